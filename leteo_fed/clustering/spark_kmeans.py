"""Spark MLlib k-means (k-means||, Bahmani et al. 2012) for DP synopses and perturbed points.

A DP synopsis is usually small enough for NumPy on the driver (it is already there, as noisy
counts); `make_cluster_fn` hands it to MLlib only above `threshold` weighted points, where
NumPy's n_init restarts would dominate the run. MLlib uses its own random stream (seeded from the
run's generator), so the MLlib and NumPy paths agree statistically, not bit for bit.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.clustering.lloyd import weighted_kmeans
from leteo_fed.clustering.result import ClusterFn
from leteo_fed.clustering.spark_io import feature_names

MLLIB_THRESHOLD = 200_000  # weighted points above which the synopsis is clustered by MLlib


def mllib_kmeans_df(
    df,
    d: int,
    k: int,
    seed: int,
    *,
    weight_col: str | None = None,
    max_iter: int = 50,
    n_init: int = 5,
) -> np.ndarray:
    """k x d centers of MLlib KMeans (k-means|| init) over columns c0..c{d-1} of `df`: the best
    of n_init runs (independent seeds derived from `seed`) by MLlib's training cost on `df`, which
    must itself be DP (a synopsis or perturbed rows, never raw private rows: the choice depends
    on it). On noisy synopses a single k-means|| run lands in a poor local optimum (two centers
    in one cluster) in about one run out of five, hence the restarts."""
    from pyspark import StorageLevel
    from pyspark.ml.clustering import KMeans
    from pyspark.ml.feature import VectorAssembler

    cols = [feature_names(i) for i in range(d)]
    vec = VectorAssembler(inputCols=cols, outputCol="_features").transform(df)
    vec = vec.persist(StorageLevel.MEMORY_AND_DISK)
    best, best_cost = None, np.inf
    try:
        for run_seed in np.random.default_rng(int(seed)).integers(2**31, size=n_init):
            km = KMeans(
                k=k,
                featuresCol="_features",
                seed=int(run_seed),
                maxIter=max_iter,
                initMode="k-means||",
            )
            if weight_col is not None:  # MLlib refuses an explicit weightCol=None
                km = km.setWeightCol(weight_col)
            model = km.fit(vec)
            cost = float(model.summary.trainingCost)
            if cost < best_cost:
                best, best_cost = model, cost
    finally:
        vec.unpersist()
    assert best is not None
    return np.array(best.clusterCenters(), dtype=np.float64)


def mllib_weighted_kmeans(
    points: np.ndarray, weights: np.ndarray, k: int, rng: np.random.Generator, *, max_iter: int = 50
) -> np.ndarray:
    """MLlib k-means on a driver-side weighted synopsis (which is DP, so shipping it is fine)."""
    import pyarrow as pa

    from leteo_fed.data.spark_stats import get_spark

    d = points.shape[1]
    table = pa.table(
        {**{feature_names(i): points[:, i] for i in range(d)}, "_w": np.asarray(weights, float)}
    )
    spark = get_spark()
    if int(spark.version.split(".")[0]) >= 4:  # Spark 4 takes an Arrow table directly
        df = spark.createDataFrame(table)
    else:
        df = spark.createDataFrame(
            list(zip(*table.to_pydict().values(), strict=True)), table.column_names
        )
    centers = mllib_kmeans_df(
        df, d, k, int(rng.integers(2**31)), weight_col="_w", max_iter=max_iter
    )
    if centers.shape[0] < k:  # MLlib returns fewer centers when there are fewer distinct points
        extra = points[rng.choice(points.shape[0], size=k - centers.shape[0])]
        centers = np.vstack([centers, extra])
    return centers


def make_cluster_fn(
    threshold: int = MLLIB_THRESHOLD, *, n_init: int = 5, max_iter: int = 100
) -> ClusterFn:
    """NumPy weighted k-means++ / Lloyd up to `threshold` synopsis points, MLlib above."""

    def cluster(
        points: np.ndarray, weights: np.ndarray, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        if points.shape[0] > threshold:
            return mllib_weighted_kmeans(points, weights, k, rng)
        return weighted_kmeans(points, k, rng, weights, n_init=n_init, max_iter=max_iter)

    return cluster
