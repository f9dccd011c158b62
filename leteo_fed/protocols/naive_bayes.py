"""Federated naive Bayes: Gaussian on numeric features, categorical on categorical ones, one round.

The label's classes c = 1..K are a public list fixed before the round; every categorical feature
j has a public domain of V_j values. Owner n sends, for EVERY class of the list (zeros included,
so a share never says which classes a site holds), class-major:

    n_c                         its rows of class c
    S1_cj, S2_cj                per numeric feature j: sum x_j and sum x_j^2 over those rows
    N_cjv                       per categorical feature j and value v: its rows of class c with v

K (1 + 2 d_num + sum_j V_j) values. The aggregator reveals the exact pooled totals and fits

    prior_c   = n_c / sum n                               (GaussianNB / CategoricalNB priors)
    theta_cj  = S1_cj / n_c,  var_cj = S2_cj / n_c - theta_cj^2 + epsilon
    epsilon   = var_smoothing x max_j (pooled variance of feature j)   (from the same sums)
    log P(v | c) = log(N_cjv + alpha) - log(sum_v N_cjv + alpha V_j)

Without DP the variances are computed from the integer totals in exact rational arithmetic
(one rounding each), so the model equals scikit-learn's GaussianNB (var_smoothing) and
CategoricalNB (alpha, min_categories = the domain sizes) trained on the pooled rows, and the
joint log-likelihood of a row is log prior + the Gaussian terms + the categorical terms.

Rows: a missing or non-numeric value refuses the round (rule `values`). Without DP a label
outside the classes or a categorical value outside its domain refuses it (rule `classes`; the
message states the rule, never a value) and a numeric value beyond the round's value bound
too (rule `bounds`); a class with no pooled row refuses the fit (it would have no mean). With
DP such a row is dropped (refusing would reveal it) and numeric values are clipped to their
public bounds [lo_j, hi_j] (`bounds`; a numeric feature without one: [-C, C], C the request's
row_norm_bound), then standardized to u = (x - mid_j) / half_j in [-1, 1] (mid_j, half_j: the
bounds' midpoint and half-width), whose sums S1, S2 the share holds: every coordinate then
moves by at most one unit per row, so one noise level fits counts and sums alike (sums of raw
x^2 would need noise ~ max(|lo|, |hi|)^2 on every coordinate, counts included).

Sensitivity (DP, F = 2^scale_bits, counts at F too): one row of class c changes n_c by F, each
N_cjv of its categories by F (one per categorical feature), S1_cj by at most |u_j| F + 1 <= F + 1
and S2_cj by at most u_j^2 F + 1 <= F + 1 (the + 1 is the rounding of the owner's sum), and
nothing of the other classes (their sums are accumulated separately, bit-identical):
    L1 = F (1 + d_cat) + 2 d_num (F + 1)
    L2 = sqrt(F^2 (1 + d_cat) + 2 d_num (F + 1)^2)
(checked by brute force in the tests). Post-processing (no privacy cost): counts at least 1
(classes) and 0 (categories); the mean of u clamped to [-1, 1], its mean square to [0, 1]; the
variance of u between a noise floor (`variance_floor`) and 1, the largest a variable in
[-1, 1] can have; then theta = mid + half theta_u, var = half^2 var_u.

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled per-class counts, sums and sums of squares (noisy with DP), hence the model, never one
site's. Single-round: one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.packing import encode_fixed
from leteo_fed.encoding.share import ShareEncoding, require_bound
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import moments_round, registry
from leteo_fed.protocols.base import (
    Common,
    DpSpec,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    SiteData,
    SiteTable,
    Step,
    check_features,
    dp_facts,
    preview_facts,
    require_same_count_scale,
    round_truth,
    skellam_plan,
    verify_dp,
)
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type

PROTOCOL_NAME = "naive_bayes"
METHOD = "naive-bayes"
DEFAULT_VAR_SMOOTHING = 1e-9  # scikit-learn's GaussianNB default
DEFAULT_ALPHA = 1.0  # scikit-learn's CategoricalNB default
DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
MAX_VALUES = 65_536  # encrypted values per owner share
# DP: a class's variance is floored at FLOOR_FACTOR times the noise std of its estimate: below
# that the noise alone could have made it from 0
FLOOR_FACTOR = 2.0
OUTSIDE_REFUSED = (
    "refused: a site with a label outside the classes or a categorical value outside its "
    "domain declines the round (rule classes), a numeric value beyond the value bound too "
    "(rule bounds); a missing value declines it (rule values)"
)
OUTSIDE_DROPPED = (
    "dropped and clipped: in a DP round a row with a label outside the classes or a "
    "categorical value outside its domain is left out; numeric values are clipped to their "
    "bounds; a missing value declines the round (rule values)"
)
FIXES = (
    "raise --dp-epsilon",
    "narrow --bounds: the noise of the sums grows with max(|lo|, |hi|) and its square",
    "use fewer classes, features or categories: each class gets a share of the rows",
    "give --rows N if the pooled row count is larger",
)


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
class NaiveBayesRequest:
    features: tuple[str, ...] = ()
    domains: tuple[NaiveBayesDomain, ...] = ()
    label_column: str = ""
    classes: tuple[str, ...] = ()
    var_smoothing: float | None = None
    alpha: float | None = None
    bounds: tuple[NaiveBayesBound, ...] = ()


@dataclass(frozen=True)
class NaiveBayesSpec:
    features: tuple[str, ...]
    domains: tuple[NaiveBayesDomain, ...]
    label_column: str
    classes: tuple[str, ...]
    bounds: tuple[NaiveBayesBound, ...] = ()


@dataclass(frozen=True)
class NaiveBayesCategorical:
    feature: str
    categories: list[str]
    counts: list[list[float]]  # a row per class
    log_prob: list[list[float]]  # a row per class


@result_type
@dataclass(frozen=True, kw_only=True)
class NaiveBayesResult(RoundFacts, Result):
    wire: ClassVar[str] = "naive_bayes"
    protocol: str
    method: str
    label_column: str
    classes: list[str]
    numeric_features: list[str]
    categorical: list[NaiveBayesCategorical]
    class_count: list[float]
    class_prior: list[float]
    theta: dict[str, list[float]]
    var: dict[str, list[float]]
    var_smoothing: float
    epsilon: float
    alpha: float
    n: float
    bounds: dict[str, list[float]] | None = None
    floored: int = 0
    outside: str = ""
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per class: its count, prior, and the mean and variance of each numeric
        feature."""
        cols: dict[str, list] = {"count": list(self.class_count), "prior": list(self.class_prior)}
        for f in self.numeric_features:
            cols[f"mean({f})"] = list(self.theta[f])
            cols[f"var({f})"] = list(self.var[f])
        return cols, list(self.classes), self.label_column

    def joint_log_likelihood(self, rows: Mapping[str, Any]) -> np.ndarray:
        """log P(c) + log P(x | c) of every row (m x K): `rows` maps each feature to its
        values (a dict of arrays or a pandas DataFrame); categorical values are compared as
        text and must lie in their domain."""
        return joint_log_likelihood(self, rows)

    def predict_log_proba(self, rows: Mapping[str, Any]) -> np.ndarray:
        """log P(c | x) of every row (m x K), normalized with log-sum-exp."""
        jll = self.joint_log_likelihood(rows)
        top = jll.max(axis=1, keepdims=True)
        return jll - (top + np.log(np.exp(jll - top).sum(axis=1, keepdims=True)))

    def predict(self, rows: Mapping[str, Any]) -> list[str]:
        """The most likely class of every row (the first of the list among ties)."""
        jll = self.joint_log_likelihood(rows)
        return [self.classes[i] for i in np.argmax(jll, axis=1)]


