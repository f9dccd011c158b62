"""Feature groups: a public list from the config, or formed under DP from a partition's merges.

With `groups = "dp"` every column starts alone and groups grow by merging two of them:
`pair_grouping` picks the merges its release finds evidence for, then `free_merges` adds those
that put no more noise into the histograms. This module holds what both read, all of it public
given the release's class sizes: whether a merged group can carry signal (`MergeTable.fits`),
how much histogram noise a merge saves (`MergeTable.saved`), and whether each group's own
marginal stays as precise in the union (`MergeTable.kept`).

A group "fits" when its grid is at most max_cells AND its DP histogram can carry signal: with
the histogram's Laplace scale b = 1 / epsilon_hist (the group's share of the budget, as
`budget_split` will give it) and n the smallest class size of the release less one standard
deviation, cells * b <= n, i.e. an average cell of every class holds at least one noise scale
of records. Without that rule, five numeric Adult columns at 10 bins formed one 4,000-cell group
whose per-class histograms held more noise than records (10,867 noisy against 5,770 real rows):
the noise floor then removed every cell of the rare non-zero capital values and two synthetic
columns came out constant (issue 32). Merging two groups leaves every other group fitting:
with the budget split by columns their shares do not change, and split equally they grow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.partition import cell_count

Parts = list[list[int]]  # groups as indices into config.columns


def planned_grouping(config: SynthConfig) -> float:
    """The most the DP grouping may spend: `grouping_share` of epsilon with groups = "dp", else
    0. It spends less when its picks end early (`pair_grouping.GroupingRelease.epsilon`)."""
    return config.epsilon * config.grouping_share if config.groups is None else 0.0


def group_epsilon(
    config: SynthConfig,
    width: int,
    n_groups: int,
    total_width: int,
    grouping: float | None = None,
) -> float:
    """A group's epsilon: the rest after the grouping (what it spent, or at most its plan when
    `grouping` is None), split by columns or equally."""
    spent = planned_grouping(config) if grouping is None else grouping
    share = width / total_width if config.group_split == "dimension" else 1 / n_groups
    return (config.epsilon - spent) * share


def histogram_epsilons(
    config: SynthConfig,
    widths: np.ndarray,
    numeric: np.ndarray,
    n_groups: int,
    total_width: int,
    grouping: float | None = None,
) -> np.ndarray:
    """Each group's histogram epsilon (vectorized `histogram_epsilon`)."""
    rest = config.epsilon - (planned_grouping(config) if grouping is None else grouping)
    share = widths / total_width if config.group_split == "dimension" else 1.0 / n_groups
    return rest * share * np.where(numeric, config.shares["histogram"], 1.0)


def histogram_epsilon(
    config: SynthConfig, columns: list[Column], n_groups: int, total_width: int
) -> float:
    """The group's histogram epsilon: its share, or the whole group's for categoricals only
    (their grid cell is the whole record: no moments are released)."""
    numeric = any(c.kind == "numeric" for c in columns)
    return float(
        histogram_epsilons(
            config, np.array([len(columns)]), np.array([numeric]), n_groups, total_width
        )[0]
    )


def histogram_cost(
    config: SynthConfig, group: list[Column], n_groups: int, total_width: int
) -> float:
    """The Laplace noise a group's histogram holds, cells * b in records (the same in every
    class): a merge is free when the sum over the groups does not grow."""
    return cell_count(group) / histogram_epsilon(config, group, n_groups, total_width)


