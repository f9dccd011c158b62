"""Noise calibration for the DP k-means methods, over the privacy layer's mechanisms.

Why these calibrations
----------------------
- Laplace(Δ₁/ε) on a query of L1 sensitivity Δ₁ is ε-DP (Dwork et al. 2006). A count has Δ₁ = 1
  under add/remove-one-row adjacency; with substitution adjacency every ε here doubles.
- Gaussian(σ) with σ from the ANALYTIC calibration of Balle & Wang (ICML 2018) is (ε, δ)-DP for
  every ε > 0; the classical σ = Δ₂ sqrt(2 ln(1.25/δ))/ε is only proven for ε < 1, although
  textbooks state it without that condition. σ is the smallest value whose exact δ(ε) is <= δ,
  found by bisection on log σ and rounded UP (`privacy.mechanisms.Gaussian.calibrate`).
- Many Gaussian releases compose through Gaussian DP (`gdp_mu`): the LSH core-set spends one
  (ε, δ) budget as μ-GDP and splits μ² across its root count, tree levels and leaf sums.

Caveat: noise is drawn in float64 by NumPy (Mironov 2012: textbook floating-point Laplace sampling
is not exactly DP; the gap is tiny but real). Pass a seed only for experiments: anyone who knows it
can regenerate and subtract the noise. Without a seed the generator is seeded from the OS.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.clustering._checks import check_seed
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import Gaussian, Laplace
from leteo_fed.privacy.mechanisms import gdp_mu as _gdp_mu


def make_rng(seed: int | None) -> np.random.Generator:
    """A seeded generator for reproducible experiments, else one seeded from OS entropy."""
    seed = check_seed(seed)
    return np.random.default_rng(seed)


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """b = Δ₁ / ε: the Laplace scale that makes a query of L1 sensitivity Δ₁ ε-DP."""
    return Laplace.calibrate(Budget(epsilon), sensitivity).scale


def gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float) -> float:
    """Smallest σ (to 1e-10 relative, rounded up) with Gaussian(σ) (ε, δ)-DP for Δ₂ (Balle-Wang)."""
    return Gaussian.calibrate(Budget(epsilon, delta), l2_sensitivity).sigma


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest μ such that μ-GDP implies (ε, δ)-DP: μ = 1 / gaussian_sigma(ε, δ, 1).

    Gaussian differential privacy (Dong, Roth & Su 2022): a Gaussian mechanism of L2 sensitivity
    Δ and std σ is (Δ/σ)-GDP; an adaptive sequence of μ_i-GDP mechanisms is sqrt(Σ μ_i²)-GDP; and
    μ-GDP is (ε, δ)-DP exactly when Φ(-ε/μ + μ/2) - e^ε Φ(-ε/μ - μ/2) <= δ, which is the analytic
    Gaussian condition with Δ/σ = μ. So a budget μ² can be split across many Gaussian releases
    (shares of μ² add up), far more tightly than splitting ε across Laplace releases.
    """
    return _gdp_mu(Budget(epsilon, delta))
