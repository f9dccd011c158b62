"""LDP collection as a round of the engine: its "sum" is the report accumulator.

Every record is perturbed at its owner with the round's epsilon (per-record epsilon-LDP); only
the reports leave the site, and each owner's ledger is charged epsilon once. The aggregator folds
chunks as they arrive and applies the mechanism's unbiased estimator at the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError
from leteo_fed.privacy.accounting import PureEvent
from leteo_fed.privacy.budget import Budget
from leteo_fed.protocols import ldp_collection as lc
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_plan import DpSpec
from leteo_fed.protocols.interface import ReportRounds
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.results import ReportTimings, Result, omitted, result_type
from leteo_fed.protocols.round_types import (
    Outcome,
    ReportStream,
    RoundPlan,
    SiteData,
    Step,
)


@dataclass(frozen=True, kw_only=True)
class _LdpFacts(Result):
    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    estimator: str
    round_id: str
    owners: list[str]
    declined: dict[str, str]
    timings: ReportTimings

    def release_warnings(self) -> list:
        """The figures the local noise buries (`ldp_noise.release_warnings`)."""
        from leteo_fed.protocols.ldp_noise import release_warnings

        return release_warnings(self.to_dict())


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpFrequencyResult(_LdpFacts):
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


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpMeanResult(_LdpFacts):
    wire: ClassVar[str] = "ldp_mean"
    mean: float
    std_error: float
    bounds: list[float]


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpMeansResult(_LdpFacts):
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


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpPointsResult(_LdpFacts):
    wire: ClassVar[str] = "ldp_points"
    columns: list[str]
    box: list[list[float]]
    points: list[list[float]]
    box_fit: str = "remap"
    mean: list[float] = field(default_factory=list)
    std_errors: list[float] = field(default_factory=list)
    bins: int = 0
    bin_edges: list[list[float]] = field(default_factory=list)
    density_kind: str = ""
    density: list[list[float]] = field(default_factory=list)

    def table(self) -> tuple[dict[str, list], list, str]:
        cols = {c: [p[j] for p in self.points] for j, c in enumerate(self.columns)}
        return cols, list(range(len(self.points))), "report"


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpNaiveBayesResult(_LdpFacts):
    """An LDP naive Bayes model: class priors, P(value | class) per feature, reports per type."""

    wire: ClassVar[str] = "ldp_naive_bayes"
    classes: list[str]
    features: list[str]
    priors: dict[str, float]
    conditionals: dict[str, lc.NbConditional]
    report_counts: dict[str, int]

    def std_errors(self) -> dict:
        """{"priors": {class: std error}, "conditionals": {feature: {class: [std error per
        value]}}}: the delta method over the oracle's covariance at the released figures
        (post-processing; `ldp_noise.nb_std_errors`)."""
        from leteo_fed.protocols.ldp_noise import nb_std_errors_of

        return nb_std_errors_of(self.to_dict())

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per (feature, value): P(value | class) for each class."""
        index: list = []
        cols: dict[str, list] = {"feature": [], "value": [], **{c: [] for c in self.classes}}
        for name in self.features:
            cond = self.conditionals[name]
            for i, value in enumerate(cond.values):
                index.append(f"{name}={value}")
                cols["feature"].append(name)
                cols["value"].append(value)
                for c in self.classes:
                    cols[c].append(cond.by_class[c][i])
        return cols, index, "feature_value"


@dataclass(frozen=True)
class LdpPlan:
    spec: lc.LdpSpec
    min_owners: int
    deadline_seconds: float
    consistency: bool
    label: str = "ldp"


NAIVE_BAYES_LABEL = "ldp_naive_bayes"  # the round label (owner policies, jobs) of naive Bayes


