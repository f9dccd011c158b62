"""The in-process engine's summary of a written release (Arrow table in, NumPy group-bys).

Same summaries as :class:`~engines.spark.summary.SparkSummary` (classes in label order, sorted
count-matrix entries, label counts), so :mod:`audit.measure` produces the same report from either
engine.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.audit.measure import Classes, sorted_matrix
from leteo_fed.anonymize.engines.local.table import labels


class ArrowSummary:
    """:class:`~audit.measure.ReleaseSummary` of the published rows of a release."""

    def __init__(self, released: pa.Table, qi: list[str]) -> None:
        self.released, self.qi = released, qi
        coded = [labels(released.column(c), as_label=False) for c in qi]
        if released.num_rows:
            rows, self._cls = unique_rows(np.stack([c.codes for c in coded], axis=1))
        else:
            rows, self._cls = np.zeros((0, len(qi)), np.int64), np.zeros(0, np.int64)
        keys = [
            {c: str(col.values[i]) for c, col, i in zip(qi, coded, row, strict=True)}
            for row in rows.tolist()
        ]
        self.classes = Classes(np.bincount(self._cls, minlength=len(rows)).astype(np.int64), keys)

    def count_matrix(self, sensitive: str) -> verify.CountMatrix:
        values = np.asarray(self.released.column(sensitive).to_numpy(zero_copy_only=False))
        uniq, val = np.unique(values, return_inverse=True)
        width = max(len(uniq), 1)
        pairs, counts = np.unique(self._cls * width + val.reshape(-1), return_counts=True)
        return sorted_matrix(
            pairs // width, uniq[pairs % width], counts, self.classes.sizes, sensitive
        )

    def label_counts(self, qi: str) -> tuple[np.ndarray, np.ndarray]:
        coded = labels(self.released.column(qi), as_label=False)
        return coded.values, coded.counts.astype(np.int64)
