"""Feature groups: a public list from the config, or computed under DP (budget counted).

Under DP the association A_ij in [0, 1] of every pair of columns comes from `pair_grouping`'s
release (per-class marginals, then one dependence score per pair; a pair whose score the noise
could explain gets 0). Then average-linkage clustering on 1 - A (scipy), cut at
`grouping_cut`; a group whose grid exceeds max_cells is split along its own linkage until every
group fits; last, groups are merged where a merge adds no histogram noise (`free_merges`).
Nothing here looks at the raw data except through that release.

A group "fits" when its grid is at most max_cells AND its DP histogram can carry signal: with
the histogram's Laplace scale b = 1 / epsilon_hist (the group's share of the budget, as
`budget_split` will give it) and n the smallest class size of the release less one standard
deviation, cells * b <= n, i.e. an average cell of every class holds at least one noise scale
of records. Without that rule, five numeric Adult columns at 10 bins formed one 4,000-cell group
whose per-class histograms held more noise than records (10,867 noisy against 5,770 real rows):
the noise floor then removed every cell of the rare non-zero capital values and two synthetic
columns came out constant (issue 32). The rule reads only the release and public values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.partition import cell_count, check_cells


def group_epsilon(config: SynthConfig, width: int, n_groups: int, total_width: int) -> float:
    """A group's epsilon: the rest after the grouping, split by columns or equally."""
    grouping = config.epsilon * config.grouping_share if config.groups is None else 0.0
    share = width / total_width if config.group_split == "dimension" else 1 / n_groups
    return (config.epsilon - grouping) * share


def histogram_epsilon(
    config: SynthConfig, columns: list[Column], n_groups: int, total_width: int
) -> float:
    """The group's histogram epsilon: its share, or the whole group's for categoricals only
    (their grid cell is the whole record: no moments are released)."""
    e = group_epsilon(config, len(columns), n_groups, total_width)
    numeric = any(c.kind == "numeric" for c in columns)
    return e * config.shares["histogram"] if numeric else e


Fits = Callable[[list[int]], bool]


def _split(
    members: list[int], dist: np.ndarray, columns: list[Column], fits: Fits
) -> list[list[int]]:
    """Split a group along its own average linkage until each part fits."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if len(members) == 1 or fits(members):
        return [members]
    sub = dist[np.ix_(members, members)]
    labels = fcluster(linkage(squareform(sub, checks=False), "average"), 2, "maxclust")
    if len(set(labels.tolist())) < 2:  # ties: split off the last column
        labels = np.r_[np.ones(len(members) - 1, dtype=int), 2]
    out: list[list[int]] = []
    for lab in sorted(set(labels.tolist())):
        part = [m for m, lb in zip(members, labels.tolist(), strict=True) if lb == lab]
        out += _split(part, dist, columns, fits)
    return out


def signal_fits(
    config: SynthConfig, columns: list[Column], n_per_class: float, n_groups: int
) -> Fits:
    """The rule of the module docstring: cells <= max_cells and cells * b <= n per class."""
    total_width = len(columns)

    def fits(members: list[int]) -> bool:
        cols = [columns[i] for i in members]
        cells = cell_count(cols)
        eps = histogram_epsilon(config, cols, n_groups, total_width)
        return cells <= config.max_cells and cells <= max(n_per_class, 0.0) * eps

    return fits


def dp_groups(assoc: np.ndarray, config: SynthConfig, n_per_class: float) -> list[list[str]]:
    """Groups from the association matrix: average linkage on 1 - A cut at grouping_cut, each
    group split until it fits (module docstring). With an equal split the groups' budget
    depends on how many there are: split again until the count is stable (it only grows)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    columns = list(config.columns)
    for c in columns:  # a single column over the cap is the config's error, not the data's
        check_cells([c], config.max_cells)
    dist = np.clip(1.0 - assoc, 0.0, 1.0)
    np.fill_diagonal(dist, 0.0)
    if len(columns) == 1:
        labels = [1]
    else:
        z = linkage(squareform(dist, checks=False), "average")
        labels = fcluster(z, config.grouping_cut, "distance").tolist()
    clusters = [
        [i for i, lb in enumerate(labels) if lb == lab]
        for lab in sorted(set(labels), key=labels.index)
    ]
    groups = clusters
    while True:
        fits = signal_fits(config, columns, n_per_class, len(groups))
        split = [part for members in groups for part in _split(members, dist, columns, fits)]
        if len(split) == len(groups):
            break
        groups = split
    groups.sort(key=min)
    return [[columns[i].name for i in sorted(g)] for g in groups]


def histogram_cost(
    config: SynthConfig, group: list[Column], n_groups: int, total_width: int
) -> float:
    """The Laplace noise a group's histogram holds, cells * b in records (the same in every
    class): `free_merges` keeps its sum over the groups from growing."""
    return cell_count(group) / histogram_epsilon(config, group, n_groups, total_width)


def free_merges(
    groups: list[list[str]], excess: np.ndarray, config: SynthConfig, n_per_class: float
) -> list[list[str]]:
    """Merge groups while a merge adds no histogram noise (`histogram_cost` summed over the
    groups), the merge whose
    columns show the most excess dependence in the release first.

    Two groups kept apart are drawn independently within a class; merged, their joint is
    measured. With the budget split by columns, a pair of 4-level columns costs 16 cells at
    half the noise scale, the same total noise as 4 + 4 cells at the full scale, and a 2-level
    column joins any other for less; the merge removes an independence assumption at no cost
    in noise. It matters where the release finds nothing: on Adult at epsilon 1 no pair clears
    the noise of 91 scores, and singletons model every numeric correlation through the class
    alone. The noisy excess (score less its null, `pair_grouping`) is released already, so
    ranking merges by it is post-processing; a group that would not fit (`signal_fits`) is
    never formed."""
    columns = list(config.columns)
    index = {c.name: i for i, c in enumerate(columns)}
    parts = [[index[n] for n in g] for g in groups]
    width = len(columns)

    def cost(members: list[int], n_groups: int) -> float:
        return histogram_cost(config, [columns[i] for i in members], n_groups, width)

    while len(parts) > 1:
        n = len(parts)
        now = sum(cost(p, n) for p in parts)
        fewer = [cost(p, n - 1) for p in parts]  # each group's cost once one merge is made
        rest = sum(fewer)
        fits = signal_fits(config, columns, n_per_class, n - 1)
        best: tuple[float, float] | None = None
        pick = (0, 0)
        for a in range(n):
            for b in range(a + 1, n):
                merged = parts[a] + parts[b]
                after = rest - fewer[a] - fewer[b] + cost(merged, n - 1)
                if after > now * (1.0 + 1e-12) or not fits(merged):
                    continue
                key = (float(excess[np.ix_(parts[a], parts[b])].max()), now - after)
                if best is None or key > best:
                    best, pick = key, (a, b)
        if best is None:
            break
        a, b = pick
        parts = [p for k, p in enumerate(parts) if k not in (a, b)] + [parts[a] + parts[b]]
    parts.sort(key=min)
    return [[columns[i].name for i in sorted(p)] for p in parts]
