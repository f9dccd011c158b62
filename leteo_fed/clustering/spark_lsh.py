"""The LSH core-set method on Spark: hashing on the executors, node counts and leaf sums by groupBy.

Per row, in Spark SQL (no Python workers): shift by the public center, project into the ball,
hash with the L hyperplanes into a heap id (1 << L) | bits. The driver then asks, level by level,
for the counts of the children of its branching nodes (a filter on the id prefix and a groupBy),
and finally for the sums of the leaves: only per-node counts and per-leaf d-vectors come back.

The SQL evaluates the same IEEE operations, in the same order, as `lsh_coreset.project_to_ball`
and `heap_codes`, so every row gets the same id as in the NumPy reference; counts, the tree and its
noise are then identical for the same seed. Leaf sums are float sums in another order (equal to
about 1e-15 relative), so the core-set and the centers agree to rounding, not bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.clustering import lsh_coreset
from leteo_fed.clustering._checks import (
    check_center,
    check_delta,
    check_dim,
    check_epsilon,
    check_k,
    check_radius,
)
from leteo_fed.clustering.noise import make_rng
from leteo_fed.clustering.result import DPKMeansResult
from leteo_fed.clustering.spark_io import feature_names
from leteo_fed.clustering.spark_kmeans import MLLIB_THRESHOLD, make_cluster_fn

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


class SparkTreeCounter:
    """Tree statistics of a DataFrame of doubles c0..c{d-1}."""

    def __init__(self, df, center: np.ndarray, radius: float) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.dim = d = len(df.columns)
        z = [F.col(feature_names(i)) - F.lit(float(center[i])) for i in range(d)]
        shifted = df.select(*[zi.alias(f"z{i}") for i, zi in enumerate(z)])
        zc = [F.col(f"z{i}") for i in range(d)]
        sq = reduce(lambda a, b: a + b, [zi * zi for zi in zc])
        nrm = F.sqrt(sq)
        scale = F.when(nrm > F.lit(radius), F.lit(radius) / nrm).otherwise(F.lit(1.0))
        self._y = shifted.select(*[(zc[i] * scale).alias(f"y{i}") for i in range(d)]).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        self._h: DataFrame | None = None  # the hashed rows, once set_hyperplanes ran
        self._depth = 0

    def count(self) -> int:
        return int(self._y.count())  # also materializes the projected rows

    def set_hyperplanes(self, planes: lsh_coreset.Hyperplanes) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        y = [F.col(f"y{i}") for i in range(self.dim)]
        depth = planes.depth
        h = F.lit(1).cast("long")
        for j in range(depth):
            g = planes.directions[j]
            acc = y[0] * F.lit(float(g[0]))
            for i in range(1, self.dim):
                acc = acc + y[i] * F.lit(float(g[i]))
            bit = F.when(acc >= F.lit(float(planes.offsets[j])), 1).otherwise(0).cast("long")
            h = F.shiftleft(h, 1).bitwiseOR(bit)
        self._h = self._y.select(*y, h.alias("h")).persist(StorageLevel.MEMORY_AND_DISK)
        self._h.count()
        self._y.unpersist()
        self._depth = depth

    def child_counts(self, level: int, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        assert self._h is not None
        node = F.shiftright(F.col("h"), self._depth - level)
        parent = F.shiftright(F.col("h"), self._depth - level + 1)
        rows = (
            self._h.where(parent.isin([int(v) for v in parents]))
            .groupBy(node.alias("node"))
            .count()
            .collect()
        )
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        arr = np.array([(r["node"], r["count"]) for r in rows], dtype=np.int64)
        order = np.argsort(arr[:, 0])
        return arr[order, 0], arr[order, 1]

    def leaf_sums(self, leaves: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        assert self._h is not None
        owner: Column | None = None
        for lvl in np.unique(levels):
            node = F.shiftright(F.col("h"), self._depth - int(lvl))
            at_level = [int(v) for v in leaves[levels == lvl]]
            owner = (F.when if owner is None else owner.when)(node.isin(at_level), node)
        if owner is None:
            raise ValueError("leaf_sums needs at least one leaf")
        rows = (
            self._h.select(owner.alias("leaf"), *[F.col(f"y{i}") for i in range(self.dim)])
            .where(F.col("leaf").isNotNull())
            .groupBy("leaf")
            .agg(*[F.sum(f"y{i}").alias(f"s{i}") for i in range(self.dim)])
            .collect()
        )
        if not rows:
            return np.zeros(0, dtype=np.int64), np.zeros((0, self.dim))
        ids = np.array([r["leaf"] for r in rows], dtype=np.int64)
        sums = np.array([[r[f"s{i}"] for i in range(self.dim)] for r in rows], dtype=np.float64)
        order = np.argsort(ids)
        return ids[order], sums[order]

    def close(self) -> None:
        if self._h is not None:
            self._h.unpersist()
        self._y.unpersist()


def lsh_spark(
    df,
    k: int,
    epsilon: float,
    radius: float,
    *,
    delta: float = lsh_coreset.DEFAULT_DELTA,
    center: float | Sequence[float] | np.ndarray | None = None,
    params: lsh_coreset.LshParams | None = None,
    seed: int | None = None,
    mllib_threshold: int = MLLIB_THRESHOLD,
) -> DPKMeansResult:
    """The LSH core-set method over a DataFrame of doubles c0..c{d-1}; parameters are checked
    before Spark runs anything; points outside the ball are projected onto it on the executors."""
    d = check_dim(len(df.columns))
    r = check_radius(radius)
    c = check_center(center, d)
    check_epsilon(epsilon)
    check_delta(delta)
    check_k(k)
    p = (params or lsh_coreset.LshParams()).checked()
    counter = SparkTreeCounter(df, c, r)
    try:
        return lsh_coreset.fit(
            counter,
            k,
            epsilon,
            r,
            delta=delta,
            center=c,
            params=p,
            rng=make_rng(seed),
            cluster_fn=make_cluster_fn(mllib_threshold, n_init=p.n_init, max_iter=p.max_iter),
        )
    finally:
        counter.close()
