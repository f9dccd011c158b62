"""Exact per-class pair tables from one engine pass, and the independence estimate.

Shared by the marginal method (its tree selection) and the DP grouping's pair scores
(`pair_grouping`): both compare a pair's exact per-class table with n_c p(a|c) p(b|c) built
from noisy first marginals.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.synth.aggregator import Aggregator
from leteo_fed.synth.config import SynthConfig


def exact_marginals(
    agg: Aggregator, config: SynthConfig
) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """(per column [C, Li], per pair [C, Li, Lj]) exact counts from one engine pass."""
    cols = list(config.columns)
    if len(cols) == 1:
        return [agg.histogram(cols)], {}
    pairs = {
        (i, j): h.reshape(h.shape[0], cols[i].levels, cols[j].levels)
        for (i, j), h in agg.pair_histograms(cols).items()
    }
    first = [pairs[(0, 1)].sum(axis=2), pairs[(0, 1)].sum(axis=1)]
    first += [pairs[(0, i)].sum(axis=1) for i in range(2, len(cols))]
    return first, pairs


def independent(first: list[np.ndarray], i: int, j: int) -> np.ndarray:
    """n_c p(i|c) p(j|c) from the noisy first marginals (clipped at 0)."""
    a, b = np.maximum(first[i], 0.0), np.maximum(first[j], 0.0)
    n = (a.sum(axis=1) + b.sum(axis=1)) / 2.0
    pa = a / np.maximum(a.sum(axis=1, keepdims=True), 1e-12)
    pb = b / np.maximum(b.sum(axis=1, keepdims=True), 1e-12)
    return n[:, None, None] * pa[:, :, None] * pb[:, None, :]
