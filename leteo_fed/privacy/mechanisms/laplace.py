"""The Laplace mechanism: Lap(b) on a query of L1 sensitivity D is (D/b)-DP (Dwork et al. 2006).

Caveat: noise is drawn in float64 by NumPy; textbook floating-point Laplace sampling is not
exactly DP (Mironov 2012): the gap is tiny but real.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leteo_fed.privacy.budget import Budget, check_epsilon
from leteo_fed.privacy.mechanisms._params import new_rng, positive_finite


@dataclass(frozen=True)
class Laplace:
    """Laplace(0, scale) noise on every coordinate of a real vector (pure DP)."""

    scale: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_finite(self.scale, "scale"))

    @property
    def variance(self) -> float:
        return 2.0 * self.scale * self.scale

    def epsilon(self, l1_sensitivity: float) -> float:
        return positive_finite(l1_sensitivity, "l1_sensitivity") / self.scale

    def privacy_map(self, l1_sensitivity: float) -> Budget:
        """(D1 / scale, 0): the density ratio at any output is at most e^(|shift| / scale)."""
        return Budget(self.epsilon(l1_sensitivity), 0.0)

    @classmethod
    def calibrate(cls, budget: Budget, l1_sensitivity: float) -> Laplace:
        """scale = D1 / epsilon (budget.delta is not needed: the result is pure DP)."""
        return cls(
            positive_finite(l1_sensitivity, "l1_sensitivity") / check_epsilon(budget.epsilon)
        )

    def sample(
        self, size: int | tuple[int, ...] | None = None, rng: np.random.Generator | None = None
    ) -> np.ndarray | float:
        """Laplace(0, scale) draws (a float when size is None); rng defaults to `new_rng()`."""
        rng = new_rng() if rng is None else rng
        return rng.laplace(0.0, self.scale, size=size)


__all__ = ["Laplace"]
