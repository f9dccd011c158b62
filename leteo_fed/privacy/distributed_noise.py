"""Distributed integer noise for (epsilon, delta)-DP aggregates: owners' Skellam shares.

Every owner adds Skellam(mu / n_min) to every integer coordinate of its share, where n_min is the
round's quorum (`owner_noise`). Sums of independent Skellams are Skellam with the rates added,
so the aggregate of n >= n_min shares carries exactly Skellam(mu * n / n_min) noise: at least the
calibrated mu, never less. No party sees the un-noised aggregate: the aggregator only holds
ciphertexts and the CSP only masked plaintexts (docs/dp-release.md). A round with fewer than
n_min shares must not be released (`effective_mu` refuses it).

The mechanism, its privacy map (Agarwal-Kairouz-Liu RDP bound and RDP -> (epsilon, delta)
conversion), its calibration, sampler and magnitude bound live in
`leteo_fed.privacy.mechanisms` (`Skellam`, `Gaussian`, `rdp_to_dp`); the functions here are the
protocol's entry points over them, in integer units of the encoded share, plus the clipping and
the sensitivities of the moments share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import ConfigError, DataError, ProtocolError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import (
    CONVERSIONS,
    DEFAULT_ALPHAS,
    Gaussian,
    Sensitivity,
    Skellam,
    new_rng,
    rdp_to_dp,
)
from leteo_fed.privacy.mechanisms._params import positive_finite as _positive_finite
from leteo_fed.privacy.mechanisms._params import positive_int as _positive_int

# --------------------------------------------------------------------------------------------
# sampling


def sample_skellam(
    mu: float, size: int | tuple[int, ...], rng: np.random.Generator | None = None
) -> np.ndarray:
    """Independent Skellam(mu) = Poisson(mu) - Poisson(mu) variables (mean 0, variance 2 mu).

    Returns int64. mu == 0 gives zeros. `rng` defaults to a freshly, cryptographically seeded
    generator (`new_rng`); pass one only for reproducible tests.
    """
    return Skellam(mu).sample(size, rng)


def owner_noise(
    mu: float,
    quorum: int,
    size: int | tuple[int, ...],
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """One owner's noise share: Skellam(mu / quorum) per coordinate.

    `mu` is the calibrated aggregate parameter (`calibrate_mu`), `quorum` the minimum number of
    owners whose shares a round needs before it is released. With n >= quorum shares the aggregate
    noise is exactly Skellam(mu * n / quorum).
    """
    return Skellam(mu).owner_share(quorum).sample(size, rng)


def effective_mu(mu: float, quorum: int, n_submitted: int) -> float:
    """The aggregate's Skellam parameter when `n_submitted` owners each added Skellam(mu/quorum).

    Refuses (ProtocolError) a round with fewer shares than the quorum: its noise would be below
    the calibrated mu and the release would not meet its (epsilon, delta).
    """
    mu = _positive_finite(mu, "mu")
    quorum = _positive_int(quorum, "quorum")
    if isinstance(n_submitted, bool) or not isinstance(n_submitted, (int, np.integer)):
        raise ConfigError(f"n_submitted must be an integer, got {n_submitted!r}")
    if n_submitted < quorum:
        raise ProtocolError(
            f"only {n_submitted} noisy shares for a quorum of {quorum}: the aggregate noise would "
            f"be below the calibrated level; the round must not be released",
            field="quorum",
        )
    return mu * int(n_submitted) / quorum


def skellam_magnitude_bound(mu: float, n_coords: int, failure_prob: float = 2.0**-64) -> int:
    """Smallest integer B with P(max over n_coords Skellam(mu) coordinates of |X| > B) <= failure_prob.

    Use it (with the aggregate mu, i.e. `effective_mu`) in the encoding's wrap-around checks.
    """
    return Skellam(mu).magnitude_bound(n_coords, failure_prob)


# --------------------------------------------------------------------------------------------
# accounting


def skellam_rdp(
    alpha: float | np.ndarray, mu: float, l1_sensitivity: float, l2_sensitivity: float
) -> float | np.ndarray:
    """Agarwal-Kairouz-Liu (NeurIPS 2021) RDP bound of Skellam(mu) noise, integer alpha > 1
    (`Skellam.rdp`)."""
    return Skellam(mu).rdp(alpha, Sensitivity(l1_sensitivity, l2_sensitivity))


def gaussian_rdp(alpha: float | np.ndarray, sigma: float, l2_sensitivity: float):
    """RDP of the Gaussian mechanism (Mironov 2017, Prop. 7): alpha D2^2 / (2 sigma^2)."""
    return Gaussian(sigma).rdp(alpha, l2_sensitivity)


def skellam_epsilon(
    mu: float,
    delta: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    *,
    compositions: int = 1,
    method: str = "improved",
    alphas: np.ndarray = DEFAULT_ALPHAS,
) -> float:
    """Epsilon at `delta` of `compositions` releases, each with Skellam(mu) noise."""
    return Skellam(mu).epsilon(
        Sensitivity(l1_sensitivity, l2_sensitivity),
        delta,
        compositions=compositions,
        method=method,
        alphas=alphas,
    )


def calibrate_mu(
    epsilon: float,
    delta: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    *,
    compositions: int = 1,
    method: str = "improved",
    alphas: np.ndarray = DEFAULT_ALPHAS,
    rel_tol: float = 1e-10,
) -> float:
    """Smallest aggregate Skellam parameter mu (to relative `rel_tol`, rounded up) whose
    accounted epsilon at `delta` is <= `epsilon` (`Skellam.calibrate`).

    The returned mu always satisfies skellam_epsilon(mu, ...) <= epsilon. Each of n_min owners
    then adds Skellam(mu / n_min) (`owner_noise`).
    """
    return Skellam.calibrate(
        Budget(epsilon, delta),
        Sensitivity(l1_sensitivity, l2_sensitivity),
        compositions=compositions,
        method=method,
        alphas=alphas,
        rel_tol=rel_tol,
    ).mu


def gaussian_analytic_delta(epsilon: float, sigma: float, l2_sensitivity: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism (Balle & Wang, ICML 2018, Thm. 8):

    delta = Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D).
    Reference for comparisons; not used to release anything.
    """
    return Gaussian(sigma).delta_at(epsilon, l2_sensitivity)


