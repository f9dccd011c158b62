"""LDP collection rounds (SPEC P4) as pure functions: plan, owner-side perturbation, wire
framing of report arrays, and the aggregator's streaming accumulator and estimate.

Every record is perturbed independently at its owner with the round's epsilon (per-record
epsilon-LDP); only the perturbed reports leave the site. The aggregator folds each chunk into
running support counts (frequency oracles) or sums (numeric mechanisms), so it never holds more
than one chunk of reports, then applies the mechanism's unbiased estimator and variance formula.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp import frequency, geo, numeric
from leteo_fed.proto import leteo_pb2 as pb

GEO = "geo"  # n-dimensional Laplace (planar for 2 columns): perturbed points, e.g. for clustering
MECHANISMS = (*frequency.FREQUENCY_MECHANISMS, *numeric.NUMERIC_MECHANISMS, GEO)
CHUNK_REPORTS = 65_536
MAX_POINTS = 1_000_000  # perturbed points are kept for the data user; refuse more
MAX_EPSILON = 50.0
_DTYPES = {"<i4", "<i8", "|u1", "<f8"}


def is_frequency(mechanism: str) -> bool:
    return mechanism in frequency.FREQUENCY_MECHANISMS


def spec_from_request(request: pb.LdpRequest) -> pb.LdpSpec:
    """Validate a data user's request into the public round parameters owners receive."""
    mech = request.mechanism
    if mech not in MECHANISMS:
        raise DataError(
            f"unknown mechanism {mech!r}; expected one of {MECHANISMS}", field="mechanism"
        )
    if not request.column:
        raise DataError("name the column to collect", field="column")
    eps = request.epsilon
    if not (math.isfinite(eps) and 0 < eps <= MAX_EPSILON):
        raise DataError(f"epsilon must be in (0, {MAX_EPSILON:g}], got {eps}", field="epsilon")
    spec = pb.LdpSpec(column=request.column, mechanism=mech, epsilon=eps)
    if mech == GEO:
        return _geo_spec(request, spec)
    if request.columns:
        raise DataError(
            f"{mech} collects one column; several columns are for 'geo'", field="columns"
        )
    if is_frequency(mech):
        domain = list(request.domain)
        if len(domain) < 2 or len(set(domain)) != len(domain) or any(not v for v in domain):
            raise DataError(
                "a frequency oracle needs a public domain of >= 2 distinct values", field="domain"
            )
        if request.HasField("lower") or request.HasField("upper"):
            raise DataError(f"{mech} takes a domain, not bounds", field="lower")
        spec.domain.extend(domain)
        frequency.make_oracle(mech, eps, len(domain))  # validates the combination
    else:
        if not (request.HasField("lower") and request.HasField("upper")):
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
        spec.lower, spec.upper = lo, hi
        numeric.make_numeric(mech, eps)
    return spec


def _geo_spec(request: pb.LdpRequest, spec: pb.LdpSpec) -> pb.LdpSpec:
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
    spec.column = columns[0]
    spec.columns.extend(columns)
    spec.box_lower.extend(lo)
    spec.box_upper.extend(hi)
    return spec


def mechanism_for(spec: pb.LdpSpec):
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


# ------------------------------------------------------------------ owner side


