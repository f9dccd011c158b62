"""Read the features of a local CSV / Parquet dataset into memory, for the in-process engine.

The same typing (:mod:`leteo_fed.anonymize.models.kinds`), the same feature choice (:mod:`features`) and
the same row filter as :mod:`spark_io`: rows with a null, NaN or infinite value in a selected
feature are dropped (a per-row filter keeps the DP guarantee of what follows; how many were
dropped is not reported, because that count is not private).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.anonymize.engines.local import io as local_io
from leteo_fed.anonymize.engines.local.scan import scan_arrow
from leteo_fed.anonymize.inputs import input_format
from leteo_fed.anonymize.models import kinds as K
from leteo_fed.clustering.features import pick_features


def column_kinds(table: pa.Table, fmt: str) -> dict[str, str]:
    """Every column's kind: by content for CSV, by stored type for Parquet."""
    if fmt != "csv":
        return {f.name: local_io.stored_kind(f.type) for f in table.schema}
    scans = scan_arrow(table, table.column_names)
    return {c: K.text_kind(scans[c], table.num_rows) for c in table.column_names}


def load_features_local(
    path: str, features: Sequence[str] | None = None, fmt: str | None = None
) -> tuple[np.ndarray, list[str]]:
    """(rows x features float64 array with non-finite rows dropped, the feature names)."""
    fmt = input_format(path, fmt)
    where = path.removeprefix("file://")
    table = local_io.read_parquet(where) if fmt == "parquet" else local_io.read_csv_text(where)
    names = pick_features(table.column_names, column_kinds(table, fmt), features)
    x = np.column_stack(
        [pc.cast(table.column(n), pa.float64()).to_numpy(zero_copy_only=False) for n in names]
    ).astype(np.float64)
    return x[np.isfinite(x).all(axis=1)], names
