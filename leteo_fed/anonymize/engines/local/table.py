"""The QI and sensitive columns of an Arrow table as integer codes, for the in-process engine.

The anonymizers only ever compare values, so each column becomes (distinct values ascending,
row -> index): numbers as float64 (what Spark's ``cast(double)`` gives), everything else as the
label Spark would compare (:func:`~engines.local.text.spark_text`). Hashing to distinct values is
done by Arrow's ``dictionary_encode`` and the small dictionary is then sorted, so no step walks
the rows in Python. Sensitive tuples ("combos") get one code per distinct tuple, in the order the
privacy model sorts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.engines.local.text import spark_text
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.kinds import NUMERIC
from leteo_fed.anonymize.models.privacy import Combo


@dataclass(frozen=True)
class Coded:
    """A column as codes: ``values[codes[r]]`` is row r's value; ``values`` ascending."""

    codes: np.ndarray
    values: np.ndarray  # float64, or str objects

    @property
    def counts(self) -> np.ndarray:
        return np.bincount(self.codes, minlength=len(self.values))


def numbers(column: pa.ChunkedArray) -> Coded:
    """A numeric column as float64 codes."""
    x = pc.cast(column, pa.float64()).to_numpy()
    values, codes = np.unique(x, return_inverse=True)
    return Coded(codes.reshape(-1).astype(np.int64), values)


def labels(column: pa.ChunkedArray, *, as_label: bool = True) -> Coded:
    """A column as text codes (``as_label``: integral floats as integers, like hierarchy labels)."""
    encoded = pc.dictionary_encode(spark_text(column, labels=as_label)).combine_chunks()
    words = np.array(encoded.dictionary.to_pylist(), dtype=object)
    order = np.argsort(words.astype(str), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    indices = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    return Coded(rank[indices], words[order])


@dataclass(frozen=True)
class Sensitive:
    """Distinct sensitive tuples (ascending), their row counts, and each row's tuple index."""

    combos: list[Combo]
    counts: np.ndarray
    code: np.ndarray
    numeric: list[bool]


def sensitive(table: pa.Table, config: AnonymizationConfig, kinds: Mapping[str, str]) -> Sensitive:
    """The sensitive columns as tuples: numbers as floats, the rest as Spark's text."""
    n = table.num_rows
    if not config.sensitive:
        return Sensitive([()], np.array([n], dtype=np.int64), np.zeros(n, dtype=np.int64), [])
    columns, numeric = [], []
    for s in config.sensitive:
        num = kinds[s.column] in NUMERIC
        numeric.append(num)
        columns.append(
            numbers(table.column(s.column))
            if num
            else labels(table.column(s.column), as_label=False)
        )
    uniq, code = unique_rows(np.stack([c.codes for c in columns], axis=1))
    combos: list[Combo] = [
        tuple(
            float(col.values[i]) if num else str(col.values[i])
            for col, num, i in zip(columns, numeric, row, strict=True)
        )
        for row in uniq.tolist()
    ]
    return Sensitive(combos, np.bincount(code, minlength=len(combos)), code, numeric)
