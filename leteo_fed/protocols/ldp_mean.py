"""Numeric means as a report statistic: the mean of a bounded column, or of several at once.

One column: each owner clips its values to the public bounds [lower, upper], maps them to
[-1, 1] and perturbs each with the round's numeric mechanism (Laplace, Duchi, PM, HM;
`leteo_fed.ldp.numeric`); the aggregator sums the unbiased reports and their squares (Spark can
sum spilled batches) and maps the mean back. Several columns (`columns` with per-column box
bounds): one report per record covers every column (attribute sampling for PM/HM, Duchi's
multi-dimensional mechanism, Laplace at 2k/epsilon), so each record is epsilon-LDP as a whole;
the aggregator keeps the column sums in memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp import numeric
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols.ldp_noise import Expectation, finish, per_column
from leteo_fed.protocols.ldp_spec import (
    CHUNK_REPORTS,
    LdpRequest,
    LdpSpec,
    box_spec,
    column_spec,
    no_geo_fields,
)
from leteo_fed.protocols.reports import ColumnReports, ReportFacts, facts, finite, register
from leteo_fed.protocols.results import result_type


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpMeanResult(ReportFacts):
    wire: ClassVar[str] = "ldp_mean"
    mean: float
    std_error: float
    bounds: list[float]


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpMeansResult(ReportFacts):
    wire: ClassVar[str] = "ldp_means"
    columns: list[str]
    means: dict[str, float]
    std_errors: dict[str, float]
    bounds: list[list[float]]

    def table(self) -> tuple[dict[str, list], list, str]:
        cols = {
            "mean": [self.means[c] for c in self.columns],
            "std_error": [self.std_errors[c] for c in self.columns],
        }
        return cols, list(self.columns), "column"


def is_multi(spec: LdpSpec) -> bool:
    """Several numeric columns in one report per record (attribute sampling / Duchi multi-dim)."""
    return spec.mechanism in numeric.NUMERIC_MECHANISMS and len(spec.columns) > 1


def _bounds(spec: LdpSpec) -> tuple[list[str], list[float], list[float]]:
    """The columns and their public bounds."""
    if is_multi(spec):
        return list(spec.columns), list(spec.box_lower), list(spec.box_upper)
    return [spec.column], [spec.lower], [spec.upper]


@dataclass
class MeanAccumulator:
    """The running sum of the unbiased reports and of their squares (per column: vectors)."""

    spec: LdpSpec
    n: int = 0
    total: Any = 0.0  # a float, or a vector for multi-column rounds
    total_sq: Any = 0.0
    engine: str = "numpy"  # "spark" once a contribution computed with Spark was added
    _mech: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._mech = MEAN.mechanism(self.spec)

    @property
    def keeps_points(self) -> bool:
        """Multi-column rounds keep vectors: no per-batch file estimate."""
        return is_multi(self.spec)

    def check(self, reports: np.ndarray) -> None:
        r = np.asarray(reports, dtype=np.float64)
        if r.ndim != 1 or not np.all(np.isfinite(r)):
            raise ProtocolError("numeric reports must be a 1-D array of finite values")

    def partial(self, reports: np.ndarray) -> tuple[int, Any, Any]:
        r = np.asarray(reports, dtype=np.float64)
        if is_multi(self.spec):
            if r.ndim != 2 or r.shape[1] != len(self.spec.columns) or not np.all(np.isfinite(r)):
                raise ProtocolError("reports must be one finite row per record over the columns")
            return len(reports), r.sum(axis=0), np.square(r).sum(axis=0)
        self.check(r)
        return len(reports), float(r.sum()), float(np.square(r).sum())

    def fold(self, part: tuple[int, Any, Any]) -> None:
        n, total, total_sq = part
        self.n += n
        self.total = self.total + total
        self.total_sq = self.total_sq + total_sq

    def add(self, n: int, contribution: Any, engine: str) -> None:
        """(total, total_sq) computed elsewhere."""
        total, total_sq = contribution
        self.fold((n, total, total_sq))
        self.engine = engine

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        doc = facts(spec, self.n)
        doc["engine"] = self.engine
        if is_multi(spec):
            k = len(spec.columns)
            est = self._mech.estimate(self.total, self.total_sq, self.n, d=k)
            lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
            means = [
                numeric.from_unit(float(m), a, b) for m, a, b in zip(est.mean, lo, hi, strict=True)
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
        est = self._mech.estimate(self.total, self.total_sq, self.n)
        lower, upper = spec.lower, spec.upper
        half = (upper - lower) / 2
        doc["mean"] = float(numeric.from_unit(est.mean, lower, upper))
        doc["std_error"] = float(est.std_error * half)
        doc["bounds"] = [lower, upper]
        doc["estimator"] = "mean of unbiased reports, mapped back from [-1, 1]"
        return doc


class MeanReports(ColumnReports):
    kind = "mean"
    mechanisms = numeric.NUMERIC_MECHANISMS
    marks = ("std_error", "means")  # geo points state a "mean" too

    def spec(self, request: LdpRequest) -> LdpSpec:
        spec = column_spec(request)
        no_geo_fields(request)
        if request.columns:  # one report per record covers every column
            if len(request.columns) < 2:
                raise DataError("list at least 2 columns, or use column for one", field="columns")
            if request.lower is not None or request.upper is not None:
                raise DataError(
                    "several columns take per-column bounds (box_lower, box_upper)", field="lower"
                )
            spec = box_spec(request, spec)  # same column and box validation as geo
            numeric.make_numeric(spec.mechanism, spec.epsilon)
            return spec
        mech = request.mechanism
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
        numeric.make_numeric(mech, spec.epsilon)
        return replace(spec, lower=lo, upper=hi)

    def mechanism(self, spec: LdpSpec) -> Any:
        return numeric.make_numeric(spec.mechanism, spec.epsilon)

    def read(self, spec: LdpSpec, table: Any) -> np.ndarray:
        if is_multi(spec):
            return table.matrix(self.columns(spec))
        return table.matrix([spec.column])[:, 0]

    def encode(self, values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
        """Each column clipped to its bounds and mapped to [-1, 1]."""
        if is_multi(spec):
            x = finite(values, spec.column, "the columns have missing or non-finite values")
            x = np.clip(x, np.asarray(spec.box_lower), np.asarray(spec.box_upper))
            return np.column_stack(
                [
                    numeric.to_unit(x[:, j], spec.box_lower[j], spec.box_upper[j])
                    for j in range(x.shape[1])
                ]
            )
        x = finite(values, spec.column, f"column '{spec.column}' has missing or non-finite values")
        return numeric.to_unit(np.clip(x, spec.lower, spec.upper), spec.lower, spec.upper)

    def perturb(self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator):
        if is_multi(spec):
            yield from super().perturb(encoded, spec, rng)
            return
        mech = self.mechanism(spec)  # built once for the batches
        for start in range(0, len(encoded), CHUNK_REPORTS):
            yield mech.perturb(encoded[start : start + CHUNK_REPORTS], rng)

    def perturb_chunk(
        self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
    ) -> np.ndarray:
        if is_multi(spec):
            return numeric.perturb_multi(encoded, spec.epsilon, spec.mechanism, rng)
        return self.mechanism(spec).perturb(encoded, rng)

    def accumulator(self, spec: LdpSpec) -> MeanAccumulator:
        return MeanAccumulator(spec)

    def result_type(self, spec: LdpSpec) -> type[LdpMeanResult] | type[LdpMeansResult]:
        return LdpMeansResult if is_multi(spec) else LdpMeanResult

    def preview(self, doc: dict, spec: LdpSpec, rows: int | None, expect: Expectation) -> dict:
        """Each mean: the report variance a + c E[t^2] over the rows, E[t^2] from the mean
        and spread the analyst expects, else at its worst (`ldp_noise` module doc)."""
        mech = self.mechanism(spec)
        doc["kind"] = "mean"
        columns, lows, highs = _bounds(spec)
        m = len(columns)
        means = per_column(expect.mean, m, "mean")
        stds = per_column(expect.std, m, "std")
        figures: list[dict] = []
        worst_var = mech.worst_case_variance(d=m)
        for name, lo, hi, mu, sigma in zip(columns, lows, highs, means, stds, strict=True):
            half, mid = (hi - lo) / 2, (hi + lo) / 2
            low_t2 = (((mu - mid) / half) ** 2 if mu is not None else 0.0) + (
                (sigma / half) ** 2 if sigma is not None else 0.0
            )
            low_t2 = min(low_t2, 1.0)
            high_t2 = low_t2 if (mu is not None and sigma is not None) else 1.0
            var = max(
                float(mech.report_variance(math.sqrt(low_t2), d=m)),
                float(mech.report_variance(math.sqrt(high_t2), d=m)),
            )
            figures.append(
                {"figure": f"mean of {name}", "expected_std": math.sqrt(var / rows) * half}
                if rows is not None
                else {"figure": f"mean of {name}", "variance_per_report": var * half * half}
            )
        half0 = (highs[0] - lows[0]) / 2
        doc["variance_per_report"] = worst_var * half0 * half0
        if rows is None:
            return doc
        doc["mean_std_error"] = max(f["expected_std"] for f in figures)
        if expect.mean or expect.std:
            told = " and ".join(
                w for w, v in (("mean", expect.mean), ("standard deviation", expect.std)) if v
            )
            assumption = (
                f"{rows} reports; the column's {told} as you expect (`expect_mean`/`expect_std`), "
                "the worst case over the bounds for what you did not give"
            )
        else:
            assumption = (
                f"{rows} reports; the worst case over the bounds (the mechanism's variance depends "
                "on the values): give `expect_mean` and `expect_std` for the data you expect"
            )
        checks = [
            SignalCheck(f["figure"], f["expected_std"], (hi - lo) / 2)
            for f, lo, hi in zip(figures, lows, highs, strict=True)
        ]
        if not is_multi(spec):
            checks = [SignalCheck("mean", figures[0]["expected_std"], half0)]
        return finish(doc, rows, figures, assumption, checks)

    def release_warnings(self, doc: Mapping[str, Any]) -> list[ReleaseWarning]:
        """A mean whose std error exceeds half the width of its bounds, or that lies outside."""
        if "means" in doc:
            items = [
                (c, doc["means"][c], doc["std_errors"][c], lo, hi)
                for c, lo, hi in zip(doc["columns"], *doc["bounds"], strict=True)
            ]
        else:
            items = [(doc["column"], doc["mean"], doc["std_error"], *doc["bounds"])]
        found: list[ReleaseWarning] = []
        for column, mean, se, lo, hi in items:
            name = f"mean of {column}"
            if se > (hi - lo) / 2:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} ({mean:.4g}) has a std error ({se:.3g}) above half its bounds' "
                        f"width ({(hi - lo) / 2:.3g}): it is noise; raise epsilon, collect more "
                        "records or use pm/hm",
                    )
                )
            elif not lo <= mean <= hi:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} ({mean:.4g} +/- {se:.3g}) lies outside its bounds [{lo:g}, "
                        f"{hi:g}]: the noise moved it there; read it as the nearest bound",
                    )
                )
        return found


MEAN = register(MeanReports())
