"""Exact per-class pair tables from one engine pass, the independence estimate, and its null.

The engines' one-pass pair tables (`exact_marginals`) feed both the marginal method and the DP
grouping (`pair_grouping`). The marginal method's tree selection compares a pair's exact
per-class table with n_c p(a|c) p(b|c) built from its noisy first marginals, less the distance
that comparison would show if the two columns were independent within each class
(`null_score`), so that a pair with many sparse cells does not look dependent through its
sampling noise alone.
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


def shares(marginal: np.ndarray) -> np.ndarray:
    """p(level | class) from a noisy per-class marginal [C, L] (clipped at 0)."""
    m = np.maximum(marginal, 0.0)
    return m / np.maximum(m.sum(axis=1, keepdims=True), 1e-12)


def null_score(expected: np.ndarray, pa: np.ndarray, pb: np.ndarray, first_var: float) -> float:
    """The L1 distance sum |M_ij - E_ij| a pair would show if its columns were independent
    within each class, E_ij built from first marginals with noise of variance first_var a cell.

    A cell with mean lambda = E_ij deviates from it by a Poisson draw (mean absolute deviation
    2 lambda pmf(floor(lambda); lambda)) and by the first marginals' noise in E_ij:
    n_c (dp_a p_b + p_a dp_b) with dp of variance first_var / n_c^2, so a variance
    sigma^2 = first_var (p_a^2 + p_b^2). The two are independent and centred; the cell's
    expected |deviation| is taken as sqrt(mad^2 + (2 / pi) sigma^2), exact when either is 0
    (E|N(0, sigma^2)| = sqrt(2 / pi) sigma) and between the larger and the sum otherwise.
    Public once the first marginals are: subtracting it leaves a score's sensitivity as it was."""
    from scipy.stats import poisson

    lam = np.maximum(expected, 0.0)
    mad = 2.0 * lam * poisson.pmf(np.floor(lam), lam)
    sigma2 = first_var * (pa[:, :, None] ** 2 + pb[:, None, :] ** 2)
    return float(np.sqrt(mad * mad + (2.0 / np.pi) * sigma2).sum())
