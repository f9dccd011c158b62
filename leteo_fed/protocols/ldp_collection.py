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
from leteo_fed.privacy.budget import check_epsilon
from leteo_fed.privacy.noise_gate import LOCAL_FIXES, SignalCheck

GEO = "geo"  # n-dimensional Laplace (planar for 2 columns): perturbed points, e.g. for clustering
MECHANISMS = (*frequency.FREQUENCY_MECHANISMS, *numeric.NUMERIC_MECHANISMS, GEO)
CHUNK_REPORTS = 65_536
MAX_POINTS = 1_000_000  # perturbed points are kept for the data user; refuse more
REPORT_DTYPES = frozenset({"<i4", "<i8", "|u1", "<f8"})  # what a report batch may carry
_OLH_SEED_SPACE = frequency.HASH_PRIME * (frequency.HASH_PRIME - 1)  # as FrequencyOracle.support


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


def is_frequency(mechanism: str) -> bool:
    return mechanism in frequency.FREQUENCY_MECHANISMS


def spec_from_request(request: LdpRequest) -> LdpSpec:
    """Validate a data user's request into the public round parameters owners receive."""
    mech = request.mechanism
    if mech not in MECHANISMS:
        raise DataError(
            f"unknown mechanism {mech!r}; expected one of {MECHANISMS}", field="mechanism"
        )
    if not request.column:
        raise DataError("name the column to collect", field="column")
    eps = check_epsilon(request.epsilon)
    spec = LdpSpec(column=request.column, mechanism=mech, epsilon=eps)
    if mech == GEO:
        return _geo_spec(request, spec)
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


def mechanism_for(spec: LdpSpec):
    """The frequency oracle or numeric mechanism a round's public parameters define."""
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


def noise_preview(spec: LdpSpec, rows: int | None = None, quorum: int = 1) -> dict:
    """What the local noise does to the estimates, from public parameters only.

    A frequency oracle's estimate of a value's share f has variance Var*/n (q*(1-q*)/(p*-q*)^2
    per report, dropping the n_i term: exact for rare values, a slight overestimate otherwise);
    a numeric mechanism's mean has at most its worst-case report variance / n, times the half
    range squared once mapped back from [-1, 1]. n is the number of reports (one per row).
    """
    mech = mechanism_for(spec)
    if mech is None or is_multi(spec):
        raise DataError("the noise preview covers one-column LDP collections", field="mechanism")
    doc: dict = {
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "quorum": quorum,
        "fixes": list(LOCAL_FIXES),
    }
    if is_frequency(spec.mechanism):
        per_report = mech.theoretical_variance_per_user()
        doc["variance_per_report"] = per_report
        if rows is None:
            return doc
        std = math.sqrt(per_report / rows)
        doc["frequency_std_error"] = std
        doc["count_std_error"] = std * rows
        checks = [SignalCheck("frequency of a value", std, 1.0)]
    else:
        half = (spec.upper - spec.lower) / 2  # numeric: the bounds are set
        per_report = mech.worst_case_variance() * half * half
        doc["variance_per_report"] = per_report
        if rows is None:
            return doc
        std = math.sqrt(per_report / rows)
        doc["mean_std_error"] = std
        checks = [SignalCheck("mean", std, half)]
    doc["rows"] = rows
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


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
            noisy = geo.nd_laplace(encoded[start : start + CHUNK_REPORTS], spec.epsilon, rng)
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
            doc["points"] = np.vstack(self.points).tolist()
            doc["estimator"] = (
                "none: n-dimensional Laplace perturbed points, remapped into the public box "
                "(epsilon per unit of Euclidean distance)"
            )
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
