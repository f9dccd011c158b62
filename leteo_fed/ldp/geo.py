"""Geo-indistinguishability: Laplace noise with a Euclidean metric, for locations and points.

Why
---
Andrés et al. (CCS 2013) "geo-indistinguishability": a mechanism K is ε·d-geo-indistinguishable
if Pr[K(x) ∈ S] <= e^{ε ||x - x'||} Pr[K(x') ∈ S] for all x, x', S. ε is a rate PER UNIT OF
DISTANCE (ε = l / r: privacy level l within radius r), so the one ε cap of single releases
does not apply (`check_epsilon(..., capped=False)`): a rate of 100 per km is 0.1 per metre. The
guarantee degrades with distance, unlike ε-LDP over a finite domain.

The m-dimensional Laplace density D(z | x) = c_{ε,m} exp(-ε ||z - x||) gives it directly:
D(z|x)/D(z|x') <= exp(ε ||x - x'||) by the triangle inequality. Sampling in polar form:

- planar (m = 2): θ ~ U[0, 2π), r = C_ε^{-1}(p) = -(1/ε)(W_{-1}((p - 1)/e) + 1), p ~ U[0, 1),
  where C_ε(r) = 1 - (1 + εr) e^{-εr} is the radius CDF and W_{-1} the Lambert W lower branch;
- m dimensions: the radius has density ∝ r^{m-1} e^{-εr}, i.e. Gamma(shape m, scale 1/ε)
  (m = 2 is the same law as the planar inverse CDF), and the direction is uniform on the
  sphere (normalised standard Gaussians).

Bounded domains: `remap_to_box` (nearest box point = coordinate-wise clip) is post-processing
and keeps ε·d-geo-ind. `resample_in_box` (redraw until inside) costs a factor 2: see there.
The box must be PUBLIC (fixed before seeing the data); a box taken from the data's own min/max,
as in some write-ups, leaks the extreme points.

Caveat: floating-point sampling is not exact (Mironov 2012 for the 1-D Laplace; Andrés et al.
discuss discretisation); outputs are float64 and not snapped to a grid.
"""

from __future__ import annotations

import math

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.budget import check_epsilon


