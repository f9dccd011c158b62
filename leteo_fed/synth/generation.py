"""Rows from the released model: per class, per group, per cluster, decoded to public values.

A row of a cluster gets a grid cell, drawn in proportion to the cells' noisy counts, those
below the noise floor set to 0 and each shrunk towards the pooled shape as far as noise explains
its class's deviation (`partition.toward_pooled`; the DP histogram, post-processing): the cell
fixes the categorical values and the numeric bins. Its numeric values come from the cluster's
N(mu, Sigma), moved into the cell's bins by the Gaussian copula (`_into_bins`): within the
cluster the numerics keep the Gaussian's dependence, and they agree with the cell, so
numeric-categorical dependence is kept at the grid's resolution.

Row counts: each class gets round(its noisy size) rows (its groups' unclipped noisy histogram
totals weighted by the inverse of their variance, `model.class_sizes`), or with --rows a
requested total split across classes in proportion to those sizes; within a class, every group
spreads the class's rows across its clusters in proportion to the noisy counts of their cells
above the noise floor b ln(cells) (largest remainders), so all groups give the class the same
number of rows. Groups are stitched by an independent random permutation within the class: they
are modelled as conditionally independent given the class. Every draw is seeded by (seed, class,
group, cluster), so both engines write the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.model import DRAW_CLUSTER, DRAW_PERMUTATION, SynthModel, rng
from leteo_fed.synth.partition import strides
from leteo_fed.synth.statistics import ClusterModel

if TYPE_CHECKING:
    import pyarrow as pa


def apportion(total: int, weights: np.ndarray) -> np.ndarray:
    """Integers summing to `total` in proportion to `weights` (largest remainders; uniform
    when every weight is 0)."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    if w.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if w.sum() <= 0:
        w = np.ones_like(w)
    exact = total * w / w.sum()
    base = np.floor(exact).astype(np.int64)
    left = int(total - base.sum())
    if left > 0:
        base[np.argsort(-(exact - base), kind="stable")[:left]] += 1
    return base


def class_rows(model: SynthModel, rows: int | None) -> np.ndarray:
    sizes = np.asarray(model.class_sizes)
    if rows is None:
        return np.rint(sizes).astype(np.int64)
    return apportion(rows, sizes)


def _into_bins(
    x: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    spare: np.ndarray,
) -> np.ndarray:
    """Gaussian draws moved into their cells' bins [lo, hi) by the Gaussian copula: each
    coordinate's quantile Phi((x - mu) / sd) is mapped to the same quantile of N(mu, sd^2)
    truncated to the bin. Where that Gaussian says nothing about the bin, `spare` (uniform
    draws) places the value: a degenerate Gaussian (sd 0: every row at mu) keeps mu when mu
    lies in the bin and is uniform in the bin otherwise; a bin the Gaussian gives no mass is
    uniform. (Using the Gaussian's own quantile there, 0.5 for every row when sd is 0, would
    stack every row of the cluster on the bin's midpoint.)"""
    from scipy.special import ndtr, ndtri

    degenerate = sd <= 1e-12
    safe = np.where(degenerate, 1.0, sd)
    u = ndtr((x - mu) / safe)
    a, b = ndtr((lo - mu) / safe), ndtr((hi - mu) / safe)
    inside = mu + safe * ndtri(np.clip(a + u * (b - a), 1e-300, 1 - 1e-16))
    uniform = lo + spare * (hi - lo)
    at_mean = degenerate & (mu >= lo) & (mu <= hi)
    value = np.where(degenerate | (b - a < 1e-12), uniform, inside)
    return np.clip(np.where(at_mean, mu, value), lo, hi)