@dataclass(frozen=True)
class MergeTable:
    """For every two groups a, b of a partition: does their union fit, and how much histogram
    noise (cells * b summed over all groups, in records) the merge saves (negative: adds)."""

    fits: np.ndarray  # [n, n] bool, False on the diagonal
    saved: np.ndarray  # [n, n] float
    total: float  # the partition's histogram noise before any merge
    kept: np.ndarray  # [n, n] bool: neither group's own marginal gets noisier in the union

    @classmethod
    def of(
        cls, parts: Parts, config: SynthConfig, n_per_class: float, grouping: float | None = None
    ) -> MergeTable:
        """`grouping`: what the DP grouping spent, if known (else its plan, an upper bound)."""
        columns = list(config.columns)
        total = len(columns)
        n = len(parts)
        cells = np.array([float(cell_count([columns[i] for i in p])) for p in parts])
        widths = np.array([len(p) for p in parts])
        numeric = np.array([any(columns[i].kind == "numeric" for i in p) for p in parts])
        eps_now = histogram_epsilons(config, widths, numeric, n, total, grouping)
        now = (cells / eps_now).sum()
        if n < 2:
            empty = np.zeros((n, n), dtype=bool)
            return cls(empty, np.zeros((n, n)), float(now), empty)
        fewer = cells / histogram_epsilons(config, widths, numeric, n - 1, total, grouping)
        m_cells = np.outer(cells, cells)
        m_eps = histogram_epsilons(
            config,
            widths[:, None] + widths[None, :],
            numeric[:, None] | numeric[None, :],
            n - 1,
            total,
            grouping,
        )
        after = fewer.sum() - fewer[:, None] - fewer[None, :] + m_cells / m_eps
        fits = (m_cells <= config.max_cells) & (m_cells <= max(n_per_class, 0.0) * m_eps)
        np.fill_diagonal(fits, False)
        # a's marginal read off the union sums cells_b cells of scale 1/m_eps: its variance
        # cells_b / m_eps^2 against 1 / eps_a^2 measured alone (and the same for b)
        var_now = 1.0 / eps_now**2
        var_read = 1.0 / m_eps**2
        kept = (cells[None, :] * var_read <= var_now[:, None] * (1 + 1e-9)) & (
            cells[:, None] * var_read <= var_now[None, :] * (1 + 1e-9)
        )
        return cls(fits, now - after, float(now), kept)

    @property
    def free(self) -> np.ndarray:
        """[n, n] the merges that fit, add no noise in total, and leave each group's own
        marginal no noisier than it was measured alone (up to rounding)."""
        return self.fits & (self.saved >= -1e-12 * self.total) & self.kept


def merge(parts: Parts, a: int, b: int) -> Parts:
    """The partition with parts a and b joined (the union last)."""
    return [p for k, p in enumerate(parts) if k not in (a, b)] + [parts[a] + parts[b]]


def names_of(parts: Parts, config: SynthConfig) -> list[list[str]]:
    """Groups as sorted column names, in the order of their first column."""
    columns = list(config.columns)
    return [[columns[i].name for i in sorted(p)] for p in sorted(parts, key=min)]


def free_merges(
    parts: Parts, config: SynthConfig, n_per_class: float, grouping: float | None = None
) -> Parts:
    """Merge groups while a merge adds no histogram noise, leaves each group's own marginal as
    precise as it was measured alone, and the union fits; the largest saving first (then the
    first pair in column order).

    Two groups kept apart are drawn independently within a class; merged, their joint is
    measured. With the budget split by columns, a pair of 4-level columns costs 16 cells at
    half the noise scale, the same total noise as 4 + 4 cells at the full scale, and each
    column's marginal sums 4 cells at half the scale: the same variance. A 2-level column
    joining a 10-level one would cut the total too, but its 2 cells would each sum 10 noisy
    ones (2.5 times the variance): on Adult that merge put the rare non-zero capital-gain values
    with fnlwgt, and the noise floor thinned them (issue 32). Public given the release's class
    sizes: no budget is spent here."""
    parts = [list(p) for p in sorted(parts, key=min)]
    while len(parts) > 1:
        table = MergeTable.of(parts, config, n_per_class, grouping)
        ok = np.triu(table.free, 1)
        if not ok.any():
            break
        saved = np.where(ok, table.saved, -np.inf)
        a, b = np.unravel_index(int(np.argmax(saved)), saved.shape)
        parts = merge(parts, int(a), int(b))
    return parts