def planar_laplace(points: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ε·d-geo-indistinguishable 2-D points via the polar method with Lambert W_{-1}."""
    x = _check_points(points, m=2)
    eps = check_epsilon(epsilon, capped=False)
    n = x.shape[0]
    theta = rng.uniform(0.0, 2.0 * math.pi, size=n)
    p = rng.random(n)
    from scipy.special import lambertw  # loaded by the first geo round, not at start

    r = -(lambertw((p - 1.0) / math.e, k=-1).real + 1.0) / eps
    r = np.maximum(r, 0.0)  # p = 0 gives W = -1 exactly; guard rounding below zero
    return x + r[:, None] * np.stack([np.cos(theta), np.sin(theta)], axis=1)


def nd_laplace(points: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """ε·d-geo-indistinguishable m-D points: radius ~ Gamma(m, 1/ε), uniform direction."""
    x = _check_points(points)
    eps = check_epsilon(epsilon, capped=False)
    n, m = x.shape
    r = np.asarray(rng.gamma(shape=m, scale=1.0 / eps, size=n))
    return x + r[:, None] * _unit_directions(n, m, rng)


def remap_to_box(points: np.ndarray, lo: np.ndarray | float, hi: np.ndarray | float) -> np.ndarray:
    """Nearest point of the box [lo, hi] (coordinate-wise clip). Post-processing: no privacy cost."""
    z = np.asarray(points, dtype=np.float64)
    lo_a, hi_a = _check_box(lo, hi, z.shape[-1])
    return np.clip(z, lo_a, hi_a)


def resample_in_box(
    points: np.ndarray,
    epsilon: float,
    lo: np.ndarray | float,
    hi: np.ndarray | float,
    rng: np.random.Generator,
    *,
    max_rounds: int = 10_000,
) -> np.ndarray:
    """m-D Laplace redrawn until it falls in the public box B = [lo, hi]: (2ε)·d-geo-ind.

    Privacy cost, stated honestly: the output density is D(z|x)/P_x(B) on B, so for two inputs
        ratio <= [D(z|x)/D(z|x')] · [P_x'(B)/P_x(B)] <= e^{ε d(x,x')} · e^{ε d(x,x')},
    since P_x'(B) = ∫_B D(·|x') <= e^{ε d(x,x')} P_x(B). The result is (2ε)·d-geo-
    indistinguishable, not ε·d: call with epsilon/2 if you need ε·d. The factor 2 is a worst
    case; it is approached only when the box cuts off very different masses for x and x' (small
    box relative to 1/ε, points near corners). Use `remap_to_box` to keep ε exactly.

    Further conditions: the box must be public and fixed in advance; the number of redraws (and
    the time taken) depends on x and must not be revealed. Input points must lie in the box.
    Rows still outside after max_rounds redraws (probability (1 - P_x(B))^max_rounds, e.g. below
    1e-300 once P_x(B) >= 0.07) are clipped instead; that event adds its probability as a δ.
    """
    x = _check_points(points)
    eps = check_epsilon(epsilon, capped=False)
    lo_a, hi_a = _check_box(lo, hi, x.shape[1])
    outside_in = np.any((x < lo_a) | (x > hi_a), axis=1)
    if outside_in.any():
        raise DataError(f"{int(outside_in.sum())} input points lie outside the box", field="points")
    z = nd_laplace(x, eps, rng)
    todo = np.nonzero(np.any((z < lo_a) | (z > hi_a), axis=1))[0]
    rounds = 0
    while todo.size and rounds < max_rounds:  # loop over rounds, vectorised over rows
        z[todo] = nd_laplace(x[todo], eps, rng)
        still = np.any((z[todo] < lo_a) | (z[todo] > hi_a), axis=1)
        todo = todo[still]
        rounds += 1
    if todo.size:
        z[todo] = np.clip(z[todo], lo_a, hi_a)
    return z


def planar_radius_cdf(r: np.ndarray | float, epsilon: float) -> np.ndarray | float:
    """C_ε(r) = 1 - (1 + εr) e^{-εr}: the CDF of the planar Laplace noise radius."""
    er = epsilon * np.maximum(np.asarray(r, dtype=np.float64), 0.0)
    out = 1.0 - (1.0 + er) * np.exp(-er)
    return float(out) if out.ndim == 0 else out


def _unit_directions(n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    g = rng.standard_normal((n, m))
    norm = np.linalg.norm(g, axis=1)
    zero = norm == 0.0  # probability zero; keep the division defined anyway
    g[zero, 0], norm[zero] = 1.0, 1.0
    return g / norm[:, None]


def _check_points(points: np.ndarray, m: int | None = None) -> np.ndarray:
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or (m is not None and x.shape[1] != m) or x.shape[1] < 1:
        want = f"(n, {m})" if m is not None else "(n, m)"
        raise DataError(f"points must have shape {want}, got {x.shape}", field="points")
    bad = ~np.all(np.isfinite(x), axis=1)
    if bad.any():
        raise DataError(f"{int(bad.sum())} points have NaN or infinite coordinates", field="points")
    return x


def _check_box(
    lo: np.ndarray | float, hi: np.ndarray | float, m: int
) -> tuple[np.ndarray, np.ndarray]:
    lo_a = np.broadcast_to(np.asarray(lo, dtype=np.float64), (m,))
    hi_a = np.broadcast_to(np.asarray(hi, dtype=np.float64), (m,))
    if not (np.all(np.isfinite(lo_a)) and np.all(np.isfinite(hi_a)) and np.all(lo_a < hi_a)):
        raise DataError(
            "box bounds must be finite with lo < hi in every coordinate", field="bounds"
        )
    return lo_a, hi_a


__all__ = [
    "nd_laplace",
    "planar_laplace",
    "planar_radius_cdf",
    "remap_to_box",
    "resample_in_box",
]
