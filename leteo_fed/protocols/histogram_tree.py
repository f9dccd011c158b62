"""A dyadic tree of counts over equal bins, and the percentiles its histogram gives.

[lower, upper] is cut into B = 2^h equal leaf bins of width w = (upper - lower) / B,
left-closed, the last one closed: x falls into bin min(floor((x - lower) / w), B - 1). The
tree over the leaves has h + 1 levels (level l: 2^l nodes, the root at level 0, the leaves at
level h), 2B - 1 nodes, stored level-major, the root first.

Consistency (post-processing of a noisy tree, no privacy cost): the least-squares estimate of
Hay et al. 2010 (every node has the same noise variance): a bottom-up pass
z_v = ((2^i - 2^(i-1)) y_v + (2^(i-1) - 1) sum z_children) / (2^i - 1) at height i, then a
top-down pass hbar_v = z_v + (hbar_parent - z_v - z_sibling) / 2; the leaves are then projected
in least squares onto the non-negative histograms with the consistent root as their total.

Percentiles: the histogram's values are spread uniformly inside each bin; the m-th smallest
value (0-based) is read at rank m + 1/2 of the cumulative counts, and percentile p at
k = p (n - 1) / 100 is the linear interpolation between the values of ranks floor(k) and ceil(k)
(numpy.percentile's default rule 'linear' on the histogram's order statistics). Each order
statistic is read inside the bin holding the true one, so on exact counts every percentile is
within one bin width of `numpy.percentile` on the rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols.noisy_counts import nonnegative_projection
from leteo_fed.protocols.round_types import SiteTable


def levels(bins: int) -> int:
    """h: B = 2^h leaves."""
    return bins.bit_length() - 1


def leaf_index(x: np.ndarray, lower: float, upper: float, bins: int) -> np.ndarray:
    """The leaf of every value in [lower, upper]: left-closed bins, the last one closed."""
    idx = np.floor((x - lower) / (upper - lower) * bins).astype(np.int64)
    return np.clip(idx, 0, bins - 1)


def tree_counts(leaves: np.ndarray) -> np.ndarray:
    """Every node of the tree over `leaves` (length 2^h), level-major, the root first."""
    levels_ = [np.asarray(leaves)]
    while len(levels_[-1]) > 1:
        last = levels_[-1]
        levels_.append(last[0::2] + last[1::2])
    return np.concatenate(levels_[::-1])


def consistent_tree(y: np.ndarray) -> np.ndarray:
    """Hay et al. 2010: the least-squares consistent tree (every parent the sum of its two
    children) nearest to the noisy tree y (level-major, root first, equal noise variance)."""
    y = np.asarray(y, dtype=np.float64)
    h = levels((len(y) + 1) // 2)
    start = [2**level - 1 for level in range(h + 2)]
    z = y.copy()
    for level in range(h - 1, -1, -1):  # bottom-up: height i = h - level + 1
        i = h - level + 1
        a, b = start[level], start[level + 1]
        children = z[b : start[level + 2]]
        kids = children[0::2] + children[1::2]
        z[a:b] = ((2**i - 2 ** (i - 1)) * y[a:b] + (2 ** (i - 1) - 1) * kids) / (2**i - 1)
    out = z.copy()
    for level in range(1, h + 1):  # top-down
        a, b = start[level], start[level + 1]
        parent = np.repeat(out[start[level - 1] : a], 2)
        pair = np.repeat(z[a:b][0::2] + z[a:b][1::2], 2)
        out[a:b] = z[a:b] + (parent - pair) / 2
    return out


def nonnegative_leaves(tree: np.ndarray, bins: int) -> np.ndarray:
    """The leaves of a consistent tree projected in least squares onto the non-negative
    histograms whose total is the (non-negative) root."""
    return nonnegative_projection(tree[bins - 1 :], max(float(tree[0]), 0.0))


def order_values(counts: np.ndarray, ranks: np.ndarray, lower: float, width: float) -> np.ndarray:
    """The value at each cumulative count t of the histogram, values spread uniformly in a
    bin (t clamped to the non-empty bins)."""
    c = np.asarray(counts, dtype=np.float64)
    cum = np.cumsum(c)
    nonempty = np.nonzero(c > 0)[0]
    first, last = int(nonempty[0]), int(nonempty[-1])
    j = np.clip(np.searchsorted(cum, ranks, side="right"), first, last)
    before = cum[j] - c[j]
    frac = np.clip((ranks - before) / c[j], 0.0, 1.0)
    return lower + width * (j + frac)


def percentiles_from_histogram(
    counts: np.ndarray, percentiles: tuple[float, ...], lower: float, upper: float
) -> np.ndarray:
    """numpy.percentile's 'linear' rule on the histogram's order statistics (module doc); the
    bounds' midpoint for an empty histogram."""
    c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    n = float(c.sum())
    if not n > 0:
        return np.full(len(percentiles), (lower + upper) / 2)
    width = (upper - lower) / len(c)
    k = np.asarray(percentiles, dtype=np.float64) / 100 * max(n - 1, 0.0)
    lo_k, hi_k = np.floor(k), np.ceil(k)
    a = order_values(c, lo_k + 0.5, lower, width)
    b = order_values(c, hi_k + 0.5, lower, width)
    return a + (k - lo_k) * (b - a)


def rank_nodes(counts: np.ndarray, quantiles: np.ndarray, lower: float, upper: float) -> list[int]:
    """Noisy tree nodes in the count below each quantile: the count below a value in leaf j is
    the prefix count of leaves 0..j-1, a sum of popcount(j) tree nodes (one per set bit of j),
    plus a part of leaf j: popcount(j) + 1 <= h + 1 nodes (the least-squares consistency only
    lowers their noise)."""
    bins = len(counts)
    j = leaf_index(np.asarray(quantiles, dtype=np.float64), lower, upper, bins)
    return [int(v).bit_count() + 1 for v in j]


def n_values(features: int, bins: int, tree: bool) -> int:
    """Counts of `features` trees: their leaves, or (`tree`) every node of each."""
    return features * (2 * bins - 1 if tree else bins)


def leaf_counts(x: np.ndarray, lower: float, upper: float, bins: int) -> np.ndarray:
    """columns x bins counts of the rows of x (every value in [lower, upper])."""
    return np.stack(
        [
            np.bincount(leaf_index(x[:, j], lower, upper, bins), minlength=bins)
            for j in range(x.shape[1])
        ]
    ).astype(np.int64)


def read_binned(
    table: SiteTable, features: Sequence[str], lower: float, upper: float, clamp: bool
) -> np.ndarray:
    """The rows x features matrix the bins take: a missing value refuses (rule values); a value
    outside [lower, upper] refuses (rule values) or, with `clamp` (DP), is clamped to them."""
    x = table.matrix(list(features))
    for j, name in enumerate(features):
        bad = int((~np.isfinite(x[:, j])).sum())
        if bad:
            raise DataError(
                f"column '{name}' has {bad} missing, NaN or infinite value(s)",
                field=name,
                rule="values",
            )
    if clamp:
        return np.clip(x, lower, upper)
    outside = (x < lower) | (x > upper)
    if outside.any():
        j = int(np.nonzero(outside.any(axis=0))[0][0])
        raise DataError(
            f"column '{features[j]}' has {int(outside[:, j].sum())} value(s) outside the "
            f"round's bounds [{lower:g}, {upper:g}] (values from "
            f"{float(x[:, j].min()):.6g} to {float(x[:, j].max()):.6g})",
            field=features[j],
            rule="values",
        )
    return x
