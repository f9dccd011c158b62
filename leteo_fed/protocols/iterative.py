"""Multi-round statistics: a secure-sum statistic whose spec carries the state of an iteration.

A multi-round protocol (k-means, logistic regression) is a `statistic.SecureSumStatistic` run
again and again: each iteration is one secure sum at a state the spec publishes (the centers,
the coefficients), and the next iteration's state follows from the last one's totals. So an
`IterativeStatistic` declares, beyond what every statistic declares (its layout, its sums):

- the **first spec** from the request (`spec`: iteration 1 at its signed start, job id "");
- how an owner takes a later iteration's state from the aggregator (`follow`: only its shape
  and bounds can be checked: the round is `chosen_by_aggregator`);
- how the **next spec follows** from an iteration's totals, or that the job has converged
  (`iterate`, which also gives the iteration's record and its published result);
- the **job's result** from its iterations (`job_result`; default: the last one's);
- what a **snapshot** keeps to resume after an aggregator restart (`keep`, `resume`, `record`).

`iterative_protocol.IterativeSecureSumProtocol` runs such a statistic as one multi-round job.

The spec of an iterative statistic has the fields `job_id` and `iteration`, and the job's T in
the field `iterations_field` names.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed.encoding.share import (
    ShareEncoding,
)
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.protocols.block_encoding import data_bound, integer_sensitivity
from leteo_fed.protocols.dp_plan import (
    DpSpec,
)
from leteo_fed.protocols.results import EncodingFacts
from leteo_fed.protocols.round_types import Outcome, SiteData, Step
from leteo_fed.protocols.secure_sum import (
    StatisticPlan,
)
from leteo_fed.protocols.statistic import Release, SecureSumStatistic, Totals

# ------------------------------------------------------------------ the job and its plan


@dataclass(frozen=True)
class IterativePlan(StatisticPlan):
    """A validated request of a multi-round job: `spec` is iteration 1's (job id ""), `dp` each
    iteration's noise (its (epsilon, delta) is what the T iterations give together),
    `dp_total` the job's (epsilon, delta)."""

    dp_total: tuple[float, float] | None = None
    iterations: int = 0  # the signed most iterations, T


@dataclass
class IterativeJob:
    """A running job as the aggregator keeps it: `spec` the next iteration's (the state it
    publishes), each completed iteration's `records` (the statistic's summaries), what the
    statistic `carry`s from one iteration to the next (plain data), whether it converged."""

    job_id: str
    invited: list[str]
    spec: Any
    records: list[Any] = field(default_factory=list)
    carry: dict[str, Any] = field(default_factory=dict)
    converged: bool = False
    clipped_rows: float | None = None  # bounded DP: the last iteration's noisy count
    encoding: EncodingFacts | None = None  # the last iteration's encoding and key facts
    started: float = field(default_factory=time.perf_counter)
    opened: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True)
class Iterate:
    """What one iteration's totals give: its `record` (kept by the job, in its snapshot), the
    next iteration's `spec`, whether the job `converged`, the iteration's published `result`,
    and what the progress line says of the step (`note`)."""

    record: Any
    spec: Any
    converged: bool
    result: Any
    note: str


# ------------------------------------------------------------------ DP of a job (pure)


# ------------------------------------------------------------------ the declaration


