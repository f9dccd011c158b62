"""Renyi-DP to (epsilon, delta)-DP conversion, shared by the mechanisms accounted through RDP.

Composition: RDP adds over releases (multiply a curve by the number of releases). Conversion at
the best order alpha on a grid:

- "standard" (Mironov, "Renyi Differential Privacy", CSF 2017, Prop. 3):
      eps = eps_RDP(alpha) + log(1/delta) / (alpha - 1)
- "improved" (default; Canonne, Kamath, Steinke, "The Discrete Gaussian for Differential
  Privacy", NeurIPS 2020, Prop. 12; equivalently Balle et al., "Hypothesis testing
  interpretations and Renyi DP", AISTATS 2020, Thm. 21; the form used by TF-Privacy/Opacus):
      eps = eps_RDP(alpha) + log(1/delta)/(alpha - 1) + log(1 - 1/alpha) - log(alpha)/(alpha - 1)
  which is never larger than the standard one (both extra terms are negative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import check_delta

# Integer Renyi orders: every integer 2..128, then a geometric grid up to 10^6 (large orders
# matter only for very small epsilon or delta).
DEFAULT_ALPHAS: np.ndarray = np.unique(
    np.concatenate([np.arange(2, 129), np.rint(np.geomspace(128, 1e6, 240))])
).astype(np.float64)

CONVERSIONS = ("improved", "standard")


def check_method(method: str) -> None:
    if method not in CONVERSIONS:
        raise ConfigError(
            f"unknown RDP conversion {method!r}; expected one of {CONVERSIONS}", field="method"
        )


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
    delta = check_delta(delta)
    check_method(method)
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


def zcdp_rho(epsilon: float, delta: float, method: str = "improved") -> float:
    """The largest rho whose rho-zCDP (the RDP curve alpha * rho at every order) converts to
    (epsilon, delta)-DP by `rdp_to_dp`: the budget of a release composed in zCDP (Gaussian
    mechanisms, exponential mechanisms at eps^2 / 8 each; Bun & Steinke 2016, Cesar & Rogers
    2021). Bisection on log rho; the conversion's epsilon grows with rho."""
    delta = check_delta(delta)
    alphas = np.concatenate([1.0 + np.arange(1, 100) / 100.0, DEFAULT_ALPHAS])

    def eps_of(rho: float) -> float:
        return rdp_to_dp(alphas * rho, alphas, delta, method)[0]

    lo, hi = 1e-12, 1.0
    while eps_of(hi) < epsilon:
        lo, hi = hi, hi * 4.0
    while hi / lo > 1.0 + 1e-9:
        mid = math.sqrt(lo * hi)
        if eps_of(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo
