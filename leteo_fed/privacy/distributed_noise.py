"""Distributed integer noise for (epsilon, delta)-DP aggregates: the Skellam mechanism (SPEC P5).

Mechanism
---------
Skellam(mu) := Poisson(mu) - Poisson(mu), two independent Poisson variables of rate mu; mean 0,
variance 2 mu (this is Sk_{mu,mu} in Agarwal, Kairouz and Liu, "The Skellam Mechanism for
Differentially Private Federated Learning", NeurIPS 2021, arXiv:2110.04995). Sums of independent
Skellams are Skellam with the rates added, so if every owner adds Skellam(mu / n_min) to every
integer coordinate of its share, where n_min is the round's quorum, the aggregate of n >= n_min
shares carries exactly Skellam(mu * n / n_min) noise: at least the calibrated mu, never less.
No party sees the un-noised aggregate: the aggregator only holds ciphertexts and the CSP only
masked plaintexts (SPEC section 2). A round with fewer than n_min shares must not be released
(`effective_mu` refuses it).

Privacy accounting (all quantities in INTEGER units of the encoded share)
-----------------------------------------------------------------------
Neighbouring datasets differ by adding or removing one row; Delta1, Delta2 are the L1 and L2
sensitivities of the integer share vector (`sensitivities_for_scatter`).

1. Renyi DP of the multi-dimensional Skellam mechanism, Agarwal-Kairouz-Liu 2021, section 3
   (cited as Corollary 3.6 by public implementations; the theorem number was not checked against
   the paper's text here, the formula was checked against two independent public accounting
   implementations), for integer orders alpha > 1, noise Skellam(mu) per coordinate (var 2 mu):

       eps_RDP(alpha) <= alpha Delta2^2 / (4 mu)
                         + min( ((2 alpha - 1) Delta2^2 + 6 Delta1) / (16 mu^2),  3 Delta1 / (4 mu) )

   The paper writes it for variance mu_paper = 2 mu as alpha D2^2/(2 mu_paper) + min(((2 alpha-1)
   D2^2 + 6 D1)/(4 mu_paper^2), 3 D1/(2 mu_paper)); Google's distributed-DP accounting code uses
   that form with "central_var". The first term is exactly the RDP of the Gaussian mechanism with
   sigma^2 = 2 mu, the second a correction that vanishes like 1/mu^2 relative to it. We only use
   integer alpha (the paper's accounting code does the same). tests/test_distributed_noise.py
   checks the bound against the exactly computed Renyi divergence of shifted 1-D Skellams.

2. Composition: RDP adds over releases (`compositions` multiplies eps_RDP).

3. RDP -> (eps, delta), at the best alpha on the grid `DEFAULT_ALPHAS`:
   - "standard" (Mironov, "Renyi Differential Privacy", CSF 2017, Prop. 3):
         eps = eps_RDP(alpha) + log(1/delta) / (alpha - 1)
   - "improved" (default; Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
     Privacy", NeurIPS 2020, Prop. 12; equivalently Balle et al., "Hypothesis testing
     interpretations and Renyi DP", AISTATS 2020, Thm. 21; the form used by TF-Privacy/Opacus):
         eps = eps_RDP(alpha) + log(1/delta)/(alpha - 1) + log(1 - 1/alpha) - log(alpha)/(alpha - 1)
     which is never larger than the standard one (both extra terms are negative).

Implementation caveats (documented, not hidden)
-----------------------------------------------
- Sampling uses numpy's Generator (PCG64) seeded with 128 bits from `secrets`, and numpy's
  Poisson sampler (floating-point rejection sampling). PCG64 is not a cryptographic generator and
  the sampler is not an exact-arithmetic one (cf. Mironov 2012 on floating-point attacks on the
  Laplace mechanism); each owner's noise is, however, only ever seen inside the encrypted and
  masked aggregate, summed with the other owners' noise.
- Noise is unbounded: `skellam_magnitude_bound` gives a bound that holds except with a stated
  probability, for the wrap-around checks of the Paillier encoding.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

from leteo_fed.errors import ConfigError, DataError, ProtocolError

# Integer Renyi orders: every integer 2..128, then a geometric grid up to 10^6 (large orders
# matter only for very small epsilon or delta).
DEFAULT_ALPHAS: np.ndarray = np.unique(
    np.concatenate([np.arange(2, 129), np.rint(np.geomspace(128, 1e6, 240))])
).astype(np.float64)

CONVERSIONS = ("improved", "standard")

# numpy's Poisson sampler refuses rates above about 9.2e18.
_MAX_POISSON_RATE = 1e18


class Sensitivity(NamedTuple):
    """L1 and L2 sensitivity of an integer share vector under add/remove-one-row."""

    l1: float
    l2: float


# --------------------------------------------------------------------------------------------
# parameter checks


def _positive_finite(value: float, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field) from None
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{field} must be finite and > 0, got {value!r}", field=field)
    return v


def _delta_open(delta: float, field: str = "delta") -> float:
    if isinstance(delta, bool):
        raise ConfigError(f"{field} must be a number, got {delta!r}", field=field)
    try:
        v = float(delta)
    except (TypeError, ValueError):
        raise ConfigError(f"{field} must be a number, got {delta!r}", field=field) from None
    if not (0.0 < v < 1.0):
        raise ConfigError(f"{field} must be in (0, 1), got {delta!r}", field=field)
    return v


def _positive_int(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{field} must be an integer >= 1, got {value!r}", field=field)
    return int(value)


def _check_method(method: str) -> None:
    if method not in CONVERSIONS:
        raise ConfigError(
            f"unknown RDP conversion {method!r}; expected one of {CONVERSIONS}", field="method"
        )


# --------------------------------------------------------------------------------------------
# sampling


def new_rng() -> np.random.Generator:
    """A numpy Generator seeded with 128 bits from the OS's cryptographic source."""
    return np.random.default_rng(secrets.randbits(128))