def gaussian_analytic_epsilon(sigma: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest epsilon with gaussian_analytic_delta(epsilon) <= delta."""
    return Gaussian(sigma).epsilon(l2_sensitivity, delta)


# --------------------------------------------------------------------------------------------
# sensitivities and clipping


def clip_rows(x: np.ndarray, c: float) -> np.ndarray:
    """Rows of x scaled so that every row's L2 norm is <= c (rows already within c unchanged).

    Vectorised; refuses NaN/inf. A clipped row ends with norm c up to rounding, and is shrunk by
    a further ulp-sized factor if the recomputed float norm still exceeds c.
    """
    c = _positive_finite(c, "row_norm_bound")
    arr = np.array(x, dtype=np.float64, copy=True)
    if arr.ndim != 2:
        raise DataError(f"clip_rows expects a 2-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise DataError("clip_rows: data contains NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1)
    over = norms > c
    if np.any(over):
        arr[over] *= (c / norms[over])[:, None]
        still = np.linalg.norm(arr, axis=1) > c
        while np.any(still):  # float rounding of the rescaled norm; a few ulps at most
            arr[still] *= 1.0 - 2.0**-40
            still = np.linalg.norm(arr, axis=1) > c
    return arr


def sensitivities_for_scatter(
    row_norm_bound_C: float,
    scale_bits: int,
    d: int,
    n_groupings: int,
    *,
    n_classes: Sequence[int] | None = None,
    extra_slack: float = 0.0,
    count_scale_bits: int = 0,
) -> Sensitivity:
    """L1/L2 sensitivity, in integer units, of a moments share (`protocols.moments`) when one row
    x with ||x||_2 <= C is added or removed.

    The share is: the upper triangle of R = sum x x^T (T = d(d+1)/2 values), then per grouping
    and class V_k = sum x (d values) and the count M_k. R and V are encoded as round(s * 2^f)
    (F = 2^f = 2^scale_bits); counts are exact integers, not scaled.

    Real-valued change caused by the row:
      R triangle: entries x_i x_j (i <= j).
          L2^2 = sum_{i<=j} x_i^2 x_j^2 = (||x||_2^4 + sum x_i^4)/2 <= ||x||_2^4  ->  L2 <= C^2
          L1   = sum_{i<=j} |x_i x_j| = (||x||_1^2 + ||x||_2^2)/2 <= (d + 1) C^2 / 2
      V of the row's class (one class per grouping): x, so L2 <= C, L1 <= sqrt(d) C.
      M of that class: 1.
    Rounding: |round(a F) - round(b F)| <= |a - b| F + 1 for every encoded coordinate (each
    rounding moves a value by at most 1/2), so each of the N affected coordinates gets +1 and,
    by the triangle inequality, L2 gains at most sqrt(N) and L1 at most N:
      R:   L2 <= C^2 F + sqrt(T)         L1 <= (d + 1) C^2 F / 2 + T
      V:   L2 <= C F + sqrt(d)           L1 <= sqrt(d) C F + d          (per grouping)
      M:   L2 = L1 = 1                                                     (per grouping)
    Totals: L2 = sqrt(L2_R^2 + G (L2_V^2 + 1)), L1 = L1_R + G (L1_V + 1), G = n_groupings.
    An integer vector z has ||z||_1 <= ||z||_2^2 and ||z||_1 <= sqrt(N_total) ||z||_2, so L1 is
    also capped by min(L2^2, sqrt(N) L2) (never binding in practice).

    Assumptions, stated: (1) the unrounded statistics are computed exactly (floating-point
    accumulation error of sum x x^T is assumed far below 2^-f; otherwise pass `extra_slack`, in
    integer units per coordinate, covering twice the worst accumulation error times F);
    (2) classes other than the row's are bit-identical with and without the row. If the
    latter is not guaranteed (e.g. BLAS re-blocking changes summation order), pass
    `n_classes` (K per grouping): every other class's V then gets the rounding slack too
    ((K - 1) d coordinates changing by at most 1 + extra_slack each). Neighbouring is
    add/remove-one-row; for replace-one, double both values.
    """
    c = _positive_finite(row_norm_bound_C, "row_norm_bound")
    if isinstance(scale_bits, bool) or not isinstance(scale_bits, (int, np.integer)):
        raise ConfigError(f"scale_bits must be an integer, got {scale_bits!r}", field="scale_bits")
    if scale_bits < 0:
        raise ConfigError(f"scale_bits must be >= 0, got {scale_bits}", field="scale_bits")
    d = _positive_int(d, "d")
    g = _positive_int(n_groupings, "n_groupings")
    if isinstance(extra_slack, bool) or not math.isfinite(extra_slack) or extra_slack < 0:
        raise ConfigError(f"extra_slack must be finite and >= 0, got {extra_slack!r}")
    if n_classes is not None:
        n_classes = [_positive_int(k, "n_classes") for k in n_classes]
        if len(n_classes) != g:
            raise ConfigError(
                f"n_classes has {len(n_classes)} entries for {g} groupings", field="n_classes"
            )
    f = float(2**scale_bits)
    slack = 1.0 + float(extra_slack)
    t = d * (d + 1) // 2

    l2_r = c * c * f + math.sqrt(t) * slack
    l1_r = (d + 1) * c * c * f / 2.0 + t * slack
    l2_v = c * f + math.sqrt(d) * slack
    l1_v = math.sqrt(d) * c * f + d * slack

    # counts encoded as M * 2^count_scale_bits (DP rounds scale them like R and V, so that one
    # noise level suits every coordinate): one row changes one count per grouping by 2^cs
    fm = float(2**count_scale_bits)
    l2_sq = l2_r**2 + g * (l2_v**2 + fm**2)
    l1 = l1_r + g * (l1_v + fm)
    n_coords = t + g * (d + 1)
    if n_classes is not None:
        others = sum((k - 1) * d for k in n_classes)
        l2_sq += others * slack * slack
        l1 += others * slack
        n_coords = t + sum(k * (d + 1) for k in n_classes)
    l2 = math.sqrt(l2_sq)
    l1 = min(l1, l2_sq, math.sqrt(n_coords) * l2)
    return Sensitivity(l1=l1, l2=l2)


__all__ = [
    "CONVERSIONS",
    "DEFAULT_ALPHAS",
    "Sensitivity",
    "calibrate_mu",
    "clip_rows",
    "effective_mu",
    "gaussian_analytic_delta",
    "gaussian_analytic_epsilon",
    "gaussian_rdp",
    "new_rng",
    "owner_noise",
    "rdp_to_dp",
    "sample_skellam",
    "sensitivities_for_scatter",
    "skellam_epsilon",
    "skellam_magnitude_bound",
    "skellam_rdp",
]
