"""Rows from the fitted tree model (`marginals`): forward sampling, then public values.

The class is drawn first from the fitted class sizes (one class without a label); then the
tree of columns is walked breadth first from its first column: that column's level is drawn
from its fitted marginal given the class, every other column's from its fitted marginal with
its parent given the class and the parent's level (an exact draw from the model's joint
distribution). A numeric level is its public bin: the value is uniform in the bin (uniform
among the bin's integers for an integer column). Every draw comes from a generator seeded by
(seed, purpose, attribute), so the table depends on the seed and the model only. Per-row work
is vectorized; the loops run over attributes and over a parent's levels (the public grid).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.marginals import DRAW_IN_BIN, DRAW_TREE, MarginalModel
from leteo_fed.synth.model import rng

if TYPE_CHECKING:
    import pyarrow as pa


def _probabilities(weights: np.ndarray) -> np.ndarray:
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    s = w.sum()
    return w / s if s > 0 else np.full(w.shape[0], 1.0 / w.shape[0])


def _draw(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws of levels with probabilities p for uniforms u."""
    cdf = np.cumsum(p)
    return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), p.shape[0] - 1)


def tree_order(d: int, edges: list[tuple[int, int]], root: int) -> list[tuple[int, int]]:
    """(parent, child) pairs in breadth-first order from `root`."""
    neighbours: dict[int, list[int]] = {i: [] for i in range(d)}
    for i, j in edges:
        neighbours[i].append(j)
        neighbours[j].append(i)
    seen, out, queue = {root}, [], deque([root])
    while queue:
        a = queue.popleft()
        for b in sorted(neighbours[a]):
            if b not in seen:
                seen.add(b)
                out.append((a, b))
                queue.append(b)
    return out


def _conditional(
    out: np.ndarray, given: list[np.ndarray], table: np.ndarray, u: np.ndarray
) -> None:
    """Fill `out` with draws from table[given..., :] row by row of the conditioning levels
    (one step per combination of public grid levels, not per row)."""
    rows_of = table.reshape(-1, table.shape[-1])
    fallback = _probabilities(rows_of.sum(axis=0))
    flat = np.ravel_multi_index(given, table.shape[:-1])
    order = np.argsort(flat, kind="stable")
    keys = flat[order]
    starts: list[int] = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
    if not keys.size:
        starts = []
    for a, b in zip(starts, [*starts[1:], keys.size], strict=True):
        rows = order[a:b]
        weights = rows_of[keys[a]]
        p = _probabilities(weights) if weights.sum() > 0 else fallback
        out[rows] = _draw(p, u[rows])


def sample_levels(model: MarginalModel, n: int, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(class index, every column's grid level) for n rows, drawn along the tree."""
    d = len(model.columns)
    sizes = np.asarray(model.class_sizes)
    cls = _draw(_probabilities(sizes), rng(seed, DRAW_TREE, d).random(n))
    levels: list[np.ndarray] = [np.zeros(n, dtype=np.int64) for _ in range(d)]
    _conditional(levels[0], [cls], model.first[0], rng(seed, DRAW_TREE, 0).random(n))
    for parent, child in tree_order(d, model.edges, 0):
        joint = (
            model.pair[(parent, child)]
            if (parent, child) in model.pair
            else np.swapaxes(model.pair[(child, parent)], 1, 2)
        )  # [class, parent levels, child levels]
        u = rng(seed, DRAW_TREE, child).random(n)
        _conditional(levels[child], [cls, levels[parent]], joint, u)
    return cls, levels


def values_in_bins(level: np.ndarray, col: Column, g: np.random.Generator) -> np.ndarray:
    """A numeric column's values: uniform in each row's bin (among its integers if integer)."""
    edges = np.asarray(col.bin_edges(), dtype=np.float64)
    a, b = edges[level], edges[level + 1]
    u = g.random(level.shape[0])
    if not col.integer:
        return a + u * (b - a)
    first = np.ceil(a)
    last = np.ceil(b) - 1
    last[level == col.levels - 1] = np.floor(col.hi)  # the last bin holds hi itself
    last = np.maximum(first, last)
    return (first + np.floor(u * (last - first + 1))).astype(np.int64)


def generate_marginals(
    model: MarginalModel, config: SynthConfig, seed: int, rows: int | None
) -> pa.Table:
    """The synthetic table: the config's columns in order, then the label (if any)."""
    import pyarrow as pa

    n = int(round(model.total)) if rows is None else rows
    cls, levels = sample_levels(model, n, seed)
    arrays: dict[str, pa.Array] = {}
    for i, col in enumerate(config.columns):
        if col.kind == "categorical":
            arrays[col.name] = _strings(levels[i], col.categories)
        else:
            x = values_in_bins(levels[i], col, rng(seed, DRAW_IN_BIN, i))
            arrays[col.name] = pa.array(x, pa.int64() if col.integer else pa.float64())
    if config.label is not None:
        arrays[config.label] = _strings(cls, config.classes)
    return pa.table(arrays)


def _strings(index: np.ndarray, domain: tuple[str, ...]) -> pa.Array:
    """The domain's values at `index` as an Arrow string array (no Python object per row)."""
    import pyarrow as pa

    codes = pa.array(index.astype(np.int32))
    return pa.DictionaryArray.from_arrays(codes, pa.array(domain, pa.string())).cast(pa.string())
