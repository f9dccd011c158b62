"""Naive Bayes' math: the per-class statistics of an owner's rows, and the exact and the noisy
fit from their pooled totals.

Layout (class-major, zeros included): per class c, n_c; then S1_cj, S2_cj (sum x_j, sum x_j^2
over the class's rows) per numeric feature j; then N_cjv per categorical feature j and value v.
From the pooled totals:

    prior_c   = n_c / sum n                               (GaussianNB / CategoricalNB priors)
    theta_cj  = S1_cj / n_c,  var_cj = S2_cj / n_c - theta_cj^2 + epsilon
    epsilon   = var_smoothing x max_j (pooled variance of feature j)   (from the same sums)
    log P(v | c) = log(N_cjv + alpha) - log(sum_v N_cjv + alpha V_j)

Without DP the variances come from the integer totals in exact rational arithmetic (one
rounding each): scikit-learn's GaussianNB and CategoricalNB (min_categories = the domain sizes)
on the pooled rows. With DP the sums are of u = (x - mid_j) / half_j in [-1, 1] (x clipped to
its bounds) and the noisy fit is post-processed (no privacy cost): counts at least 1 (classes)
and 0 (categories); the mean of u clamped to [-1, 1], its mean square to [0, 1]; the variance
of u between `variance_floor` and 1, the largest a variable in [-1, 1] can have; then
theta = mid + half theta_u, var = half^2 var_u.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed.errors import DataError, ProtocolError

# DP: a class's variance is floored at FLOOR_FACTOR times the noise std of its estimate: below
# that the noise alone could have made it from 0
FLOOR_FACTOR = 2.0


@dataclass(frozen=True)
class NaiveBayesDomain:
    """A categorical feature and its public values."""

    name: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NaiveBayesBound:
    """DP: a numeric feature's public clipping bounds."""

    name: str
    lower: float = 0.0
    upper: float = 0.0


@dataclass(frozen=True)
class Layout:
    """Where every statistic sits in a share: per class, its count, then (S1, S2) of each
    numeric feature, then the counts of each categorical feature's domain."""

    numeric: tuple[str, ...]
    categorical: tuple[NaiveBayesDomain, ...]
    k: int

    @staticmethod
    def of(features: Sequence[str], domains: Sequence[NaiveBayesDomain], k: int) -> Layout:
        cat = {d.name: d for d in domains}
        return Layout(
            tuple(f for f in features if f not in cat),
            tuple(cat[f] for f in features if f in cat),
            k,
        )

    @property
    def n_categories(self) -> int:
        return sum(len(d.values) for d in self.categorical)

    @property
    def per_class(self) -> int:
        return 1 + 2 * len(self.numeric) + self.n_categories

    @property
    def n_values(self) -> int:
        return self.k * self.per_class

    def category_offsets(self) -> list[int]:
        """The offset of each categorical feature's block inside a class's block."""
        out, pos = [], 1 + 2 * len(self.numeric)
        for d in self.categorical:
            out.append(pos)
            pos += len(d.values)
        return out


def centers_and_scales(bounds: Sequence[NaiveBayesBound]) -> tuple[np.ndarray, np.ndarray]:
    """(mid_j, half_j) of each numeric feature's bounds: u = (x - mid) / half is in [-1, 1]."""
    lo = np.array([b.lower for b in bounds], dtype=np.float64)
    hi = np.array([b.upper for b in bounds], dtype=np.float64)
    return (lo + hi) / 2.0, (hi - lo) / 2.0


def standardize(x: np.ndarray, bounds: Sequence[NaiveBayesBound]) -> np.ndarray:
    """DP: x clipped to its bounds, then u = (x - mid) / half, clipped to [-1, 1] again (the
    float division may land a hair outside)."""
    mid, half = centers_and_scales(bounds)
    lo = np.array([b.lower for b in bounds], dtype=np.float64)
    hi = np.array([b.upper for b in bounds], dtype=np.float64)
    return np.clip((np.clip(x, lo, hi) - mid) / half, -1.0, 1.0)