class LdpProtocol(ReportRounds):
    name = "ldp"
    request_type = lc.LdpRequest
    spec_type = lc.LdpSpec
    plot_file = None  # drawn by `leteo-fed ldp collect` / `ldp naive-bayes` (ldp.png, nb.png)

    def result_file(self, label: str) -> str | None:
        if label == NAIVE_BAYES_LABEL:
            return "result.json"
        return "ldp.json" if label == self.name else None

    def output_file(self, request: lc.LdpRequest) -> str:
        return "result.json" if request.label_column else "ldp.json"

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: lc.LdpRequest, common: Common) -> LdpPlan:
        common.no_dp("LDP collection")  # the per-record epsilon is the request's own
        spec = lc.spec_from_request(request)
        quorum = common.quorum(defaults.MIN_QUORUM_LDP)
        label = NAIVE_BAYES_LABEL if lc.is_naive_bayes(spec) else self.name
        return LdpPlan(spec, quorum, common.deadline(), request.consistency, label)

    def next_round(self, plan: LdpPlan, state: None, index: int) -> RoundPlan:
        return RoundPlan(plan.spec, "ldp", reveal="reports")

    def new_accumulator(self, plan: LdpPlan) -> lc.Accumulator | lc.NbAccumulator:
        if lc.is_naive_bayes(plan.spec):
            return lc.NbAccumulator(plan.spec)
        return lc.Accumulator(plan.spec)

    def finish_round(self, plan: LdpPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        doc = outcome.reports.result(plan.consistency)
        spec = plan.spec
        if lc.is_naive_bayes(spec):
            cls: type = LdpNaiveBayesResult
        elif spec.mechanism == lc.GEO:
            cls = LdpPointsResult
        elif lc.is_multi(spec):
            cls = LdpMeansResult
        elif lc.is_frequency(spec.mechanism):
            cls = LdpFrequencyResult
        else:
            cls = LdpMeanResult
        timings = ReportTimings(
            owners={s: dict(t) for s, t in outcome.submitted.items()},
            aggregator={"estimate_seconds": time.perf_counter() - start},
        )
        return Step(
            cls(
                **doc,
                round_id=outcome.round_id,
                owners=sorted(outcome.submitted),
                declined=dict(outcome.declined),
                timings=timings,
            )
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: lc.LdpSpec) -> list[str]:
        if lc.is_naive_bayes(spec):
            return [*(f.name for f in spec.features), spec.label_column]
        return list(spec.columns) or [spec.column]

    def request_columns(self, request: lc.LdpRequest) -> list[str]:
        named = [request.column, *request.columns, *(f.name for f in request.features)]
        return list(dict.fromkeys(c for c in [*named, request.label_column] if c))

    def request_budget(self, request: lc.LdpRequest, dp: DpRequest | None) -> Budget | None:
        """The per-record epsilon the analyst asked for (the round's charge)."""
        return Budget(request.epsilon, 0.0) if request.epsilon > 0 else None

    def check(
        self, spec: lc.LdpSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        lc.mechanism_for(spec)  # refuses unknown mechanisms and a bad epsilon

    def charge(self, spec: lc.LdpSpec, dp: DpSpec | None) -> Budget:
        return Budget(spec.epsilon, 0.0)

    def charge_event(
        self, spec: lc.LdpSpec, encoding: ShareEncoding | None, dp: DpSpec | None
    ) -> PureEvent:
        """Every record's report is pure epsilon-DP: the sharp pure-DP Renyi curve."""
        return PureEvent(spec.epsilon)

    def mechanism(self, spec: lc.LdpSpec, dp: DpSpec | None) -> str:
        return f"ldp-{spec.mechanism}"

    def describe(self, spec: lc.LdpSpec, dp: DpSpec | None) -> str:
        if lc.is_naive_bayes(spec):
            names = ", ".join(f.name for f in spec.features)
            return f"naive Bayes on {names} with label {spec.label_column}, one report per record"
        return f"column {spec.column}, one report per record"

    def reports(
        self, spec: lc.LdpSpec, site: SiteData, rng: np.random.Generator, timings: dict
    ) -> ReportStream:
        """Perturb every record; the chunks are computed before anything is sent."""
        start = time.perf_counter()
        columns = self.columns(spec)
        table = site.read(columns)
        if lc.is_naive_bayes(spec):
            model = lc.naive_bayes_model(spec)
            rows = {f.name: table.labels(f.name) for f in spec.features}
            try:
                per_type = model.client_reports(rows, table.labels(spec.label_column), rng)
            except DataError as exc:  # a value outside the public classes or a feature's domain
                raise DataError(str(exc), field=exc.field, rule="classes") from exc
            wire = lc.nb_report_rows(spec, per_type, rng)
            chunks = [wire[i : i + lc.CHUNK_REPORTS] for i in range(0, len(wire), lc.CHUNK_REPORTS)]
            timings["perturb_seconds"] = time.perf_counter() - start
            return ReportStream(len(wire), iter(chunks))
        values: list[str] | np.ndarray
        if lc.is_frequency(spec.mechanism):
            values = table.labels(spec.column)
        elif spec.mechanism == lc.GEO or lc.is_multi(spec):
            values = table.matrix(columns)
        else:
            values = table.matrix([spec.column])[:, 0]
        encoded = lc.encode_column(values, spec)
        chunks = list(lc.perturb_chunks(encoded, spec, rng))
        timings["perturb_seconds"] = time.perf_counter() - start
        return ReportStream(len(encoded), iter(chunks))


PROTOCOL = registry.register(LdpProtocol())
