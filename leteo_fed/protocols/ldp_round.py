"""LDP collection as a round of the engine: one adapter runs every report statistic.

Every record is perturbed at its owner with the round's epsilon (per-record epsilon-LDP); only
the reports leave the site, and each owner's ledger is charged epsilon once. The aggregator folds
chunks as they arrive and applies the mechanism's unbiased estimator at the end. What differs
between kinds of collection (frequency oracles, numeric means, geo points, naive Bayes) is the
kind's `reports.ReportStatistic`, found by the spec (`reports.statistic_for`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.privacy.accounting import PureEvent
from leteo_fed.privacy.budget import Budget
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_plan import DpSpec
from leteo_fed.protocols.interface import ReportRounds
from leteo_fed.protocols.ldp_frequency import LdpFrequencyResult
from leteo_fed.protocols.ldp_geo import LdpPointsResult
from leteo_fed.protocols.ldp_mean import LdpMeanResult, LdpMeansResult
from leteo_fed.protocols.ldp_naive_bayes import NAIVE_BAYES_LABEL, LdpNaiveBayesResult
from leteo_fed.protocols.ldp_spec import LdpRequest, LdpSpec
from leteo_fed.protocols.reports import (
    ROUND_LABEL,
    ReportAccumulator,
    spec_from_request,
    statistic_for,
)
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.results import ReportTimings
from leteo_fed.protocols.round_types import (
    Outcome,
    ReportStream,
    RoundPlan,
    SiteData,
    Step,
)

__all__ = [
    "NAIVE_BAYES_LABEL",
    "LdpFrequencyResult",
    "LdpMeanResult",
    "LdpMeansResult",
    "LdpNaiveBayesResult",
    "LdpPlan",
    "LdpPointsResult",
    "ReportRoundProtocol",
]


@dataclass(frozen=True)
class LdpPlan:
    spec: LdpSpec
    min_owners: int
    deadline_seconds: float
    consistency: bool
    label: str = ROUND_LABEL


class ReportRoundProtocol(ReportRounds):
    """The report round of any `ReportStatistic`: the payload `ldp`."""

    name = "ldp"
    request_type = LdpRequest
    spec_type = LdpSpec
    plot_file = None  # drawn by `leteo-fed ldp collect` / `ldp naive-bayes` (ldp.png, nb.png)

    def result_file(self, label: str) -> str | None:
        if label == NAIVE_BAYES_LABEL:
            return "result.json"
        return "ldp.json" if label == self.name else None

    def output_file(self, request: LdpRequest) -> str:
        return "result.json" if request.label_column else "ldp.json"

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: LdpRequest, common: Common) -> LdpPlan:
        common.no_dp("LDP collection")  # the per-record epsilon is the request's own
        spec = spec_from_request(request)
        quorum = common.quorum(defaults.MIN_QUORUM_LDP)
        label = statistic_for(spec).label
        return LdpPlan(spec, quorum, common.deadline(), request.consistency, label)

    def next_round(self, plan: LdpPlan, state: None, index: int) -> RoundPlan:
        return RoundPlan(plan.spec, "ldp", reveal="reports")

    def new_accumulator(self, plan: LdpPlan) -> ReportAccumulator:
        return statistic_for(plan.spec).accumulator(plan.spec)

    def finish_round(self, plan: LdpPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        doc = outcome.reports.result(plan.consistency)
        cls = statistic_for(plan.spec).result_type(plan.spec)
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

    def columns(self, spec: LdpSpec) -> list[str]:
        return statistic_for(spec).columns(spec)

    def request_columns(self, request: LdpRequest) -> list[str]:
        named = [request.column, *request.columns, *(f.name for f in request.features)]
        return list(dict.fromkeys(c for c in [*named, request.label_column] if c))

    def request_budget(self, request: LdpRequest, dp: DpRequest | None) -> Budget | None:
        """The per-record epsilon the analyst asked for (the round's charge)."""
        return Budget(request.epsilon, 0.0) if request.epsilon > 0 else None

    def check(
        self, spec: LdpSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        statistic_for(spec).mechanism(spec)  # refuses unknown mechanisms and a bad epsilon

    def charge(self, spec: LdpSpec, dp: DpSpec | None) -> Budget:
        return Budget(spec.epsilon, 0.0)

    def charge_event(
        self, spec: LdpSpec, encoding: ShareEncoding | None, dp: DpSpec | None
    ) -> PureEvent:
        """Every record's report is pure epsilon-DP: the sharp pure-DP Renyi curve."""
        return PureEvent(spec.epsilon)

    def mechanism(self, spec: LdpSpec, dp: DpSpec | None) -> str:
        return f"ldp-{spec.mechanism}"

    def describe(self, spec: LdpSpec, dp: DpSpec | None) -> str:
        return statistic_for(spec).describe(spec)

    def reports(
        self, spec: LdpSpec, site: SiteData, rng: np.random.Generator, timings: dict
    ) -> ReportStream:
        """Perturb every record; the chunks are computed before anything is sent."""
        start = time.perf_counter()
        statistic = statistic_for(spec)
        table = site.read(statistic.columns(spec))
        n, chunks = statistic.reports(spec, table, rng)
        timings["perturb_seconds"] = time.perf_counter() - start
        return ReportStream(n, iter(chunks))


PROTOCOL = registry.register(ReportRoundProtocol())
