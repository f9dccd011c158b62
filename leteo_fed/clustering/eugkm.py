"""EUGkM: DP k-means on a two-level adaptive grid synopsis (Su et al. 2016/2017).

Algorithm (Su et al.'s, with their defaults c1 = 10, c2 = 5, α = 0.5)
---------------------------------------------------------------------
1. Clip every point into the PUBLIC box [lo, hi] (coordinate-wise). Points outside the bounds
   are moved to the nearest box point; the bounds are inputs, never read from the data.
2. Level 1: split each dimension into m1 equal intervals, with
       M1 = (N ε / c1)^(2d/(2+d)),   m1 = ceil(max(100^(1/d), M1^(1/d) / 4)),
   and release every cell's count + Laplace(1/(α ε)), empty cells included.
3. Level 2: a level-1 cell with noisy count N' (negative N' zeroed) is split into
       M2 = (N' (1-α) ε / c2)^(2d/(2+d)) cells,   m2 = max(1, ceil(M2^(1/d))) per dimension,
   and every level-2 cell's count gets Laplace(1/((1-α) ε)).
4. Synopsis = the centers of the level-2 cells with noisy count > `threshold` (default 0: cells
   with a non-positive noisy count are DROPPED, the rest keep their noisy count as weight).
5. Non-private weighted k-means (k-means++ then Lloyd, best of `n_init`) on the synopsis. A
   synopsis of more than `coarse_above` cells is first summarized per level-1 cell (weighted
   mean, total weight); the restarts run on that summary and one Lloyd run on the full synopsis
   refines the best: the synopsis grows like N^(2d/(2+d)), the restarts then do not.

Privacy (add/remove-one-row adjacency)
--------------------------------------
Each row lies in exactly one cell per level, so all cells of a level share one budget (parallel
composition) and the levels add up (sequential composition):
    ε = ε_n + α ε_g + (1-α) ε_g,   ε_g = ε - ε_n,
where ε_n = `count_fraction` ε (default 5%) buys the noisy row count Ñ = N + Laplace(1/ε_n) that
the grid formulas need (Su et al. take N as known; under add/remove adjacency N itself is private).
Pass `n_public` when the row count is genuinely public: then ε_n = 0 and ε_g = ε. The formulas use
ε_g where Su et al. write ε. Steps 3-5 only post-process noisy counts, so the released centers,
the synopsis and the grid sizes are all ε-DP. The run spends no δ.

Where it works: the grid has at least 100 level-1 cells and m1^d grows exponentially with the
dimension (d = 64 needs 2^64 cells), so EUGkM suits low-dimensional data (d up to about 8).
A run that would need more than `max_cells` cells at level 1 is refused before any data is read
when 100^(1/d) alone exceeds it, else right after the noisy count. At level 2, if sum(m2^d) exceeds
`max_cells`, all m2 are scaled down by one common factor until it fits (post-processing of the
noisy level-1 counts, reported as `level2_capped`).

Floating point: cell indices are floor((x - lo) / w) with w = (hi - lo) / m computed once in
Python; the Spark path evaluates the very same IEEE operations in SQL, so both paths put every
row in the same cell and release identical synopses for the same seed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from leteo_fed.clustering._checks import (
    check_bounds,
    check_dim,
    check_epsilon,
    check_fraction,
    check_k,
    check_positive,
)
from leteo_fed.clustering.lloyd import lloyd, weighted_kmeans
from leteo_fed.clustering.noise import make_rng
from leteo_fed.clustering.result import ClusterFn, DPKMeansResult
from leteo_fed.errors import ConfigError, DataError

METHOD = "eugkm"
MAX_CELLS = 1 << 23  # 8.4 M cells: 67 MB of float64 noise per level on the driver
_CEIL_TOL = 1e-9  # ceil(v) with this relative slack: 100**(1/2) rounding to 10.000...02 is 10


@dataclass(frozen=True)
class EugkmParams:
    """Tuning of EUGkM; defaults are Su et al.'s (c1 = 10, c2 = 5, α = 0.5)."""

    alpha: float = 0.5
    c1: float = 10.0
    c2: float = 5.0
    count_fraction: float = 0.05
    threshold: float = 0.0
    max_cells: int = MAX_CELLS
    n_init: int = 5
    max_iter: int = 100
    coarse_above: int = 50_000

    def checked(self) -> EugkmParams:
        check_fraction(self.alpha, "alpha")
        check_positive(self.c1, "c1")
        check_positive(self.c2, "c2")
        check_fraction(self.count_fraction, "count_fraction")
        if not math.isfinite(self.threshold) or self.threshold < 0:
            raise ConfigError("threshold must be finite and >= 0", field="threshold")
        if min(self.max_cells, self.n_init, self.max_iter, self.coarse_above) < 1:
            raise ConfigError("max_cells, n_init, max_iter and coarse_above must be >= 1")
        return self


