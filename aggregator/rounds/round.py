"""Round bookkeeping: who was invited, who submitted, the running encrypted sum, the outcome.

A share is folded into the encrypted sum only once it has arrived whole and validated, so an
owner that disconnects mid-upload leaves the aggregate untouched. A round closes exactly once:
when every invited owner has submitted or declined, or at its deadline, whichever comes first.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aggregator.rounds.intake import RoundIntake
from leteo_fed.errors import AccessDenied, DuplicateError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.round_types import RoundPlan, Step
from leteo_fed.transport.rounds import result_to_proto
from leteo_fed.transport.site_names import MANY_SITES, name_sites

OPEN, COMPLETED, FAILED = "OPEN", "COMPLETED", "FAILED"


def status_proto(
    ident: str,
    label: str,
    state: str,
    message: str,
    invited: list[str],
    submitted: list[str],
    result: Any,
) -> pb.RoundStatus:
    """The RoundStatus of a round or a job (GetRound's answer, what owners are published)."""
    return pb.RoundStatus(
        round_id=ident,
        protocol=label,
        state=state,
        message=message,
        invited=invited,
        submitted=submitted,
        missing=sorted(set(invited).difference(submitted)),
        result=result_to_proto(result) if result is not None else None,
    )


@dataclass
class Round:
    round_id: str
    label: str
    plan: RoundPlan
    deadline: float
    invited: list[str]
    min_owners: int
    intake: RoundIntake  # where contributions go: signed shares or LDP reports
    job: Any  # the Job (`aggregator.rounds.jobs`) this round belongs to
    state: str = OPEN
    message: str = ""
    declined: dict[str, str] = field(default_factory=dict)
    accepted: set[str] = field(default_factory=set)  # owners that accepted the invitation
    receiving: set[str] = field(default_factory=set)
    submitted: dict[str, dict[str, float]] = field(default_factory=dict)
    result: Any = None  # the protocol's result dataclass
    step: Step | None = None
    closing: bool = False
    invited_at: float = 0.0  # time.perf_counter() when the invitations went out
    answer_seconds: list[float] = field(default_factory=list)  # invitation -> answer, per owner
    stored: pb.RoundStatus | None = None  # a round from before a restart: its kept status
    index: int = 1  # the round's place in its job (k-means: the iteration)
    csp_unreachable: bool = False  # it failed because the CSP could not be reached
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    # kept beside the lists so that no answer or share scans every invited owner
    invited_set: frozenset[str] = field(init=False)
    resolved: set[str] = field(init=False, default_factory=set)  # submitted or declined

    def __post_init__(self) -> None:
        self.invited_set = frozenset(self.invited)

    @classmethod
    def ended(cls, status: pb.RoundStatus) -> Round:
        """A round from before a restart, known only by its final status (to publish it)."""
        rnd = cls(
            status.round_id,
            status.protocol,
            None,  # type: ignore[arg-type]  # nothing is planned or received any more
            0.0,
            list(status.invited),
            0,
            None,  # type: ignore[arg-type]
            None,
            state=status.state,
            message=status.message,
            closing=True,
            stored=status,
        )
        rnd.done.set()
        return rnd

    def missing(self) -> list[str]:
        return [s for s in self.invited if s not in self.submitted]

    # ------------------------------------------------------------------ share intake

    def begin_share(self, site: str) -> None:
        with self.lock:
            if self.closing or self.state != OPEN:
                raise ProtocolError(f"round {self.round_id} is closed; share from {site} refused")
            if time.time() > self.deadline:
                raise ProtocolError(f"round {self.round_id} passed its deadline; share refused")
            if site not in self.invited_set:
                raise AccessDenied(f"owner '{site}' was not invited to round {self.round_id}")
            if site in self.submitted or site in self.receiving:
                raise DuplicateError(f"owner '{site}' already submitted a share to {self.round_id}")
            if site in self.declined:
                raise ProtocolError(f"owner '{site}' declined round {self.round_id}")
            self.receiving.add(site)

    def abort_share(self, site: str) -> None:
        with self.lock:
            self.receiving.discard(site)

    def accept(self, site: str, contribution: Any, timings: dict[str, float]) -> bool:
        """Fold a complete, validated contribution. Returns True when the round can now close."""
        with self.lock:
            self.receiving.discard(site)
            if self.closing:
                raise ProtocolError(f"round {self.round_id} closed while {site}'s share arrived")
            self.intake.fold(contribution)
            self.submitted[site] = dict(timings)
            self.resolved.add(site)
            return self._all_resolved()

    def decline(self, site: str, reason: str) -> bool:
        with self.lock:
            if site in self.submitted or self.closing:
                return False
            self.declined[site] = reason
            self.receiving.discard(site)
            if site in self.invited_set:
                self.resolved.add(site)
            return self._all_resolved()

    def _all_resolved(self) -> bool:
        return len(self.resolved) == len(self.invited_set)

    def settled_without(self, gone: Callable[[str], bool]) -> list[str]:
        """The owners still owed, if the round can close now without them: its quorum is in,
        no share is arriving, and each of them is `gone` (known to be disconnected). Empty when
        waiting may still change the round."""
        with self.lock:
            if self.closing or self.receiving or len(self.submitted) < self.min_owners:
                return []
            owed = [s for s in self.invited if s not in self.submitted and s not in self.declined]
        return owed if owed and all(gone(s) for s in owed) else []

    def claim_close(self) -> bool:
        """True for exactly one caller: the one that gets to finalize."""
        with self.lock:
            if self.closing:
                return False
            self.closing = True
            return True

    def finish(self, state: str, message: str, result: Any = None) -> None:
        with self.lock:
            self.state, self.message, self.result = state, message, result
        self.done.set()

    def quorum_message(self) -> str:
        parts = [
            f"quorum not met: {len(self.submitted)} share(s) received, {self.min_owners} required"
        ]
        if self.declined:
            by_reason: dict[str, list[str]] = {}
            for site, reason in sorted(self.declined.items()):
                by_reason.setdefault(reason, []).append(site)
            parts.append(
                "declined: "
                + "; ".join(
                    f"{name_sites(sites)}: {r}" if len(sites) > MANY_SITES else f"{s}: {r}"
                    for r, sites in by_reason.items()
                    for s in (sites[:1] if len(sites) > MANY_SITES else sites)
                )
            )
        silent = [s for s in self.invited if s not in self.submitted and s not in self.declined]
        if silent:
            parts.append("no share by the deadline from: " + name_sites(silent))
        return ". ".join(parts)


def round_status(rnd: Round) -> pb.RoundStatus:
    if rnd.stored is not None:
        return rnd.stored
    with rnd.lock:
        return status_proto(
            rnd.round_id,
            rnd.label,
            rnd.state,
            rnd.message,
            rnd.invited,
            list(rnd.submitted),
            rnd.result,
        )


def answer_latency(seconds: list[float]) -> dict[str, float]:
    """The owners' answer latency, invitation -> answer, as round timings: what an operator
    compares with the invitation timeout (empty when nobody answered)."""
    if not seconds:
        return {}
    ordered = sorted(seconds)

    def at(q: float) -> float:  # nearest rank: a latency some owner actually had
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return {
        "answer_p50_seconds": at(0.50),
        "answer_p99_seconds": at(0.99),
        "answer_max_seconds": ordered[-1],
    }
