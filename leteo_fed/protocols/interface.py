"""What a federated protocol is: the interface the round engine, the owners, the ledger and
the CLI call (`FederatedProtocol`), and the budget of a multi-round job (`MultiRoundJob`).

A protocol is one object with no network code:

- aggregator side: `plan` a validated job from the analyst's request, give the spec of each
  `next_round`, and `finish_round` from the revealed totals (or the report accumulator), which
  either ends the job or asks for another round (k-means iterations);
- owner side: the `columns` a round reads, `check` of a spec before anything is computed
  (encoding, DP accounting, engine), what the round `charge`s against the owner's budget, and
  the share itself: `share_values` (encoded integers for the secure sum) or `reports` (LDP).

Requests and specs are frozen dataclasses whose field names match the protocol's proto payload
messages, so the transport converts them generically (`leteo_fed.transport.codec`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.accounting import ApproxEvent, PrivacyEvent, SkellamEvent
from leteo_fed.privacy.budget import Budget
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    with_clip_count,
)
from leteo_fed.protocols.requests import (
    Common,
    DpRequest,
)
from leteo_fed.protocols.round_types import (
    REPORTS,
    SECURE_SUM,
    Outcome,
    ProjectionQuery,
    ReportStream,
    RoundPlan,
    SiteData,
    Step,
)


@dataclass(frozen=True)
class LedgerCharge:
    """A round's charge as the owner's ledger takes it (`PrivacyLedger.reserve`)."""

    budget: Budget  # the release alone; a job's round: the job's (epsilon, delta)
    event: PrivacyEvent | None  # its RDP curve (None: an ApproxEvent of `budget`)
    job: str = ""  # the multi-round job it is a round of ("" for a single release)
    further: int = 0  # later rounds of the job that must fit too


class AnalystSide:
    """What the analyst's command and client read of a protocol: its names, its result files,
    how its request travels, how long a job may take, and how the preview simulates rows."""

    name: ClassVar[str]
    request_type: ClassVar[type]
    spec_type: ClassVar[type]
    multi_round: ClassVar[bool] = False  # a job of several rounds (round ids get "-it<t>")
    plot_file: ClassVar[str | None] = None  # the figure the CLI draws of a result, if any
    # A protocol where a row adds at most one count to each released value (crosstab,
    # quantiles) has its DP bound fixed: a DP request that names none gets this one.
    fixed_row_norm_bound: ClassVar[float | None] = None
    # A protocol whose DP release reads numeric columns it can clip and scale to public
    # per-column bounds (`DpRequest.release_bounds`); others refuse a request with bounds.
    takes_bounds: ClassVar[bool] = False

    def result_file(self, label: str) -> str | None:
        """The file the CLI writes a result of a job labelled `label` (RoundStatus.protocol)
        to; None: not a label of this protocol."""
        return f"{self.name}.json" if label == self.name else None

    def output_file(self, request: Any) -> str:
        """The file the CLI writes the result of `request` to."""
        return self.result_file(self.name) or f"{self.name}.json"

    def wire_request(self, request: Any) -> Any:
        """The request as its payload travels (a plugin's own request wraps into the
        `statistic` payload, `plugins`)."""
        return request

    def job_timeout(self, request: Any, deadline_seconds: float) -> float:
        """How long the analyst waits for a job of this request whose rounds each have
        `deadline_seconds` (single-round protocols: the deadline)."""
        return deadline_seconds

    def preview_data(
        self, plan: Any, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's simulated rows made fit for this protocol (e.g. a label that depends
        on the features), and what that adds to the stated assumption ("" : nothing)."""
        return columns, ""


class JobSide(ABC):
    """The aggregator's job loop: a plan from the request, each round's spec, what a finished
    round gives, and the state a restarted aggregator resumes from."""

    name: ClassVar[str]

    @abstractmethod
    def plan(self, request: Any, common: Common) -> Any:
        """Validate a request into a plan with `label`, `min_owners` and `deadline_seconds`;
        DataError naming the field otherwise."""

    def start(self, plan: Any, job_id: str, invited: list[str]) -> Any:
        """The job's mutable state (None for single-round protocols)."""
        return None

    @abstractmethod
    def next_round(self, plan: Any, state: Any, index: int) -> RoundPlan:
        """The plan of round `index` (1-based)."""

    @abstractmethod
    def finish_round(self, plan: Any, state: Any, outcome: Outcome) -> Step:
        """The result of a completed round; `Step.done` False asks for another round."""

    def job_result(self, plan: Any, state: Any, last: Step) -> Any:
        """The job's result once done (single-round: the round's)."""
        return last.result

    def snapshot(self, state: Any) -> dict[str, Any] | None:
        """The job's state after a completed round as plain JSON data (no pickle), kept by the
        aggregator so that after a restart the job resumes from there; None: the job cannot
        resume (single-round protocols have nothing between rounds)."""
        return None

    def restore(self, plan: Any, job_id: str, invited: list[str], snapshot: dict[str, Any]) -> Any:
        """The state a `snapshot` describes, for the job planned again from its request;
        ProtocolError if the snapshot does not fit the plan."""
        raise ProtocolError(f"{self.name} jobs cannot resume from a snapshot")

    def max_rounds(self, plan: Any) -> int:
        """The most rounds a job planned from this request may have (k-means: T iterations)."""
        return 1

    def progress(self, plan: Any, index: int, round_id: str) -> str:
        return ""

    def failure(self, plan: Any, index: int, message: str) -> str:
        """The job's message when round `index` failed."""
        return message


