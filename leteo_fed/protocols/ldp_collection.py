"""LDP collection rounds as pure functions: the public spec, owner-side perturbation, and the
aggregator's streaming accumulator and estimate.

Every record is perturbed independently at its owner with the round's epsilon (per-record
epsilon-LDP); only the perturbed reports leave the site. The aggregator folds each chunk into
running support counts (frequency oracles) or sums (numeric mechanisms), so it never holds more
than one chunk of reports, then applies the mechanism's unbiased estimator and variance formula.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp import frequency, geo, numeric
from leteo_fed.ldp.naive_bayes import LdpNaiveBayes
from leteo_fed.privacy.budget import check_epsilon

GEO = "geo"  # n-dimensional Laplace (planar for 2 columns): perturbed points, e.g. for clustering
MECHANISMS = (*frequency.FREQUENCY_MECHANISMS, *numeric.NUMERIC_MECHANISMS, GEO)
CHUNK_REPORTS = 65_536
MAX_POINTS = 1_000_000  # perturbed points are kept for the data user; refuse more
REPORT_DTYPES = frozenset({"<i4", "<i8", "|u1", "<f8"})  # what a report batch may carry
_OLH_SEED_SPACE = frequency.HASH_PRIME * (frequency.HASH_PRIME - 1)  # as FrequencyOracle.support
BOX_FITS = ("remap", "resample")  # geo: clip a report into the box, or redraw it (ldp/geo.py)
DEFAULT_BINS = 20  # geo: density grid bins per axis
MAX_BINS = 200
NB_ORACLES = ("grr", "oue", "olh")  # naive Bayes: frequency oracles whose reports carry a type
MAX_NB_FEATURES = 254  # the report type travels in the first byte of an OUE report


@dataclass(frozen=True)
class FeatureDomain:
    """One categorical feature of a naive Bayes round and its public values (LdpFeatureDomain)."""

    name: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NbConditional:
    """P(value | class) of one feature: a probability per value, in `values` order, per class."""

    values: tuple[str, ...]
    by_class: dict[str, list[float]]


@dataclass(frozen=True)
class LdpRequest:
    """What the data user asks (the wire's LdpRequest)."""

    column: str = ""
    mechanism: str = ""
    epsilon: float = 0.0
    domain: tuple[str, ...] = ()
    lower: float | None = None
    upper: float | None = None
    consistency: bool = False
    columns: tuple[str, ...] = ()
    box_lower: tuple[float, ...] = ()
    box_upper: tuple[float, ...] = ()
    box_fit: str = ""  # geo: remap (default) | resample
    bins: int = 0  # geo: density grid bins per axis (0: DEFAULT_BINS)
    label_column: str = ""  # set: an LDP naive Bayes round (mechanism is its frequency oracle)
    classes: tuple[str, ...] = ()
    features: tuple[FeatureDomain, ...] = ()


@dataclass(frozen=True)
class LdpSpec:
    """The public parameters every owner perturbs with (the wire's LdpSpec)."""

    column: str
    mechanism: str
    epsilon: float
    domain: tuple[str, ...] = ()
    lower: float = 0.0
    upper: float = 0.0
    theta: float = 0.0  # THE threshold (0 = mechanism default)
    olh_g: int = 0  # OLH hash range (0 = default)
    columns: tuple[str, ...] = ()
    box_lower: tuple[float, ...] = ()
    box_upper: tuple[float, ...] = ()
    box_fit: str = ""
    bins: int = 0
    label_column: str = ""
    classes: tuple[str, ...] = ()
    features: tuple[FeatureDomain, ...] = ()


def is_frequency(mechanism: str) -> bool:
    return mechanism in frequency.FREQUENCY_MECHANISMS


def spec_from_request(request: LdpRequest) -> LdpSpec:
    """Validate a data user's request into the public round parameters owners receive."""
    mech = request.mechanism
    if request.label_column:
        return _nb_spec(request)
    if request.classes or request.features:
        raise DataError(
            "classes and features are for naive Bayes: name its label_column", field="label_column"
        )
    if mech not in MECHANISMS:
        raise DataError(
            f"unknown mechanism {mech!r}; expected one of {MECHANISMS}", field="mechanism"
        )
    if not request.column:
        raise DataError("name the column to collect", field="column")
    eps = check_epsilon(request.epsilon)
    spec = LdpSpec(column=request.column, mechanism=mech, epsilon=eps)
    if mech == GEO:
        return _geo_fit(request, _geo_spec(request, spec))
    if request.box_fit or request.bins:
        raise DataError("box_fit and bins are for geo collections", field="box_fit")
    if request.columns and mech in numeric.NUMERIC_MECHANISMS:
        return _multi_numeric_spec(request, spec)
    if request.columns:
        raise DataError(
            f"{mech} collects one column; several columns are for 'geo' and numeric mechanisms",
            field="columns",
        )
    if is_frequency(mech):
        domain = list(request.domain)
        if len(domain) < 2 or len(set(domain)) != len(domain) or any(not v for v in domain):
            raise DataError(
                "a frequency oracle needs a public domain of >= 2 distinct values", field="domain"
            )
        if request.lower is not None or request.upper is not None:
            raise DataError(f"{mech} takes a domain, not bounds", field="lower")
        spec = replace(spec, domain=tuple(domain))
        frequency.make_oracle(mech, eps, len(domain))  # validates the combination
    else:
        if request.lower is None or request.upper is None:
            raise DataError(f"{mech} needs public bounds lower and upper", field="lower")
        lo, hi = request.lower, request.upper
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DataError(
                f"bounds must be finite with lower < upper, got [{lo}, {hi}]", field="lower"
            )
        if request.domain:
            raise DataError(f"{mech} takes bounds, not a domain", field="domain")
        if request.consistency:
            raise DataError(
                "consistency post-processing applies to frequency oracles", field="consistency"
            )
        spec = replace(spec, lower=lo, upper=hi)
        numeric.make_numeric(mech, eps)
    return spec


def is_multi(spec: LdpSpec) -> bool:
    """Several numeric columns in one report per record (attribute sampling / Duchi multi-dim)."""
    return spec.mechanism in numeric.NUMERIC_MECHANISMS and len(spec.columns) > 1


def _multi_numeric_spec(request: LdpRequest, spec: LdpSpec) -> LdpSpec:
    """One report per record covering every column, so each record is epsilon-LDP as a whole."""
    if len(request.columns) < 2:
        raise DataError("list at least 2 columns, or use column for one", field="columns")
    if request.lower is not None or request.upper is not None:
        raise DataError(
            "several columns take per-column bounds (box_lower, box_upper)", field="lower"
        )
    spec = _geo_spec(request, spec)  # same column and box validation
    numeric.make_numeric(spec.mechanism, spec.epsilon)
    return spec


def _geo_spec(request: LdpRequest, spec: LdpSpec) -> LdpSpec:
    """Points in a public box; epsilon is per unit of Euclidean distance (geo-indistinguishability)."""
    columns = list(request.columns) or [request.column]
    lo, hi = list(request.box_lower), list(request.box_upper)
    if len(set(columns)) != len(columns):
        raise DataError("columns contains duplicates", field="columns")
    if len(lo) != len(columns) or len(hi) != len(columns):
        raise DataError("geo needs box_lower and box_upper for every column", field="box_lower")
    if not all(
        math.isfinite(a) and math.isfinite(b) and a < b for a, b in zip(lo, hi, strict=True)
    ):
        raise DataError("box bounds must be finite with lower < upper", field="box_lower")
    if request.domain or request.consistency:
        raise DataError("geo takes columns and a box, not a domain", field="domain")
    return replace(
        spec, column=columns[0], columns=tuple(columns), box_lower=tuple(lo), box_upper=tuple(hi)
    )


def _geo_fit(request: LdpRequest, spec: LdpSpec) -> LdpSpec:
    """How reports are fitted into the box, and the density grid of the estimate."""
    fit = request.box_fit or "remap"
    if fit not in BOX_FITS:
        raise DataError(f"box_fit must be one of {BOX_FITS}, got {fit!r}", field="box_fit")
    bins = request.bins or DEFAULT_BINS
    if not 1 <= bins <= MAX_BINS:
        raise DataError(f"bins must be in [1, {MAX_BINS}], got {bins}", field="bins")
    return replace(spec, box_fit=fit, bins=bins)


def draw_epsilon(spec: LdpSpec) -> float:
    """The rate each geo draw uses: resampling until inside the box costs twice the rate of a
    draw (ldp/geo.py `resample_in_box`), so each draw takes epsilon / 2 and the report stays
    epsilon-geo-indistinguishable, as with remapping at epsilon."""
    return spec.epsilon / 2 if spec.box_fit == "resample" else spec.epsilon


def geo_noise_variance(spec: LdpSpec) -> float:
    """Each coordinate's noise variance before the box: the radius of m-D Laplace is
    Gamma(m, 1/e), so E[r^2] = m (m + 1) / e^2, shared equally by m coordinates."""
    return (len(spec.columns) + 1) / draw_epsilon(spec) ** 2


def _nb_spec(request: LdpRequest) -> LdpSpec:
    """LDP naive Bayes: one report per record, of a type drawn at random (ldp/naive_bayes.py)."""
    mech = request.mechanism
    if mech not in NB_ORACLES:
        raise DataError(
            f"naive Bayes reports through one of {NB_ORACLES}, got {mech!r}", field="mechanism"
        )
    if request.column or request.columns or request.domain:
        raise DataError(
            "naive Bayes takes label_column, classes and features (not column, columns or domain)",
            field="column",
        )
    if request.lower is not None or request.upper is not None or request.box_lower:
        raise DataError("naive Bayes takes categorical features, not bounds", field="lower")
    if request.box_fit or request.bins or request.consistency:
        raise DataError(
            "box_fit, bins and consistency do not apply to naive Bayes", field="box_fit"
        )
    if not request.features:
        raise DataError("naive Bayes needs at least one feature and its values", field="features")
    if len(request.features) > MAX_NB_FEATURES:
        raise DataError(f"at most {MAX_NB_FEATURES} features", field="features")
    names = [f.name for f in request.features]
    if len(set(names)) != len(names):
        raise DataError("features names a column twice", field="features")
    if request.label_column in names:
        raise DataError("the label column cannot also be a feature", field="label_column")
    eps = check_epsilon(request.epsilon)
    spec = LdpSpec(
        column=request.label_column,
        mechanism=mech,
        epsilon=eps,
        label_column=request.label_column,
        classes=tuple(request.classes),
        features=tuple(FeatureDomain(f.name, tuple(f.values)) for f in request.features),
    )
    naive_bayes_model(spec)  # validates the domains, classes and oracle
    return spec


def naive_bayes_model(spec: LdpSpec) -> LdpNaiveBayes:
    """The (unfitted) model a naive Bayes round's public parameters define."""
    return LdpNaiveBayes(
        spec.mechanism,
        spec.epsilon,
        {f.name: list(f.values) for f in spec.features},
        list(spec.classes),
    )


def is_naive_bayes(spec: LdpSpec) -> bool:
    return bool(spec.label_column)


def mechanism_for(spec: LdpSpec):
    """The frequency oracle or numeric mechanism a round's public parameters define (naive
    Bayes: its unfitted model, one oracle per report type)."""
    if is_naive_bayes(spec):
        return naive_bayes_model(spec)
    if is_frequency(spec.mechanism):
        return frequency.make_oracle(
            spec.mechanism,
            spec.epsilon,
            len(spec.domain),
            theta=spec.theta or None,
            g=spec.olh_g or None,
        )
    if spec.mechanism == GEO:
        return None
    return numeric.make_numeric(spec.mechanism, spec.epsilon)


# ------------------------------------------------------------------ owner side


def encode_column(values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
    """Frequency: domain indices (refusing values outside the domain). Numeric: [-1, 1]. Geo:
    the points themselves. A value beyond its public bounds or box is clipped to them, as the
    mechanisms define their input (it biases an estimate toward the bound, never the privacy);
    refusing it instead would tell the aggregator that the site holds such a value."""
    if is_multi(spec):
        x = _finite(values, spec.column, "the columns have missing or non-finite values")
        lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
        x = np.clip(x, lo, hi)
        return np.column_stack(
            [
                numeric.to_unit(x[:, j], spec.box_lower[j], spec.box_upper[j])
                for j in range(x.shape[1])
            ]
        )
    if spec.mechanism == GEO:
        x = _finite(values, spec.column, "the point columns have missing or non-finite values")
        return np.clip(x, np.asarray(spec.box_lower), np.asarray(spec.box_upper))
    if is_frequency(spec.mechanism):
        index = {v: i for i, v in enumerate(spec.domain)}
        codes = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            examples = sorted({str(values[i]) for i in bad[:1000]})[:5]
            raise DataError(
                f"column '{spec.column}' has {bad.size} value(s) outside the declared domain, "
                f"e.g. {', '.join(repr(v) for v in examples)}",
                field=spec.column,
                rule="classes",
            )
        return codes
    x = _finite(values, spec.column, f"column '{spec.column}' has missing or non-finite values")
    return numeric.to_unit(np.clip(x, spec.lower, spec.upper), spec.lower, spec.upper)


def _finite(values: Sequence | np.ndarray, column: str, problem: str) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise DataError(problem, field=column, rule="values")
    return x


def perturb_chunks(
    encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Per-record perturbation, CHUNK_REPORTS records at a time."""
    if spec.mechanism == GEO:
        lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
        for start in range(0, len(encoded), CHUNK_REPORTS):
            part = encoded[start : start + CHUNK_REPORTS]
            if spec.box_fit == "resample":  # each draw at epsilon / 2 (`draw_epsilon`)
                yield geo.resample_in_box(part, draw_epsilon(spec), lo, hi, rng)
                continue
            noisy = geo.nd_laplace(part, spec.epsilon, rng)
            yield geo.remap_to_box(noisy, lo, hi)  # post-processing: the guarantee holds
        return
    if is_multi(spec):
        for start in range(0, len(encoded), CHUNK_REPORTS):
            yield numeric.perturb_multi(
                encoded[start : start + CHUNK_REPORTS], spec.epsilon, spec.mechanism, rng
            )
        return
    oracle = mechanism_for(spec)
    for start in range(0, len(encoded), CHUNK_REPORTS):
        yield oracle.perturb(encoded[start : start + CHUNK_REPORTS], rng)


# ------------------------------------------------------------------ aggregator side


# (reports, support or points or None, total, total of squares) of one chunk
Contribution = tuple[int, np.ndarray | None, Any, Any]


@dataclass
class Accumulator:
    """Running support (frequency) or sums (numeric) over every accepted report.

    Every chunk is validated before it is folded, so a malformed chunk changes nothing; the
    accumulator never holds more than the running totals (geo rounds keep their points).
    Contributions computed elsewhere (e.g. with Spark, from spilled chunk files that passed
    `check`) are added with `add`.
    """

    spec: LdpSpec
    n: int = 0
    support: np.ndarray | None = None
    total: Any = 0.0  # a float, or a vector for multi-column rounds
    total_sq: Any = 0.0
    points: list[np.ndarray] = field(default_factory=list)
    engine: str = "numpy"  # "spark" once a contribution computed with Spark was added
    _mech: Any = field(default=None, repr=False)  # the oracle or numeric mechanism

    def __post_init__(self) -> None:
        self._mech = mechanism_for(self.spec)
        if is_frequency(self.spec.mechanism):
            self.support = np.zeros(len(self.spec.domain))

    @property
    def keeps_points(self) -> bool:
        """Geo and multi-column rounds keep points or vectors: no per-chunk file estimate."""
        return self.spec.mechanism == GEO or is_multi(self.spec)

    def check(self, reports: np.ndarray) -> None:
        """The refusals of `partial`, without computing anything (for chunks folded later)."""
        if is_frequency(self.spec.mechanism):
            check_reports(reports, self.spec)
            if self.spec.mechanism == "olh":
                _check_olh_ranges(reports, self._mech.g)
            return
        r = np.asarray(reports, dtype=np.float64)
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise ProtocolError("numeric reports must be a 1-D array of finite values")

    def partial(self, reports: np.ndarray) -> Contribution:
        """What a chunk contributes; validated so a malformed chunk changes nothing."""
        n = len(reports)
        if self.spec.mechanism == GEO:
            lo, hi = np.asarray(self.spec.box_lower), np.asarray(self.spec.box_upper)
            ok = reports.ndim == 2 and reports.shape[1] == len(lo) and reports.dtype == np.float64
            if not ok or not np.all((reports >= lo) & (reports <= hi)):
                raise ProtocolError("geo reports must be points inside the public box")
            if self.n + n > MAX_POINTS:  # checked before anything is folded
                raise ProtocolError(f"more than {MAX_POINTS} points in one round")
            return n, reports.copy(), 0.0, 0.0
        if is_frequency(self.spec.mechanism):
            check_reports(reports, self.spec)
            return n, np.asarray(self._mech.support(reports), dtype=np.float64), 0.0, 0.0
        r = np.asarray(reports, dtype=np.float64)
        if is_multi(self.spec):
            if r.ndim != 2 or r.shape[1] != len(self.spec.columns) or not np.all(np.isfinite(r)):
                raise ProtocolError("reports must be one finite row per record over the columns")
            return n, None, r.sum(axis=0), np.square(r).sum(axis=0)
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise ProtocolError("numeric reports must be a 1-D array of finite values")
        return n, None, float(r.sum()), float(np.square(r).sum())

    def fold(self, part: Contribution) -> None:
        n, support, total, total_sq = part
        self.n += n
        if self.spec.mechanism == GEO:
            if support is not None:
                self.points.append(support)
            return
        if support is not None and self.support is not None:
            self.support = self.support + support
        self.total = self.total + total
        self.total_sq = self.total_sq + total_sq

    def add(self, n: int, contribution, engine: str) -> None:
        """Fold a contribution computed elsewhere: a support vector, or (total, total_sq)."""
        if is_frequency(self.spec.mechanism):
            self.fold((n, np.asarray(contribution, dtype=np.float64), 0.0, 0.0))
        else:
            total, total_sq = contribution
            self.fold((n, None, total, total_sq))
        self.engine = engine

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        doc = {
            "protocol": "ldp",
            "mechanism": spec.mechanism,
            "epsilon": spec.epsilon,
            "column": spec.column,
            "n": self.n,
        }
        if self.n < 1:
            raise DataError("no reports were collected")
        if spec.mechanism == GEO:
            doc["columns"] = list(spec.columns)
            doc["box"] = [list(spec.box_lower), list(spec.box_upper)]
            points = np.vstack(self.points)
            doc["points"] = points.tolist()
            doc.update(geo_estimate(points, spec))
            doc["engine"] = "numpy"
            return doc
        support, total, total_sq = self.support, self.total, self.total_sq
        doc["engine"] = self.engine
        if is_frequency(spec.mechanism):
            est = self._mech.estimate(support, self.n)
            doc["estimates"] = dict(zip(spec.domain, map(float, est.counts), strict=True))
            doc["std_errors"] = dict(zip(spec.domain, map(float, est.std_error), strict=True))
            doc["estimator"] = (
                "unbiased (c_i - n q) / (p - q); variance: exact formula of Wang et al. (2017)"
            )
            if consistency:
                doc["consistent_estimates"] = dict(
                    zip(spec.domain, map(float, self._mech.consistent(est)), strict=True)
                )
                doc["consistency"] = "non-negative, summing to n (post-processing; not unbiased)"
        else:
            if is_multi(spec):
                k = len(spec.columns)
                est = self._mech.estimate(total, total_sq, self.n, d=k)
                lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
                means = [
                    numeric.from_unit(float(m), a, b)
                    for m, a, b in zip(est.mean, lo, hi, strict=True)
                ]
                ses = np.asarray(est.std_error) * (hi - lo) / 2
                doc["columns"] = list(spec.columns)
                doc["means"] = dict(zip(spec.columns, map(float, means), strict=True))
                doc["std_errors"] = dict(zip(spec.columns, map(float, ses), strict=True))
                doc["bounds"] = [list(spec.box_lower), list(spec.box_upper)]
                doc["estimator"] = (
                    "one report per record over all columns (attribute sampling for pm/hm, "
                    "Duchi's multi-dimensional mechanism, Laplace with scale 2k/epsilon); column "
                    "means of unbiased reports, mapped back from [-1, 1]"
                )
                return doc
            est = self._mech.estimate(total, total_sq, self.n)
            lower, upper = spec.lower, spec.upper
            half = (upper - lower) / 2
            doc["mean"] = float(numeric.from_unit(est.mean, lower, upper))
            doc["std_error"] = float(est.std_error * half)
            doc["bounds"] = [lower, upper]
            doc["estimator"] = "mean of unbiased reports, mapped back from [-1, 1]"
        return doc


def geo_estimate(points: np.ndarray, spec: LdpSpec) -> dict:
    """The mean report with its standard error from theory, and the reports' density grid over
    the box: the joint bins x bins histogram for 2 columns, each column's marginal otherwise."""
    n, m = points.shape
    edges = [
        np.linspace(a, b, spec.bins + 1)
        for a, b in zip(spec.box_lower, spec.box_upper, strict=True)
    ]
    if m == 2:
        grid, _, _ = np.histogram2d(points[:, 0], points[:, 1], bins=[edges[0], edges[1]])
        kind, density = "joint", grid.tolist()
    else:
        kind = "marginals"
        density = [
            np.histogram(points[:, j], bins=edges[j])[0].astype(float).tolist() for j in range(m)
        ]
    se = math.sqrt(geo_noise_variance(spec) / n)
    return {
        "box_fit": spec.box_fit,
        "mean": points.mean(axis=0).tolist(),
        "std_errors": [se] * m,
        "bins": spec.bins,
        "bin_edges": [e.tolist() for e in edges],
        "density_kind": kind,
        "density": density,
        "estimator": (
            f"{m}-dimensional Laplace points (epsilon per unit of Euclidean distance), "
            + (
                "remapped into"
                if spec.box_fit == "remap"
                else "each drawn at epsilon/2 until inside"
            )
            + " the public box; the mean report estimates the pooled mean location, standard "
            "error sqrt((m + 1) / (e^2 n)) per coordinate from the noise alone (the box only "
            "shrinks it, biasing toward the box); density: report counts per bin"
        ),
    }


# (reports, {report type: (support, reports of that type)}, 0, 0) of one chunk
NbContribution = tuple[int, dict[str, tuple[np.ndarray, int]], float, float]


@dataclass
class NbAccumulator:
    """Per report type, the running support of a naive Bayes round's reports.

    A report is one row: its type (0 = the prior, i = feature i) then the oracle's report of
    that type: GRR (type, value), OLH (type, seed, hashed value), OUE (type, bits..., zero
    padding to the widest type) as uint8. Chunks are validated before they are folded; only
    the supports are kept (so there is nothing to spill to Spark).
    """

    spec: LdpSpec
    n: int = 0
    engine: str = "numpy"
    supports: dict[str, np.ndarray] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    _model: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._model = naive_bayes_model(self.spec)

    keeps_points = True  # no per-chunk file estimate: supports per type are kept in memory

    def check(self, reports: np.ndarray) -> None:
        self.partial(reports)

    def partial(self, reports: np.ndarray) -> NbContribution:
        model: LdpNaiveBayes = self._model
        types = model.report_types
        r = np.asarray(reports)
        width = {"grr": 2, "olh": 3}.get(self.spec.mechanism)
        if width is None:  # oue
            width = 1 + max(o.d for o in model.oracles.values())
            ok = r.dtype == np.uint8 and r.ndim == 2 and r.shape[1] == width
        else:
            ok = r.ndim == 2 and r.shape[1] == width and np.issubdtype(r.dtype, np.integer)
        if not ok:
            raise ProtocolError(
                f"naive Bayes {self.spec.mechanism} reports must be rows of {width} integers "
                "(the report type first)"
            )
        kind = r[:, 0].astype(np.int64)
        if r.size and (kind.min() < 0 or kind.max() >= len(types)):
            raise ProtocolError(f"a naive Bayes report type outside [0, {len(types)})")
        parts: dict[str, tuple[np.ndarray, int]] = {}
        for t, rtype in enumerate(types):
            rows = r[kind == t, 1:]
            oracle = model.oracles[rtype]
            if self.spec.mechanism == "grr":
                values = rows[:, 0].astype(np.int64)
                if values.size and (values.min() < 0 or values.max() >= oracle.d):
                    raise ProtocolError(f"a {rtype} report outside [0, {oracle.d})")
                support = oracle.support(values)
            elif self.spec.mechanism == "olh":
                support = oracle.support(rows.astype(np.int64))  # checks seeds and ranges
            else:
                if rows.size and (rows.max() > 1 or np.any(rows[:, oracle.d :])):
                    raise ProtocolError(f"a {rtype} report that is not {oracle.d} bits")
                support = oracle.support(np.ascontiguousarray(rows[:, : oracle.d]))
            parts[rtype] = (np.asarray(support, dtype=np.float64), int(rows.shape[0]))
        return len(r), parts, 0.0, 0.0

    def fold(self, part: NbContribution) -> None:
        n, parts, _, _ = part
        self.n += n
        for rtype, (support, count) in parts.items():
            self.supports[rtype] = self.supports.get(rtype, 0.0) + support
            self.counts[rtype] = self.counts.get(rtype, 0) + count

    def add(self, n: int, contribution, engine: str) -> None:
        raise ProtocolError("naive Bayes rounds keep their supports in memory")

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        if self.n < 1:
            raise DataError("no reports were collected")
        model: LdpNaiveBayes = self._model
        model.fit_from_reports(
            (t, self.supports.get(t, np.zeros(model.oracles[t].d)), self.counts.get(t, 0))
            for t in model.report_types
        )
        classes = list(spec.classes)
        prior = np.exp(model.class_log_prior_)  # type: ignore[arg-type]
        conditionals = {}
        for f in spec.features:
            table = model.conditional(f.name)  # (values, classes)
            conditionals[f.name] = NbConditional(
                f.values, {c: table[:, j].tolist() for j, c in enumerate(classes)}
            )
        return {
            "protocol": "ldp",
            "mechanism": spec.mechanism,
            "epsilon": spec.epsilon,
            "column": spec.label_column,
            "n": self.n,
            "engine": self.engine,
            "estimator": (
                "one report per record, its type (the prior or one feature) drawn uniformly; "
                "unbiased counts per type scaled by N / n_type, floored at 1 and normalised "
                "(Yilmaz et al. 2020)"
            ),
            "classes": classes,
            "features": [f.name for f in spec.features],
            "priors": dict(zip(classes, map(float, prior), strict=True)),
            "conditionals": conditionals,
            "report_counts": {t: int(self.counts.get(t, 0)) for t in model.report_types},
        }


def nb_report_rows(spec: LdpSpec, per_type: list[tuple[str, np.ndarray]], rng) -> np.ndarray:
    """The owner's wire form of `LdpNaiveBayes.client_reports`: one row per record, its type
    first (see NbAccumulator), rows shuffled so their order says nothing about the records'."""
    model = naive_bayes_model(spec)
    width = 1 + max(o.d for o in model.oracles.values())
    blocks = []
    for t, (_, reports) in enumerate(per_type):
        r = np.asarray(reports)
        if spec.mechanism == "oue":
            block = np.zeros((len(r), width), dtype=np.uint8)
            block[:, 0] = t
            if len(r):
                block[:, 1 : 1 + r.shape[1]] = r
        else:
            body = r.reshape(len(r), -1).astype(np.int64)
            block = np.column_stack([np.full(len(r), t, dtype=np.int64), body])
        blocks.append(block)
    out = np.concatenate(blocks)
    return out[rng.permutation(len(out))]


def nb_predict(result: dict, rows: dict[str, Sequence[str]]) -> list[str]:
    """Classify rows {feature: values} with a naive Bayes result document (argmax of the log
    prior plus the log conditionals); a value outside a feature's domain is a DataError."""
    classes = list(result["classes"])
    jll = np.log(np.array([result["priors"][c] for c in classes]))[None, :]
    total = None
    for name in result["features"]:
        cond = result["conditionals"][name]
        if isinstance(cond, NbConditional):  # the accumulator's document, before JSON
            cond = {"values": cond.values, "by_class": cond.by_class}
        index = {v: i for i, v in enumerate(cond["values"])}
        if name not in rows:
            raise DataError(f"the rows lack feature column {name!r}", field=name)
        codes = np.array([index.get(str(v), -1) for v in rows[name]], dtype=np.int64)
        if np.any(codes < 0):
            bad = next(str(v) for v, c in zip(rows[name], codes, strict=True) if c < 0)
            raise DataError(f"column {name!r}: value {bad!r} is not in its domain", field=name)
        table = np.log(np.array([cond["by_class"][c] for c in classes]).T)  # (values, classes)
        part = table[codes]
        total = part if total is None else total + part
    scores = jll if total is None else total + jll
    return [classes[i] for i in np.argmax(scores, axis=1)]


def _check_olh_ranges(reports: np.ndarray, g: int) -> None:
    """The range checks of `FrequencyOracle.support` for OLH, without hashing (spill mode)."""
    if not reports.size:
        return
    r = reports.astype(np.int64, copy=False)
    seeds, y = r[:, 0], r[:, 1]
    if seeds.min() < 0 or seeds.max() >= _OLH_SEED_SPACE:
        raise DataError("OLH report with an invalid hash seed", field="reports")
    if y.min() < 0 or y.max() >= g:
        raise DataError(f"OLH report outside [0, {g})", field="reports")


def check_reports(reports: np.ndarray, spec: LdpSpec) -> None:
    d, mech = len(spec.domain), spec.mechanism
    if mech == "grr":
        ok = (
            reports.ndim == 1
            and np.issubdtype(reports.dtype, np.integer)
            and (reports.size == 0 or (reports.min() >= 0 and reports.max() < d))
        )
    elif mech in ("sue", "oue", "the"):
        ok = (
            reports.ndim == 2
            and reports.shape[1] == d
            and reports.dtype == np.uint8
            and (reports.size == 0 or reports.max() <= 1)
        )
    elif mech == "she":
        ok = reports.ndim == 2 and reports.shape[1] == d and bool(np.all(np.isfinite(reports)))
    else:  # olh: (seed, hashed value)
        ok = (
            reports.ndim == 2 and reports.shape[1] == 2 and np.issubdtype(reports.dtype, np.integer)
        )
    if not ok:
        raise ProtocolError(f"reports do not have the shape or range of {mech} over {d} values")
