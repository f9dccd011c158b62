"""Frequency oracles as a report statistic: how often each value of a public domain occurs.

Each owner maps its records to domain indices (refusing a value outside the domain) and
perturbs each with the round's oracle (GRR, SUE, OUE, SHE, THE, OLH; `leteo_fed.ldp.frequency`).
The aggregator folds every batch into the running support counts, which Spark can compute from
spilled batches as well, then applies the oracle's unbiased estimator and its exact variance,
optionally followed by the consistency post-processing (non-negative counts summing to n).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp import frequency
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols.ldp_noise import (
    Expectation,
    finish,
    frequency_variance,
    shares,
    worst_frequency_variance,
)
from leteo_fed.protocols.ldp_spec import (
    CHUNK_REPORTS,
    LdpRequest,
    LdpSpec,
    column_spec,
    no_geo_fields,
)
from leteo_fed.protocols.reports import ColumnReports, ReportFacts, facts, register
from leteo_fed.protocols.results import omitted, result_type

_OLH_SEED_SPACE = frequency.HASH_PRIME * (frequency.HASH_PRIME - 1)  # as FrequencyOracle.support


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpFrequencyResult(ReportFacts):
    wire: ClassVar[str] = "ldp_frequency"
    estimates: dict[str, float]
    std_errors: dict[str, float]
    consistent_estimates: dict[str, float] | None = omitted()
    consistency: str | None = omitted()

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per category: the estimated frequency and its standard error."""
        cats = list(self.estimates)
        cols: dict[str, list] = {
            "estimate": [self.estimates[c] for c in cats],
            "std_error": [self.std_errors[c] for c in cats],
        }
        if self.consistent_estimates is not None:
            cols["consistent_estimate"] = [self.consistent_estimates[c] for c in cats]
        return cols, cats, self.column


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
    """The shape, type and range of a batch of the oracle's reports."""
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


@dataclass
class FrequencyAccumulator:
    """The running support of every domain value over the accepted reports."""

    spec: LdpSpec
    n: int = 0
    support: np.ndarray | None = None
    engine: str = "numpy"
    keeps_points: ClassVar[bool] = False  # spilled batches: Spark computes their support
    _oracle: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._oracle = FREQUENCY.mechanism(self.spec)
        self.support = np.zeros(len(self.spec.domain))

    def check(self, reports: np.ndarray) -> None:
        check_reports(reports, self.spec)
        if self.spec.mechanism == "olh":
            _check_olh_ranges(reports, self._oracle.g)

    def partial(self, reports: np.ndarray) -> tuple[int, np.ndarray]:
        check_reports(reports, self.spec)
        return len(reports), np.asarray(self._oracle.support(reports), dtype=np.float64)

    def fold(self, part: tuple[int, np.ndarray]) -> None:
        n, support = part
        self.n += n
        self.support = self.support + support

    def add(self, n: int, contribution: Any, engine: str) -> None:
        """A support vector computed elsewhere."""
        self.fold((n, np.asarray(contribution, dtype=np.float64)))
        self.engine = engine

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        doc = facts(spec, self.n)
        doc["engine"] = self.engine
        est = self._oracle.estimate(self.support, self.n)
        doc["estimates"] = dict(zip(spec.domain, map(float, est.counts), strict=True))
        doc["std_errors"] = dict(zip(spec.domain, map(float, est.std_error), strict=True))
        doc["estimator"] = (
            "unbiased (c_i - n q) / (p - q); variance: exact formula of Wang et al. (2017)"
        )
        if consistency:
            doc["consistent_estimates"] = dict(
                zip(spec.domain, map(float, self._oracle.consistent(est)), strict=True)
            )
            doc["consistency"] = "non-negative, summing to n (post-processing; not unbiased)"
        return doc