class IterativeStatistic(SecureSumStatistic[Any, Any]):
    """A statistic of several secure sums (see the module's docstring).

    Class attributes beyond a statistic's: `iterations_field` (the spec's field holding T),
    `title` (how messages name a job), `of` ("of" or "of at most": how progress texts relate
    an iteration to T), `limit_note` (a job that stops at T without converging),
    `default_iterations` (T when the request leaves it 0; what the job's timeout assumes),
    `noise_remedy` (what a refusal of too much noise suggests; "" : the default's), the
    default scales of sums without and with DP, and whether a DP round encodes counts at the
    sums' scale (`counts_at_sum_scale`; else at `count_scale_bits`, at least that)."""

    iterations_field: ClassVar[str] = "iterations"
    title: ClassVar[str] = ""
    of: ClassVar[str] = "of at most"
    limit_note: ClassVar[str] = "reached the iteration limit (not converged)"
    default_iterations: ClassVar[int] = 1
    noise_remedy: ClassVar[str] = ""
    counts_at_sum_scale: ClassVar[bool] = True

    # ---------------------------------------------------------------- what is asked

    def iterations_asked(self, request: Any) -> int:
        """The request's T without validation (what the job's timeout assumes)."""
        return int(getattr(request, self.iterations_field, 0) or self.default_iterations)

    def request_columns(self, request: Any) -> list[str]:
        """The columns the request names (the owner's authorization, before any plan)."""
        return [*self.features(self.spec(request)), *self.other_columns(self.spec(request))]

    def check_state(self, spec: Any, encoding: ShareEncoding) -> None:
        """The owner's check of the state a relayed spec carries, in this round's encoding
        (default: `check_spec`): its shape and bounds (DataError naming the field)."""
        self.check_spec(spec)

    @abstractmethod
    def follow(self, plan: IterativePlan, spec: Any, received: Any) -> Any:
        """Iteration > 1's spec as an owner takes it: `spec` (the signed parts, replayed) with
        the state the aggregator chose taken from `received` once its shape and bounds are
        checked (DataError naming the field)."""

    def check_site(self, site: SiteData) -> None:
        """Refuse a site this statistic cannot compute on (its engine, its source)."""
        return None

    def plan_spec(self, spec: Any, dp: DpSpec | None, encoding: ShareEncoding) -> Any:
        """Iteration 1's spec once the round's noise and encoding are known (e.g. the
        analyst's centers mapped to the scaled columns of a bounded release)."""
        return spec

    # ---------------------------------------------------------------- the encoding

    def count_scale_bits(self, spec: Any, scale_bits: int, bound: float) -> int:
        """The scale of counts in a DP round (default: the sums')."""
        return scale_bits

    def share_bound(
        self, spec: Any, value_bound: float, max_rows: int, scale_bits: int, count_bits: int
    ) -> int:
        """The largest |encoded value| of one owner's share (default: the blocks')."""
        return data_bound(self.blocks(spec, value_bound), max_rows, scale_bits, count_bits)

    def integer_sensitivity(
        self, spec: Any, bound: float, scale_bits: int, count_bits: int
    ) -> noise.Sensitivity:
        """A DP iteration's sensitivity in integer units at the row-norm bound (default: the
        blocks'): what the noise is calibrated at and every owner verifies."""
        return integer_sensitivity(self.dp_blocks(spec, bound), scale_bits, count_bits)

    # ---------------------------------------------------------------- what the totals give

    @abstractmethod
    def iterate(
        self,
        plan: IterativePlan,
        job: IterativeJob,
        spec: Any,
        totals: Totals,
        release: Release,
        outcome: Outcome,
    ) -> Iterate:
        """What iteration `spec`'s totals give (`Iterate`); the job's `carry` may be updated."""

    def job_result(self, plan: IterativePlan, job: IterativeJob, last: Step) -> Any:
        """The job's result once done (default: the last iteration's)."""
        return last.result

    def preview_rows(
        self, plan: IterativePlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's simulated rows made fit for the job (default: `preview_data` of
        iteration 1's spec), and what that adds to the stated assumption."""
        return self.preview_data(plan.spec, columns, rng)

    def result(self, spec: Any, totals: Totals, release: Release) -> dict[str, Any]:
        raise ProtocolError(f"{self.name}'s results come from its iterations (`iterate`)")

    def figures(self, spec: Any, result: Mapping[str, Any]) -> dict[str, float]:
        return {}

    # ---------------------------------------------------------------- snapshots

    @abstractmethod
    def keep(self, job: IterativeJob) -> dict[str, Any]:
        """The statistic's own part of the job's snapshot (plain JSON data): its state."""

    @abstractmethod
    def resume(self, plan: IterativePlan, job: IterativeJob, doc: Mapping[str, Any]) -> None:
        """The job's state (`spec`, `carry`, `encoding`) from its snapshot's `doc`, checked
        against the plan (KeyError, TypeError, ValueError or DataError if it does not fit)."""

    @abstractmethod
    def record(self, doc: Mapping[str, Any]) -> Any:
        """One iteration's record from its snapshot document."""


# ------------------------------------------------------------------ the adapter


def plain(value: Any) -> Any:
    """JSON-ready: numpy scalars as Python numbers (dicts and lists walked)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def rdp_epsilon(mu: float, sens: noise.Sensitivity, delta: float, rounds: int) -> float:
    """Epsilon at delta of `rounds` releases with Skellam(mu) noise at this sensitivity (RDP
    composition, the accounting every owner recomputes); 0 for no round."""
    if rounds < 1:
        return 0.0
    return Skellam(mu).epsilon(sens, delta, compositions=rounds)


def job_epsilon(plan: StatisticPlan, rounds: int) -> float:
    """Epsilon at the job's delta of `rounds` iterations with the plan's noise (RDP)."""
    dp, sens = plan.dp, plan.sensitivity
    if dp is None or sens is None:
        raise DataError("a preview is of DP noise: give `dp_epsilon`", field="dp_epsilon")
    return rdp_epsilon(dp.mu, sens, dp.delta, rounds)


COMPOSITION = (
    "Renyi (RDP): the T iterations' curves added and converted once at delta; each iteration's "
    "noise calibrated so that T of them are (epsilon, delta)-DP"
)