# ------------------------------------------------------------------ owner side


@dataclass(frozen=True)
class LocalStats:
    count: np.ndarray  # K
    s1: np.ndarray  # K x d_num
    s2: np.ndarray  # K x d_num
    categories: list[np.ndarray]  # per categorical feature: K x V_j
    rows: int  # rows read


def local_statistics(
    table: Any,
    layout: Layout,
    label_column: str,
    classes: Sequence[str],
    bounds: Sequence[NaiveBayesBound],
    value_bound: float,
    dp: bool,
) -> LocalStats:
    """The zero-filled per-class statistics of one site's rows (`table`, a SiteTable). Without
    DP a label outside the classes or a categorical value outside its domain refuses the round
    (rule classes), a numeric value beyond `value_bound` too (rule bounds); with DP such rows
    are dropped and numeric values standardized to their `bounds` (a DP spec's). A missing value
    refuses either (rule values)."""
    k = layout.k
    y, ok = category_indices(_labels(table, label_column), classes)
    if not dp and not ok.all():
        _refuse_outside(label_column, int((~ok).sum()), "classes")
    inside = ok
    cat_idx = []
    for d in layout.categorical:
        idx, ok_j = category_indices(_labels(table, d.name), d.values)
        if not dp and not ok_j.all():
            _refuse_outside(d.name, int((~ok_j).sum()), "domain")
        inside = inside & ok_j
        cat_idx.append(idx)
    x = _numeric(table, layout.numeric, len(y))
    if bounds:  # a DP round's (every numeric feature has its bounds there)
        x = standardize(x, bounds)
    elif not dp:
        top = np.abs(x).max(axis=0) if len(x) else np.zeros(len(layout.numeric))
        for name, t in zip(layout.numeric, top.tolist(), strict=True):
            if t > value_bound:
                raise DataError(
                    f"column '{name}' has a value beyond the round's value bound "
                    f"{value_bound:.6g}; raise the bound (`value_bound`) or rescale the column",
                    field=name,
                    rule="bounds",
                )
    y, x = y[inside], x[inside]
    count = np.bincount(y, minlength=k).astype(np.int64)
    # per class, separately accumulated (bincount adds rows in order, bin by bin): a row of one
    # class leaves every other class's sums bit-identical (the sensitivity relies on it)
    s1 = np.zeros((k, len(layout.numeric)))
    s2 = np.zeros((k, len(layout.numeric)))
    for j in range(len(layout.numeric)):
        s1[:, j] = np.bincount(y, weights=x[:, j], minlength=k)
        s2[:, j] = np.bincount(y, weights=x[:, j] * x[:, j], minlength=k)
    cats = []
    for d, idx in zip(layout.categorical, cat_idx, strict=True):
        v = len(d.values)
        flat = np.bincount(y * v + idx[inside], minlength=k * v).astype(np.int64)
        cats.append(flat.reshape(k, v))
    return LocalStats(count, s1, s2, cats, len(inside))


def _labels(table: Any, column: str) -> list[str]:
    try:
        return list(table.labels(column))
    except DataError as exc:  # a missing value
        raise DataError(str(exc), field=column, rule="values") from exc