class FrequencyReports(ColumnReports):
    kind = "frequency"
    mechanisms = frequency.FREQUENCY_MECHANISMS
    marks = ("estimates",)

    def spec(self, request: LdpRequest) -> LdpSpec:
        spec = column_spec(request)
        no_geo_fields(request)
        mech = request.mechanism
        if request.columns:
            raise DataError(
                f"{mech} collects one column; several columns are for 'geo' and numeric mechanisms",
                field="columns",
            )
        domain = list(request.domain)
        if len(domain) < 2 or len(set(domain)) != len(domain) or any(not v for v in domain):
            raise DataError(
                "a frequency oracle needs a public domain of >= 2 distinct values", field="domain"
            )
        if request.lower is not None or request.upper is not None:
            raise DataError(f"{mech} takes a domain, not bounds", field="lower")
        frequency.make_oracle(mech, spec.epsilon, len(domain))  # validates the combination
        return replace(spec, domain=tuple(domain))

    def mechanism(self, spec: LdpSpec) -> frequency.FrequencyOracle:
        return frequency.make_oracle(
            spec.mechanism,
            spec.epsilon,
            len(spec.domain),
            theta=spec.theta or None,
            g=spec.olh_g or None,
        )

    def read(self, spec: LdpSpec, table: Any) -> list[str]:
        return table.labels(spec.column)

    def encode(self, values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
        """Domain indices, refusing a value outside the domain."""
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

    def perturb(self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator):
        oracle = self.mechanism(spec)  # built once for the batches
        for start in range(0, len(encoded), CHUNK_REPORTS):
            yield oracle.perturb(encoded[start : start + CHUNK_REPORTS], rng)

    def perturb_chunk(
        self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
    ) -> np.ndarray:
        return self.mechanism(spec).perturb(encoded, rng)

    def accumulator(self, spec: LdpSpec) -> FrequencyAccumulator:
        return FrequencyAccumulator(spec)

    def result_type(self, spec: LdpSpec) -> type[LdpFrequencyResult]:
        return LdpFrequencyResult

    def preview(self, doc: dict, spec: LdpSpec, rows: int | None, expect: Expectation) -> dict:
        """Each value's frequency: (v0 + f b) / n at the share f the analyst expects, else
        at its worst share (`ldp_noise` module doc)."""
        mech = self.mechanism(spec)
        doc["kind"] = "frequency"
        doc["variance_per_report"] = mech.theoretical_variance_per_user()
        if rows is None:
            return doc
        given = shares(expect.frequencies, spec.domain, "frequencies")
        figures: list[dict] = []
        for v in spec.domain:
            var = (
                float(frequency_variance(mech, given[v]))
                if v in given
                else worst_frequency_variance(mech)
            )
            std = math.sqrt(var / rows)
            figures.append(
                {"figure": f"frequency of {v}", "expected_std": std, "count_std": std * rows}
            )
        doc["frequency_std_error"] = max(f["expected_std"] for f in figures)
        doc["count_std_error"] = doc["frequency_std_error"] * rows
        assumption = f"{rows} reports; " + (
            "each value's share as you expect it (`expect_frequencies`), the worst share (0 "
            "or 1) for the others"
            if given
            else "each value at its worst share (0 or 1): give `expect_frequencies` V=F,... to "
            "use the shares you expect"
        )
        checks = [SignalCheck("frequency of a value", doc["frequency_std_error"], 1.0)]
        return finish(doc, rows, figures, assumption, checks)

    def release_warnings(self, doc: Mapping[str, Any]) -> list[ReleaseWarning]:
        """A frequency estimate below zero (before consistency), or whose std error exceeds it."""
        found: list[ReleaseWarning] = []
        n = doc["n"]
        for v, est in doc["estimates"].items():
            se = doc["std_errors"][v]
            name = f"frequency of {v}"
            if est < 0:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} is negative ({est:.4g} +/- {se:.3g} records of {n}) before "
                        "consistency: the value is rarer than the noise resolves; raise "
                        "epsilon or collect more records",
                    )
                )
            elif se > est:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} ({est:.4g} records of {n}) is smaller than its std error "
                        f"({se:.3g}): it is noise; raise epsilon or collect more records",
                    )
                )
        return found


FREQUENCY = register(FrequencyReports())
