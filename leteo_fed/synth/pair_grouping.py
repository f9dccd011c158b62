"""The release behind `groups = "dp"`: per-class marginals, then one dependence score per pair.

Two Laplace releases, half of epsilon_grouping each, under add/remove of one record:

G1. every column's per-class marginal [C, L_i] (L1 sensitivity W: a record adds 1 to one cell
    of each of the W marginals);
G2. for every pair i < j, the score s_ij = sum over (class, a, b) of |M_ij - E_ij|, M_ij the
    exact per-class pair counts and E_ij = n_c p(a|c) p(b|c) the independence estimate built
    from G1 (`pair_tables.independent`; public once G1 is out). A record moves one cell of M_ij
    by 1, so each score by at most 1 and the vector of P = W(W - 1)/2 scores by at most P.

Everything after is post-processing: a pair's null level (what its score would be if the two
columns were independent within each class: the Poisson mean absolute deviation 2 lambda
pmf(floor(lambda); lambda) of every cell with mean lambda = E_ij, plus the error G1's noise puts
into E_ij; `null_score`), a pair counted only when its noisy
score exceeds that level by its noise scale times ln P + 3 (of P pure-noise scores the expected
number kept is e^-3 = 0.05), and its strength (s - null) / 2n, a total variation distance
in [0, 1], as the association the clustering of `grouping.dp_groups` reads.

Why not the moments release it replaces: (count, sum x, upper(sum x x^T)) over the encoded
columns has L1 sensitivity 1 + W + W(W + 1)/2 (120 for Adult's 14 columns), and at 10% of
epsilon its noise on a covariance entry exceeded every real covariance of Adult's scaled
columns even at epsilon 4: it could only group on chance. A score per pair costs P = 91 on
Adult, but each score sums a whole pair table's evidence: marital-status against relationship
scores in the thousands of records.
"""

from __future__ import annotations

import math

import numpy as np

from leteo_fed.synth.aggregator import Aggregator
from leteo_fed.synth.config import SynthConfig
from leteo_fed.synth.pair_tables import exact_marginals, independent, null_score, shares
from leteo_fed.synth.statistics import inverse_variance_mean, laplace


def pair_count(n_columns: int) -> int:
    return n_columns * (n_columns - 1) // 2


def class_counts(first: list[np.ndarray], b1: float) -> tuple[np.ndarray, float]:
    """(each class's size from G1, its standard deviation): the columns' noisy marginal totals,
    each unbiased with variance 2 L_i b1^2, weighted by the inverse of that variance."""
    totals = np.stack([f.sum(axis=1) for f in first], axis=1)  # [C, W]
    return inverse_variance_mean(totals, np.array([2.0 * f.shape[1] * b1 * b1 for f in first]))


def strength(excess: np.ndarray, b2: float, total: float) -> np.ndarray:
    """The association matrix from the excess scores [W, W] (s - null): excess / 2n for the
    pairs above b2 (ln P + 3), else 0."""
    w = excess.shape[0]
    margin = b2 * (math.log(max(pair_count(w), 2)) + 3.0)
    assoc = np.eye(w)
    if total > 0:
        above = (excess > margin) & ~np.eye(w, dtype=bool)
        assoc[above] = np.minimum(1.0, excess[above] / (2.0 * total))
    return assoc


def grouping_release(
    agg: Aggregator,
    config: SynthConfig,
    epsilon: float,
    rng_first: np.random.Generator,
    rng_scores: np.random.Generator,
) -> tuple[np.ndarray, float, np.ndarray]:
    """(the association matrix [W, W], the smallest class size less one standard deviation,
    every pair's noisy score less its null [W, W]) from G1 and G2 at epsilon / 2 each (module
    docstring)."""
    w = len(config.columns)
    p = pair_count(w)
    exact_first, exact_pairs = exact_marginals(agg, config)
    g1 = laplace(epsilon / 2.0, float(w))
    first = [m + np.asarray(g1.sample(m.shape, rng_first)) for m in exact_first]
    sizes, sd = class_counts(first, g1.scale)
    n_per_class = max(float(sizes.min()) - sd, 0.0)
    if p == 0:
        return np.ones((1, 1)), n_per_class, np.zeros((1, 1))
    g2 = laplace(epsilon / 2.0, float(p))
    keys = sorted(exact_pairs)
    estimates = {k: independent(first, *k) for k in keys}
    exact = np.array([np.abs(exact_pairs[k] - estimates[k]).sum() for k in keys])
    noisy = exact + np.asarray(g2.sample(exact.shape, rng_scores))
    nulls = np.array(
        [
            null_score(estimates[(i, j)], shares(first[i]), shares(first[j]), 2.0 * g1.scale**2)
            for i, j in keys
        ]
    )
    rows, cols = np.array(keys).T
    excess = np.zeros((w, w))
    excess[rows, cols] = excess[cols, rows] = noisy - nulls
    assoc = strength(excess, g2.scale, float(max(sizes.sum(), 0.0)))
    return assoc, n_per_class, excess