class GridCounter(Protocol):
    """Exact cell counts of the (clipped) data; NumPy here, Spark in `spark_eugkm`."""

    dim: int

    def count(self) -> int: ...

    def level1_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(flat level-1 indices of non-empty cells, their counts)."""
        ...

    def level2_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int, m2: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(level-1 index, local level-2 index, count) of every non-empty level-2 cell."""
        ...


# ------------------------------------------------------------------------------ grid formulas


def _ceil(v: np.ndarray | float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return np.ceil(a - _CEIL_TOL * np.maximum(a, 1.0)).astype(np.int64)


def level1_grid(n: float, epsilon: float, d: int, c1: float = 10.0) -> tuple[float, int]:
    """(M1, m1) = ((N ε / c1)^(2d/(2+d)), ceil(max(100^(1/d), M1^(1/d) / 4)))."""
    m_big = (max(n, 0.0) * epsilon / c1) ** (2.0 * d / (2.0 + d))
    m1 = int(_ceil(max(100.0 ** (1.0 / d), m_big ** (1.0 / d) / 4.0)))
    return float(m_big), max(m1, 1)


def level2_grid(
    noisy_counts: np.ndarray, epsilon: float, alpha: float, d: int, c2: float = 5.0
) -> tuple[np.ndarray, np.ndarray]:
    """(M2, m2) per level-1 cell: M2 = (max(N', 0) (1-α) ε / c2)^(2d/(2+d)), m2 = max(1, ceil(M2^(1/d)))."""
    n_prime = np.maximum(np.asarray(noisy_counts, dtype=np.float64), 0.0)
    m_big = (n_prime * (1.0 - alpha) * epsilon / c2) ** (2.0 * d / (2.0 + d))
    m2 = np.maximum(_ceil(m_big ** (1.0 / d)), 1)
    return m_big, m2


def min_level1_cells(d: int) -> int:
    """Cells of the coarsest level-1 grid any N allows: ceil(100^(1/d))^d."""
    return int(_ceil(100.0 ** (1.0 / d))) ** d


def cap_level2(m2: np.ndarray, d: int, max_cells: int) -> tuple[np.ndarray, bool]:
    """m2 scaled by the largest common factor s in (0, 1] with sum(max(1, floor(s m2))^d) <= max_cells."""

    def total(v: np.ndarray) -> float:  # float64: no int64 overflow for large m2^d
        return float(np.sum(v.astype(np.float64) ** d))

    if total(m2) <= max_cells:
        return m2, False
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if total(np.maximum(np.floor(m2 * mid), 1).astype(np.int64)) <= max_cells:
            lo = mid
        else:
            hi = mid
    return np.maximum(np.floor(m2 * lo), 1).astype(np.int64), True


# ------------------------------------------------------------------------------ cell indexing


def cell_widths(lo: np.ndarray, hi: np.ndarray, m1: int) -> np.ndarray:
    return (hi - lo) / m1


def level1_coords(
    x: np.ndarray, lo: np.ndarray, w1: np.ndarray, m1: int
) -> tuple[np.ndarray, np.ndarray]:
    """(t = (x - lo) / w1, per-dimension level-1 cell i1 = clip(floor(t), 0, m1 - 1))."""
    t = (x - lo) / w1
    i1 = np.clip(np.floor(t), 0, m1 - 1).astype(np.int64)
    return t, i1


def flat_index(i: np.ndarray, base: np.ndarray | int) -> np.ndarray:
    """Σ_j i_j base^j (dimension 0 varies fastest); base may differ per row."""
    b = np.asarray(base, dtype=np.int64)
    out = np.zeros(i.shape[0], dtype=np.int64)
    mult = np.ones(i.shape[0], dtype=np.int64) if b.ndim else np.int64(1)
    for j in range(i.shape[1]):
        out += i[:, j] * mult
        mult = mult * b
    return out


def level2_local(t: np.ndarray, i1: np.ndarray, m2_rows: np.ndarray) -> np.ndarray:
    """Local level-2 index inside the parent cell: i2_j = clip(floor((t_j - i1_j) m2), 0, m2 - 1)."""
    m2c = m2_rows[:, None]
    i2 = np.clip(np.floor((t - i1) * m2c), 0, m2c - 1).astype(np.int64)
    return flat_index(i2, m2_rows)


def synopsis_centers(
    keep: np.ndarray, offsets: np.ndarray, m2: np.ndarray, lo: np.ndarray, w1: np.ndarray, m1: int
) -> np.ndarray:
    """Centers of the level-2 cells with global indices `keep` (offsets[c] + local index)."""
    d = lo.shape[0]
    parent = np.searchsorted(offsets, keep, side="right") - 1
    local = keep - offsets[parent]
    m2p = m2[parent]
    out = np.empty((keep.shape[0], d))
    q1, q2 = parent.copy(), local.copy()
    for j in range(d):
        i1 = q1 % m1
        q1 //= m1
        i2 = q2 % m2p
        q2 //= m2p
        out[:, j] = lo[j] + (i1 + (i2 + 0.5) / m2p) * w1[j]
    return out


# ------------------------------------------------------------------------------ NumPy counter


class NumpyGridCounter:
    """Exact counts of in-memory points (the reference for tests and small data)."""

    def __init__(self, points: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        x = np.asarray(points, dtype=np.float64)
        if x.ndim != 2:
            raise DataError(f"points must be a 2-D array, got shape {x.shape}", field="points")
        if not np.all(np.isfinite(x)):
            raise DataError("points contain NaN or infinite values", field="points")
        self.dim = x.shape[1]
        self._x = np.clip(x, lo, hi)

    def count(self) -> int:
        return int(self._x.shape[0])

    def level1_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int
    ) -> tuple[np.ndarray, np.ndarray]:
        _, i1 = level1_coords(self._x, lo, w1, m1)
        idx, cnt = np.unique(flat_index(i1, m1), return_counts=True)
        return idx, cnt

    def level2_counts(
        self, lo: np.ndarray, w1: np.ndarray, m1: int, m2: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        t, i1 = level1_coords(self._x, lo, w1, m1)
        c1 = flat_index(i1, m1)
        local = level2_local(t, i1, m2[c1])
        pairs, cnt = np.unique(np.stack([c1, local], axis=1), axis=0, return_counts=True)
        return pairs[:, 0], pairs[:, 1], cnt


# ------------------------------------------------------------------------------ the driver


def coarsen(
    points: np.ndarray, weights: np.ndarray, groups: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean point and total weight per group (level-1 cell) of a synopsis."""
    ids, inv = np.unique(groups, return_inverse=True)
    w = np.bincount(inv, weights=weights, minlength=ids.size)
    out = np.empty((ids.size, points.shape[1]))
    for j in range(points.shape[1]):
        out[:, j] = np.bincount(inv, weights=weights * points[:, j], minlength=ids.size) / w
    return out, w


def _numpy_cluster(
    points: np.ndarray, weights: np.ndarray, k: int, rng, *, n_init: int, max_iter: int
) -> np.ndarray:
    return weighted_kmeans(points, k, rng, weights, n_init=n_init, max_iter=max_iter)


def fit(
    counter: GridCounter,
    k: int,
    epsilon: float,
    lo: float | Sequence[float] | np.ndarray,
    hi: float | Sequence[float] | np.ndarray,
    *,
    params: EugkmParams | None = None,
    n_public: int | None = None,
    rng: np.random.Generator | None = None,
    cluster_fn: ClusterFn | None = None,
) -> DPKMeansResult:
    """EUGkM over any counter. Noise is drawn on the driver in a fixed order (Ñ, level 1, level 2,
    k-means), so the same seed gives the same synopsis whatever computed the exact counts."""
    p = (params or EugkmParams()).checked()
    d = check_dim(counter.dim)
    k = check_k(k)
    eps = check_epsilon(epsilon)
    lo_a, hi_a = check_bounds(lo, hi, d)
    if n_public is not None and (isinstance(n_public, bool) or int(n_public) < 1):
        raise ConfigError(f"n_public must be an integer >= 1, got {n_public!r}", field="n_public")
    if min_level1_cells(d) > p.max_cells:
        raise ConfigError(
            f"EUGkM on {d} features needs at least ceil(100^(1/{d}))^{d} = "
            f"{min_level1_cells(d):.3g} grid cells (limit {p.max_cells}); the grid method suits "
            "low-dimensional data: use the LSH core-set method or fewer features",
            field="features",
        )
    rng = rng if rng is not None else make_rng(None)
    times: dict[str, float] = {}

    t0 = time.perf_counter()
    if n_public is None:
        eps_n = p.count_fraction * eps
        n_noisy = counter.count() + rng.laplace(0.0, 1.0 / eps_n)
        n_used = max(float(n_noisy), 1.0)
    else:
        eps_n, n_noisy, n_used = 0.0, float(n_public), float(n_public)
    eps_g = eps - eps_n
    big_m1, m1 = level1_grid(n_used, eps_g, d, p.c1)
    cells1 = m1**d
    if cells1 > p.max_cells:
        raise ConfigError(
            f"EUGkM level-1 grid {m1}^{d} = {cells1:.3g} cells exceeds the limit {p.max_cells}; "
            "use the LSH core-set method or fewer features",
            field="features",
        )
    times["count_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    w1 = cell_widths(lo_a, hi_a, m1)
    idx1, cnt1 = counter.level1_counts(lo_a, w1, m1)
    b1 = 1.0 / (p.alpha * eps_g)
    noisy1 = np.zeros(cells1)
    noisy1[idx1] = cnt1
    noisy1 += rng.laplace(0.0, b1, size=cells1)
    times["level1_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    _, m2 = level2_grid(noisy1, eps_g, p.alpha, d, p.c2)
    m2, capped = cap_level2(m2, d, p.max_cells)
    sizes2 = m2.astype(np.int64) ** d
    offsets = np.concatenate([[0], np.cumsum(sizes2)[:-1]]).astype(np.int64)
    cells2 = int(sizes2.sum())
    i1_2, loc2, cnt2 = counter.level2_counts(lo_a, w1, m1, m2)
    b2 = 1.0 / ((1.0 - p.alpha) * eps_g)
    noisy2 = np.zeros(cells2)
    noisy2[offsets[i1_2] + loc2] = cnt2
    noisy2 += rng.laplace(0.0, b2, size=cells2)
    times["level2_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    keep = np.nonzero(noisy2 > p.threshold)[0]
    points = synopsis_centers(keep, offsets, m2, lo_a, w1, m1)
    weights = noisy2[keep]
    cluster = cluster_fn or partial(_numpy_cluster, n_init=p.n_init, max_iter=p.max_iter)
    coarse = keep.size > p.coarse_above
    if keep.size == 0:  # nothing survived the noise: data-independent centers (post-processing)
        centers = rng.uniform(lo_a, hi_a, size=(k, d))
    elif coarse:  # restarts on the per-level-1-cell means, then Lloyd on the full synopsis
        parent = np.searchsorted(offsets, keep, side="right") - 1
        c_pts, c_w = coarsen(points, weights, parent)
        centers, _ = lloyd(points, cluster(c_pts, c_w, k, rng), weights, max_iter=p.max_iter)
    else:
        centers = cluster(points, weights, k, rng)
    times["kmeans_s"] = time.perf_counter() - t0

    return DPKMeansResult(
        centers=np.asarray(centers, dtype=np.float64),
        method=METHOD,
        epsilon=eps,
        delta=0.0,
        budget={
            "adjacency": "add/remove one row",
            "noisy_count": {"epsilon": eps_n, "laplace_scale": (1.0 / eps_n) if eps_n else None},
            "level1_counts": {"epsilon": p.alpha * eps_g, "laplace_scale": b1},
            "level2_counts": {"epsilon": (1.0 - p.alpha) * eps_g, "laplace_scale": b2},
            "composition": "parallel within a level, sequential across count, level 1, level 2",
        },
        details={
            "n_noisy": float(n_noisy),
            "n_public": n_public is not None,
            "alpha": p.alpha,
            "c1": p.c1,
            "c2": p.c2,
            "M1": big_m1,
            "m1": m1,
            "level1_cells": cells1,
            "level2_cells": cells2,
            "level2_capped": capped,
            "m2_max": int(m2.max()),
            "synopsis_cells": int(keep.size),
            "coarse_restarts": bool(coarse),
            "threshold": p.threshold,
            "bounds": {"lo": lo_a.tolist(), "hi": hi_a.tolist()},
        },
        summary_points=points,
        summary_weights=weights,
        timings=times,
    )


def eugkm_numpy(
    points: np.ndarray,
    k: int,
    epsilon: float,
    lo: float | Sequence[float] | np.ndarray,
    hi: float | Sequence[float] | np.ndarray,
    *,
    params: EugkmParams | None = None,
    n_public: int | None = None,
    seed: int | None = None,
) -> DPKMeansResult:
    """EUGkM on in-memory points (the reference path). Points outside [lo, hi] are clipped."""
    x = np.asarray(points, dtype=np.float64)
    d = check_dim(x.shape[1] if x.ndim == 2 else 0)
    lo_a, hi_a = check_bounds(lo, hi, d)
    return fit(
        NumpyGridCounter(x, lo_a, hi_a),
        k,
        epsilon,
        lo_a,
        hi_a,
        params=params,
        n_public=n_public,
        rng=make_rng(seed),
    )
