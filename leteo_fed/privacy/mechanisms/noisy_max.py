"""Report noisy max with exponential noise: which candidate scores highest, and nothing else.

argmax_i (u_i + Exp(scale)) over utilities u_i of sensitivity D (each u_i moves by at most D
between neighbouring data sets) is (2 D / scale)-DP. It is the permute-and-flip mechanism
(McKenna and Sheldon, NeurIPS 2020), proved identical to report noisy max with exponential
noise by Ding, Kifer et al. (2021); it is never worse than the exponential mechanism (Gumbel
noise) at the same epsilon. Its cost does not grow with the number of candidates: choosing the
strongest of 91 column pairs costs what one pair's score would, where releasing every score
with Laplace noise costs 91 of them.

Caveat as for `Laplace`: noise is drawn in float64 by NumPy, not by an exact sampler.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leteo_fed.privacy.budget import Budget, check_epsilon
from leteo_fed.privacy.mechanisms._params import new_rng, positive_finite


@dataclass(frozen=True)
class NoisyMax:
    """Exponential(scale) noise on every utility; only the index of the largest is released."""

    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_finite(self.scale, "scale"))

    @property
    def variance(self) -> float:
        return self.scale * self.scale

    def epsilon(self, sensitivity: float) -> float:
        return 2.0 * positive_finite(sensitivity, "sensitivity") / self.scale

    def privacy_map(self, sensitivity: float) -> Budget:
        """(2 D / scale, 0) for utilities that need not move together (no monotonicity)."""
        return Budget(self.epsilon(sensitivity), 0.0)

    @classmethod
    def calibrate(cls, budget: Budget, sensitivity: float) -> NoisyMax:
        """scale = 2 D / epsilon."""
        return cls(
            2.0 * positive_finite(sensitivity, "sensitivity") / check_epsilon(budget.epsilon)
        )

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: np.random.Generator | None = None
    ) -> np.ndarray | float:
        """Exponential(scale) draws; rng defaults to `new_rng()`."""
        rng = new_rng() if rng is None else rng
        return rng.exponential(self.scale, size=size)

    def select(self, utilities: np.ndarray, rng: np.random.Generator | None = None) -> int:
        """The released index: argmax of the utilities plus fresh noise (NaN refused)."""
        u = np.asarray(utilities, dtype=float)
        if u.ndim != 1 or u.size == 0 or not np.isfinite(u).all():
            raise ValueError("noisy max needs a non-empty vector of finite utilities")
        return int(np.argmax(u + np.asarray(self.sample(u.size, rng))))


__all__ = ["NoisyMax"]
