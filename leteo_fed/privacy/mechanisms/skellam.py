"""The Skellam mechanism: integer noise for (epsilon, delta)-DP sums, with its privacy map.

Mechanism
---------
Skellam(mu) := Poisson(mu) - Poisson(mu), two independent Poisson variables of rate mu; mean 0,
variance 2 mu (this is Sk_{mu,mu} in Agarwal, Kairouz and Liu, "The Skellam Mechanism for
Differentially Private Federated Learning", NeurIPS 2021, arXiv:2110.04995). Sums of independent
Skellams are Skellam with the rates added, which is what lets n owners each add a share
(`Skellam.owner_share`) and the aggregate carry the calibrated noise (`distributed_noise`).

Privacy map (all quantities in INTEGER units of the noised vector)
------------------------------------------------------------------
Neighbouring datasets differ by adding or removing one row; Delta1, Delta2 are the L1 and L2
sensitivities of the integer vector.

Renyi DP of the multi-dimensional Skellam mechanism, Agarwal-Kairouz-Liu 2021, section 3
(cited as Corollary 3.6 by public implementations; the theorem number was not checked against
the paper's text here, the formula was checked against two independent public accounting
implementations), for integer orders alpha > 1, noise Skellam(mu) per coordinate (var 2 mu):

    eps_RDP(alpha) <= alpha Delta2^2 / (4 mu)
                      + min( ((2 alpha - 1) Delta2^2 + 6 Delta1) / (16 mu^2),  3 Delta1 / (4 mu) )

The paper writes it for variance mu_paper = 2 mu as alpha D2^2/(2 mu_paper) + min(((2 alpha-1)
D2^2 + 6 D1)/(4 mu_paper^2), 3 D1/(2 mu_paper)); Google's distributed-DP accounting code uses
that form with "central_var". The first term is exactly the RDP of the Gaussian mechanism with
sigma^2 = 2 mu, the second a correction that vanishes like 1/mu^2 relative to it. We only use
integer alpha (the paper's accounting code does the same). tests/leteo_fed/privacy/test_distributed_noise.py
checks the bound against the exactly computed Renyi divergence of shifted 1-D Skellams.
Releases compose by adding RDP; the curve is converted to (eps, delta) by `rdp.rdp_to_dp`.

Implementation caveats (documented, not hidden)
-----------------------------------------------
- Sampling uses numpy's Generator (PCG64) seeded with 128 bits from `secrets`, and numpy's
  Poisson sampler (floating-point rejection sampling). PCG64 is not a cryptographic generator and
  the sampler is not an exact-arithmetic one (cf. Mironov 2012 on floating-point attacks on the
  Laplace mechanism); each owner's noise is, however, only ever seen inside the encrypted and
  masked aggregate, summed with the other owners' noise.
- Noise is unbounded: `magnitude_bound` gives a bound that holds except with a stated
  probability, for the wrap-around checks of the Paillier encoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import Budget, check_delta, check_epsilon
from leteo_fed.privacy.mechanisms._params import (
    Sensitivity,
    mapped_budget,
    new_rng,
    positive_finite,
    positive_int,
)
from leteo_fed.privacy.mechanisms.rdp import DEFAULT_ALPHAS, check_method, rdp_to_dp

# numpy's Poisson sampler refuses rates above about 9.2e18.
MAX_POISSON_RATE = 1e18


@dataclass(frozen=True)
class Skellam:
    """Skellam(mu) noise on every coordinate of an integer vector. mu = 0 means no noise (it
    samples zeros but has no privacy map)."""

    mu: float

    def __post_init__(self) -> None:
        if isinstance(self.mu, bool):
            raise ConfigError(f"mu must be a number, got {self.mu!r}", field="mu")
        try:
            mu = float(self.mu)
        except (TypeError, ValueError):
            raise ConfigError(f"mu must be a number, got {self.mu!r}", field="mu") from None
        if not math.isfinite(mu) or mu < 0:
            raise ConfigError(f"mu must be finite and >= 0, got {mu!r}", field="mu")
        object.__setattr__(self, "mu", mu)

    @property
    def variance(self) -> float:
        return 2.0 * self.mu

    # ---------------------------------------------------------------- privacy map

    def rdp(self, alpha: float | np.ndarray, sensitivity: Sensitivity) -> float | np.ndarray:
        """Agarwal-Kairouz-Liu (NeurIPS 2021) RDP bound at integer orders alpha > 1:

        eps(alpha) = alpha D2^2/(4 mu) + min(((2 alpha - 1) D2^2 + 6 D1)/(16 mu^2), 3 D1/(4 mu)).
        """
        mu = positive_finite(self.mu, "mu")
        l1, l2 = sensitivity
        d1 = positive_finite(l1, "l1_sensitivity")
        d2 = positive_finite(l2, "l2_sensitivity")
        a = np.asarray(alpha, dtype=np.float64)
        if np.any(a <= 1) or np.any(a != np.rint(a)):
            raise ConfigError(
                "Renyi orders must be integers > 1 for the Skellam bound", field="alpha"
            )
        d2sq = d2 * d2
        out = a * d2sq / (4.0 * mu) + np.minimum(
            ((2.0 * a - 1.0) * d2sq + 6.0 * d1) / (16.0 * mu * mu), 3.0 * d1 / (4.0 * mu)
        )
        return float(out) if out.ndim == 0 else out

    def epsilon(
        self,
        sensitivity: Sensitivity,
        delta: float,
        *,
        compositions: int = 1,
        method: str = "improved",
        alphas: np.ndarray = DEFAULT_ALPHAS,
    ) -> float:
        """Epsilon at `delta` of `compositions` releases, each with this noise (may be 0)."""
        k = positive_int(compositions, "compositions")
        rdp = k * np.asarray(self.rdp(alphas, sensitivity))
        return rdp_to_dp(rdp, alphas, delta, method)[0]

    def privacy_map(
        self,
        sensitivity: Sensitivity,
        delta: float,
        *,
        compositions: int = 1,
        method: str = "improved",
        alphas: np.ndarray = DEFAULT_ALPHAS,
    ) -> Budget:
        """The (epsilon, delta) guarantee of this noise at the given sensitivity and delta."""
        eps = self.epsilon(
            sensitivity, delta, compositions=compositions, method=method, alphas=alphas
        )
        return mapped_budget(eps, delta)

    @classmethod
    def calibrate(
        cls,
        budget: Budget,
        sensitivity: Sensitivity,
        *,
        compositions: int = 1,
        method: str = "improved",
        alphas: np.ndarray = DEFAULT_ALPHAS,
        rel_tol: float = 1e-10,
    ) -> Skellam:
        """The smallest mu (to relative `rel_tol`, rounded up) whose epsilon at budget.delta is
        <= budget.epsilon.

        Bisection on log mu; valid because every RDP term decreases strictly in mu, hence so
        does the converted epsilon. The result always satisfies result.epsilon(...) <= epsilon.
        """
        target = check_epsilon(budget.epsilon)
        delta = check_delta(budget.delta)
        check_method(method)

        def eps_of(mu: float) -> float:
            return cls(mu).epsilon(
                sensitivity, delta, compositions=compositions, method=method, alphas=alphas
            )

        hi = 1.0
        while eps_of(hi) > target:
            hi *= 2.0
            if hi > MAX_POISSON_RATE:
                raise ConfigError(
                    f"epsilon={target!r} at delta={delta!r} needs mu > {MAX_POISSON_RATE:g}",
                    field="epsilon",
                )
        lo = hi / 2.0
        if eps_of(lo) <= target:  # only when hi == 1: search downwards
            while eps_of(lo) <= target:
                hi, lo = lo, lo / 2.0
                if lo < 1e-300:
                    return cls(hi)
        while hi / lo - 1.0 > rel_tol:
            mid = math.sqrt(lo * hi)
            if eps_of(mid) <= target:
                hi = mid
            else:
                lo = mid
        return cls(hi)

    # ---------------------------------------------------------------- noise

    def sample(
        self, size: int | tuple[int, ...], rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """Independent Skellam(mu) variables as int64 (zeros when mu == 0).

        `rng` defaults to a freshly, cryptographically seeded generator (`new_rng`); pass one
        only for reproducible tests.
        """
        mu = self.mu
        if mu > MAX_POISSON_RATE:
            raise ConfigError(
                f"mu={mu:g} exceeds the Poisson sampler's range ({MAX_POISSON_RATE:g})",
                field="mu",
            )
        rng = new_rng() if rng is None else rng
        if mu == 0:
            return np.zeros(size, dtype=np.int64)
        a = rng.poisson(mu, size=size).astype(np.int64)
        b = rng.poisson(mu, size=size).astype(np.int64)
        return a - b

    def owner_share(self, quorum: int) -> Skellam:
        """One owner's share, Skellam(mu / quorum): with n >= quorum owners each adding it, the
        aggregate noise is exactly Skellam(mu * n / quorum), never less than this mu."""
        mu = positive_finite(self.mu, "mu")
        return Skellam(mu / positive_int(quorum, "quorum"))

    def magnitude_bound(self, n_coords: int, failure_prob: float = 2.0**-64) -> int:
        """Smallest integer B with P(max over n_coords coordinates of |X| > B) <= failure_prob.

        By the two-sided Chernoff bound of `_log_tail` and a union bound over coordinates. Use
        it with the aggregate's mu in the encoding's wrap-around checks.
        """
        mu = positive_finite(self.mu, "mu")
        n_coords = positive_int(n_coords, "n_coords")
        failure_prob = check_delta(failure_prob, "failure_prob")
        target = math.log(failure_prob) - math.log(2.0 * n_coords)

        def excess(t: float) -> float:
            return _log_tail(mu, t) - target

        # bisection over the integers (the excess decreases in t): exact, and no SciPy in the
        # owner agents, which rebuild every DP spec and so run this on each invitation
        lo, hi = 0, max(1, math.ceil(math.sqrt(2.0 * mu)))
        while excess(hi) > 0:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if excess(mid) > 0:
                lo = mid
            else:
                hi = mid
        return hi


def _log_tail(mu: float, t: float) -> float:
    """log of the Chernoff bound on P(X >= t), X ~ Skellam(mu), t > 0.

    log E exp(l X) = 2 mu (cosh l - 1); optimising l gives l = asinh(t / (2 mu)) and
    P(X >= t) <= exp(-(t asinh(u) - 2 mu (sqrt(1 + u^2) - 1))), u = t / (2 mu).
    """
    u = t / (2.0 * mu)
    # sqrt(1 + u^2) - 1 written without the cancellation that makes it noise at large mu
    return -(t * math.asinh(u) - 2.0 * mu * u * u / (math.sqrt(1.0 + u * u) + 1.0))


__all__ = ["MAX_POISSON_RATE", "Skellam"]
