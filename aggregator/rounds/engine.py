"""The round engine: one lifecycle for every protocol.

A request becomes a job (its id is the round id for single-round protocols). The job runs its
rounds one after the other in its own thread: open (at the CSP for secure-sum rounds), invite,
wait until every owner has submitted or declined or the deadline passes, check the quorum,
reveal (secure sum or report estimate), let the protocol finish the round, publish the round's
outcome to the invited owners, and either stop or open the protocol's next round.

With a state store (`aggregator.state`) every step is kept as it happens: the job with the
analyst's signed request when it starts, each round when it opens and when it ends (with, for a
multi-round protocol, its state after every completed round), and each result once it is
published. `recover` picks up from there after a restart.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aggregator.owners import OwnerDirectory
from aggregator.rounds.report_intake import ReportIntake
from aggregator.rounds.round import (
    COMPLETED,
    FAILED,
    OPEN,
    Round,
    answer_latency,
    status_proto,
)
from aggregator.rounds.secure_sum import SecureSum, SignedShares
from aggregator.state import StateStore, StoredJob, StoredRound
from leteo_fed import defaults
from leteo_fed.errors import LeteoError, NotFoundError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.base import (
    REPORTS,
    Common,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    Step,
    encoding_facts,
)
from leteo_fed.transport import membership
from leteo_fed.transport.metrics import AggregatorMetrics

log = logging.getLogger("leteo.aggregator")

SPARK_REPORT_THRESHOLD = defaults.SPARK_REPORT_THRESHOLD
RESTARTED = (
    "the aggregator restarted while round {round_id} was open; the shares sent to it were lost"
)

MAX_CSP_RETRIES = 3  # rounds of one job run again after the CSP was unreachable
CSP_POLL_SECONDS = 1.0
DISCONNECTED = "unreachable: disconnected during the round (the quorum was in without it)"
GONE = "unreachable: disconnected since the job's previous round; not invited again"

# the analyst's signed request (serialized pb.Signed) -> (protocol, request payload, the common
# round fields for n invited owners, the pb.Signed): how a job is planned again after a restart
Rebuild = Callable[[bytes], tuple[FederatedProtocol, Any, Callable[[int], Common], Any]]


@dataclass
class Job:
    job_id: str
    protocol: FederatedProtocol
    plan: Any
    state: Any
    invited: list[str]
    authorization: Any = None  # the analyst's signed request (pb.Signed), relayed to owners
    caller: str = ""
    attempt: int = 1  # 1 + how often the job resumed after a restart
    status: str = OPEN
    message: str = ""
    result: Any = None  # the protocol's (job) result dataclass
    rounds: list[Round] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)
    started_unix: float = field(default_factory=time.time)
    previous: str = ""  # how the job's last completed round ended (its Step message)
    csp_retries: int = 0  # rounds run again because the CSP was unreachable

    @property
    def label(self) -> str:
        return self.plan.label

    def finish(self, status: str, message: str, result: Any = None) -> None:
        with self.lock:
            self.status, self.message, self.result = status, message, result
        self.done.set()

    def submitted(self) -> list[str]:
        """Who contributed: the live round's owners, or for multi-round jobs the last
        completed round's."""
        with self.lock:
            rounds = list(self.rounds)
        if self.protocol.multi_round:
            rounds = [r for r in rounds if r.state == COMPLETED]
        return sorted(rounds[-1].submitted) if rounds else []


def job_status(job: Job) -> pb.RoundStatus:
    submitted = job.submitted()
    with job.lock:
        status = status_proto(
            job.job_id, job.label, job.status, job.message, job.invited, submitted, job.result
        )
        current = job.rounds[-1] if job.rounds else None
        previous = job.previous
    if current is not None:
        status.progress.CopyFrom(_progress(job, current, previous))
    return status


def _progress(job: Job, rnd: Round, previous: str) -> pb.JobProgress:
    with rnd.lock:
        if rnd.state != OPEN:
            phase = rnd.state.lower()
        else:
            phase = "decrypting" if rnd.closing else "collecting"
        return pb.JobProgress(
            round_id=rnd.round_id,
            round=rnd.index,
            rounds=job.protocol.max_rounds(job.plan),
            phase=phase,
            invited=list(rnd.invited),
            accepted=sorted(rnd.accepted),
            declined=dict(rnd.declined),
            submitted=sorted(rnd.submitted),
            quorum=rnd.min_owners,
            elapsed_seconds=time.time() - job.started_unix,
            previous=previous,
        )


