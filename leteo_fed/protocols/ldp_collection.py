"""LDP collection rounds (SPEC P4) as pure functions: plan, owner-side perturbation, wire
framing of report arrays, and the aggregator's streaming accumulator and estimate.

Every record is perturbed independently at its owner with the round's epsilon (per-record
epsilon-LDP); only the perturbed reports leave the site. The aggregator folds each chunk into
running support counts (frequency oracles) or sums (numeric mechanisms), so it never holds more
than one chunk of reports, then applies the mechanism's unbiased estimator and variance formula.
"""

from __future__ import annotations

import logging
import math
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
_OLH_SEED_SPACE = frequency.HASH_PRIME * (frequency.HASH_PRIME - 1)  # as FrequencyOracle.support


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


def is_multi(spec: pb.LdpSpec) -> bool:
    """Several numeric columns in one report per record (attribute sampling / Duchi multi-dim)."""
    return spec.mechanism in numeric.NUMERIC_MECHANISMS and len(spec.columns) > 1


def _multi_numeric_spec(request: pb.LdpRequest, spec: pb.LdpSpec) -> pb.LdpSpec:
    """One report per record covering every column, so each record is epsilon-LDP as a whole."""
    if len(request.columns) < 2:
        raise DataError("list at least 2 columns, or use column for one", field="columns")
    if request.HasField("lower") or request.HasField("upper"):
        raise DataError(
            "several columns take per-column bounds (box_lower, box_upper)", field="lower"
        )
    spec = _geo_spec(request, spec)  # same column and box validation
    numeric.make_numeric(spec.mechanism, spec.epsilon)
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
    if is_multi(spec):
        x = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise DataError("the columns have missing or non-finite values", field=spec.column)
        return np.column_stack(
            [
                numeric.to_unit(x[:, j], spec.box_lower[j], spec.box_upper[j])
                for j in range(x.shape[1])
            ]
        )
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
    if is_multi(spec):
        for start in range(0, len(encoded), CHUNK_REPORTS):
            yield numeric.perturb_multi(
                encoded[start : start + CHUNK_REPORTS], spec.epsilon, spec.mechanism, rng
            )
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


@dataclass(frozen=True)
class SpilledChunk:
    """A validated chunk written to a file (spill mode); its support is computed by Spark."""

    path: Path
    n: int


