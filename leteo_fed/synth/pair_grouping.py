"""The release behind `groups = "dp"`: the class sizes, then a few picks of the pair of
groups whose columns depend most, each by report noisy max.

Under add/remove of one record, epsilon_grouping split as `COUNT_SHARE` and the rest:

G1. the size of every class, with Laplace noise (L1 sensitivity 1). It gives the class sizes
    the signal rule reads (`grouping.MergeTable`) and the null levels below.
G2. `rounds(W)` = min(W - 1, ceil(W / 2), 8) picks at an equal share each, by `NoisyMax`
    (exponential noise of scale 2 D / epsilon_pick). Every pick chooses among STOP and the
    pairs of columns (i, j) in two different groups whose union fits; it releases only which
    one won. A pair's utility is its dependence score
        s_ij = sum over classes c and cells (a, b) of |M_cab - r_ca k_cb / n_c|,
    M_c the exact per-class pair table, r_c, k_c, n_c its own row sums, column sums and total:
    the L1 distance from the independence fit of the table itself. Adding a record moves M by
    1 and the fit by less than 3 (the old fit scaled by n/(n+1) moves by less than 1, and the
    record's row and column add (r_a + k_b + 1)/(n+1) < 2), so D = 4. Less than a threshold
    that is public given G1:
    - the pair's null sum_c sqrt(cells n_c), which bounds what independent columns score
      through sampling alone (a cell of mean lambda deviates by at most its standard
      deviation sqrt(lambda) on average, and sum sqrt(lambda) <= sqrt(cells n) by
      Cauchy-Schwarz), and
    - the larger of the noise margin scale * ln(m K / 0.05) (m candidates, K picks: a
      release picks a pair with no excess dependence with probability at most 0.05) and the
      strength floor 2 n (1 - grouping_cut) (a total variation distance from independence
      below 1 - grouping_cut is not worth a bigger histogram).
    The threshold is the same for every candidate of a round, so the picks rank pairs by
    their excess dependence alone (a merge that adds no noise gets no head start: it would
    take the place of a stronger pair that needs a bigger group). A picked pair's groups
    merge; STOP ends the picks above the threshold, and the picks left rank the merges that
    add no noise (`grouping.free_merges`'s rule) until none is left.

Composition: the release spends G1 plus the picks it makes, at most epsilon_grouping. Whether a
further pick is made reads the released G1 and the earlier picks only, so the spend is public,
and the picks not made go back to the histograms (`GroupingRelease.epsilon`). Under pure DP
this is adaptive composition with parameters chosen from earlier outputs: for every sequence
of outputs, the likelihood ratio of two neighbouring data sets is the product of each step's,
at most exp(sum of the epsilons that sequence spent) <= exp(epsilon) (the basic-composition
privacy filter of Rogers et al., 2016). Until issue 32's tenth session an early STOP kept its
unused picks' share: on Adult at epsilon 0.5 with ten bins the picks stopped after one pick on
most seeds, and the histograms lost 10% of epsilon for one merge or none.

Why picks and not a Laplace score for every pair (the release until issue 32's fifth session):
that release cost P = W(W - 1)/2 in L1 (91 on Adult) and scored against an independence
estimate built from noisy per-class marginals, whose noise entered every score; on Adult's
15,081 training rows at epsilon 1 its margin was 13,670 records and it found no pair, not even
education against education-num (exact excess 21,522). A pick's noise does not grow with P.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import NoisyMax
from leteo_fed.synth.aggregator import Aggregator
from leteo_fed.synth.config import SynthConfig
from leteo_fed.synth.grouping import MergeTable, Parts, merge
from leteo_fed.synth.pair_tables import exact_marginals
from leteo_fed.synth.statistics import laplace

COUNT_SHARE = 0.1  # of epsilon_grouping, for G1
FALSE_PICK = 0.05  # a release picks a pair with no excess dependence at most this likely
SCORE_SENSITIVITY = 4.0
MAX_PICKS = 8


def rounds(n_columns: int) -> int:
    """How many picks G2 makes: enough to join half the columns, at most W - 1 and at most
    MAX_PICKS (each pick gets 1/K of the budget, and its margin grows as K ln(P K): at 50
    picks for 100 columns it would exceed the largest score 5,000 rows can have)."""
    return min(n_columns - 1, math.ceil(n_columns / 2), MAX_PICKS) if n_columns > 1 else 0


def pick_epsilon(epsilon: float, n_columns: int) -> float:
    """One pick's epsilon: the release's epsilon less G1, over its `rounds(W)` picks."""
    k = rounds(n_columns)
    return epsilon * (1.0 - COUNT_SHARE) / k if k else 0.0


@dataclass(frozen=True)
class GroupingRelease:
    """What the release says: the groups its picks formed, the picks in order, and the
    smallest class size less one noise standard deviation (G1)."""

    found: Parts  # the groups the picks above the threshold formed
    parts: Parts  # those after the free picks too
    picks: list[tuple[int, int]]  # above the threshold, in order
    free_picks: list[tuple[int, int]]
    n_per_class: float
    picks_made: int  # STOP included; at most `rounds(W)`
    epsilon: float  # what G1 and the picks made spent, at most the release's epsilon


def dependence_score(table: np.ndarray) -> float:
    """s_ij of the module docstring for one per-class pair table [C, L_i, L_j]."""
    t = np.asarray(table, dtype=float)
    n = t.sum(axis=(1, 2))
    fit = t.sum(axis=2)[:, :, None] * t.sum(axis=1)[:, None, :] / np.maximum(n, 1.0)[:, None, None]
    return float(np.abs(t - fit).sum())


def null_bound(levels_i: int, levels_j: int, sizes: np.ndarray) -> float:
    """sum_c sqrt(cells n_c): at least what a pair of independent columns scores on average."""
    return float(np.sqrt(levels_i * levels_j * np.maximum(sizes, 0.0)).sum())


def threshold(candidates: int, picks: int, scale: float, floor: float) -> float:
    """A round's threshold beyond the nulls (module docstring): the larger of the noise margin
    over its m candidates and the K picks, and the strength floor."""
    return max(scale * math.log(max(candidates, 1) * picks / FALSE_PICK), floor)


def grouping_release(
    agg: Aggregator,
    config: SynthConfig,
    epsilon: float,
    rng_first: np.random.Generator,
    rng_picks: np.random.Generator,
) -> GroupingRelease:
    """G1 at COUNT_SHARE of epsilon, then `rounds(W)` picks sharing the rest (module
    docstring)."""
    columns = list(config.columns)
    w = len(columns)
    exact_first, exact_pairs = exact_marginals(agg, config)
    g1 = laplace(epsilon * COUNT_SHARE, 1.0)
    exact_sizes = exact_first[0].sum(axis=1)
    sizes = exact_sizes + np.asarray(g1.sample(exact_sizes.shape, rng_first))
    n_per_class = max(float(sizes.min()) - math.sqrt(g1.variance), 0.0)
    parts: Parts = [[i] for i in range(w)]
    k = rounds(w)
    if k == 0:
        return GroupingRelease(parts, parts, [], [], n_per_class, 0, epsilon * COUNT_SHARE)
    keys = sorted(exact_pairs)
    pairs = np.array(keys)
    utility = np.array(
        [
            dependence_score(exact_pairs[(i, j)])
            - null_bound(columns[i].levels, columns[j].levels, sizes)
            for i, j in keys
        ]
    )
    per_pick = pick_epsilon(epsilon, w)
    pick = NoisyMax.calibrate(Budget(per_pick, 0.0), SCORE_SENSITIVITY)
    floor = 2.0 * max(float(sizes.sum()), 0.0) * (1.0 - config.grouping_cut)
    picks: tuple[list[tuple[int, int]], list[tuple[int, int]]] = ([], [])  # threshold, free
    found: Parts | None = None
    made = 0
    for _ in range(k):
        part_of = np.empty(w, dtype=int)
        for p, members in enumerate(parts):
            part_of[members] = p
        table = MergeTable.of(parts, config, n_per_class)
        a, b = part_of[pairs[:, 0]], part_of[pairs[:, 1]]
        cand = np.flatnonzero((table.fits if found is None else table.free)[a, b])
        if cand.size == 0:
            break
        made += 1
        if found is None:
            gain = utility[cand] - threshold(cand.size, k, pick.scale, floor)
            won = pick.select(np.r_[gain, 0.0], rng_picks)
            if won == cand.size:  # STOP: the picks left rank the free merges
                found = parts
                continue
        else:
            won = pick.select(utility[cand], rng_picks)
        picks[found is not None].append(keys[int(cand[won])])
        parts = merge(parts, int(a[cand[won]]), int(b[cand[won]]))
    return GroupingRelease(
        parts if found is None else found,
        parts,
        picks[0],
        picks[1],
        n_per_class,
        made,
        min(epsilon, epsilon * COUNT_SHARE + made * per_pick),
    )