def encode_column(values: Sequence, spec: pb.LdpSpec) -> np.ndarray:
    """Frequency: domain indices (refusing values outside the domain). Numeric: [-1, 1].
    Geo: the points themselves, refusing any outside the public box."""
    if spec.mechanism == GEO:
        x = np.asarray(values, dtype=np.float64)
        lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
        if not np.all(np.isfinite(x)):
            raise DataError(
                "the point columns have missing or non-finite values", field=spec.column
            )
        outside = (x < lo) | (x > hi)
        if outside.any():
            j = int(np.flatnonzero(outside.any(axis=0))[0])
            raise DataError(
                f"column '{spec.columns[j]}' has {int(outside[:, j].sum())} value(s) outside the "
                f"public box [{lo[j]:g}, {hi[j]:g}]",
                field=spec.columns[j],
            )
        return x
    if is_frequency(spec.mechanism):
        index = {v: i for i, v in enumerate(spec.domain)}
        codes = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
        bad = np.flatnonzero(codes < 0)
        if bad.size:
            outside = sorted({str(values[i]) for i in bad[:1000]})[:5]
            raise DataError(
                f"column '{spec.column}' has {bad.size} value(s) outside the declared domain, "
                f"e.g. {', '.join(repr(v) for v in outside)}",
                field=spec.column,
            )
        return codes
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise DataError(
            f"column '{spec.column}' has missing or non-finite values", field=spec.column
        )
    return numeric.to_unit(x, spec.lower, spec.upper)


def perturb_chunks(
    encoded: np.ndarray, spec: pb.LdpSpec, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Per-record perturbation, CHUNK_REPORTS records at a time."""
    if spec.mechanism == GEO:
        lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
        for start in range(0, len(encoded), CHUNK_REPORTS):
            noisy = geo.nd_laplace(encoded[start : start + CHUNK_REPORTS], spec.epsilon, rng)
            yield geo.remap_to_box(noisy, lo, hi)  # post-processing: the guarantee holds
        return
    oracle = mechanism_for(spec)
    for start in range(0, len(encoded), CHUNK_REPORTS):
        yield oracle.perturb(encoded[start : start + CHUNK_REPORTS], rng)


def to_batch(reports: np.ndarray) -> pb.ReportBatch:
    arr = np.ascontiguousarray(reports)
    return pb.ReportBatch(data=arr.tobytes(), dtype=arr.dtype.str, shape=list(arr.shape))


def from_batch(msg: pb.ReportBatch) -> np.ndarray:
    if msg.dtype not in _DTYPES:
        raise ProtocolError(f"report dtype {msg.dtype!r} is not accepted")
    dtype = np.dtype(msg.dtype)
    shape = tuple(int(s) for s in msg.shape)
    if not shape or math.prod(shape) * dtype.itemsize != len(msg.data):
        raise ProtocolError("report batch size does not match its shape")
    return np.frombuffer(msg.data, dtype=dtype).reshape(shape)


# ------------------------------------------------------------------ aggregator side


@dataclass
class Accumulator:
    """Running support (frequency) or sums (numeric) over every accepted report."""

    spec: pb.LdpSpec
    n: int = 0
    support: np.ndarray | None = None
    total: float = 0.0
    total_sq: float = 0.0
    _mech: object = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._mech = mechanism_for(self.spec)
        if is_frequency(self.spec.mechanism):
            self.support = np.zeros(len(self.spec.domain))

    points: list[np.ndarray] = field(default_factory=list)

    def partial(self, reports: np.ndarray) -> tuple[int, np.ndarray | None, float, float]:
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
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise ProtocolError("numeric reports must be a 1-D array of finite values")
        return n, None, float(r.sum()), float(np.square(r).sum())

    def fold(self, part: tuple[int, np.ndarray | None, float, float]) -> None:
        n, support, total, total_sq = part
        if self.spec.mechanism == GEO:
            self.points.append(support)
            self.n += n
            return
        self.n += n
        if support is not None:
            self.support = self.support + support
        self.total += total
        self.total_sq += total_sq

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
            return doc
        if is_frequency(spec.mechanism):
            est = self._mech.estimate(self.support, self.n)
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
            est = self._mech.estimate(self.total, self.total_sq, self.n)
            lo, hi = spec.lower, spec.upper
            half = (hi - lo) / 2
            doc["mean"] = float(numeric.from_unit(est.mean, lo, hi))
            doc["std_error"] = float(est.std_error * half)
            doc["bounds"] = [lo, hi]
            doc["estimator"] = "mean of unbiased reports, mapped back from [-1, 1]"
        return doc


def check_reports(reports: np.ndarray, spec: pb.LdpSpec) -> None:
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