@dataclass
class Accumulator:
    """Running support (frequency) or sums (numeric) over every accepted report.

    By default every chunk is folded in memory with NumPy. In spill mode (a `spill_dir` given
    here or later through `spill`) `partial` validates each chunk just the same but writes it to
    a file in `spill_dir` and returns a `SpilledChunk`; `result` then adds the support of all
    folded chunk files, computed once with Spark (`leteo_fed.data.spark_ldp.spark_support`), to
    whatever was folded in memory before the switch. Geo rounds keep their points: no spill.
    The spill directory becomes the accumulator's: `cleanup` deletes it.
    """

    spec: pb.LdpSpec
    spill_dir: Path | None = None
    n: int = 0
    support: np.ndarray | None = None
    total: float = 0.0
    total_sq: float = 0.0
    points: list[np.ndarray] = field(default_factory=list)
    chunk_files: list[Path] = field(default_factory=list)
    _mech: object = field(default=None, repr=False)
    _declared: int = field(default=0, repr=False)
    _n_spilled: int = field(default=0, repr=False)
    _closed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self._mech = mechanism_for(self.spec)
        if is_frequency(self.spec.mechanism):
            self.support = np.zeros(len(self.spec.domain))
        if self.spill_dir is not None:
            spill_dir, self.spill_dir = Path(self.spill_dir), None
            if not self.spill(spill_dir):
                raise DataError("geo rounds keep their points and cannot spill to files")

    # ------------------------------------------------------------------ spill mode

    @property
    def can_spill(self) -> bool:
        return self.spec.mechanism != GEO and not is_multi(self.spec)

    @property
    def engine(self) -> str:
        """What `result` estimates with: "spark" once a chunk file has been folded."""
        return "spark" if self.chunk_files else "numpy"

    def declare(self, n_reports: int) -> int:
        """Add reports announced by a submission (negative: withdraw them); returns the total."""
        with self._lock:
            self._declared += n_reports
            return self._declared

    def spill(self, spill_dir: Path) -> bool:
        """Switch to spill mode, writing chunks under `spill_dir` (created). True if it switched
        now; False if already spilling (the first directory stays) or a geo round."""
        with self._lock:
            if self.spill_dir is not None or not self.can_spill or self._closed:
                return False
            spill_dir = Path(spill_dir)
            spill_dir.mkdir(parents=True, exist_ok=True)
            self.spill_dir = spill_dir
            return True

    def discard(self, parts: Sequence) -> None:
        """Delete the files of spilled parts that will never be folded (an aborted upload)."""
        for part in parts:
            if isinstance(part, SpilledChunk):
                part.path.unlink(missing_ok=True)

    def cleanup(self) -> None:
        """End of the round: delete the spill directory and refuse further spilled chunks."""
        with self._lock:
            self._closed = True
            spill_dir = self.spill_dir
        if spill_dir is not None:
            shutil.rmtree(spill_dir, ignore_errors=True)

    def _write(self, reports: np.ndarray, spill_dir: Path) -> SpilledChunk:
        from leteo_fed.data.spark_ldp import write_chunk  # pyspark only when spilling

        if self._closed:
            raise ProtocolError("the round is closed; reports refused")
        try:
            path = write_chunk(reports, spill_dir)
        except FileNotFoundError as exc:  # the round closed (and its files went) meanwhile
            if self._closed:
                raise ProtocolError("the round is closed; reports refused") from exc
            raise
        return SpilledChunk(path, len(reports))

    # ------------------------------------------------------------------ chunks

    def partial(
        self, reports: np.ndarray
    ) -> tuple[int, np.ndarray | None, float, float] | SpilledChunk:
        """What a chunk contributes; validated so a malformed chunk changes nothing.

        In spill mode the chunk is validated as strictly as `support` would (same refusals),
        then written to a file; the returned `SpilledChunk` names it.
        """
        n = len(reports)
        spill_dir = self.spill_dir
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
            if spill_dir is None:
                return n, np.asarray(self._mech.support(reports), dtype=np.float64), 0.0, 0.0
            if self.spec.mechanism == "olh":
                _check_olh_ranges(reports, self._mech.g)
            return self._write(reports, spill_dir)
        r = np.asarray(reports, dtype=np.float64)
        if is_multi(self.spec):
            if r.ndim != 2 or r.shape[1] != len(self.spec.columns) or not np.all(np.isfinite(r)):
                raise ProtocolError("reports must be one finite row per record over the columns")
            return n, None, r.sum(axis=0), np.square(r).sum(axis=0)
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise ProtocolError("numeric reports must be a 1-D array of finite values")
        if spill_dir is not None:
            return self._write(reports, spill_dir)
        return n, None, float(r.sum()), float(np.square(r).sum())

    def fold(self, part: tuple[int, np.ndarray | None, float, float] | SpilledChunk) -> None:
        if isinstance(part, SpilledChunk):
            with self._lock:
                self.chunk_files.append(part.path)
                self.n += part.n
                self._n_spilled += part.n
            return
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

    def _totals(self) -> tuple[np.ndarray | None, float, float]:
        """Support and sums over every folded chunk: in memory, plus the spilled ones via Spark."""
        if not self.chunk_files:
            return self.support, self.total, self.total_sq
        from leteo_fed.data.spark_ldp import spark_support

        n, contribution = spark_support(list(self.chunk_files), self.spec)
        if n != self._n_spilled:
            raise ProtocolError(
                f"the chunk files hold {n} reports, {self._n_spilled} were accepted"
            )
        if is_frequency(self.spec.mechanism):
            return self.support + contribution, 0.0, 0.0
        total, total_sq = contribution
        return None, self.total + total, self.total_sq + total_sq

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
        support, total, total_sq = self._totals()
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
            lo, hi = spec.lower, spec.upper
            half = (hi - lo) / 2
            doc["mean"] = float(numeric.from_unit(est.mean, lo, hi))
            doc["std_error"] = float(est.std_error * half)
            doc["bounds"] = [lo, hi]
            doc["estimator"] = "mean of unbiased reports, mapped back from [-1, 1]"
        return doc


def warm_spark() -> None:
    """Start the Spark session ahead of a spilled round's estimate (the JVM takes seconds).

    Best effort: a failure is logged here and raised again by the estimate itself.
    """
    try:
        from leteo_fed.data.spark_ldp import warm

        warm()
    except Exception:
        logging.getLogger("leteo.ldp").warning("could not start Spark", exc_info=True)


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
