"""DP k-means through a private LSH core-set (after Google's "private LSH clustering").

Algorithm
---------
1. Shift every point by the PUBLIC center c and project the points outside the ball of PUBLIC
   radius R onto its sphere (x <- c + (x - c) min(1, R/||x - c||)); nothing is read off the data.
2. Draw L random hyperplanes (unit Gaussian directions g_j, offsets t_j; data-independent, from the
   run's generator). Bit j of a point is [g_j . (x - c) >= t_j]; its first l bits name its node at
   level l of a binary prefix tree (random-projection LSH, applied recursively).
3. Private tree: the root count Ñ = N + noise sets the thresholds (below). Level by level, every
   child of every branching node gets count + N(0, σ_count²), empty children included. A child
   with noisy count < T_leaf is dropped; one with >= T_branch branches (until depth L); the others
   are leaves. A branching node whose children were all dropped becomes a leaf itself
   (post-processing of noisy counts).
4. Core-set: per leaf, the sum of its (projected) points + N(0, σ_sum² I) divided by the leaf's
   noisy count, pulled back into the ball; weight = the leaf's noisy count.
5. Non-private weighted k-means++ and Lloyd on the core-set; centers shifted back by c.

Privacy (add/remove-one-row adjacency): Gaussian DP accounting
--------------------------------------------------------------
Every release is Gaussian, so the run is accounted in Gaussian DP (`noise.gdp_mu`): (ε, δ) is
turned into one μ (μ-GDP implies (ε, δ)-DP exactly), and μ² is split into shares that add up:
- root count (sensitivity 1): μ_root² = `root_share` μ² (default 2%), σ_root = 1/μ_root;
- tree: a row is in at most one evaluated node per level, so each level is one query of
  sensitivity 1; the L levels share μ_tree² = `tree_share` μ² (18%): σ_count = sqrt(L)/μ_tree;
- leaf sums: a row is in at most one leaf and its projected vector has ||y||₂ <= R, so the sums
  are one query of L2 sensitivity R: μ_sum² = the rest (80%), σ_sum = R/μ_sum.
Adaptivity (later levels depend on earlier noisy counts) is allowed: GDP composes adaptively.
The tree shape, the core-set and the centers are (ε, δ)-DP; δ defaults to 1e-6, the setting
the method was published with.

Thresholds (functions of public inputs and Ñ): a leaf of m points has an average whose noise has
norm about sqrt(d) σ_sum / m. T_noise = sqrt(d) σ_sum / (noise_target R) makes that noise
`noise_target` x R (default 0.2). T_leaf is T_noise, lowered to Ñ/(2k) when the data are too few
for 2k such leaves (so every cluster can own a couple of leaves), but never below
`min_leaf_fraction` T_noise (default 1/2: a leaf average noisier than twice the target costs more
loss than the finer split gains):
    T_leaf = max(1, min(T_noise, max(Ñ/(2k), min_leaf_fraction T_noise))),
    T_branch = branch_factor T_leaf (default 3),
    L = min(max_depth, ceil(log2(Ñ / T_leaf)) + depth_slack).
The defaults were chosen on a 100-dimensional, 64-component Gaussian mixture like the
benchmark's (a different draw), before the benchmark ran; never on digits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from leteo_fed.clustering._checks import (
    check_center,
    check_delta,
    check_dim,
    check_epsilon,
    check_fraction,
    check_k,
    check_positive,
    check_radius,
)
from leteo_fed.clustering.lloyd import weighted_kmeans
from leteo_fed.clustering.noise import gdp_mu, make_rng
from leteo_fed.clustering.result import ClusterFn, DPKMeansResult
from leteo_fed.errors import ConfigError, DataError

METHOD = "lsh"
DEFAULT_DELTA = 1e-6  # the method's published evaluation setting
MAX_DEPTH_LIMIT = 60  # node ids (1 << L) | prefix must fit an int64


@dataclass(frozen=True)
class LshParams:
    """Tuning of the LSH core-set; every default is documented in the module docstring."""

    root_share: float = 0.02  # shares of μ² (Gaussian DP), see the module docstring
    tree_share: float = 0.18
    max_depth: int = 20
    depth_slack: int = 3
    noise_target: float = 0.2
    min_leaf_fraction: float = 0.5
    branch_factor: float = 3.0
    offset_scale: float = 0.0  # hyperplane offsets t_j ~ U(-1, 1) offset_scale R / sqrt(d)
    n_init: int = 5
    max_iter: int = 100

    def checked(self) -> LshParams:
        check_fraction(self.root_share, "root_share")
        check_fraction(self.tree_share, "tree_share")
        if self.root_share + self.tree_share >= 1.0:
            raise ConfigError("root_share + tree_share must be < 1", field="tree_share")
        if not 1 <= self.max_depth <= MAX_DEPTH_LIMIT:
            raise ConfigError(f"max_depth must be in [1, {MAX_DEPTH_LIMIT}]", field="max_depth")
        check_positive(self.noise_target, "noise_target")
        check_fraction(self.min_leaf_fraction, "min_leaf_fraction")
        if not self.branch_factor >= 1.0:
            raise ConfigError("branch_factor must be >= 1", field="branch_factor")
        if not (math.isfinite(self.offset_scale) and self.offset_scale >= 0):
            raise ConfigError("offset_scale must be finite and >= 0", field="offset_scale")
        if self.depth_slack < 0 or self.n_init < 1 or self.max_iter < 1:
            raise ConfigError("depth_slack must be >= 0, n_init and max_iter >= 1")
        return self


@dataclass(frozen=True)
class Hyperplanes:
    """L hashing hyperplanes in the shifted space: bit j = [g_j . y >= t_j]."""

    directions: np.ndarray  # L x d, unit rows
    offsets: np.ndarray  # L

    @property
    def depth(self) -> int:
        return int(self.directions.shape[0])


def draw_hyperplanes(
    d: int, depth: int, radius: float, offset_scale: float, rng: np.random.Generator
) -> Hyperplanes:
    g = rng.standard_normal((depth, d))
    g /= np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-300)
    t = rng.uniform(-1.0, 1.0, size=depth) * (offset_scale * radius / math.sqrt(d))
    return Hyperplanes(g, t)


class TreeCounter(Protocol):
    """Exact node counts and leaf sums of the projected data; NumPy here, Spark in `spark_lsh`."""

    dim: int

    def count(self) -> int: ...

    def set_hyperplanes(self, planes: Hyperplanes) -> None: ...

    def child_counts(self, level: int, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, counts) of the non-empty level-`level` children of the given node ids."""
        ...

    def leaf_sums(self, leaves: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, d-dimensional sums) of the non-empty leaves (disjoint nodes, ids with levels)."""
        ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------ per-row math


def project_to_ball(x: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """y = (x - c) min(1, R/||x - c||), the norm summed coordinate by coordinate in order (the
    Spark path does the same operations in SQL, so both agree bit for bit)."""
    z = x - center
    sq = z[:, 0] * z[:, 0]
    for i in range(1, z.shape[1]):
        sq = sq + z[:, i] * z[:, i]
    nrm = np.sqrt(sq)
    with np.errstate(divide="ignore"):
        s = np.where(nrm > radius, radius / nrm, 1.0)
    return z * s[:, None]


def heap_codes(y: np.ndarray, planes: Hyperplanes) -> np.ndarray:
    """Node id at depth L, (1 << L) | bits, so that the node at level l is id >> (L - l)."""
    depth = planes.depth
    h = np.ones(y.shape[0], dtype=np.int64)
    for j in range(depth):
        g = planes.directions[j]
        acc = y[:, 0] * g[0]
        for i in range(1, y.shape[1]):
            acc = acc + y[:, i] * g[i]
        h = (h << 1) | (acc >= planes.offsets[j]).astype(np.int64)
    return h


class NumpyTreeCounter:
    """Exact tree statistics of in-memory points (reference path)."""

    def __init__(self, points: np.ndarray, center: np.ndarray, radius: float) -> None:
        x = np.asarray(points, dtype=np.float64)
        if x.ndim != 2:
            raise DataError(f"points must be a 2-D array, got shape {x.shape}", field="points")
        if not np.all(np.isfinite(x)):
            raise DataError("points contain NaN or infinite values", field="points")
        self.dim = x.shape[1]
        self._y = project_to_ball(x, center, radius)
        self._h: np.ndarray | None = None
        self._depth = 0

    def count(self) -> int:
        return int(self._y.shape[0])

    def set_hyperplanes(self, planes: Hyperplanes) -> None:
        self._h = heap_codes(self._y, planes)
        self._depth = planes.depth

    def child_counts(self, level: int, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self._h is not None
        node = self._h >> (self._depth - level)
        alive = np.isin(node >> 1, parents)
        ids, cnt = np.unique(node[alive], return_counts=True)
        return ids, cnt

    def leaf_sums(self, leaves: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self._h is not None
        owner = np.full(self._h.shape[0], -1, dtype=np.int64)
        for lvl in np.unique(levels):
            node = self._h >> (self._depth - int(lvl))
            hit = np.isin(node, leaves[levels == lvl])
            owner[hit] = node[hit]
        keep = owner >= 0
        ids, inv = np.unique(owner[keep], return_inverse=True)
        sums = np.zeros((ids.shape[0], self.dim))
        np.add.at(sums, inv, self._y[keep])
        return ids, sums

    def close(self) -> None:
        self._h = None


# ------------------------------------------------------------------------------ the driver


@dataclass(frozen=True)
class TreePlan:
    """Thresholds and depth, from public inputs and the noisy root count."""

    t_leaf: float
    t_branch: float
    depth: int


def plan_tree(
    n_noisy: float, k: int, d: int, radius: float, sigma_sum: float, p: LshParams
) -> TreePlan:
    n = max(float(n_noisy), 2.0)
    t_noise = math.sqrt(d) * sigma_sum / (p.noise_target * radius)
    t_leaf = max(1.0, min(t_noise, max(n / (2.0 * k), p.min_leaf_fraction * t_noise)))
    depth = math.ceil(math.log2(max(n / t_leaf, 1.0))) + p.depth_slack
    return TreePlan(t_leaf, p.branch_factor * t_leaf, int(min(max(depth, 1), p.max_depth)))


def build_tree(
    counter: TreeCounter,
    n_noisy: float,
    plan: TreePlan,
    sigma_count: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, int]]:
    """(leaf ids, their levels, their noisy counts, stats). Children are visited in increasing
    id order and noised in that order, whatever backend counted them."""
    leaves: list[tuple[int, int, float]] = []
    stats = {"evaluated_nodes": 0, "dropped_nodes": 0, "promoted_parents": 0}
    if n_noisy < plan.t_leaf:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), stats
    if n_noisy < plan.t_branch or plan.depth == 0:
        return np.array([1]), np.array([0]), np.array([float(n_noisy)]), stats
    branching = np.array([1], dtype=np.int64)
    branch_counts = np.array([float(n_noisy)])
    for level in range(1, plan.depth + 1):
        ids, cnt = counter.child_counts(level, branching)
        children = np.stack([2 * branching, 2 * branching + 1], axis=1).ravel()
        noisy = np.zeros(children.shape[0])
        noisy[np.searchsorted(children, ids)] = cnt
        noisy += rng.normal(0.0, sigma_count, size=children.shape[0])
        stats["evaluated_nodes"] += int(children.shape[0])
        kept = noisy >= plan.t_leaf
        stats["dropped_nodes"] += int((~kept).sum())
        # a branching parent whose two children were dropped becomes a leaf itself
        orphan = ~(kept[0::2] | kept[1::2])
        for pid, pc in zip(branching[orphan], branch_counts[orphan], strict=True):
            leaves.append((int(pid), level - 1, float(pc)))
        stats["promoted_parents"] += int(orphan.sum())
        branch = kept & (noisy >= plan.t_branch) if level < plan.depth else np.zeros_like(kept)
        for cid, c in zip(children[kept & ~branch], noisy[kept & ~branch], strict=True):
            leaves.append((int(cid), level, float(c)))
        branching, branch_counts = children[branch], noisy[branch]
        if branching.size == 0:
            break
    leaves.sort()
    return (
        np.array([x[0] for x in leaves], dtype=np.int64),
        np.array([x[1] for x in leaves], dtype=np.int64),
        np.array([x[2] for x in leaves]),
        stats,
    )


def fit(
    counter: TreeCounter,
    k: int,
    epsilon: float,
    radius: float,
    *,
    delta: float = DEFAULT_DELTA,
    center: float | Sequence[float] | np.ndarray | None = None,
    params: LshParams | None = None,
    rng: np.random.Generator | None = None,
    cluster_fn: ClusterFn | None = None,
) -> DPKMeansResult:
    """The LSH core-set method over any counter; noise is drawn on the driver in a fixed order
    (hyperplanes, root, tree levels, leaf sums, k-means)."""
    p = (params or LshParams()).checked()
    d = check_dim(counter.dim)
    k = check_k(k)
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    r = check_radius(radius)
    c = check_center(center, d)
    rng = rng if rng is not None else make_rng(None)
    mu = gdp_mu(eps, dlt)
    mu_root = mu * math.sqrt(p.root_share)
    mu_tree = mu * math.sqrt(p.tree_share)
    mu_sum = mu * math.sqrt(1.0 - p.root_share - p.tree_share)
    sigma_root, sigma_sum = 1.0 / mu_root, r / mu_sum
    times: dict[str, float] = {}

    t0 = time.perf_counter()
    planes_all = draw_hyperplanes(d, p.max_depth, r, p.offset_scale, rng)
    n_noisy = counter.count() + rng.normal(0.0, sigma_root)
    plan = plan_tree(n_noisy, k, d, r, sigma_sum, p)
    planes = Hyperplanes(planes_all.directions[: plan.depth], planes_all.offsets[: plan.depth])
    counter.set_hyperplanes(planes)
    times["count_hash_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sigma_count = math.sqrt(plan.depth) / mu_tree
    ids, levels, counts, stats = build_tree(counter, n_noisy, plan, sigma_count, rng)
    times["tree_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    sums = np.zeros((ids.shape[0], d))
    if ids.size:
        got, s = counter.leaf_sums(ids, levels)
        sums[np.searchsorted(ids, got)] = s
    sums += rng.normal(0.0, sigma_sum, size=sums.shape)
    counter.close()
    points = sums / counts[:, None] if ids.size else np.zeros((0, d))
    points = project_to_ball(points, np.zeros(d), r) + c if ids.size else points
    times["coreset_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if ids.size == 0:  # no leaf survived: data-independent centers in the ball
        u = rng.standard_normal((k, d))
        centers = c + u / np.linalg.norm(u, axis=1, keepdims=True) * r * rng.random((k, 1))
    elif cluster_fn is not None:
        centers = cluster_fn(points, counts, k, rng)
    else:
        centers = weighted_kmeans(points, k, rng, counts, n_init=p.n_init, max_iter=p.max_iter)
    times["kmeans_s"] = time.perf_counter() - t0

    return DPKMeansResult(
        centers=np.asarray(centers, dtype=np.float64),
        method=METHOD,
        epsilon=eps,
        delta=dlt,
        budget={
            "adjacency": "add/remove one row",
            "accounting": "Gaussian DP: mu-GDP with mu from (epsilon, delta); shares of mu^2",
            "mu": mu,
            "root_count": {"mu_share": p.root_share, "gaussian_std": sigma_root},
            "tree_counts": {
                "mu_share": p.tree_share,
                "levels": plan.depth,
                "gaussian_std": sigma_count,
            },
            "leaf_sums": {
                "mu_share": 1.0 - p.root_share - p.tree_share,
                "gaussian_std": sigma_sum,
                "l2_sensitivity": r,
            },
        },
        details={
            "n_noisy": float(n_noisy),
            "radius": r,
            "center": c.tolist(),
            "depth": plan.depth,
            "t_leaf": plan.t_leaf,
            "t_branch": plan.t_branch,
            "leaves": int(ids.size),
            **stats,
        },
        summary_points=points,
        summary_weights=counts,
        timings=times,
    )


def lsh_numpy(
    points: np.ndarray,
    k: int,
    epsilon: float,
    radius: float,
    *,
    delta: float = DEFAULT_DELTA,
    center: float | Sequence[float] | np.ndarray | None = None,
    params: LshParams | None = None,
    seed: int | None = None,
) -> DPKMeansResult:
    """The LSH core-set method on in-memory points (reference path)."""
    x = np.asarray(points, dtype=np.float64)
    d = check_dim(x.shape[1] if x.ndim == 2 else 0)
    r = check_radius(radius)
    c = check_center(center, d)
    check_epsilon(epsilon)
    check_delta(delta)
    check_k(k)
    return fit(
        NumpyTreeCounter(x, c, r),
        k,
        epsilon,
        r,
        delta=delta,
        center=c,
        params=params,
        rng=make_rng(seed),
    )