def _envelope(authorization: Any) -> bytes:
    """The signed request as stored (b'' when there is none: tests without an analyst)."""
    return authorization.SerializeToString() if authorization is not None else b""


class RoundEngine:
    def __init__(
        self,
        owners: OwnerDirectory,
        secure_sum: SecureSum,
        publish: Callable[[Round], None],
        spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
        owners_ca: bytes | None = None,
        store: StateStore | None = None,
        rebuild: Rebuild | None = None,
        metrics: AggregatorMetrics | None = None,
    ) -> None:
        """`store`: where jobs and rounds are kept (None: in memory only, a restart forgets
        them); `rebuild`: how a kept request is planned again (multi-round jobs resume only
        with it); `metrics`: where rounds and declines are counted (None: a registry of its
        own)."""
        if spark_report_threshold < 0:
            raise ValueError(f"spark_report_threshold must be >= 0, got {spark_report_threshold}")
        self.owners = owners
        self.secure_sum = secure_sum
        self.owners_ca = owners_ca  # share statements are checked on arrival (None: insecure)
        self.spark_report_threshold = spark_report_threshold
        self._publish = publish
        self.store = store
        self._rebuild = rebuild
        self.metrics = metrics if metrics is not None else AggregatorMetrics()
        self._capture: list[Future] | None = None  # publications to wait for (recovery)
        self._jobs: dict[str, Job] = {}
        self._rounds: dict[str, Round] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="round")
        owners.on_disconnect = self.owner_gone

    # ------------------------------------------------------------------ lookups

    def job(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def round(self, round_id: str) -> Round:
        with self._lock:
            rnd = self._rounds.get(round_id)
        if rnd is None:
            raise NotFoundError(f"unknown round {round_id!r}")
        return rnd

    def jobs_listing(self, caller: str | None, limit: int) -> list[pb.JobSummary]:
        """The newest jobs first (only `caller`'s unless None): running ones as they stand,
        the others as kept in the state (those from before a restart included)."""
        with self._lock:
            live = [j for j in self._jobs.values() if caller is None or j.caller == caller]
        out = {}
        for job in live:
            status = job_status(job)
            out[job.job_id] = pb.JobSummary(
                job_id=job.job_id,
                protocol=job.label,
                analyst=job.caller,
                state=status.state,
                message=status.message,
                started_unix=job.started_unix,
                invited=list(status.invited),
                submitted=list(status.submitted),
            )
        if self.store is not None:
            try:
                stored = self.store.recent_jobs(caller, limit)
            except LeteoError:
                log.exception("could not list the jobs kept in the state")
                stored = []
            for s in stored:
                if s.job_id in out:
                    continue
                final = pb.RoundStatus.FromString(s.status_proto) if s.status_proto else None
                out[s.job_id] = pb.JobSummary(
                    job_id=s.job_id,
                    protocol=s.label,
                    analyst=s.caller,
                    state=s.status,
                    message=s.message,
                    started_unix=s.created_unix,
                    invited=s.invited,
                    submitted=list(final.submitted) if final is not None else [],
                )
        newest = sorted(out.values(), key=lambda j: j.started_unix, reverse=True)
        return newest[:limit]

    def stored_status(self, ident: str) -> pb.RoundStatus | None:
        """The kept final status of a job or round (those from before a restart included);
        None while it runs, if unknown, or without a store."""
        if self.store is None:
            return None
        try:
            raw = self.store.final_status(ident)
        except LeteoError:
            log.exception("could not read the status of %s from the state", ident)
            return None
        return pb.RoundStatus.FromString(raw) if raw is not None else None

    def stored_round_status(self, round_id: str) -> pb.RoundStatus | None:
        """The kept final status of the round `round_id` itself, never its job's: an owner
        asking for the lost first attempt of a single-round job (same id as the job) must hear
        that this attempt failed, even once the job completed under a new attempt."""
        if self.store is None:
            return None
        try:
            stored = self.store.round(round_id)
        except LeteoError:
            log.exception("could not read the status of %s from the state", round_id)
            return None
        if stored is None or stored.status_proto is None:
            return None
        return pb.RoundStatus.FromString(stored.status_proto)

    # ------------------------------------------------------------------ starting a job

    def start(
        self,
        protocol: FederatedProtocol,
        request: Any,
        common_of: Callable[[int], Common],
        owners: list[str],
        caller: str,
        authorization: Any = None,
    ) -> Job:
        """Plan the job (refusals raise before anything is opened) and run it in a thread."""
        # sorted, distinct: the set owners and the CSP know by its Merkle root (`membership`)
        invited = sorted(set(owners) or set(self.owners.sites()))  # idle owners only when named
        plan = protocol.plan(request, common_of(len(invited)))
        self.owners.check_invited(invited, plan.min_owners)
        job_id = f"{plan.label}-{uuid.uuid4().hex[:12]}"
        job = Job(
            job_id,
            protocol,
            plan,
            protocol.start(plan, job_id, invited),
            invited,
            authorization,
            caller,
        )
        first = self._open(job, 1)  # the first round opens now: CSP refusals reach the caller
        if self.store is not None:  # kept before any invitation; a failure reaches the caller
            try:
                self.store.start_job(
                    job_id,
                    protocol.name,
                    plan.label,
                    caller,
                    _envelope(authorization),
                    invited,
                    first.round_id,
                    first.label,
                )
            except LeteoError:
                first.finish(FAILED, "the aggregator could not record the job")
                raise
        with self._lock:
            self._jobs[job_id] = job
        log.info(
            "job %s started by %s: %s, %d owners invited, quorum %d, deadline %.0f s",
            job_id,
            caller,
            plan.label,
            len(invited),
            plan.min_owners,
            plan.deadline_seconds,
        )
        threading.Thread(
            target=self._run, args=(job, first), name=f"job-{job_id}", daemon=True
        ).start()
        return job

    def _run(self, job: Job, rnd: Round | None, index: int = 1) -> None:
        """Run the job's rounds from round `index` (`rnd`, or opened here when None) on."""
        try:
            if rnd is None:
                rnd = self._open_retrying(job, index)
            while True:
                self._invite_all(rnd)
                wait = job.plan.deadline_seconds + defaults.CSP_TIMEOUT_SECONDS + 60
                if not rnd.done.wait(wait):
                    raise ProtocolError(f"round {rnd.round_id} did not finish")
                if rnd.state != COMPLETED or rnd.step is None:
                    if rnd.csp_unreachable and self._await_csp(job, rnd.message):
                        rnd = self._open_retrying(job, index)  # the same round, a new attempt
                        continue
                    self._end(job, FAILED, job.protocol.failure(job.plan, index, rnd.message))
                    log.warning("job %s failed: %s", job.job_id, job.message)
                    return
                step = rnd.step
                if step.done:
                    break
                with job.lock:
                    job.message = step.message or job.message
                    job.previous = step.message
                if self._closing.is_set():
                    raise PeerUnavailable("the aggregator is shutting down")
                index += 1
                rnd = self._open_retrying(job, index)
            message = step.message or rnd.message
            self._end(job, COMPLETED, message, job.protocol.job_result(job.plan, job.state, step))
            log.info("job %s completed: %s", job.job_id, job.message)
        except LeteoError as exc:
            self._end(job, FAILED, job.protocol.failure(job.plan, index, str(exc)))
            log.error("job %s failed: %s", job.job_id, job.message)
        except Exception as exc:  # a bug must still end the job, never leave it hanging
            log.exception("job %s crashed", job.job_id)
            self._end(job, FAILED, f"internal error: {type(exc).__name__}")

    def _open_retrying(self, job: Job, index: int) -> Round:
        """Open round `index`; if the CSP cannot be reached, wait for it (`_await_csp`) and
        open it again under a new attempt."""
        while True:
            try:
                return self._open_next(job, index)
            except PeerUnavailable as exc:
                if not self._await_csp(job, str(exc)):
                    raise

    def _await_csp(self, job: Job, why: str) -> bool:
        """The CSP was unreachable: wait for it up to one round deadline, at most
        MAX_CSP_RETRIES times per job. True once it answers again; the job's next round then
        opens under a new attempt id (owners and the CSP take each round id once; a share
        charged in the failed attempt comes back to its owner when the CSP attests it never
        decrypted it, as after any failure)."""
        if job.csp_retries >= MAX_CSP_RETRIES or self._closing.is_set():
            return False
        job.csp_retries += 1
        log.warning("job %s: %s; waiting for the CSP to come back", job.job_id, why)
        end = time.monotonic() + job.plan.deadline_seconds
        while not self._closing.is_set():
            try:
                self.secure_sum.public_key()
                break
            except LeteoError:
                if time.monotonic() >= end:
                    return False
                self._closing.wait(CSP_POLL_SECONDS)
        else:
            return False
        if self.store is not None:
            job.attempt = self.store.next_attempt(job.job_id)
        else:
            job.attempt += 1
        log.info("job %s: the CSP answers again; attempt %d", job.job_id, job.attempt)
        return True

    def _end(self, job: Job, status: str, message: str, result: Any = None) -> None:
        """Keep the job's final status, then end it (whoever waits for the job finds it kept).
        A job that fails because the aggregator is stopping stays unfinished in the state: the
        next start resumes or fails it."""
        if self.store is not None and status == FAILED and self._closing.is_set():
            log.info("job %s: left for the next start of the aggregator to recover", job.job_id)
        elif self.store is not None:
            try:
                final = status_proto(
                    job.job_id, job.label, status, message, job.invited, job.submitted(), result
                )
                self.store.finish_job(job.job_id, status, message, final.SerializeToString())
            except Exception:
                self._not_kept(f"job {job.job_id}: its end")
        job.finish(status, message, result)

    # ------------------------------------------------------------------ one round

    def _open(self, job: Job, index: int) -> Round:
        plan: RoundPlan = job.protocol.next_round(job.plan, job.state, index)
        # owners and the CSP refuse a round id they have seen: a resumed job's rounds differ
        again = f"-r{job.attempt}" if job.attempt > 1 else ""
        round_id = job.job_id + again
        if job.protocol.multi_round:
            round_id = f"{job.job_id}-it{index}{again}"
        deadline = time.time() + job.plan.deadline_seconds
        if job.protocol.kind == REPORTS:
            intake: Any = ReportIntake(job.protocol.new_accumulator(job.plan))
        else:
            public = self.secure_sum.public_key()  # the CSP's current key, asked per round
            layout = plan.share_encoding.layout(public.bits)
            mode = "projection" if plan.reveal == "projection" else "blinded"
            intake = SignedShares(
                public, layout, plan.n_values, round_id, mode, self.owners_ca, job.invited
            )
            self.secure_sum.open(round_id, public.key_id, intake.n_ciphertexts, mode)
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
        with self._lock:
            self._rounds[round_id] = rnd
        with job.lock:
            job.rounds.append(rnd)
            job.message = job.protocol.progress(job.plan, index, round_id) or job.message
        return rnd

    def _open_next(self, job: Job, index: int) -> Round:
        """Open a further round of a running job and keep it before any owner is invited."""
        rnd = self._open(job, index)
        if self.store is not None:
            try:
                self.store.open_round(rnd.round_id, job.job_id, index, rnd.label, job.message)
            except LeteoError:
                rnd.finish(FAILED, "the aggregator could not record the round")
                raise
        return rnd

    def _invite_all(self, rnd: Round) -> None:
        """Arm the deadline and invite every owner (all at once; replies arrive as callbacks)."""
        from leteo_fed.transport.rounds import spec_to_proto, with_membership

        job: Job = rnd.job
        rnd.invited_at = time.perf_counter()
        self.metrics.round_started(rnd.label)
        timer = threading.Timer(max(0.0, rnd.deadline - time.time()), self.finalize, args=(rnd,))
        timer.daemon = True
        timer.start()
        encrypted = isinstance(rnd.intake, SignedShares)
        members = sorted(rnd.invited)
        tree = membership.levels(members)  # once per round: each owner's proof is log-size
        spec = spec_to_proto(
            rnd.round_id,
            job.protocol,
            rnd.plan,
            rnd.intake.public.key_id if encrypted else "",
            rnd.deadline,
            rnd.intake.layout if encrypted else None,
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
            self._pool.submit(self.finalize, rnd)
        else:
            self._close_if_settled(rnd)

    def accepted(self, rnd: Round, complete: bool) -> None:
        if complete:
            self._pool.submit(self.finalize, rnd)
        else:
            self._close_if_settled(rnd)

    def upload_failed(self, rnd: Round) -> None:
        """A share broke off mid-upload (its owner may be gone): the round may be settled."""
        self._close_if_settled(rnd)

    def owner_gone(self, site: str) -> None:
        """An outbound owner's stream ended: every open round that now only waits for owners
        known to be gone closes at once instead of at its deadline."""
        with self._lock:
            rounds = [r for r in self._rounds.values() if r.state == OPEN and site in r.invited_set]
        for rnd in rounds:
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
        self._pool.submit(self.finalize, rnd)

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
                outcome = self._reveal(job, rnd)
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
            if isinstance(rnd.intake, ReportIntake):
                rnd.intake.cleanup()  # spilled chunk files are not needed any more
        # kept before the round counts as done: the job's next round opens only after the
        # state holds this one's end (and the protocol's state after it)
        self._record_end(job, rnd, state, message, result)
        rnd.finish(state, message, result)
        self.metrics.round_ended(
            rnd.label, state == COMPLETED, time.perf_counter() - rnd.invited_at
        )
        self._publish(rnd)
        self._record_published(rnd.round_id)

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
            self._not_kept(f"round {rnd.round_id}: its end")

    def _record_published(self, round_id: str) -> None:
        if self.store is None:
            return
        try:
            self.store.mark_published(round_id)
        except Exception:
            self._not_kept(f"round {round_id}: its publication")

    def _not_kept(self, what: str) -> None:
        """A write to the state failed (called in an except block): the work goes on in memory."""
        if self._closing.is_set():  # the state closes with the service: expected, one line
            log.warning("%s was not kept in the state: the aggregator is stopping", what)
        else:
            log.exception("%s could not be kept in the state", what)

    def _reveal(self, job: Job, rnd: Round) -> Outcome:
        plan = rnd.plan
        outcome = Outcome(
            round_id=rnd.round_id,
            plan=plan,
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
        if isinstance(rnd.intake, ReportIntake):
            outcome.reports = rnd.intake.finalize()
            log.info(
                "round %s: %s estimate from %d reports (%s path)",
                rnd.round_id,
                outcome.reports.spec.mechanism,
                outcome.reports.n,
                outcome.reports.engine,
            )
            return outcome
        intake: SignedShares = rnd.intake
        public, layout = intake.public, intake.layout
        shares = intake.take()
        n = len(shares)
        outcome.timings["intake_seconds_per_share"] = intake.intake_seconds / n
        outcome.timings["intake_cpu_seconds_per_share"] = intake.intake_cpu_seconds / n
        enc = plan.share_encoding
        outcome.encoding = encoding_facts(enc, layout, plan.n_values, public.bits)
        if plan.reveal == "projection":
            query = job.protocol.projection_query(job.plan, job.state, n)
            outcome.projection = self.secure_sum.project(
                rnd.round_id, public, shares, query, enc, layout, outcome.timings, rnd.invited
            )
            outcome.csp = {"compute_seconds": outcome.projection.compute_seconds}
        else:
            outcome.totals, outcome.csp = self.secure_sum.reveal(
                rnd.round_id, public, shares, plan.n_values, layout, outcome.timings, rnd.invited
            )
        return outcome

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run background work (publishing results) on the engine's pool."""
        future = self._pool.submit(fn, *args)
        capture = self._capture
        if capture is not None:
            capture.append(future)
        return future

    def warm_spark(self) -> None:
        """Start the Spark session ahead of a spilled round's estimate (the JVM takes seconds)."""
        self._pool.submit(_warm_spark)

    def close(self) -> None:
        """Stop now: pending work is cancelled; jobs open no further round."""
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ after a restart

    def recover(self) -> None:
        """Pick up what the state kept from an earlier run of the aggregator (at start-up,
        before any new job):

        - a round that was open is failed: the shares sent to it were lost (only the aggregator
          held them, and the CSP never decrypted them, so the owners get their budget back);
        - a single-round job whose round was open runs again under a new attempt id (as after
          a CSP restart); one whose round had ended takes its round's status;
        - a multi-round job resumes from its last completed round (planned again from the
          analyst's signed request, its state restored from the snapshot), the next round
          under a new round id; without a completed round, or if its protocol cannot resume,
          it fails;
        - every finished round not yet published is published, once; none is published twice.

        The failures are published before a resumed job invites anyone: an owner has its
        budget back before it is asked for the retried round.
        """
        store = self.store
        if store is None:
            return
        lost: set[str] = set()
        for r in store.open_rounds():
            message = RESTARTED.format(round_id=r.round_id)
            stored_job = store.job(r.job_id)
            invited = stored_job.invited if stored_job is not None else []
            status = status_proto(r.round_id, r.label, FAILED, message, invited, [], None)
            store.finish_round(r.round_id, FAILED, status.SerializeToString())
            lost.add(r.round_id)
            log.warning("round %s failed: %s", r.round_id, message)
        resumed: list[tuple[Job, int]] = []
        for stored in store.unfinished_jobs():
            try:
                resume = self._recover_job(stored, lost)
            except Exception as exc:
                log.exception("job %s: recovery failed", stored.job_id)
                self._fail_stored(stored, f"the aggregator restarted and could not resume: {exc}")
                continue
            if resume is not None:
                resumed.append(resume)
        published = self._publish_kept()
        for job, index in resumed:
            threading.Thread(
                target=self._resume,
                args=(job, index, published),
                name=f"job-{job.job_id}",
                daemon=True,
            ).start()

    def _recover_job(self, stored: StoredJob, lost: set[str]) -> tuple[Job, int] | None:
        """End an unfinished job from the state, or return it with the index to resume at."""
        store = self.store
        assert store is not None
        rounds = store.job_rounds(stored.job_id)
        if not rounds:
            self._fail_stored(stored, "the aggregator restarted before the job's first round")
            return None
        last = rounds[-1]
        if rounds[0].round_id == stored.job_id:  # single-round: the job is its round
            return self._recover_single(stored, last, lost)
        replanned, why = self._replan(stored)

        def failure(index: int, message: str) -> str:
            if replanned is None:
                return message
            protocol, plan, _ = replanned
            return protocol.failure(plan, index, message)

        last_message = _message(last)
        if last.state == FAILED and last.round_id not in lost:  # it failed before the restart
            self._fail_stored(stored, failure(last.idx, last_message))
            return None
        completed = [r for r in rounds if r.state == COMPLETED]
        if last.state == COMPLETED and last.done:  # only the job's end was not kept
            if replanned is None or stored.snapshot is None:
                self._fail_stored(
                    stored, f"the aggregator restarted after the job's last round; {why}"
                )
                return None
            protocol, plan, authorization = replanned
            state = protocol.restore(plan, stored.job_id, stored.invited, stored.snapshot)
            job = self._job_from(stored, protocol, plan, state, authorization, stored.attempt)
            result = protocol.job_result(plan, state, Step(None, True, last_message))
            self._end(job, COMPLETED, last_message, result)
            log.info("job %s completed (its end was kept after the restart)", job.job_id)
            return None
        if last.round_id in lost:
            why_stopped = last_message
        else:  # between a completed round and the next one's opening
            why_stopped = f"the aggregator restarted after round {last.round_id}"
        index = completed[-1].idx + 1 if completed else last.idx
        if not completed:
            why = "no round of the job had completed to resume from"
        elif stored.snapshot is None:
            why = "the job cannot resume: its protocol keeps no state between rounds"
        if replanned is None or not completed or stored.snapshot is None:
            self._fail_stored(stored, failure(index, f"{why_stopped}; {why}"))
            return None
        protocol, plan, authorization = replanned
        state = protocol.restore(plan, stored.job_id, stored.invited, stored.snapshot)
        attempt = store.next_attempt(stored.job_id)
        job = self._job_from(stored, protocol, plan, state, authorization, attempt)
        job.message = (
            f"resumed after an aggregator restart from round {completed[-1].round_id}: "
            f"{why_stopped}"
        )
        with self._lock:
            self._jobs[job.job_id] = job
        log.warning(
            "job %s resumes at round %d (attempt %d): %s", job.job_id, index, attempt, why_stopped
        )
        return job, index

    def _recover_single(
        self, stored: StoredJob, last: StoredRound, lost: set[str]
    ) -> tuple[Job, int] | None:
        """A single-round job whose round the restart interrupted runs again under a new
        attempt id (`<job>-r<attempt>`), as after a CSP restart: the lost attempt's failure is
        published first, so its owners have their charge back before the new invitation. A
        round that had ended before the restart gives the job its status."""
        if last.round_id not in lost:
            self._end_stored(stored, last)
            return None
        replanned, why = self._replan(stored)
        if replanned is None:
            self._fail_stored(stored, f"{_message(last)}; {why}")
            return None
        assert self.store is not None
        protocol, plan, authorization = replanned
        attempt = self.store.next_attempt(stored.job_id)
        state = protocol.start(plan, stored.job_id, list(stored.invited))
        job = self._job_from(stored, protocol, plan, state, authorization, attempt)
        job.message = f"running again after an aggregator restart: {_message(last)}"
        with self._lock:
            self._jobs[job.job_id] = job
        log.warning("job %s runs again (attempt %d): %s", job.job_id, attempt, _message(last))
        return job, 1

    def _replan(self, stored: StoredJob) -> tuple[tuple[FederatedProtocol, Any, Any] | None, str]:
        """(protocol, plan, signed request) planned again from the kept request, or None and
        why the job cannot resume."""
        if self._rebuild is None:
            return None, "the job cannot resume (this aggregator cannot plan kept requests)"
        try:
            protocol, payload, common_of, authorization = self._rebuild(stored.request)
            plan = protocol.plan(payload, common_of(len(stored.invited)))
        except LeteoError as exc:
            return None, f"the job cannot resume: its request no longer plans ({exc})"
        return (protocol, plan, authorization), ""

    def _job_from(
        self,
        stored: StoredJob,
        protocol: FederatedProtocol,
        plan: Any,
        state: Any,
        authorization: Any,
        attempt: int,
    ) -> Job:
        return Job(
            stored.job_id,
            protocol,
            plan,
            state,
            list(stored.invited),
            authorization,
            stored.caller,
            attempt,
        )

    def _end_stored(self, stored: StoredJob, last: StoredRound) -> None:
        """A single-round job ends with its round's kept status."""
        assert self.store is not None and last.status_proto is not None
        status = pb.RoundStatus.FromString(last.status_proto)
        status.round_id = stored.job_id  # a re-run's round is `<job>-r<attempt>`
        final = status.SerializeToString()
        self.store.finish_job(stored.job_id, status.state, status.message, final)
        log.info("job %s: %s after the restart: %s", stored.job_id, status.state, status.message)

    def _fail_stored(self, stored: StoredJob, message: str) -> None:
        assert self.store is not None
        status = status_proto(
            stored.job_id, stored.label, FAILED, message, stored.invited, [], None
        )
        self.store.finish_job(stored.job_id, FAILED, message, status.SerializeToString())
        log.warning("job %s failed: %s", stored.job_id, message)

    def _publish_kept(self) -> list[Future]:
        """Publish every finished round the state holds as unpublished; the publications."""
        assert self.store is not None
        futures: list[Future] = []
        self._capture = futures
        try:
            for r in self.store.unpublished_rounds():
                assert r.status_proto is not None
                status = pb.RoundStatus.FromString(r.status_proto)
                try:
                    self._publish(Round.ended(status))
                except Exception:
                    log.exception("round %s: publishing its kept status failed", r.round_id)
                    continue
                self._record_published(r.round_id)
                log.info(
                    "round %s: its %s status published after the restart", r.round_id, status.state
                )
        finally:
            self._capture = None
        return futures

    def _resume(self, job: Job, index: int, published: list[Future]) -> None:
        concurrent.futures.wait(published, timeout=defaults.PUBLISH_TIMEOUT_SECONDS + 1.0)
        self._run(job, None, index)


def _warm_spark() -> None:
    """Best effort: a failure is logged here and raised again by the estimate itself."""
    try:
        from leteo_fed.data.spark_ldp import warm

        warm()
    except Exception:
        log.warning("could not start Spark", exc_info=True)


def _message(r: StoredRound) -> str:
    if r.status_proto is None:
        return ""
    return pb.RoundStatus.FromString(r.status_proto).message