def category_indices(values: Sequence[str], domain: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(index of each value in the domain, 0 outside; whether it is inside). One dict lookup
    per value, driven from C by `map` (a fraction of a second per million rows; np.unique's
    sort of the strings is several times slower)."""
    index = {v: i for i, v in enumerate(domain)}
    found = map(index.get, values, itertools.repeat(-1))
    idx = np.fromiter(found, dtype=np.int64, count=len(values))
    ok = idx >= 0
    return np.where(ok, idx, 0), ok


def _refuse_outside(column: str, count: int, what: str) -> None:
    """Without DP every value must be declared; the message states the rule, no value."""
    raise DataError(
        f"column '{column}' has {count} value(s) outside the round's {what}: every value must "
        "be declared (`classes` / `domains`)",
        field=column,
        rule="classes",
    )


def _numeric(table: Any, names: Sequence[str], n_rows: int) -> np.ndarray:
    if not names:
        return np.zeros((n_rows, 0))
    x = table.matrix(list(names))
    bad = (~np.isfinite(x)).sum(axis=0)
    for name, count in zip(names, bad.tolist(), strict=True):
        if count:
            raise DataError(
                f"column '{name}' has {count} missing, NaN or infinite value(s)",
                field=name,
                rule="values",
            )
    return x


# ------------------------------------------------------------------ aggregator side


@dataclass(frozen=True)
class ClassTotals:
    """The pooled statistics as exact integers at their scales."""

    count: list[int]  # K, at 2^count_scale_bits
    s1: list[list[int]]  # K x d_num, at 2^scale_bits
    s2: list[list[int]]
    categories: list[list[list[int]]]  # per categorical feature: K x V_j, at 2^count_scale_bits


def split_totals(totals: Sequence[int], layout: Layout) -> ClassTotals:
    if len(totals) != layout.n_values:
        raise ProtocolError(f"expected {layout.n_values} totals, got {len(totals)}")
    d = len(layout.numeric)
    per = layout.per_class
    offsets = layout.category_offsets()
    count, s1, s2 = [], [], []
    cats: list[list[list[int]]] = [[] for _ in layout.categorical]
    for c in range(layout.k):
        block = [int(v) for v in totals[c * per : (c + 1) * per]]
        count.append(block[0])
        s1.append(block[1 : 1 + 2 * d : 2])
        s2.append(block[2 : 2 + 2 * d : 2])
        for j, (off, dom) in enumerate(zip(offsets, layout.categorical, strict=True)):
            cats[j].append(block[off : off + len(dom.values)])
    return ClassTotals(count, s1, s2, cats)


@dataclass(frozen=True)
class Fit:
    class_count: np.ndarray  # K
    theta: np.ndarray  # K x d_num
    var: np.ndarray  # K x d_num, epsilon included
    epsilon: float
    category_counts: list[np.ndarray]  # per categorical feature: K x V_j
    log_prob: list[np.ndarray]
    floored: int = 0


def exact_fit(
    t: ClassTotals,
    scale_bits: int,
    count_bits: int,
    var_smoothing: float,
    alpha: float,
    classes: Sequence[str],
) -> Fit:
    """The model from exact totals (non-DP): variances in rational arithmetic, one rounding
    each: var = (n S2 F - S1^2) / (n^2 F^2), F = 2^scale_bits."""
    cs, f = count_bits, scale_bits
    if any(v < 0 or v % (1 << cs) for v in t.count):
        raise ProtocolError("a class count is negative or not whole: corrupted aggregate")
    n = [v >> cs for v in t.count]
    empty = [c for c, m in zip(classes, n, strict=True) if m == 0]
    if empty:
        raise DataError(
            f"no pooled row has class(es) {empty[:5]}: a class needs rows for its mean and "
            "variance; leave it out of `classes`",
            field="classes",
            rule="rows",
        )
    big = 1 << f
    d = len(t.s1[0]) if t.s1 else 0
    theta = np.array([[t.s1[c][j] / (n[c] * big) for j in range(d)] for c in range(len(n))])
    var = np.array(
        [
            [
                (n[c] * t.s2[c][j] * big - t.s1[c][j] ** 2) / (n[c] * n[c] * big * big)
                for j in range(d)
            ]
            for c in range(len(n))
        ]
    ).reshape(len(n), d)
    total = sum(n)
    pooled = [
        (total * sum(r[j] for r in t.s2) * big - sum(r[j] for r in t.s1) ** 2)
        / (total * total * big * big)
        for j in range(d)
    ]
    epsilon = var_smoothing * max(pooled, default=0.0)
    cats = []
    for block in t.categories:
        if any(v < 0 or v % (1 << cs) for row in block for v in row):
            raise ProtocolError("a category count is negative or not whole: corrupted aggregate")
        cats.append(np.array([[v >> cs for v in row] for row in block], dtype=np.float64))
    return Fit(
        np.array(n, dtype=np.float64),
        theta.reshape(len(n), d),
        np.maximum(var, 0.0) + epsilon,
        epsilon,
        cats,
        [category_log_prob(c, alpha) for c in cats],
    )


def category_log_prob(counts: np.ndarray, alpha: float) -> np.ndarray:
    """CategoricalNB's feature_log_prob_: log(N_cv + alpha) - log(sum_v N_cv + alpha V)."""
    smoothed = counts + alpha
    return np.log(smoothed) - np.log(smoothed.sum(axis=1, keepdims=True))


def mean_and_variance_errors(
    sigma: float, n: np.ndarray | float, theta: np.ndarray | float, m2: np.ndarray | float
) -> tuple[np.ndarray, np.ndarray]:
    """The noise std of a class's released mean and variance of u, to first order (delta
    method), when n, S1 and S2 each carry independent noise of std sigma (real units; the
    errors of x's are half and half^2 times these):
        d theta = (dS1 - theta dn) / n
        d var   = (dS2 - 2 theta dS1 + (2 theta^2 - m2) dn) / n      (m2 = S2 / n)."""
    n, theta, m2 = np.asarray(n, float), np.asarray(theta, float), np.asarray(m2, float)
    mean_err = sigma * np.sqrt(1.0 + theta * theta) / n
    var_err = sigma * np.sqrt(1.0 + 4.0 * theta * theta + (2.0 * theta * theta - m2) ** 2) / n
    return mean_err, var_err


def variance_floor(sigma: float, n: np.ndarray, theta: np.ndarray, m2: np.ndarray) -> np.ndarray:
    """FLOOR_FACTOR x the noise std of the variance estimate: a smaller variance is one the
    noise alone could have made from 0."""
    return FLOOR_FACTOR * mean_and_variance_errors(sigma, n, theta, m2)[1]


def noisy_fit(
    t: ClassTotals,
    scale_bits: int,
    count_bits: int,
    var_smoothing: float,
    alpha: float,
    bounds: Sequence[NaiveBayesBound],
    sigma: float,
) -> Fit:
    """The model from noisy totals of the standardized u (DP), post-processed (no privacy
    cost): class counts at least 1, category counts at least 0; per class the mean of u clamped
    to [-1, 1], its mean square to [0, 1], its variance between `variance_floor` and 1; then
    back to x: theta = mid + half theta_u, var = half^2 var_u (+ epsilon, from the pooled sums
    with the same clamps)."""
    cf, sf = float(1 << count_bits), float(1 << scale_bits)
    n = np.maximum(np.array(t.count, dtype=np.float64) / cf, 1.0)
    d = len(bounds)
    mid, half = centers_and_scales(bounds)
    s1 = np.array(t.s1, dtype=np.float64).reshape(len(n), d) / sf
    s2 = np.array(t.s2, dtype=np.float64).reshape(len(n), d) / sf
    theta_u = np.clip(s1 / n[:, None], -1.0, 1.0)
    m2_u = np.clip(s2 / n[:, None], 0.0, 1.0)
    raw = m2_u - theta_u * theta_u
    floor = variance_floor(sigma, n[:, None], theta_u, m2_u)
    var_u = np.minimum(np.maximum(raw, floor), 1.0)
    floored = int(np.sum(raw < floor))
    total = float(n.sum())
    p_mean = np.clip(s1.sum(axis=0) / total, -1.0, 1.0)
    p_m2 = np.clip(s2.sum(axis=0) / total, 0.0, 1.0)
    pooled = np.clip(p_m2 - p_mean * p_mean, 0.0, 1.0) * half * half
    epsilon = var_smoothing * float(pooled.max()) if d else 0.0
    cats = [np.maximum(np.array(block, dtype=np.float64) / cf, 0.0) for block in t.categories]
    return Fit(
        n,
        mid + half * theta_u,
        half * half * var_u + epsilon,
        epsilon,
        cats,
        [category_log_prob(c, alpha) for c in cats],
        floored,
    )