def _cluster_rows(
    m: ClusterModel, j: int, nj: int, cols: list[Column], g: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(cells [nj], numeric values on [0, 1] [nj, w]) for cluster j: cells drawn in proportion
    to their clipped noisy counts, numerics from the cluster's Gaussian moved into the cells."""
    cells = np.flatnonzero(m.cluster_of_cell == j)
    weights = m.cell_counts[cells]
    p = (
        weights / weights.sum()
        if weights.sum() > 0
        else np.full(cells.shape[0], 1 / cells.shape[0])
    )
    chosen = cells[
        np.minimum(np.searchsorted(np.cumsum(p), g.random(nj), side="right"), cells.shape[0] - 1)
    ]
    d = m.means.shape[1]
    if d == 0:
        return chosen, np.zeros((nj, 0))
    x = m.means[j] + g.standard_normal((nj, d)) @ m.factors[j].T
    spare = g.random((nj, d))  # for the values the Gaussian cannot place (see _into_bins)
    numeric = [c for c in cols if c.kind == "numeric"]
    st = strides(cols)
    pos = [i for i, c in enumerate(cols) if c.kind == "numeric"]
    level = np.column_stack([(chosen // st[i]) % cols[i].levels for i in pos])
    lo = np.empty((nj, len(numeric)))
    hi = np.empty((nj, len(numeric)))
    for k, c in enumerate(numeric):  # each bin as [lo, hi) on the column's [0, 1] scale
        u = (np.asarray(c.bin_edges()) - c.lo) / (c.hi - c.lo)
        lo[:, k], hi[:, k] = u[level[:, k]], u[level[:, k] + 1]
    sd = np.sqrt(np.maximum(np.diagonal(m.covariances[j]), 0.0))
    return chosen, _into_bins(x, m.means[j], sd, lo, hi, spare)


def _decode(cells: np.ndarray, x: np.ndarray, cols: list[Column]) -> dict[str, np.ndarray]:
    """Public values: categoricals from the cell; numerics rescaled from [0, 1] (rounded when
    integer)."""
    out: dict[str, np.ndarray] = {}
    st = strides(cols)
    at = 0
    for i, c in enumerate(cols):
        if c.kind == "numeric":
            v = np.clip(x[:, at], 0.0, 1.0) * (c.hi - c.lo) + c.lo
            if c.integer:  # rounded, but kept among the integers of the row's bin [a, b)
                edges = np.asarray(c.bin_edges())
                lvl = (cells // st[i]) % c.levels
                first, last = np.ceil(edges[lvl]), np.ceil(edges[lvl + 1]) - 1
                last[lvl == c.levels - 1] = np.floor(c.hi)  # the last bin holds hi itself
                v = np.clip(np.rint(v), first, np.maximum(first, last)).astype(np.int64)
            out[c.name] = v
            at += 1
        else:
            idx = (cells // st[i]) % c.levels
            out[c.name] = np.asarray(c.categories, dtype=object)[idx]
    return out


def _group_rows(
    model: SynthModel, cols: list[Column], c: int, gi: int, n: int, seed: int
) -> dict[str, np.ndarray]:
    m = model.models[(c, gi)]
    weights = np.bincount(m.cluster_of_cell, m.cell_counts, minlength=m.counts.shape[0])
    alloc = apportion(n, weights)
    w = sum(col.kind == "numeric" for col in cols)
    cells, xs = [], []
    for j, nj in enumerate(alloc.tolist()):  # one step per cluster
        if nj == 0:
            continue
        cj, xj = _cluster_rows(m, j, nj, cols, rng(seed, DRAW_CLUSTER, c, gi, j))
        cells.append(cj)
        xs.append(xj)
    cell = np.concatenate(cells) if cells else np.zeros(0, dtype=np.int64)
    x = np.concatenate(xs) if xs else np.zeros((0, w))
    perm = rng(seed, DRAW_PERMUTATION, c, gi).permutation(x.shape[0])
    return _decode(cell[perm], x[perm], cols)


def generate(model: SynthModel, config: SynthConfig, seed: int, rows: int | None) -> pa.Table:
    """The synthetic table: the config's columns in order, then the label (if any)."""
    import pyarrow as pa

    sizes = class_rows(model, rows)
    parts: dict[str, list[np.ndarray]] = {c.name: [] for c in config.columns}
    labels: list[np.ndarray] = []
    for c, n in enumerate(sizes.tolist()):
        for gi, names in enumerate(model.groups):
            cols = [config.column(name) for name in names]
            for name, values in _group_rows(model, cols, c, gi, n, seed).items():
                parts[name].append(values)
        if config.label is not None:
            labels.append(np.full(n, config.classes[c], dtype=object))
    arrays: dict[str, pa.Array] = {}
    for col in config.columns:
        values = np.concatenate(parts[col.name]) if parts[col.name] else np.zeros(0)
        if col.kind == "categorical":
            arrays[col.name] = pa.array(values.astype(object), pa.string())
        elif col.integer:
            arrays[col.name] = pa.array(values.astype(np.int64), pa.int64())
        else:
            arrays[col.name] = pa.array(values.astype(np.float64), pa.float64())
    if config.label is not None:
        label_values = np.concatenate(labels) if labels else np.zeros(0, dtype=object)
        arrays[config.label] = pa.array(label_values.astype(object), pa.string())
    return pa.table(arrays)
