"""One round, from its opening to its publication.

open (its intake: at the CSP for a secure-sum round) -> invite every owner and arm the
deadline -> collect answers, shares and declines -> close once, when every owner has submitted
or declined, when only owners known to be disconnected are still owed and the quorum is in, or
at the deadline -> check the quorum -> reveal (the intake's aggregate) -> let the protocol finish
the round -> keep its end in the state -> publish it to the invited owners.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from aggregator.owners import OwnerDirectory
from aggregator.rounds.intake import RoundIntake
from aggregator.rounds.jobs import Job, JobRegistry, not_kept
from aggregator.rounds.report_intake import ReportIntake
from aggregator.rounds.reveal import Revealer
from aggregator.rounds.round import COMPLETED, FAILED, Round, answer_latency, status_proto
from aggregator.rounds.secure_sum import SignedShares
from aggregator.rounds.workers import Workers
from aggregator.state import StateStore
from leteo_fed.errors import LeteoError, PeerUnavailable, ProtocolError
from leteo_fed.protocols.interface import ProjectionRounds, ReportRounds
from leteo_fed.protocols.round_types import Outcome, ProjectionQuery, RoundPlan, Step
from leteo_fed.transport import membership
from leteo_fed.transport.metrics import AggregatorMetrics

log = logging.getLogger("leteo.aggregator")

DISCONNECTED = "unreachable: disconnected during the round (the quorum was in without it)"
GONE = "unreachable: disconnected since the job's previous round; not invited again"


class IntakeOpener:
    """Opens a round's intake by its protocol's kind: for a secure-sum round, at the CSP (or the
    key holders) under its current key (asked per round, so a key rotation takes effect with
    the next round); for a report round, the protocol's accumulator."""

    def __init__(self, secure_sum: Revealer, owners_ca: bytes | None) -> None:
        """`owners_ca`: share statements are checked on arrival against it (None: insecure)."""
        self.secure_sum = secure_sum
        self.owners_ca = owners_ca

    def open(self, job: Job, plan: RoundPlan, round_id: str) -> RoundIntake:
        protocol = job.protocol
        if isinstance(protocol, ReportRounds):
            return ReportIntake(protocol.new_accumulator(job.plan))
        mode = "projection" if plan.reveal == "projection" else "blinded"
        self.secure_sum.check_mode(mode)  # e.g. no projection-only rounds with key holders
        public = self.secure_sum.public_key()
        layout = plan.share_encoding.layout(public.bits)

        def projection_query(n_shares: int) -> ProjectionQuery:
            if not isinstance(protocol, ProjectionRounds):
                raise ProtocolError(f"{protocol.name} has no projection-only mode")
            return protocol.projection_query(job.plan, job.state, n_shares)

        intake = SignedShares(
            public,
            layout,
            plan.n_values,
            round_id,
            mode,
            self.owners_ca,
            job.invited,
            self.secure_sum,
            projection_query,
        )
        self.secure_sum.open(round_id, public.key_id, intake.n_ciphertexts, mode)
        return intake


