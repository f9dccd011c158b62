"""What a release achieves, summarized on the released rows with Spark (never from the algorithm).

Spark groups the output by QI tuple (class sizes), by (QI tuple, sensitive value) (the count
matrix l and t need), and by each QI label (for NCP); only those summaries reach the driver, as
Arrow tables, and :mod:`audit.measure` does the arithmetic (shared with the in-process engine).

Classes are joined on the driver by a 64-bit hash of the QI tuple (Spark's ``xxhash64``); the
class table proves the hash collision-free for this release before any count matrix is trusted.
The classes are then put in label order, so the report does not depend on hash values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.audit.measure import Classes, label_order, measure_release, sorted_matrix
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

_CID = "_leteo_class"
_N = "_leteo_n"


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _values(table: pa.Table, name: str) -> np.ndarray:
    """One Arrow column as NumPy: numbers stay numeric (ordered distance needs them sorted)."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def _class_id(qi: list[str]) -> Column:
    from pyspark.sql import functions as F

    return F.xxhash64(*[_col(c) for c in qi]).alias(_CID)


class SparkSummary:
    """:class:`~audit.measure.ReleaseSummary` of a released DataFrame (one group-by per
    summary)."""

    def __init__(self, released: DataFrame, qi: list[str]) -> None:
        from pyspark.sql import functions as F

        self.released, self.qi = released, qi
        table = (
            released.groupBy(*[_col(c) for c in qi])
            .agg(F.count(F.lit(1)).alias(_N))
            .select(_class_id(qi), _N, *[_col(c) for c in qi])
            .toArrow()
        )
        ids = _values(table, _CID).astype(np.int64)
        if ids.size and np.unique(ids).size != ids.size:
            raise DataError("two equivalence classes share a 64-bit class hash; cannot measure")
        labels = {c: np.asarray(table.column(c).to_pylist(), dtype=object) for c in qi}
        order = label_order([labels[c] for c in qi]) if ids.size else np.zeros(0, np.int64)
        keys = [{c: labels[c][i] for c in qi} for i in order.tolist()]
        self.classes = Classes(_values(table, _N).astype(np.int64)[order], keys)
        self._by_hash = np.argsort(ids[order], kind="stable")  # hash rank -> class position
        self._hashes = ids[order][self._by_hash]

    def _index_of(self, ids: np.ndarray) -> np.ndarray:
        return self._by_hash[np.searchsorted(self._hashes, ids)]

    def count_matrix(self, sensitive: str) -> verify.CountMatrix:
        from pyspark.sql import functions as F

        table = (
            self.released.groupBy(_class_id(self.qi), _col(sensitive).alias("_s"))
            .agg(F.count(F.lit(1)).alias(_N))
            .toArrow()
        )
        cls = self._index_of(_values(table, _CID).astype(np.int64))
        return sorted_matrix(
            cls, _values(table, "_s"), _values(table, _N), self.classes.sizes, sensitive
        )

    def label_counts(self, qi: str) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        table = self.released.groupBy(_col(qi).alias("_l")).agg(F.count(F.lit(1)).alias(_N))
        table = table.toArrow()
        labels = np.asarray(table.column("_l").to_pylist(), dtype=object)
        order = label_order([labels])
        return labels[order], _values(table, _N).astype(np.int64)[order]


def measure_spark_release(
    released: DataFrame,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    *,
    rows_in: int,
    spans: Mapping[str, float],
) -> dict[str, Any]:
    """The measured part of the report, for a released DataFrame of published rows."""
    summary = SparkSummary(released, config.qi_columns)
    return measure_release(summary, config, hierarchies, rows_in=rows_in, spans=spans)
