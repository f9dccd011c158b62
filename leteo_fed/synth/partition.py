"""The public grid of a feature group, its data-independent total order, and the cut into clusters.

A group's columns span a grid: `bins` equal-width bins per numeric column (on the encoded
[0, 1] scale), one level per category. A cell's id is its mixed-radix index (row-major in the
group's column order); both engines compute it from the codes with integer arithmetic. The walk
order is the Morton (Z-order) rank over the cells' level indices: bits interleaved, so cells
close in the order are close in the grid. It depends on the public grid only.

The cut (`clusters_from_histogram`) walks the cells in that order, accumulating the clipped
non-negative noisy counts, and closes a cluster as soon as the sum reaches k; a last remainder
below k joins the previous cluster. It reads nothing but the DP histogram: post-processing.
"""

from __future__ import annotations

import math

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.synth.config import Column
from leteo_fed.synth.statistics import noise_shrinkage


def cell_count(columns: list[Column]) -> int:
    return math.prod(c.levels for c in columns)


def check_cells(columns: list[Column], max_cells: int) -> int:
    """The group's number of cells; ConfigError naming bins and the group when over the cap."""
    cells = cell_count(columns)
    if cells > max_cells:
        detail = ", ".join(
            f"{c.name}: {c.levels} {'bins' if c.kind == 'numeric' else 'categories'}"
            for c in columns
        )
        raise ConfigError(
            f"the group {[c.name for c in columns]} spans {cells} grid cells ({detail}), more "
            f"than synthesize.max_cells = {max_cells}: lower `bins`, split the group into "
            "smaller ones, or raise max_cells (a DP histogram over many cells is mostly noise)",
            field="bins",
        )
    return cells


def strides(columns: list[Column]) -> list[int]:
    """Row-major strides of the mixed-radix cell id (last column varies fastest)."""
    out, step = [], 1
    for c in reversed(columns):
        out.append(step)
        step *= c.levels
    return out[::-1]


def cell_ids(levels: list[np.ndarray], columns: list[Column]) -> np.ndarray:
    """Mixed-radix cell id of every row from its per-column levels."""
    ids = np.zeros(levels[0].shape[0] if levels else 0, dtype=np.int64)
    for lv, s in zip(levels, strides(columns), strict=True):
        ids += lv * s
    return ids