class RoundLifecycle:
    def __init__(
        self,
        owners: OwnerDirectory,
        intakes: IntakeOpener,
        publish: Callable[[Round], None],
        registry: JobRegistry,
        store: StateStore | None,
        metrics: AggregatorMetrics,
        workers: Workers,
        stopping: threading.Event,
    ) -> None:
        """`publish`: tells a round's invited owners how it ended; `stopping`: set once the
        aggregator stops (a state write failing then is expected)."""
        self.owners = owners
        self.intakes = intakes
        self.publish = publish
        self.registry = registry
        self.store = store
        self.metrics = metrics
        self.workers = workers
        self.stopping = stopping

    # ------------------------------------------------------------------ open, invite

    def open(self, job: Job, index: int) -> Round:
        """Open round `index` of the job (its id differs on every attempt: owners and the CSP
        take each round id once)."""
        plan: RoundPlan = job.protocol.next_round(job.plan, job.state, index)
        # owners and the CSP refuse a round id they have seen: a resumed job's rounds differ
        again = f"-r{job.attempt}" if job.attempt > 1 else ""
        round_id = job.job_id + again
        if job.protocol.multi_round:
            round_id = f"{job.job_id}-it{index}{again}"
        deadline = time.time() + job.plan.deadline_seconds
        intake = self.intakes.open(job, plan, round_id)
        rnd = Round(
            round_id,
            plan.label,
            plan,
            deadline,
            list(job.invited),
            job.plan.min_owners,
            intake,
            job,
            index=index,
        )
        self.registry.add_round(rnd)
        with job.lock:
            job.rounds.append(rnd)
            job.message = job.protocol.progress(job.plan, index, round_id) or job.message
        return rnd

    def open_kept(self, job: Job, index: int) -> Round:
        """Open a further round of a running job and keep it before any owner is invited."""
        rnd = self.open(job, index)
        if self.store is not None:
            try:
                self.store.open_round(rnd.round_id, job.job_id, index, rnd.label, job.message)
            except LeteoError:
                rnd.finish(FAILED, "the aggregator could not record the round")
                raise
        return rnd

    def invite_all(self, rnd: Round) -> None:
        """Arm the deadline and invite every owner (all at once; replies arrive as callbacks)."""
        from leteo_fed.transport.rounds import spec_to_proto, with_membership

        job: Job = rnd.job
        rnd.invited_at = time.perf_counter()
        self.metrics.round_started(rnd.label)
        timer = threading.Timer(max(0.0, rnd.deadline - time.time()), self.finalize, args=(rnd,))
        timer.daemon = True
        timer.start()
        members = sorted(rnd.invited)
        tree = membership.levels(members)  # once per round: each owner's proof is log-size
        spec = spec_to_proto(
            rnd.round_id,
            job.protocol,
            rnd.plan,
            rnd.intake.key_id,
            rnd.deadline,
            rnd.intake.layout,
            rnd.min_owners,
            job.job_id,
            job.authorization,
            membership.root_of_levels(tree),
            len(members),
        )
        gone = self._gone_from_job(job, rnd)
        for index, site in enumerate(members):
            if site in gone:  # not asked again: it would only make the round wait
                self.decline(rnd, site, GONE)
                continue
            mine = with_membership(spec, membership.proof_from_levels(tree, index))
            self.owners.invite(site, mine, functools.partial(self._invited, rnd, site))

    def _gone_from_job(self, job: Job, rnd: Round) -> set[str]:
        """Owners that did not contribute to the job's previous round and are still known to
        be disconnected: gone for good as far as this job is concerned."""
        with job.lock:
            earlier = [r for r in job.rounds if r is not rnd]
        if not earlier:
            return set()
        last = earlier[-1]
        return {
            s
            for s in rnd.invited
            if s not in last.submitted and s in last.invited_set and self.owners.is_gone(s)
        }

    # ------------------------------------------------------------------ collect

    def _invited(self, rnd: Round, site: str, reason: str) -> None:
        if not reason.startswith("unreachable"):  # an answer: how long the owner took
            latency = time.perf_counter() - rnd.invited_at
            self.metrics.answered(latency)
            with rnd.lock:
                rnd.answer_seconds.append(latency)
        if not reason:
            with rnd.lock:
                rnd.accepted.add(site)
        if reason:
            log.warning("round %s: %s cannot take part: %s", rnd.round_id, site, reason)
            self.decline(rnd, site, reason)

    def decline(self, rnd: Round, site: str, reason: str) -> None:
        self.metrics.declined(reason)
        if rnd.decline(site, reason):
            self.workers.submit(self.finalize, rnd)
        else:
            self._close_if_settled(rnd)

    def accepted(self, rnd: Round, complete: bool) -> None:
        if complete:
            self.workers.submit(self.finalize, rnd)
        else:
            self._close_if_settled(rnd)

    def upload_failed(self, rnd: Round) -> None:
        """A share broke off mid-upload (its owner may be gone): the round may be settled."""
        self._close_if_settled(rnd)

    def owner_gone(self, site: str) -> None:
        """An outbound owner's stream ended: every open round that now only waits for owners
        known to be gone closes at once instead of at its deadline."""
        for rnd in self.registry.open_rounds_of(site):
            self._close_if_settled(rnd)

    def _close_if_settled(self, rnd: Round) -> None:
        owed = rnd.settled_without(self.owners.is_gone)
        if not owed:
            return
        for site in owed:
            self.metrics.declined(DISCONNECTED)
            rnd.decline(site, DISCONNECTED)
        log.info(
            "round %s: quorum in, %s disconnected: closing without waiting",
            rnd.round_id,
            ", ".join(owed),
        )
        self.workers.submit(self.finalize, rnd)

    # ------------------------------------------------------------------ close

    def finalize(self, rnd: Round) -> None:
        """Close the round exactly once: quorum, reveal, the protocol's result, keep, publish."""
        if not rnd.claim_close():
            return
        job: Job = rnd.job
        state, message, result = FAILED, "", None
        try:
            if len(rnd.submitted) < rnd.min_owners:
                message = rnd.quorum_message()
                log.warning("round %s failed: %s", rnd.round_id, message)
            else:
                outcome = self._reveal(rnd)
                step: Step = job.protocol.finish_round(job.plan, job.state, outcome)
                rnd.step = step
                state, result = COMPLETED, step.result
                message = f"{len(rnd.submitted)} share(s) aggregated"
                log.info("round %s completed with %d owners", rnd.round_id, len(rnd.submitted))
        except PeerUnavailable as exc:  # the CSP is down: the job may run the round again
            rnd.csp_unreachable = True
            message = str(exc)
            log.error("round %s failed: %s", rnd.round_id, exc)
        except LeteoError as exc:
            message = str(exc)
            log.error("round %s failed: %s", rnd.round_id, exc)
        except Exception as exc:  # a bug must still end the round, never leave it hanging
            log.exception("round %s crashed", rnd.round_id)
            message = f"internal error: {type(exc).__name__}"
        finally:
            rnd.intake.cleanup()  # e.g. spilled report files are not needed any more
        # kept before the round counts as done: the job's next round opens only after the
        # state holds this one's end (and the protocol's state after it)
        self._record_end(job, rnd, state, message, result)
        rnd.finish(state, message, result)
        self.metrics.round_ended(
            rnd.label, state == COMPLETED, time.perf_counter() - rnd.invited_at
        )
        self.publish(rnd)
        self.record_published(rnd.round_id)

    def _reveal(self, rnd: Round) -> Outcome:
        """What the round revealed: who took part, how long it took, and its intake's
        aggregate."""
        outcome = Outcome(
            round_id=rnd.round_id,
            plan=rnd.plan,
            invited=list(rnd.invited),
            submitted=dict(rnd.submitted),
            declined=dict(rnd.declined),
        )
        # invitations out -> round closed (every owner answered, or the deadline)
        outcome.timings["collect_seconds"] = time.perf_counter() - rnd.invited_at
        latency = answer_latency(rnd.answer_seconds)
        outcome.timings.update(latency)
        if latency:
            log.info(
                "round %s: %d owner(s) answered, latency p50 %.3f s, p99 %.3f s, max %.3f s",
                rnd.round_id,
                len(rnd.answer_seconds),
                latency["answer_p50_seconds"],
                latency["answer_p99_seconds"],
                latency["answer_max_seconds"],
            )
        rnd.intake.reveal(outcome)
        return outcome

    def _record_end(self, job: Job, rnd: Round, state: str, message: str, result: Any) -> None:
        if self.store is None:
            return
        try:
            status = status_proto(
                rnd.round_id, rnd.label, state, message, rnd.invited, list(rnd.submitted), result
            )
            done = state == COMPLETED and rnd.step is not None and rnd.step.done
            snapshot = None
            if state == COMPLETED and job.protocol.multi_round:
                snapshot = job.protocol.snapshot(job.state)
            self.store.finish_round(rnd.round_id, state, status.SerializeToString(), done, snapshot)
        except Exception:  # the round still ends and is published; a restart would fail it
            not_kept(f"round {rnd.round_id}: its end", self.stopping.is_set())

    def record_published(self, round_id: str) -> None:
        if self.store is None:
            return
        try:
            self.store.mark_published(round_id)
        except Exception:
            not_kept(f"round {round_id}: its publication", self.stopping.is_set())
