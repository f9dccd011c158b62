"""What a DP k-means run returns: the centers plus everything needed to state what was spent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# (points, weights, k, rng) -> k x d centers: the non-private clustering of a DP synopsis
ClusterFn = Callable[[np.ndarray, np.ndarray, int, np.random.Generator], np.ndarray]


@dataclass
class DPKMeansResult:
    """Centers and their privacy accounting.

    Everything here is a DP output (or public): `centers`, `summary_points` / `summary_weights`
    (the noisy synopsis or core-set the centers were computed from) and `details` (grid sizes,
    noisy counts, thresholds: all post-processing of noisy values or functions of public inputs).
    `budget` names every part of ε (and δ) and what it paid for; the parts add up to `epsilon`.
    """

    centers: np.ndarray
    method: str
    epsilon: float
    delta: float  # δ actually spent (0 for a pure ε-DP run)
    budget: dict[str, Any]
    details: dict[str, Any]
    summary_points: np.ndarray
    summary_weights: np.ndarray
    timings: dict[str, float] = field(default_factory=dict)