class OwnerSide(ABC):
    """What an owner verifies before it computes anything: the round it expects (replayed from
    the signed request with the job side's `start` and `next_round`), the columns it reads,
    the reveal mode, and the sensitivity it recomputes."""

    name: ClassVar[str]

    @abstractmethod
    def start(self, plan: Any, job_id: str, invited: list[str]) -> Any: ...  # JobSide's

    @abstractmethod
    def next_round(self, plan: Any, state: Any, index: int) -> RoundPlan: ...  # JobSide's

    def expected_round(
        self, plan: Any, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """The round `index` an owner expects: the aggregator's own `start` and `next_round`
        replayed from the signed request. A protocol whose round depends on something only the
        aggregator can choose (a secret rotation, centers computed from earlier results) takes
        it from `received`, the spec as relayed, once it has checked its shape; everything
        else must come out equal to what was relayed."""
        return self.next_round(plan, self.start(plan, job_id, invited), index)

    def chosen_by_aggregator(self, spec: Any) -> bool:
        """Whether what this round releases depends on values the aggregator chose and no owner
        can verify (k-means centers after the first iteration): owners count such a round as a
        release of its own."""
        return False

    @abstractmethod
    def columns(self, spec: Any) -> list[str]:
        """The site columns the round reads."""

    @abstractmethod
    def request_columns(self, request: Any) -> list[str]:
        """The site columns the analyst's request names. An owner reads only columns its
        analyst signed for: `columns(spec)` of every round planned from the request must be
        among these, whatever the aggregator relays."""

    def dimension(self, spec: Any) -> int:
        """Features per row, declared in the share's header."""
        return len(self.columns(spec))

    def reveal_mode(self, spec: Any) -> str:
        """How the CSP may reveal this round's sum, read from the spec by the owner and signed
        in its share statement, so the aggregator cannot open the round in another mode."""
        return "blinded"

    def check(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        """Refuse (LeteoError) a spec this owner must not or cannot compute."""
        return None

    def dp_sensitivity(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity | None:
        """Secure-sum protocols: the L1/L2 sensitivity (integer units) of this site's share,
        recomputed from the public round parameters: what `check` verifies the announced noise
        against and what the round's privacy event is charged at. None: the protocol has no
        DP share (then the charge is an ApproxEvent of `charge`)."""
        return None


class LedgerSide(ABC):
    """What an owner's ledger records of a round: the budget the request allows and the job
    declares, the round's charge and privacy event, the budget the owner must still have, and
    the entry's mechanism and note. It reads the owner's side
    (`OwnerSide.columns`, `dp_sensitivity`)."""

    name: ClassVar[str]

    @abstractmethod
    def columns(self, spec: Any) -> list[str]: ...

    @abstractmethod
    def dp_sensitivity(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity | None: ...

    def request_budget(self, request: Any, dp: DpRequest | None) -> Budget | None:
        """The most a job planned from this request may charge each owner (None: the analyst
        asked for no DP), compared by owners with `job_budget` of the spec they receive."""
        return dp.budget if dp is not None else None

    def job_budget(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What the whole job of this round charges an owner, as the spec declares it (a
        multi-round protocol counts every round); None: nothing."""
        return self.charge(spec, dp)

    def charge(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What this round spends from the owner's budget under basic composition (None:
        nothing). A job's round (`charge_job`): the increment of the job's Renyi composition
        at the job's delta, eps(i) - eps(i - 1), the delta with round 1."""
        return dp.budget if dp is not None else None

    def charge_event(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec | None
    ) -> PrivacyEvent | None:
        """The round's privacy event, what an RDP ledger composes (None: no DP charge).
        Default: the Skellam noise of the round at the quorum (never less than what is added)
        and the sensitivity the owner recomputes (`dp_sensitivity`)."""
        if dp is None:
            return None
        sens = self.dp_sensitivity(spec, encoding, dp)
        if sens is None:
            charge = self.charge(spec, dp)
            return ApproxEvent(charge.epsilon, charge.delta) if charge is not None else None
        if dp.counts_clipped:  # the clipped-rows count rides in the same noisy share
            if encoding is None:
                raise ProtocolError("a bounded DP round needs an encoding")
            sens, _ = with_clip_count(sens, 0, encoding.count_scale_bits, True)
        return SkellamEvent(dp.mu, sens.l1, sens.l2)

    def ledger_charge(
        self,
        spec: Any,
        encoding: ShareEncoding | None,
        dp: DpSpec | None,
        *,
        ahead: bool = False,
    ) -> LedgerCharge | None:
        """What the owner's ledger is asked for this round (None: nothing): its budget alone
        and its event; `ahead`: with every later round of its job that the owner must still
        afford to take part (`budget_needed`)."""
        budget = self.charge(spec, dp)
        if budget is None:
            return None
        return LedgerCharge(budget, self.charge_event(spec, encoding, dp))

    def budget_needed(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What the owner must still have to take part (k-means: every remaining iteration)."""
        return self.charge(spec, dp)

    def mechanism(self, spec: Any, dp: DpSpec | None) -> str:
        """The mechanism name a charge is recorded under in the ledger."""
        return dp.mechanism if dp is not None else self.name

    def describe(self, spec: Any, dp: DpSpec | None) -> str:
        """The ledger note of a charge."""
        return f"{self.name} on {', '.join(self.columns(spec))}"


class FederatedProtocol(AnalystSide, JobSide, OwnerSide, LedgerSide, ABC):
    """One protocol, as every party calls it; `name` is its payload field in RoundRequest and
    RoundSpec. A protocol is either a secure sum (`SecureSumRounds`) or a round of reports
    (`ReportRounds`)."""

    kind: ClassVar[str]


class SecureSumRounds(FederatedProtocol):
    """Owners send Paillier-encrypted, packed integers; the CSP reveals their sum."""

    kind: ClassVar[str] = SECURE_SUM

    @abstractmethod
    def share_values(
        self,
        spec: Any,
        encoding: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        """Secure-sum protocols: this site's encoded statistics (before noise)."""
        raise NotImplementedError(f"{self.name} sends no encrypted share")


class ProjectionRounds(ABC):
    """A secure sum whose reveal may be a projection (`reveal_mode` "projection"): the
    CSP answers the aggregator's query on the summed share, never the share itself."""

    @abstractmethod
    def projection_query(self, plan: Any, state: Any, n_owners: int) -> ProjectionQuery:
        """What the CSP projects a round's revealed sum onto."""


class ReportRounds(FederatedProtocol):
    """Owners send perturbed reports (LDP); the aggregator folds them into an accumulator."""

    kind: ClassVar[str] = REPORTS

    @abstractmethod
    def new_accumulator(self, plan: Any) -> Any:
        """Report protocols: the accumulator the round's reports are folded into."""
        raise NotImplementedError(f"{self.name} takes no reports")

    @abstractmethod
    def reports(
        self, spec: Any, site: SiteData, rng: np.random.Generator, timings: dict[str, float]
    ) -> ReportStream:
        """Report protocols: this site's perturbed reports."""
        raise NotImplementedError(f"{self.name} sends no reports")


class MultiRoundJob(ABC):
    """The budget of a multi-round DP job (k-means, logistic regression), for a
    `FederatedProtocol` whose spec says its iteration and the job's T (`iterations_of`): each
    round's noise is calibrated so that the T rounds together give the signed (epsilon, delta)
    (Renyi composition, `DpSpec.compositions`), which every owner verifies in `check`."""

    name: ClassVar[str]

    @abstractmethod
    def iterations_of(self, spec: Any) -> tuple[int, int]:
        """(this round's iteration, the job's T) as the spec declares them."""

    def charge(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The iteration's share of the job's signed (epsilon, delta), against the analyst's
        authorization: T shares make the job's budget (the ledger charges by its accountant,
        `ledger_charge`)."""
        return dp.budget.split(max(1, self.iterations_of(spec)[1])) if dp is not None else None

    def job_budget(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The job's (epsilon, delta): what its T iterations give together."""
        return dp.budget if dp is not None else None

    def budget_needed(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The job's budget: take part only if the ledger covers this and every later
        iteration (`ledger_charge(..., ahead=True)`)."""
        return dp.budget if dp is not None else None

    def ledger_charge(
        self,
        spec: Any,
        encoding: ShareEncoding | None,
        dp: DpSpec | None,
        *,
        ahead: bool = False,
    ) -> LedgerCharge | None:
        """The iteration's event, as a round of job `<name>:<job id>` whose budget is the
        job's (epsilon, delta); `ahead`: with the later iterations."""
        if dp is None:
            return None
        iteration, iterations = self.iterations_of(spec)
        return LedgerCharge(
            dp.budget,
            self.charge_event(spec, encoding, dp),  # type: ignore[attr-defined]
            job=f"{self.name}:{spec.job_id}",
            further=max(0, iterations - iteration) if ahead else 0,
        )