def sample_skellam(
    mu: float, size: int | tuple[int, ...], rng: np.random.Generator | None = None
) -> np.ndarray:
    """Independent Skellam(mu) = Poisson(mu) - Poisson(mu) variables (mean 0, variance 2 mu).

    Returns int64. mu == 0 gives zeros. `rng` defaults to a freshly, cryptographically seeded
    generator (`new_rng`); pass one only for reproducible tests.
    """
    if isinstance(mu, bool):
        raise ConfigError(f"mu must be a number, got {mu!r}", field="mu")
    mu = float(mu)
    if not math.isfinite(mu) or mu < 0:
        raise ConfigError(f"mu must be finite and >= 0, got {mu!r}", field="mu")
    if mu > _MAX_POISSON_RATE:
        raise ConfigError(
            f"mu={mu:g} exceeds the Poisson sampler's range ({_MAX_POISSON_RATE:g})", field="mu"
        )
    rng = new_rng() if rng is None else rng
    if mu == 0:
        return np.zeros(size, dtype=np.int64)
    a = rng.poisson(mu, size=size).astype(np.int64)
    b = rng.poisson(mu, size=size).astype(np.int64)
    return a - b


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
    mu = _positive_finite(mu, "mu")
    quorum = _positive_int(quorum, "quorum")
    return sample_skellam(mu / quorum, size, rng)


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


def _skellam_log_tail(mu: float, t: float) -> float:
    """log of the Chernoff bound on P(X >= t), X ~ Skellam(mu), t > 0.

    log E exp(l X) = 2 mu (cosh l - 1); optimising l gives l = asinh(t / (2 mu)) and
    P(X >= t) <= exp(-(t asinh(u) - 2 mu (sqrt(1 + u^2) - 1))), u = t / (2 mu).
    """
    u = t / (2.0 * mu)
    return -(t * math.asinh(u) - 2.0 * mu * (math.sqrt(1.0 + u * u) - 1.0))


def skellam_magnitude_bound(mu: float, n_coords: int, failure_prob: float = 2.0**-64) -> int:
    """Smallest integer B with P(max over n_coords Skellam(mu) coordinates of |X| > B) <= failure_prob.

    By the two-sided Chernoff bound of `_skellam_log_tail` and a union bound over coordinates.
    Use it (with the aggregate mu, i.e. `effective_mu`) in the encoding's wrap-around checks.
    """
    mu = _positive_finite(mu, "mu")
    n_coords = _positive_int(n_coords, "n_coords")
    failure_prob = _delta_open(failure_prob, "failure_prob")
    target = math.log(failure_prob) - math.log(2.0 * n_coords)

    def excess(t: float) -> float:
        return _skellam_log_tail(mu, t) - target

    hi = max(1.0, math.sqrt(2.0 * mu))
    while excess(hi) > 0:
        hi *= 2.0
    t = brentq(excess, 0.0, hi, xtol=1e-9, rtol=1e-12)
    return int(math.ceil(t))


# --------------------------------------------------------------------------------------------
# accounting


def skellam_rdp(
    alpha: float | np.ndarray, mu: float, l1_sensitivity: float, l2_sensitivity: float
) -> float | np.ndarray:
    """Agarwal-Kairouz-Liu (NeurIPS 2021) RDP bound of Skellam(mu) noise, integer alpha > 1:

    eps(alpha) = alpha D2^2/(4 mu) + min(((2 alpha - 1) D2^2 + 6 D1)/(16 mu^2), 3 D1/(4 mu)).
    """
    mu = _positive_finite(mu, "mu")
    d1 = _positive_finite(l1_sensitivity, "l1_sensitivity")
    d2 = _positive_finite(l2_sensitivity, "l2_sensitivity")
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(a <= 1) or np.any(a != np.rint(a)):
        raise ConfigError("Renyi orders must be integers > 1 for the Skellam bound", field="alpha")
    d2sq = d2 * d2
    out = a * d2sq / (4.0 * mu) + np.minimum(
        ((2.0 * a - 1.0) * d2sq + 6.0 * d1) / (16.0 * mu * mu), 3.0 * d1 / (4.0 * mu)
    )
    return float(out) if out.ndim == 0 else out


