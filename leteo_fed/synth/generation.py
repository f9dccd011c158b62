"""Rows from the released model: per class, per group, per cluster N(mu, Sigma), decoded.

Row counts: each class gets round(its noisy size) rows (the mean over groups of the unclipped
noisy histogram totals), or with --rows a requested total split across classes in proportion to
those sizes; within a class, every group spreads the class's rows across its clusters in
proportion to their noisy counts (largest remainders), so all groups give the class the same
number of rows. Groups are stitched by an independent random permutation within the class: they
are modelled as conditionally independent given the class. Every draw is seeded by (seed, class,
group, cluster), so both engines write the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.model import DRAW_CLUSTER, DRAW_PERMUTATION, SynthModel, rng

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


def _decode(x: np.ndarray, u: np.ndarray, cols: list[Column]) -> dict[str, np.ndarray]:
    """Encoded draws back to public values: numerics clipped to [0, 1] and rescaled (rounded
    when integer); a one-hot block clipped at 0, renormalized and sampled with uniforms `u`."""
    out: dict[str, np.ndarray] = {}
    at, cat = 0, 0
    for c in cols:
        if c.kind == "numeric":
            v = np.clip(x[:, at], 0.0, 1.0) * (c.hi - c.lo) + c.lo
            out[c.name] = np.rint(v).astype(np.int64) if c.integer else v
            at += 1
            continue
        p = np.clip(x[:, at : at + c.width], 0.0, None)
        s = p.sum(axis=1, keepdims=True)
        p = np.where(s > 0, p / np.where(s > 0, s, 1.0), 1.0 / c.width)
        idx = (u[:, cat : cat + 1] > np.cumsum(p, axis=1)).sum(axis=1)
        out[c.name] = np.asarray(c.categories, dtype=object)[np.minimum(idx, c.width - 1)]
        at += c.width
        cat += 1
    return out


def _group_rows(
    model: SynthModel, cols: list[Column], c: int, gi: int, n: int, seed: int
) -> dict[str, np.ndarray]:
    m = model.models[(c, gi)]
    alloc = apportion(n, m.counts)
    n_cat = sum(col.kind == "categorical" for col in cols)
    d = m.means.shape[1]
    xs, us = [], []
    for j, nj in enumerate(alloc.tolist()):  # one step per cluster
        if nj == 0:
            continue
        g = rng(seed, DRAW_CLUSTER, c, gi, j)
        z = g.standard_normal((nj, d))
        xs.append(m.means[j] + z @ m.factors[j].T)
        us.append(g.random((nj, n_cat)))
    x = np.concatenate(xs) if xs else np.zeros((0, d))
    u = np.concatenate(us) if us else np.zeros((0, n_cat))
    perm = rng(seed, DRAW_PERMUTATION, c, gi).permutation(x.shape[0])
    return _decode(x[perm], u[perm], cols)


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
