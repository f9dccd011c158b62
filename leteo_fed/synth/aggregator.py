"""What both engines compute from the rows: exact integer aggregates, nothing else.

The in-process (`local_engine`) and Spark (`spark_engine`) aggregators implement this protocol;
every DP release is computed from its outputs on the driver (`model`, `marginals`,
`pair_grouping`), so the release depends on the data, the config and the seed only.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from leteo_fed.synth.config import Column
from leteo_fed.synth.statistics import Sums


class Aggregator(Protocol):
    """Exact integer aggregates of the encoded input (in process or on Spark)."""

    n_classes: int

    def histogram(self, group: list[Column]) -> np.ndarray:
        """[classes, cells] int64 counts of the group's grid cells per class."""
        ...

    def pair_histograms(self, columns: list[Column]) -> dict[tuple[int, int], np.ndarray]:
        """{(i, j): [classes, Li * Lj] int64} the counts of every pair of columns (i < j) on
        their grid levels per class, in one pass over the rows."""
        ...

    def cluster_sums(
        self, group: list[Column], key_of_cell: np.ndarray, n_keys: int, numeric: list[Column]
    ) -> Sums:
        """Per key (key_of_cell[class, cell of `group`]) counts, sums of x and of x x^T over
        the `numeric` columns."""
        ...
