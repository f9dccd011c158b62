"""Distributed integer noise for (epsilon, delta)-DP aggregates: owners' Skellam shares.

Every owner adds Skellam(mu / n_min) to every integer coordinate of its share, where n_min is the
round's quorum (`Skellam(mu).owner_share(n_min)`). Sums of independent Skellams are Skellam with the rates added,
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

import numpy as np

from leteo_fed.errors import ConfigError, DataError, ProtocolError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import (
    CONVERSIONS,
    DEFAULT_ALPHAS,
    Sensitivity,
    Skellam,
    new_rng,
    rdp_to_dp,
)
from leteo_fed.privacy.mechanisms._params import positive_finite as _positive_finite
from leteo_fed.privacy.mechanisms._params import positive_int as _positive_int

# --------------------------------------------------------------------------------------------
# the aggregate noise


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

    The returned mu always satisfies Skellam(mu).epsilon(...) <= epsilon. Each of n_min owners
    then adds Skellam(mu / n_min) (`Skellam(mu).owner_share(n_min)`).
    """
    try:
        return Skellam.calibrate(
            Budget(epsilon, delta),
            Sensitivity(l1_sensitivity, l2_sensitivity),
            compositions=compositions,
            method=method,
            alphas=alphas,
            rel_tol=rel_tol,
        ).mu
    except ConfigError as exc:
        if "needs mu" not in str(exc):
            raise
        raise DataError(
            f"{exc}: the noise this release needs is too large to sample. Give public "
            "`bounds` per column (data in natural units), or lower row_norm_bound (rescale the "
            "features so that rows have norms near it), lower scale_bits, or raise dp_epsilon",
            field="row_norm_bound",
        ) from exc


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


__all__ = [
    "CONVERSIONS",
    "DEFAULT_ALPHAS",
    "Sensitivity",
    "calibrate_mu",
    "clip_rows",
    "effective_mu",
    "new_rng",
    "rdp_to_dp",
    "skellam_magnitude_bound",
]
