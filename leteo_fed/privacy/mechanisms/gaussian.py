"""The Gaussian mechanism with its exact (analytic) privacy map, and Gaussian DP.

Why the analytic calibration
----------------------------
Gaussian(sigma) on a query of L2 sensitivity D is (eps, delta)-DP exactly when
delta >= Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D) (Balle & Wang,
ICML 2018, Thm. 8). Calibrating sigma on that curve is valid for every eps > 0, whereas the
classical sigma = D sqrt(2 ln(1.25/delta))/eps is only proven for eps < 1 (and is looser).

Gaussian differential privacy (Dong, Roth & Su 2022): a Gaussian mechanism of L2 sensitivity D
and std sigma is (D/sigma)-GDP; an adaptive sequence of mu_i-GDP mechanisms is
sqrt(sum mu_i^2)-GDP; and mu-GDP is (eps, delta)-DP exactly when the analytic condition above
holds with D/sigma = mu. So a budget mu^2 can be split across many Gaussian releases (`gdp_mu`).

Caveat: noise is drawn in float64 by NumPy, not by an exact sampler (Mironov 2012).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leteo_fed.privacy.budget import Budget, check_delta, check_epsilon
from leteo_fed.privacy.mechanisms._params import mapped_budget, new_rng, positive_finite


def _analytic_delta(epsilon: float, sigma: float, l2: float) -> float:
    """delta(eps) = Phi(D/(2 s) - eps s/D) - e^eps Phi(-D/(2 s) - eps s/D), in log space."""
    from scipy.special import log_ndtr  # central mechanisms only: owners never load SciPy

    a, b = l2 / (2.0 * sigma), epsilon * sigma / l2
    return float(math.exp(log_ndtr(a - b)) - math.exp(epsilon + log_ndtr(-a - b)))


@dataclass(frozen=True)
class Gaussian:
    """N(0, sigma^2) noise on every coordinate of a real vector."""

    sigma: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", positive_finite(self.sigma, "sigma"))

    @property
    def variance(self) -> float:
        return self.sigma * self.sigma

    def rdp(self, alpha: float | np.ndarray, l2_sensitivity: float) -> float | np.ndarray:
        """RDP at order alpha (Mironov 2017, Prop. 7): alpha D2^2 / (2 sigma^2)."""
        d2 = positive_finite(l2_sensitivity, "l2_sensitivity")
        out = np.asarray(alpha, dtype=np.float64) * d2 * d2 / (2.0 * self.sigma * self.sigma)
        return float(out) if out.ndim == 0 else out

    def delta_at(self, epsilon: float, l2_sensitivity: float) -> float:
        """Exact delta(epsilon) (Balle-Wang, Thm. 8); epsilon = 0 gives the total variation."""
        eps = check_epsilon(epsilon, capped=False, allow_zero=True)
        return _analytic_delta(eps, self.sigma, positive_finite(l2_sensitivity, "l2_sensitivity"))

    def epsilon(self, l2_sensitivity: float, delta: float) -> float:
        """Smallest epsilon with delta_at(epsilon) <= delta (root of a decreasing function)."""
        delta = check_delta(delta)
        if self.delta_at(0.0, l2_sensitivity) <= delta:
            return 0.0
        from scipy.optimize import brentq

        hi = 1.0
        while self.delta_at(hi, l2_sensitivity) > delta:
            hi *= 2.0
        return float(
            brentq(
                lambda e: self.delta_at(e, l2_sensitivity) - delta,
                0.0,
                hi,
                xtol=1e-13,
                rtol=1e-13,
            )
        )

    def privacy_map(self, l2_sensitivity: float, delta: float) -> Budget:
        """The exact (epsilon, delta) guarantee at this L2 sensitivity and delta."""
        return mapped_budget(self.epsilon(l2_sensitivity, delta), delta)

    @classmethod
    def calibrate(cls, budget: Budget, l2_sensitivity: float) -> Gaussian:
        """Smallest sigma (to 1e-10 relative, rounded up) that is budget-DP at L2 sensitivity D.

        Bisection on log sigma: delta(sigma) decreases in sigma.
        """
        eps = check_epsilon(budget.epsilon)
        dlt = check_delta(budget.delta)
        sens = positive_finite(l2_sensitivity, "l2_sensitivity")

        def ok(sigma: float) -> bool:
            return _analytic_delta(eps, sigma, sens) <= dlt

        lo, hi = sens * 1e-3, sens
        while not ok(hi):  # grow until feasible
            lo, hi = hi, hi * 2.0
        while ok(lo):
            lo /= 2.0
        while hi / lo > 1.0 + 1e-10:
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return cls(hi)

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: np.random.Generator | None = None
    ) -> np.ndarray | float:
        """N(0, sigma^2) draws (a float when size is None); rng defaults to `new_rng()`."""
        rng = new_rng() if rng is None else rng
        return rng.normal(0.0, self.sigma, size=size)


def gdp_mu(budget: Budget) -> float:
    """The largest mu such that mu-GDP implies the budget's (epsilon, delta)-DP:
    mu = 1 / (the calibrated sigma at sensitivity 1)."""
    return 1.0 / Gaussian.calibrate(budget, 1.0).sigma


__all__ = ["Gaussian", "gdp_mu"]