@dataclass(frozen=True)
class NaiveBayesPlan:
    features: tuple[str, ...]
    domains: tuple[NaiveBayesDomain, ...]
    label_column: str
    classes: tuple[str, ...]
    var_smoothing: float
    alpha: float
    bounds: tuple[NaiveBayesBound, ...]  # DP: one per numeric feature, in order; else ()
    min_owners: int
    deadline_seconds: float
    encoding: ShareEncoding
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None
    label: str = PROTOCOL_NAME

    @property
    def layout(self) -> Layout:
        return Layout.of(self.features, self.domains, len(self.classes))


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
    def per_class(self) -> int:
        return 1 + 2 * len(self.numeric) + sum(len(d.values) for d in self.categorical)

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


# ------------------------------------------------------------------ the request


def _check_request(
    request: NaiveBayesRequest,
) -> tuple[tuple[str, ...], tuple[NaiveBayesDomain, ...], tuple[str, ...], float, float]:
    features = check_features(tuple(request.features), "classify on")
    label = request.label_column
    if not label:
        raise DataError("label_column is empty: name the class column", field="label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="label_column")
    classes = tuple(request.classes)
    if not classes:
        raise DataError(
            "classes is empty: the label's classes are a public list fixed before the round "
            "(--classes a,b,... or --domain LABEL=a,b,...)",
            field="classes",
        )
    if len(classes) < 2 or any(not c for c in classes) or len(set(classes)) != len(classes):
        raise DataError("classes must list at least 2 distinct, non-empty classes", field="classes")
    domains = []
    seen: set[str] = set()
    for d in request.domains:
        if d.name not in features:
            raise DataError(
                f"domain of '{d.name}', which is not a feature (list it in features)",
                field="domains",
            )
        if d.name in seen:
            raise DataError(f"feature '{d.name}' has more than one domain", field="domains")
        seen.add(d.name)
        values = tuple(d.values)
        if not values or any(not v for v in values) or len(set(values)) != len(values):
            raise DataError(
                f"the domain of '{d.name}' must list distinct, non-empty values",
                field="domains",
            )
        domains.append(NaiveBayesDomain(d.name, values))
    var_smoothing = (
        DEFAULT_VAR_SMOOTHING if request.var_smoothing is None else request.var_smoothing
    )
    if not (math.isfinite(var_smoothing) and var_smoothing >= 0):
        raise DataError(
            f"var_smoothing must be a finite number >= 0, got {var_smoothing}",
            field="var_smoothing",
        )
    alpha = DEFAULT_ALPHA if request.alpha is None else request.alpha
    if not (math.isfinite(alpha) and alpha > 0):
        raise DataError(f"alpha must be a positive number, got {alpha}", field="alpha")
    ordered = tuple(sorted(domains, key=lambda d: features.index(d.name)))
    layout = Layout.of(features, ordered, len(classes))
    if layout.n_values > MAX_VALUES:
        raise DataError(
            f"a share would hold {layout.n_values} values (classes x (1 + 2 numeric features + "
            f"categories)); at most {MAX_VALUES}: use fewer classes, features or categories",
            field="features",
        )
    return features, ordered, classes, float(var_smoothing), float(alpha)


def resolve_bounds(
    request: NaiveBayesRequest, numeric: Sequence[str], common: Common
) -> tuple[NaiveBayesBound, ...]:
    """DP: every numeric feature's clipping bounds, in order (the request's, else [-C, C]);
    without DP the request may give none (the value bound bounds every value)."""
    given: dict[str, NaiveBayesBound] = {}
    for b in request.bounds:
        if b.name not in numeric:
            raise DataError(
                f"bounds name '{b.name}', which is not a numeric feature", field="bounds"
            )
        if b.name in given:
            raise DataError(f"feature '{b.name}' has more than one bound", field="bounds")
        lo, hi = float(b.lower), float(b.upper)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DataError(
                f"the bounds of '{b.name}' must be finite with lower < upper, got [{lo}, {hi}]",
                field="bounds",
            )
        given[b.name] = NaiveBayesBound(b.name, lo, hi)
    if common.dp is None:
        if given:
            raise DataError(
                "bounds apply to DP rounds (the value bound bounds every value otherwise)",
                field="bounds",
            )
        return ()
    c = common.dp.row_norm_bound
    return tuple(given.get(f, NaiveBayesBound(f, -c, c)) for f in numeric)


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


# every standardized value is in [-1, 1]: the encoding's value bound of a DP round
DP_VALUE_BOUND = 1.0


def sensitivity(n_numeric: int, n_categorical: int, scale_bits: int) -> noise.Sensitivity:
    """L1/L2 sensitivity, in integer units, of one DP share when one row is added or removed
    (module docstring): the class count and one count per categorical feature move by
    F = 2^scale_bits exactly; S1_j and S2_j of the standardized u_j by at most F + 1 each."""
    f = float(2**scale_bits)
    counts = 1 + n_categorical
    l1 = counts * f + 2 * n_numeric * (f + 1.0)
    l2 = math.sqrt(counts * f * f + 2 * n_numeric * (f + 1.0) ** 2)
    return noise.Sensitivity(l1=l1, l2=l2)


# ------------------------------------------------------------------ owner side


@dataclass(frozen=True)
class LocalStats:
    count: np.ndarray  # K
    s1: np.ndarray  # K x d_num
    s2: np.ndarray  # K x d_num
    categories: list[np.ndarray]  # per categorical feature: K x V_j
    rows: int  # rows read


def local_statistics(
    table: SiteTable, spec: NaiveBayesSpec, value_bound: float, dp: bool
) -> LocalStats:
    """The zero-filled per-class statistics of one site's rows (module docstring's refusals:
    without DP, rule classes / bounds; with DP, rows outside dropped and values clipped)."""
    layout = Layout.of(spec.features, spec.domains, len(spec.classes))
    k = layout.k
    y, ok = _indices(_labels(table, spec.label_column), spec.classes)
    if not dp and not ok.all():
        _refuse_outside(spec.label_column, int((~ok).sum()), "classes")
    inside = ok
    cat_idx = []
    for d in layout.categorical:
        idx, ok_j = _indices(_labels(table, d.name), d.values)
        if not dp and not ok_j.all():
            _refuse_outside(d.name, int((~ok_j).sum()), "domain")
        inside = inside & ok_j
        cat_idx.append(idx)
    x = _numeric(table, layout.numeric, len(y))
    if dp:
        x = standardize(x, spec.bounds)
    else:
        top = np.abs(x).max(axis=0) if len(x) else np.zeros(len(layout.numeric))
        for name, t in zip(layout.numeric, top.tolist(), strict=True):
            if t > value_bound:
                raise DataError(
                    f"column '{name}' has a value beyond the round's value bound "
                    f"{value_bound:.6g}; raise the bound (--value-bound) or rescale the column",
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


def _labels(table: SiteTable, column: str) -> list[str]:
    try:
        return table.labels(column)
    except DataError as exc:  # a missing value
        raise DataError(str(exc), field=column, rule="values") from exc


def _indices(values: Sequence[str], domain: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
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
        "be declared (--classes / --domain)",
        field=column,
        rule="classes",
    )


def _numeric(table: SiteTable, names: Sequence[str], n_rows: int) -> np.ndarray:
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


def encode_statistics(stats: LocalStats, enc: ShareEncoding) -> list[int]:
    """Class-major: count, (S1, S2) per numeric feature, each categorical block; sums at
    2^scale_bits, counts at 2^count_scale_bits."""
    if stats.rows > enc.max_rows_per_owner:
        raise EncodingError(
            f"{stats.rows} rows exceed the round's max_rows_per_owner {enc.max_rows_per_owner}",
            rule="rows",
        )
    k, d = stats.s1.shape
    sums = np.empty((k, 2 * d))
    sums[:, 0::2], sums[:, 1::2] = stats.s1, stats.s2
    enc_sums = encode_fixed(sums, enc.scale_bits, enc.data_bound, "per-class sums")
    cs = enc.count_scale_bits
    out: list[int] = []
    for c in range(k):
        out.append(int(stats.count[c]) << cs)
        out.extend(enc_sums[c * 2 * d : (c + 1) * 2 * d])
        for block in stats.categories:
            out.extend(int(v) << cs for v in block[c])
    return out


# ------------------------------------------------------------------ aggregator side


@dataclass(frozen=True)
class Totals:
    """The pooled statistics as exact integers at their scales."""

    count: list[int]  # K, at 2^count_scale_bits
    s1: list[list[int]]  # K x d_num, at 2^scale_bits
    s2: list[list[int]]
    categories: list[list[list[int]]]  # per categorical feature: K x V_j, at 2^count_scale_bits


def split_totals(totals: Sequence[int], layout: Layout) -> Totals:
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
    return Totals(count, s1, s2, cats)


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
    t: Totals, enc: ShareEncoding, var_smoothing: float, alpha: float, classes: Sequence[str]
) -> Fit:
    """The model from exact totals (non-DP): variances in rational arithmetic, one rounding
    each: var = (n S2 F - S1^2) / (n^2 F^2), F = 2^scale_bits."""
    cs, f = enc.count_scale_bits, enc.scale_bits
    if any(v < 0 or v % (1 << cs) for v in t.count):
        raise ProtocolError("a class count is negative or not whole: corrupted aggregate")
    n = [v >> cs for v in t.count]
    empty = [c for c, m in zip(classes, n, strict=True) if m == 0]
    if empty:
        raise DataError(
            f"no pooled row has class(es) {empty[:5]}: a class needs rows for its mean and "
            "variance; leave it out of --classes",
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
    t: Totals,
    enc: ShareEncoding,
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
    cf, sf = float(1 << enc.count_scale_bits), float(1 << enc.scale_bits)
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


def joint_log_likelihood(result: NaiveBayesResult, rows: Mapping[str, Any]) -> np.ndarray:
    """log prior + sum of the Gaussian log densities + sum of the categorical log
    probabilities, per row and class (GaussianNB's and CategoricalNB's formulas)."""
    k = len(result.classes)
    with np.errstate(divide="ignore"):
        jll_prior = np.log(np.asarray(result.class_prior, dtype=np.float64))
    m = None
    parts = []
    if result.numeric_features:
        x = np.column_stack(
            [np.asarray(rows[f], dtype=np.float64) for f in result.numeric_features]
        )
        theta = np.array([result.theta[f] for f in result.numeric_features]).T  # K x d
        var = np.array([result.var[f] for f in result.numeric_features]).T
        m = len(x)
        gauss = -0.5 * np.sum(np.log(2.0 * np.pi * var), axis=1)[None, :]
        gauss = gauss - 0.5 * np.sum((x[:, None, :] - theta[None, :, :]) ** 2 / var, axis=2)
        parts.append(gauss)
    for table in result.categorical:
        values = [str(v) for v in np.asarray(rows[table.feature], dtype=object).tolist()]
        idx, ok = _indices(values, table.categories)
        if not ok.all():
            raise DataError(
                f"column '{table.feature}' has {int((~ok).sum())} value(s) outside its domain",
                field=table.feature,
            )
        m = len(idx)
        parts.append(np.asarray(table.log_prob, dtype=np.float64).T[idx])
    if m is None:
        raise DataError("the model has no feature", field="features")
    jll = np.broadcast_to(jll_prior, (m, k)).copy()
    for p in parts:
        jll += p
    return jll


def noise_preview(plan: NaiveBayesPlan, rows: int | None = None) -> dict:
    """What the noise of a DP round does to the model, from public parameters only.

    Every released value (class counts, S1, S2, category counts) carries noise of std sigma in
    real units (with the quorum's shares). At `rows` pooled rows split evenly over the K
    classes (n = rows / K per class), per numeric feature at the midpoint of its bounds with a
    standard deviation of a quarter of their width (theta_u = 0, m2_u = 1/4): the std of a
    class's mean (half x) and variance (half^2 x `mean_and_variance_errors`); per categorical
    feature at P = 1 / V: the std of P(v | c), sigma sqrt((V - 1) / V) / (n + alpha V).
    Checks: each class count against rows / K, each mean's error against half the bounds'
    width, each variance's against half^2, each category probability's against 1."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    layout = plan.layout
    doc |= {
        "classes": len(plan.classes),
        "values_per_share": layout.n_values,
        "bounds": {b.name: [b.lower, b.upper] for b in plan.bounds},
        "noise_std_per_value": sigma,
        "fixes": list(FIXES),
    }
    if rows is None:
        return doc
    if not rows > 0:
        raise DataError("rows must be positive", field="rows")
    n = rows / layout.k
    doc["assumed_rows"] = rows
    doc["assumed_rows_per_class"] = n
    checks = [SignalCheck("count of each class", sigma, n)]
    mean_std, var_std = {}, {}
    for b in plan.bounds:
        half = (b.upper - b.lower) / 2.0
        me, ve = mean_and_variance_errors(sigma, n, 0.0, 0.25)
        mean_std[b.name], var_std[b.name] = half * float(me), half * half * float(ve)
        checks.append(SignalCheck(f"mean of {b.name} per class", mean_std[b.name], half))
        checks.append(SignalCheck(f"variance of {b.name} per class", var_std[b.name], half**2))
    prob_std = {}
    for d in layout.categorical:
        v = len(d.values)
        prob_std[d.name] = sigma * math.sqrt((v - 1) / v) / (n + plan.alpha * v)
        checks.append(SignalCheck(f"P({d.name} = v | class)", prob_std[d.name], 1.0))
    doc["noise_std_of_means"] = mean_std
    doc["noise_std_of_variances"] = var_std
    doc["noise_std_of_category_probabilities"] = prob_std
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


# ------------------------------------------------------------------ the protocol


def spec_layout(spec: NaiveBayesSpec) -> Layout:
    """The share layout a spec defines, checked as its request would be (the owner's side)."""
    request = NaiveBayesRequest(
        features=tuple(spec.features),
        domains=tuple(spec.domains),
        label_column=spec.label_column,
        classes=tuple(spec.classes),
    )
    features, domains, classes, _, _ = _check_request(request)
    if tuple(domains) != tuple(spec.domains):
        raise ProtocolError("the spec's domains are not in the features' order")
    return Layout.of(features, domains, len(classes))


class NaiveBayesProtocol(FederatedProtocol):
    name = PROTOCOL_NAME
    request_type = NaiveBayesRequest
    spec_type = NaiveBayesSpec

    plot_file = "naive_bayes.png"

    def result_file(self, label: str) -> str | None:
        return "result.json" if label == self.name else None

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: NaiveBayesRequest, common: Common) -> NaiveBayesPlan:
        features, domains, classes, var_smoothing, alpha = _check_request(request)
        layout = Layout.of(features, domains, len(classes))
        bounds = resolve_bounds(request, layout.numeric, common)
        min_owners, deadline = common.quorum(), common.deadline()
        max_owners = common.n_invited  # the CSP sums at most one share of each invited owner
        dp, sens = None, None
        if common.dp is None:
            enc = moments_round.encoding(
                common.scale_bits or DEFAULT_SCALE_BITS,
                common.value_bound or DEFAULT_VALUE_BOUND,
                max_owners=max_owners,
            )
        else:
            # value_bound does not apply: values are clipped to their bounds, standardized
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            sens = sensitivity(len(layout.numeric), len(layout.categorical), f)
            dp, noise_bound = skellam_plan(common.dp, sens, min_owners, layout.n_values)
            enc = moments_round.encoding(
                f,
                DP_VALUE_BOUND,
                max_owners=max_owners,
                count_scale_bits=f,
                noise_bound=noise_bound,
            )
        return NaiveBayesPlan(
            features,
            domains,
            request.label_column,
            classes,
            var_smoothing,
            alpha,
            bounds,
            min_owners,
            deadline,
            enc,
            dp,
            sens,
        )

    def next_round(self, plan: NaiveBayesPlan, state: None, index: int) -> RoundPlan:
        spec = NaiveBayesSpec(
            plan.features, plan.domains, plan.label_column, plan.classes, plan.bounds
        )
        layout = plan.layout
        return RoundPlan(
            spec, plan.label, plan.encoding, layout.n_values, plan.dp, dimension=len(plan.features)
        )

    def finish_round(self, plan: NaiveBayesPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        layout = plan.layout
        totals = split_totals(outcome.require_totals(), layout)
        sigma = 0.0
        if plan.dp is None:
            fit = exact_fit(totals, plan.encoding, plan.var_smoothing, plan.alpha, plan.classes)
        else:
            sigma = plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits)
            fit = noisy_fit(
                totals, plan.encoding, plan.var_smoothing, plan.alpha, plan.bounds, sigma
            )
        outcome.timings["statistics_seconds"] = time.perf_counter() - start
        total = float(fit.class_count.sum())
        numeric = list(layout.numeric)
        return Step(
            NaiveBayesResult(
                protocol=self.name,
                method=METHOD,
                label_column=plan.label_column,
                classes=list(plan.classes),
                numeric_features=numeric,
                categorical=[
                    NaiveBayesCategorical(
                        d.name,
                        list(d.values),
                        counts.tolist(),
                        logp.tolist(),
                    )
                    for d, counts, logp in zip(
                        layout.categorical, fit.category_counts, fit.log_prob, strict=True
                    )
                ],
                class_count=fit.class_count.tolist(),
                class_prior=(fit.class_count / total).tolist(),
                theta={f: fit.theta[:, j].tolist() for j, f in enumerate(numeric)},
                var={f: fit.var[:, j].tolist() for j, f in enumerate(numeric)},
                var_smoothing=plan.var_smoothing,
                epsilon=fit.epsilon,
                alpha=plan.alpha,
                n=total,
                bounds={b.name: [b.lower, b.upper] for b in plan.bounds} or None,
                floored=fit.floored,
                outside=OUTSIDE_DROPPED if plan.dp is not None else OUTSIDE_REFUSED,
                **outcome.facts(),
                dp=self._dp_facts(plan, outcome.n_owners, sigma, outcome, total),
            )
        )

    @staticmethod
    def figures(plan: NaiveBayesPlan, totals: list[int], sigma: float) -> dict[str, float]:
        """The figures a DP model states: each class's rows, and the mean and variance of
        every numeric feature in it."""
        fit = noisy_fit(
            split_totals(totals, plan.layout),
            plan.encoding,
            plan.var_smoothing,
            plan.alpha,
            plan.bounds,
            sigma,
        )
        out: dict[str, float] = {}
        for i, c in enumerate(plan.classes):
            out[f"rows of class {c}"] = float(fit.class_count[i])
            for j, f in enumerate(plan.layout.numeric):
                out[f"mean of {f} in class {c}"] = float(fit.theta[i, j])
                out[f"variance of {f} in class {c}"] = float(fit.var[i, j])
        return out

    @staticmethod
    def _dp_facts(
        plan: NaiveBayesPlan, n_owners: int, sigma: float, outcome: Outcome, rows: float
    ) -> DpFacts | None:
        dp = plan.dp
        if dp is None or plan.sensitivity is None:
            return None
        truth = round_truth(
            dp,
            outcome,
            lambda t: NaiveBayesProtocol.figures(plan, t, sigma),
            rows,
            plan.encoding.count_scale_bits,
        )
        return dp_facts(
            "distributed Skellam noise on every per-class count, sum and sum of squares",
            dp,
            plan.sensitivity,
            truth,
            skellam_mu_aggregate=dp.aggregate_mu(n_owners),
            noise_std_per_value=sigma,
            post_processing="class counts at least 1, category counts at least 0; means "
            "of the standardized u = (x - mid) / half clamped to [-1, 1], mean squares to "
            f"[0, 1]; variances of u between {FLOOR_FACTOR:g} x their noise std and 1; then "
            "theta = mid + half theta_u, var = half^2 var_u + epsilon",
            note="numeric values clipped to their bounds and standardized to [-1, 1] at each "
            "owner; noise_std_per_value is in counts and in units of u; rows with a label or "
            "category outside the public lists dropped; every owner charged its ledger; "
            "row_norm_bound is the default bound [-C, C] of a numeric feature without one",
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: NaiveBayesSpec) -> list[str]:
        return [*spec.features, spec.label_column]

    def request_columns(self, request: NaiveBayesRequest) -> list[str]:
        return [*request.features, request.label_column]

    def dimension(self, spec: NaiveBayesSpec) -> int:
        return len(spec.features)

    def check(
        self, spec: NaiveBayesSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError("a naive Bayes round needs a plain encoding")
        layout = spec_layout(spec)
        require_bound(
            enc,
            moments_round.data_bound(
                enc.value_bound, enc.max_rows_per_owner, 0, enc.scale_bits, enc.count_scale_bits
            ),
        )
        if dp is None:
            if spec.bounds:
                raise ProtocolError("a non-DP naive Bayes round declares no clipping bounds")
            return
        if tuple(b.name for b in spec.bounds) != layout.numeric or any(
            not (math.isfinite(b.lower) and math.isfinite(b.upper) and b.lower < b.upper)
            for b in spec.bounds
        ):
            raise ProtocolError(
                "a DP naive Bayes round needs finite bounds lower < upper for every numeric "
                "feature, in order"
            )
        if enc.value_bound != DP_VALUE_BOUND:
            raise ProtocolError("a DP naive Bayes round encodes standardized values: bound 1")
        if site.uses_spark:
            raise DataError(
                'DP rounds are computed with the numpy engine only (engine = "spark" is set)'
            )
        require_same_count_scale(enc)
        verify_dp(dp, (), self.dp_sensitivity(spec, enc, dp), layout.n_values, enc)

    def dp_sensitivity(
        self, spec: NaiveBayesSpec, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a naive Bayes round needs a plain encoding")
        layout = spec_layout(spec)
        return sensitivity(len(layout.numeric), len(layout.categorical), enc.scale_bits)

    def describe(self, spec: NaiveBayesSpec, dp: DpSpec | None) -> str:
        layout = Layout.of(spec.features, spec.domains, len(spec.classes))
        return (
            f"naive Bayes of {spec.label_column} ({len(spec.classes)} classes) on "
            f"{len(layout.numeric)} numeric and {len(layout.categorical)} categorical feature(s)"
        )

    def share_values(
        self,
        spec: NaiveBayesSpec,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        table = site.read(self.columns(spec))
        stats = local_statistics(table, spec, enc.value_bound, dp is not None)
        timings["statistics_seconds"] = time.perf_counter() - start
        return encode_statistics(stats, enc)


PROTOCOL = registry.register(NaiveBayesProtocol())