def morton_order(columns: list[Column]) -> np.ndarray:
    """Cell ids sorted by their Morton key: the fixed, public walk order of the grid."""
    cells = cell_count(columns)
    ids = np.arange(cells, dtype=np.int64)
    idx = [(ids // s) % c.levels for c, s in zip(columns, strides(columns), strict=True)]
    bits = [max(0, (c.levels - 1).bit_length()) for c in columns]
    key = np.zeros(cells, dtype=np.int64)
    pos = 0
    for t in range(max(bits, default=0)):
        for lv, b in zip(idx, bits, strict=True):
            if t < b:
                key |= ((lv >> t) & 1) << pos
                pos += 1
    return ids[np.argsort(key, kind="stable")]


def clusters_from_histogram(noisy: np.ndarray, order: np.ndarray, k: int) -> np.ndarray:
    """Cluster index of every cell (by cell id) from the noisy histogram: cut along `order`
    whenever the accumulated max(0, noisy) count reaches k; a tail below k joins the last
    cluster. Every cell belongs to exactly one cluster, so each record does."""
    clipped = np.maximum(noisy[order], 0.0)
    cluster = np.empty(order.shape[0], dtype=np.int64)
    current, acc = 0, 0.0
    for i, v in enumerate(clipped.tolist()):  # one step per cell of the public grid, not per row
        cluster[i] = current
        acc += v
        if acc >= k:
            current, acc = current + 1, 0.0
    if acc < k and current > 0 and order.shape[0] and cluster[-1] == current:
        cluster[cluster == current] = current - 1  # the tail below k joins the previous cluster
    out = np.empty_like(cluster)
    out[order] = cluster
    return out


def restore_levels(
    noisy: np.ndarray, floored: np.ndarray, columns: list[Column], scale: float, z: float = 3.0
) -> np.ndarray:
    """The floored cell counts, with a column the floor left on one level given its other levels.

    The noise floor keeps phantom mass out of the draw, but a level spread thinly over many
    cells (the rare non-zero capital gains of Adult) can lose every cell to it, and a column
    whose other levels all vanish comes out constant. For such a column, each emptied level
    whose noisy total T (the unclipped sum over its m cells; Laplace noise of standard
    deviation sqrt(2 m) * scale) exceeds z standard deviations gets T back, spread over its
    cells as the kept mass is spread over the other columns' cells (the level is drawn
    independently of them: no phantom cell is revived). If a column is still left on one level
    that holds less than half of the clipped noisy mass (its noise as large as its signal), the
    group gets its clipped noisy counts instead of the floored ones. Post-processing of the DP
    histogram."""
    out = floored.copy()
    ids = np.arange(noisy.shape[0], dtype=np.int64)
    for col, stride in zip(columns, strides(columns), strict=True):
        level = (ids // stride) % col.levels
        kept = np.bincount(level, out, minlength=col.levels)
        if np.count_nonzero(kept > 0) > 1 or kept.sum() <= 0:
            continue
        total = np.bincount(level, noisy, minlength=col.levels)
        sd = np.sqrt(2.0 * np.bincount(level, minlength=col.levels)) * scale
        rest = ids - level * stride  # the cell with this column's level set to 0
        shape = np.bincount(rest, out, minlength=noisy.shape[0])  # kept mass of the others
        shape = shape / shape.sum()
        for lv in np.flatnonzero((kept <= 0) & (total > z * sd)).tolist():
            cells = level == lv
            out[cells] = total[lv] * shape[rest[cells]]
    clipped = np.maximum(noisy, 0.0)
    for col, stride in zip(columns, strides(columns), strict=True):
        level = (ids // stride) % col.levels
        kept = np.bincount(level, out, minlength=col.levels)
        mass = np.bincount(level, clipped, minlength=col.levels)
        if np.count_nonzero(kept > 0) == 1 and mass[kept > 0].sum() < mass.sum() / 2:
            # still on one level, and that level holds less than half the clipped noisy mass:
            # the noise is as large as the signal, and a column fixed within a class would be
            # a perfect (and false) predictor of the class. The cells keep their clipped noisy
            # counts instead: noisy, but not degenerate. (A column that is constant in the
            # data keeps its level: it holds most of the mass.)
            return clipped
    return out


def floored(counts: np.ndarray, scale: float) -> np.ndarray:
    """Noisy counts with every cell below the noise floor scale * ln(cells) (about the largest
    noise among the empty cells) set to 0, and none negative."""
    floor = scale * np.log(max(counts.shape[-1], 1))
    return np.where(counts >= floor, np.maximum(counts, 0.0), 0.0)


def shrunk_to(noisy: np.ndarray, target: np.ndarray, scale: float) -> np.ndarray:
    """A noisy histogram (Laplace of `scale` per cell) mixed with a target of the same total:
    the share keep of its floored counts, 1 - keep of the target, with keep the positive-part
    James-Stein share max(0, 1 - (cells - 2) 2 b^2 / |noisy - target|^2) of the whole
    deviation. The vector is judged whole because the largest of many noise draws looks like
    signal cell by cell: a histogram whose deviation from the target the noise explains takes
    the target, not the cells its noise happened to lift."""
    dev = (noisy - target).ravel()
    per_cell = float(np.sqrt((dev * dev).sum() / max(dev.shape[0] - 2, 1)))
    keep = float(noise_shrinkage(np.asarray(per_cell), 2.0 * scale * scale))
    return keep * floored(noisy, scale) + (1.0 - keep) * target


def pooled_shape(pooled: np.ndarray, scale: float, columns: list[Column]) -> np.ndarray:
    """The share of each cell in the pooled histogram (all classes) of a group, shrunk as far
    as the noise explains it: each column's marginal towards uniform, then the joint towards
    the product of those marginals (independence within the group). A marginal sums
    cells / levels noisy cells, so it resolves far more than any cell: a group whose joint is
    noise still gets its columns' shapes, and a column whose shape is noise is uniform rather
    than a few lifted cells. Uniform when the noisy total is not positive."""
    total = float(pooled.sum())
    cells = pooled.shape[0]
    if total <= 0:
        return np.full(cells, 1.0 / cells)
    shape = [c.levels for c in columns]
    grid = pooled.reshape(shape)
    prior = np.ones(shape)
    for axis, c in enumerate(columns):
        other = tuple(a for a in range(len(shape)) if a != axis)
        margin = grid.sum(axis=other) if other else grid
        uniform = np.full(c.levels, total / c.levels)
        got = shrunk_to(margin, uniform, scale * math.sqrt(cells / c.levels))
        got = got / got.sum() if got.sum() > 0 else uniform / total
        prior = prior * got.reshape([-1 if a == axis else 1 for a in range(len(shape))])
    joint = prior.ravel()
    if len(columns) > 1:
        joint = shrunk_to(pooled, total * joint, scale)
        joint = joint / joint.sum() if joint.sum() > 0 else prior.ravel()
    return joint


def toward_pooled(
    noisy: np.ndarray, scale: float, columns: list[Column], sizes: np.ndarray
) -> np.ndarray:
    """The per-class noisy histograms [classes, cells], each cell shrunk towards the pooled
    shape as far as its class's deviation from it is explained by noise; floored.

    Class c's expectation under the pooled shape is e_c = t_c p, t_c its size as the whole
    release estimates it (`model.class_sizes`: every group's noisy totals, not only this
    one's) and p the pooled histogram (the classes' sum, Laplace of scale sqrt(C) b per
    cell) shrunk by `pooled_shape`. A cell's deviation d = noisy_c - e_c is kept in the share
    max(0, 1 - 2 b^2 / d^2) (2 b^2 the Laplace noise's variance: the positive-part shrinkage
    the covariances get in `statistics.gaussian_model`), and the result mixes the class's own
    floored count (below b ln(cells): 0) with e_c in those shares. A deviation far above the
    noise keeps the class's count as it was; where the noise outweighs the data, the class
    takes the pooled shape at its own size instead of whichever cells its noise happened to
    lift (German credit at epsilon 1, 150 records of class 2 over 4 age bins at scale 55: the
    floor kept the last bin, a synthetic mean age of 72 against a real 35, and false
    correlations up to 0.56 through the class). Post-processing."""
    classes = noisy.shape[0]
    own = floored(noisy, scale)
    if classes < 2:
        return own
    share = pooled_shape(noisy.sum(axis=0), math.sqrt(classes) * scale, columns)
    expected = np.maximum(np.asarray(sizes, dtype=float), 0.0)[:, None] * share[None, :]
    keep = noise_shrinkage(noisy - expected, 2.0 * scale * scale)
    return keep * own + (1.0 - keep) * expected


def cluster_bin_means(
    cluster_of_cell: np.ndarray, weights: np.ndarray, columns: list[Column]
) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's mean of every numeric column as its histogram sees it, with the variance
    of that estimate: the weighted mean of the bin centres of its cells (on [0, 1]), and the
    weighted mean of width^2 / 12 (a value's spread within its bin, which the centre ignores).
    Post-processing of the DP histogram; [clusters, numeric columns] each."""
    m = int(cluster_of_cell.max()) + 1 if cluster_of_cell.shape[0] else 0
    ids = np.arange(cluster_of_cell.shape[0], dtype=np.int64)
    w = np.maximum(weights, 0.0)
    total = np.bincount(cluster_of_cell, w, minlength=m)
    flat = np.bincount(cluster_of_cell, minlength=m).astype(float)
    use_flat = total <= 0  # a cluster whose cells were all floored: its cells count equally
    means: list[np.ndarray] = []
    variances: list[np.ndarray] = []
    for col, stride in zip(columns, strides(columns), strict=True):
        if col.kind != "numeric":
            continue
        edges = (np.asarray(col.bin_edges(), dtype=float) - col.lo) / (col.hi - col.lo)
        level = (ids // stride) % col.levels
        centre = (edges[level] + edges[level + 1]) / 2.0
        spread = (edges[level + 1] - edges[level]) ** 2 / 12.0
        for values, out in ((centre, means), (spread, variances)):
            weighted = np.bincount(cluster_of_cell, w * values, minlength=m)
            plain = np.bincount(cluster_of_cell, values, minlength=m)
            out.append(
                np.where(
                    use_flat, plain / np.maximum(flat, 1.0), weighted / np.maximum(total, 1e-300)
                )
            )
    if not means:
        return np.zeros((m, 0)), np.zeros((m, 0))
    return np.stack(means, axis=1), np.stack(variances, axis=1)