def gaussian_rdp(alpha: float | np.ndarray, sigma: float, l2_sensitivity: float):
    """RDP of the Gaussian mechanism (Mironov 2017, Prop. 7): alpha D2^2 / (2 sigma^2)."""
    sigma = _positive_finite(sigma, "sigma")
    d2 = _positive_finite(l2_sensitivity, "l2_sensitivity")
    out = np.asarray(alpha, dtype=np.float64) * d2 * d2 / (2.0 * sigma * sigma)
    return float(out) if out.ndim == 0 else out


def rdp_to_dp(
    rdp: Sequence[float] | np.ndarray,
    alphas: Sequence[float] | np.ndarray,
    delta: float,
    method: str = "improved",
) -> tuple[float, float]:
    """(epsilon, best alpha) from an RDP curve, minimised over the given orders.

    "standard": eps = rdp(a) + log(1/delta)/(a-1)                  (Mironov 2017, Prop. 3)
    "improved": eps = rdp(a) + log(1/delta)/(a-1) + log(1-1/a) - log(a)/(a-1)
                (Canonne-Kamath-Steinke 2020, Prop. 12; Balle et al. 2020, Thm. 21)
    Epsilon is floored at 0.
    """
    delta = _delta_open(delta)
    _check_method(method)
    r = np.asarray(rdp, dtype=np.float64)
    a = np.asarray(alphas, dtype=np.float64)
    if r.shape != a.shape or r.ndim != 1 or len(a) == 0:
        raise ConfigError("rdp and alphas must be 1-D sequences of the same length")
    if np.any(a <= 1):
        raise ConfigError("Renyi orders must be > 1", field="alphas")
    eps = r + math.log(1.0 / delta) / (a - 1.0)
    if method == "improved":
        eps = eps + np.log1p(-1.0 / a) - np.log(a) / (a - 1.0)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(a[i])


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
    k = _positive_int(compositions, "compositions")
    rdp = k * np.asarray(skellam_rdp(alphas, mu, l1_sensitivity, l2_sensitivity))
    return rdp_to_dp(rdp, alphas, delta, method)[0]


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
    accounted epsilon at `delta` is <= `epsilon`.

    Bisection on log mu; valid because every RDP term decreases strictly in mu, hence so does
    the converted epsilon. The returned mu always satisfies skellam_epsilon(mu, ...) <= epsilon.
    Each of n_min owners then adds Skellam(mu / n_min) (`owner_noise`).
    """
    target = _positive_finite(epsilon, "epsilon")
    delta = _delta_open(delta)
    _check_method(method)

    def eps_of(mu: float) -> float:
        return skellam_epsilon(
            mu,
            delta,
            l1_sensitivity,
            l2_sensitivity,
            compositions=compositions,
            method=method,
            alphas=alphas,
        )

    hi = 1.0
    while eps_of(hi) > target:
        hi *= 2.0
        if hi > _MAX_POISSON_RATE:
            raise ConfigError(
                f"epsilon={epsilon!r} at delta={delta!r} needs mu > {_MAX_POISSON_RATE:g}",
                field="epsilon",
            )
    lo = hi / 2.0
    if eps_of(lo) <= target:  # only when hi == 1: search downwards
        while eps_of(lo) <= target:
            hi, lo = lo, lo / 2.0
            if lo < 1e-300:
                return hi
    while hi / lo - 1.0 > rel_tol:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_analytic_delta(epsilon: float, sigma: float, l2_sensitivity: float) -> float:
    """Exact delta(epsilon) of the Gaussian mechanism (Balle & Wang, ICML 2018, Thm. 8):

    delta = Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D).
    Reference for comparisons; not used to release anything.
    """
    if not math.isfinite(epsilon) or epsilon < 0:
        raise ConfigError(f"epsilon must be finite and >= 0, got {epsilon!r}", field="epsilon")
    s = _positive_finite(sigma, "sigma")
    d = _positive_finite(l2_sensitivity, "l2_sensitivity")
    a, b = d / (2.0 * s), epsilon * s / d
    return float(math.exp(log_ndtr(a - b)) - math.exp(epsilon + log_ndtr(-a - b)))


def gaussian_analytic_epsilon(sigma: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest epsilon with gaussian_analytic_delta(epsilon) <= delta (root of a decreasing
    function of epsilon)."""
    delta = _delta_open(delta)
    if gaussian_analytic_delta(0.0, sigma, l2_sensitivity) <= delta:
        return 0.0
    hi = 1.0
    while gaussian_analytic_delta(hi, sigma, l2_sensitivity) > delta:
        hi *= 2.0
    return float(
        brentq(
            lambda e: gaussian_analytic_delta(e, sigma, l2_sensitivity) - delta,
            0.0,
            hi,
            xtol=1e-13,
            rtol=1e-13,
        )
    )


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
