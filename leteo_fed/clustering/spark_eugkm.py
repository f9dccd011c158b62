"""EUGkM on Spark: cell indices on the executors, counts by groupBy, noise on the driver.

Only cell counts reach the driver (non-empty level-1 cells, then non-empty level-2 cells): never
a row. The per-row arithmetic is Spark SQL (no Python workers), written as the same IEEE
operations as `eugkm.level1_coords` / `level2_local`, so every row lands in the same cell as in
the NumPy reference and the same seed releases the same synopsis. The synopsis (or, above
`EugkmParams.coarse_above` cells, its per-level-1-cell summary) is clustered by NumPy k-means++
and Lloyd on the driver, or by MLlib k-means|| above `spark_kmeans.MLLIB_THRESHOLD` points.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

import numpy as np

from leteo_fed.clustering import eugkm
from leteo_fed.clustering._checks import check_bounds, check_dim, check_epsilon, check_k
from leteo_fed.clustering.noise import make_rng
from leteo_fed.clustering.result import DPKMeansResult
from leteo_fed.clustering.spark_io import feature_names
from leteo_fed.clustering.spark_kmeans import MLLIB_THRESHOLD, make_cluster_fn


def _collect_pairs(df, key_cols: list[str]) -> list[np.ndarray]:
    rows = df.collect()
    if not rows:
        return [np.zeros(0, dtype=np.int64) for _ in range(len(key_cols) + 1)]
    arr = np.array([tuple(r) for r in rows], dtype=np.int64)
    return [arr[:, i] for i in range(arr.shape[1])]


class SparkGridCounter:
    """Exact cell counts of a DataFrame of doubles c0..c{d-1}, clipped into [lo, hi] in SQL."""

    def __init__(self, df, lo: np.ndarray, hi: np.ndarray) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.dim = len(df.columns)
        clipped = [
            F.least(
                F.greatest(F.col(feature_names(i)), F.lit(float(lo[i]))), F.lit(float(hi[i]))
            ).alias(feature_names(i))
            for i in range(self.dim)
        ]
        self._df = df.select(*clipped).persist(StorageLevel.MEMORY_AND_DISK)

    def _level1(self, lo: np.ndarray, w1: np.ndarray, m1: int):
        """Per-dimension t_j = (x_j - lo_j) / w1_j and i1_j = clip(floor(t_j), 0, m1 - 1)."""
        from pyspark.sql import functions as F

        t = [
            (F.col(feature_names(j)) - F.lit(float(lo[j]))) / F.lit(float(w1[j]))
            for j in range(self.dim)
        ]
        i1 = [F.least(F.greatest(F.floor(tj), F.lit(0)), F.lit(m1 - 1)).cast("long") for tj in t]
        return t, i1

    def count(self) -> int:
        return int(self._df.count())

    def level1_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int
    ) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        _, i1 = self._level1(lo, w1, m1)
        flat = reduce(lambda a, b: a + b, [i1[j] * F.lit(m1**j) for j in range(self.dim)])
        idx, cnt = _collect_pairs(self._df.groupBy(flat.alias("cell")).count(), ["cell"])
        return idx, cnt

    def level2_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int, m2: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StructField, StructType

        t_cols, i1 = self._level1(lo, w1, m1)
        d = self.dim
        flat = reduce(lambda a, b: a + b, [i1[j] * F.lit(m1**j) for j in range(d)])
        staged = self._df.select(
            *[tj.alias(f"t{j}") for j, tj in enumerate(t_cols)],
            *[ij.alias(f"i{j}") for j, ij in enumerate(i1)],
            flat.alias("cell"),
        )
        split = np.nonzero(m2 > 1)[0]
        spark = self._df.sparkSession
        schema = StructType(
            [StructField("cell", LongType(), False), StructField("m2", LongType(), False)]
        )
        table = spark.createDataFrame([(int(c), int(m2[c])) for c in split], schema)
        joined = staged.join(F.broadcast(table), on="cell", how="left").withColumn(
            "m2", F.coalesce(F.col("m2"), F.lit(1).cast("long"))
        )
        m = F.col("m2")
        i2 = [
            F.least(
                F.greatest(F.floor((F.col(f"t{j}") - F.col(f"i{j}")) * m), F.lit(0)), m - F.lit(1)
            ).cast("long")
            for j in range(d)
        ]
        local, mult = F.lit(0).cast("long"), F.lit(1).cast("long")
        for j in range(d):
            local = local + i2[j] * mult
            mult = mult * m
        grouped = joined.groupBy("cell", local.alias("local")).count()
        c1, loc, cnt = _collect_pairs(grouped, ["cell", "local"])
        return c1, loc, cnt

    def close(self) -> None:
        self._df.unpersist()


def eugkm_spark(
    df,
    k: int,
    epsilon: float,
    lo: float | Sequence[float] | np.ndarray,
    hi: float | Sequence[float] | np.ndarray,
    *,
    params: eugkm.EugkmParams | None = None,
    n_public: int | None = None,
    seed: int | None = None,
    mllib_threshold: int = MLLIB_THRESHOLD,
) -> DPKMeansResult:
    """EUGkM over a DataFrame of doubles c0..c{d-1} (`spark_io.load_features`). Parameters are
    checked before Spark runs anything; points outside [lo, hi] are clipped on the executors."""
    d = check_dim(len(df.columns))
    lo_a, hi_a = check_bounds(lo, hi, d)
    check_epsilon(epsilon)
    check_k(k)
    p = (params or eugkm.EugkmParams()).checked()
    counter = SparkGridCounter(df, lo_a, hi_a)
    try:
        return eugkm.fit(
            counter,
            k,
            epsilon,
            lo_a,
            hi_a,
            params=p,
            n_public=n_public,
            rng=make_rng(seed),
            cluster_fn=make_cluster_fn(mllib_threshold, n_init=p.n_init, max_iter=p.max_iter),
        )
    finally:
        counter.close()
