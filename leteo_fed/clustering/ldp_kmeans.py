"""k-means on locally perturbed points: every row gets n-dimensional Laplace noise.

Why this works as local DP: the m-dimensional Laplace mechanism (`leteo_fed.ldp.geo.nd_laplace`,
density ∝ exp(-r ||z - x||)) is r·d_2-geo-indistinguishable. Inside the PUBLIC box [lo, hi] any two
inputs are at most D = ||hi - lo||₂ apart, so the rate r = ε / D gives ε-LDP for every row
(Pr[z | x] <= e^{r D} Pr[z | x'] = e^ε Pr[z | x']). Points outside the box are clipped into it
first; the perturbed point is then mapped back to the nearest box point (`remap_to_box`,
post-processing, no extra cost). The perturbed table is ε-DP centrally as well (each row
influences only its own report), so k-means on it is free post-processing: NumPy weighted
k-means++/Lloyd in memory, or Spark MLlib k-means|| for large volumes (rows never reach the driver).

Utility is far below the central methods: the noise per point has norm about m D / ε, which in
many dimensions exceeds the box itself. The method is here for data that must leave its owner
already perturbed (local DP collection); for central data, use EUGkM or the LSH core-set.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np

from leteo_fed.clustering._checks import check_bounds, check_dim, check_epsilon, check_k, check_seed
from leteo_fed.clustering.lloyd import weighted_kmeans
from leteo_fed.clustering.noise import make_rng
from leteo_fed.clustering.result import DPKMeansResult
from leteo_fed.clustering.spark_io import feature_names
from leteo_fed.ldp.geo import nd_laplace, remap_to_box

METHOD = "ldp"


def ldp_rate(epsilon: float, lo: np.ndarray, hi: np.ndarray) -> float:
    """Geo-indistinguishability rate r = ε / ||hi - lo||₂ that makes nd_laplace ε-LDP in the box."""
    return check_epsilon(epsilon) / float(np.linalg.norm(hi - lo))


def perturb_points(
    points: np.ndarray, epsilon: float, lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Each row clipped into the box, moved by m-D Laplace noise at rate ε/D, remapped into the box."""
    x = np.clip(np.asarray(points, dtype=np.float64), lo, hi)
    return remap_to_box(nd_laplace(x, ldp_rate(epsilon, lo, hi), rng), lo, hi)


def _result(centers, eps, lo, hi, perturbed: np.ndarray, times, d: int) -> DPKMeansResult:
    return DPKMeansResult(
        centers=np.asarray(centers, dtype=np.float64),
        method=METHOD,
        epsilon=eps,
        delta=0.0,
        budget={
            "model": "local: every row perturbed independently, epsilon-LDP per row",
            "mechanism": "n-dimensional Laplace (geo-indistinguishability), remapped to the box",
            "rate_per_unit_distance": ldp_rate(eps, lo, hi),
            "box_diameter": float(np.linalg.norm(hi - lo)),
        },
        details={"bounds": {"lo": lo.tolist(), "hi": hi.tolist()}, "dimension": d},
        summary_points=perturbed,
        summary_weights=np.ones(perturbed.shape[0]),
        timings=times,
    )


def ldp_kmeans_numpy(
    points: np.ndarray,
    k: int,
    epsilon: float,
    lo: float | Sequence[float] | np.ndarray,
    hi: float | Sequence[float] | np.ndarray,
    *,
    seed: int | None = None,
    n_init: int = 5,
) -> DPKMeansResult:
    """Perturb every row locally, then k-means++/Lloyd on the perturbed rows (in memory)."""
    x = np.asarray(points, dtype=np.float64)
    d = check_dim(x.shape[1] if x.ndim == 2 else 0)
    lo_a, hi_a = check_bounds(lo, hi, d)
    eps = check_epsilon(epsilon)
    k = check_k(k)
    rng = make_rng(seed)
    t0 = time.perf_counter()
    z = perturb_points(x, eps, lo_a, hi_a, rng)
    t1 = time.perf_counter()
    centers = weighted_kmeans(z, k, rng, n_init=n_init)
    times = {"perturb_s": t1 - t0, "kmeans_s": time.perf_counter() - t1}
    return _result(centers, eps, lo_a, hi_a, z, times, d)


def _perturb_batches_fn(d: int, eps: float, lo: np.ndarray, hi: np.ndarray, entropy: int):
    """mapInArrow body: per partition a generator seeded by (entropy, partition id). Spark may
    compute a partition more than once (MLlib makes several passes, lost cache blocks are
    recomputed); the seeding makes every recomputation produce the SAME noisy rows, so no row is
    ever released with two independent noise draws (which would spend ε twice). The entropy is
    drawn once on the driver (from the seed, or from the OS). Executors import leteo_fed.ldp.geo."""

    def perturb(batches: Iterator) -> Iterator:
        import pyarrow as pa
        from pyspark import TaskContext

        ctx = TaskContext.get()
        part = ctx.partitionId() if ctx is not None else 0
        rng = np.random.default_rng([entropy, part])
        names = [feature_names(i) for i in range(d)]
        for batch in batches:
            if batch.num_rows == 0:
                continue
            x = np.column_stack([batch.column(i).to_numpy(zero_copy_only=False) for i in range(d)])
            z = perturb_points(x.astype(np.float64), eps, lo, hi, rng)
            yield pa.RecordBatch.from_arrays([pa.array(z[:, i]) for i in range(d)], names=names)

    return perturb


def perturb_spark(df, epsilon: float, lo: np.ndarray, hi: np.ndarray, seed: int | None):
    """The perturbed DataFrame (same columns c0..c{d-1}); computed on the executors."""
    d = check_dim(len(df.columns))
    eps = check_epsilon(epsilon)
    entropy = int(make_rng(check_seed(seed)).integers(2**63))
    return df.mapInArrow(_perturb_batches_fn(d, eps, lo, hi, entropy), df.schema)


def ldp_kmeans_spark(
    df,
    k: int,
    epsilon: float,
    lo: float | Sequence[float] | np.ndarray,
    hi: float | Sequence[float] | np.ndarray,
    *,
    seed: int | None = None,
    n_init: int = 3,
) -> DPKMeansResult:
    """Perturb every row on the executors, then MLlib k-means|| (best of n_init) on them."""
    from leteo_fed.clustering.spark_kmeans import mllib_kmeans_df

    d = check_dim(len(df.columns))
    lo_a, hi_a = check_bounds(lo, hi, d)
    eps = check_epsilon(epsilon)
    k = check_k(k)
    rng = make_rng(seed)
    t0 = time.perf_counter()
    z = perturb_spark(df, eps, lo_a, hi_a, int(rng.integers(2**62)))
    centers = mllib_kmeans_df(z, d, k, int(rng.integers(2**31)), n_init=n_init)
    times = {"perturb_and_kmeans_s": time.perf_counter() - t0}
    return _result(centers, eps, lo_a, hi_a, np.zeros((0, d)), times, d)
