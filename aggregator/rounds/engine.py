"""The round engine: one lifecycle for every protocol.

A request becomes a job (its id is the round id for single-round protocols). The job runs its
rounds one after the other in its own thread: open (at the CSP for secure-sum rounds), invite,
wait until every owner has submitted or declined or the deadline passes, check the quorum,
reveal (secure sum or report estimate), let the protocol finish the round, publish the round's
outcome to the invited owners, and either stop or open the protocol's next round.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from aggregator.owners import OwnerDirectory
from aggregator.rounds.report_intake import ReportIntake
from aggregator.rounds.round import COMPLETED, FAILED, OPEN, Round
from aggregator.rounds.secure_sum import SecureSum, SignedShares
from leteo_fed import defaults
from leteo_fed.errors import LeteoError, NotFoundError, PeerUnavailable, ProtocolError
from leteo_fed.protocols.base import (
    REPORTS,
    Common,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    Step,
    encoding_facts,
)

log = logging.getLogger("leteo.aggregator")

SPARK_REPORT_THRESHOLD = defaults.SPARK_REPORT_THRESHOLD


@dataclass
class Job:
    job_id: str
    protocol: FederatedProtocol
    plan: Any
    state: Any
    invited: list[str]
    authorization: Any = None  # the analyst's signed request (pb.Signed), relayed to owners
    status: str = OPEN
    message: str = ""
    result: Any = None  # the protocol's (job) result dataclass
    rounds: list[Round] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

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


class RoundEngine:
    def __init__(
        self,
        owners: OwnerDirectory,
        secure_sum: SecureSum,
        publish: Callable[[Round], None],
        spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
        owners_ca: bytes | None = None,
    ) -> None:
        if spark_report_threshold < 0:
            raise ValueError(f"spark_report_threshold must be >= 0, got {spark_report_threshold}")
        self.owners = owners
        self.secure_sum = secure_sum
        self.owners_ca = owners_ca  # share statements are checked on arrival (None: insecure)
        self.spark_report_threshold = spark_report_threshold
        self._publish = publish
        self._jobs: dict[str, Job] = {}
        self._rounds: dict[str, Round] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="round")

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
        invited = list(owners) or [site for site, _ in self.owners.listing()]
        plan = protocol.plan(request, common_of(len(invited)))
        self.owners.check_invited(invited, plan.min_owners)
        job_id = f"{plan.label}-{uuid.uuid4().hex[:12]}"
        job = Job(
            job_id, protocol, plan, protocol.start(plan, job_id, invited), invited, authorization
        )
        first = self._open(job, 1)  # the first round opens now: CSP refusals reach the caller
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

    def _run(self, job: Job, rnd: Round) -> None:
        index = 1
        try:
            while True:
                self._invite_all(rnd)
                wait = job.plan.deadline_seconds + defaults.CSP_TIMEOUT_SECONDS + 60
                if not rnd.done.wait(wait):
                    raise ProtocolError(f"round {rnd.round_id} did not finish")
                if rnd.state != COMPLETED or rnd.step is None:
                    job.finish(FAILED, job.protocol.failure(job.plan, index, rnd.message))
                    log.warning("job %s failed: %s", job.job_id, job.message)
                    return
                step = rnd.step
                if step.done:
                    break
                with job.lock:
                    job.message = step.message or job.message
                if self._closing.is_set():
                    raise PeerUnavailable("the aggregator is shutting down")
                index += 1
                rnd = self._open(job, index)
            message = step.message or rnd.message
            job.finish(COMPLETED, message, job.protocol.job_result(job.plan, job.state, step))
            log.info("job %s completed: %s", job.job_id, job.message)
        except LeteoError as exc:
            job.finish(FAILED, job.protocol.failure(job.plan, index, str(exc)))
            log.error("job %s failed: %s", job.job_id, job.message)
        except Exception as exc:  # a bug must still end the job, never leave it hanging
            log.exception("job %s crashed", job.job_id)
            job.finish(FAILED, f"internal error: {type(exc).__name__}")

    # ------------------------------------------------------------------ one round

    def _open(self, job: Job, index: int) -> Round:
        plan: RoundPlan = job.protocol.next_round(job.plan, job.state, index)
        round_id = f"{job.job_id}-it{index}" if job.protocol.multi_round else job.job_id
        deadline = time.time() + job.plan.deadline_seconds
        if job.protocol.kind == REPORTS:
            intake: Any = ReportIntake(job.protocol.new_accumulator(job.plan))
        else:
            public = self.secure_sum.public_key()  # the CSP's current key, asked per round
            layout = plan.share_encoding.layout(public.bits)
            mode = "projection" if plan.reveal == "projection" else "blinded"
            intake = SignedShares(public, layout, plan.n_values, round_id, mode, self.owners_ca)
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
        )
        with self._lock:
            self._rounds[round_id] = rnd
        with job.lock:
            job.rounds.append(rnd)
            job.message = job.protocol.progress(job.plan, index, round_id) or job.message
        return rnd

    def _invite_all(self, rnd: Round) -> None:
        """Arm the deadline and invite every owner (all at once; replies arrive as callbacks)."""
        from leteo_fed.transport.rounds import spec_to_proto

        job: Job = rnd.job
        rnd.invited_at = time.perf_counter()
        timer = threading.Timer(max(0.0, rnd.deadline - time.time()), self.finalize, args=(rnd,))
        timer.daemon = True
        timer.start()
        encrypted = isinstance(rnd.intake, SignedShares)
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
            rnd.invited,
        )
        for site in rnd.invited:
            self.owners.invite(site, spec, functools.partial(self._invited, rnd, site))

    def _invited(self, rnd: Round, site: str, reason: str) -> None:
        if reason:
            log.warning("round %s: %s cannot take part: %s", rnd.round_id, site, reason)
            self.decline(rnd, site, reason)

    def decline(self, rnd: Round, site: str, reason: str) -> None:
        if rnd.decline(site, reason):
            self._pool.submit(self.finalize, rnd)

    def accepted(self, rnd: Round, complete: bool) -> None:
        if complete:
            self._pool.submit(self.finalize, rnd)

    def finalize(self, rnd: Round) -> None:
        """Close the round exactly once: quorum, reveal, the protocol's result, publish."""
        if not rnd.claim_close():
            return
        job: Job = rnd.job
        try:
            if len(rnd.submitted) < rnd.min_owners:
                rnd.finish(FAILED, rnd.quorum_message())
                log.warning("round %s failed: %s", rnd.round_id, rnd.message)
            else:
                outcome = self._reveal(job, rnd)
                step: Step = job.protocol.finish_round(job.plan, job.state, outcome)
                rnd.step = step
                rnd.finish(COMPLETED, f"{len(rnd.submitted)} share(s) aggregated", step.result)
                log.info("round %s completed with %d owners", rnd.round_id, len(rnd.submitted))
        except LeteoError as exc:
            rnd.finish(FAILED, str(exc))
            log.error("round %s failed: %s", rnd.round_id, exc)
        except Exception as exc:  # a bug must still end the round, never leave it hanging
            log.exception("round %s crashed", rnd.round_id)
            rnd.finish(FAILED, f"internal error: {type(exc).__name__}")
        finally:
            if isinstance(rnd.intake, ReportIntake):
                rnd.intake.cleanup()  # spilled chunk files are not needed any more
        self._publish(rnd)

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
                rnd.round_id, public, shares, query, enc, layout, outcome.timings
            )
            outcome.csp = {"compute_seconds": outcome.projection.compute_seconds}
        else:
            outcome.totals, outcome.csp = self.secure_sum.reveal(
                rnd.round_id, public, shares, plan.n_values, layout, outcome.timings
            )
        return outcome

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run background work (publishing results) on the engine's pool."""
        self._pool.submit(fn, *args)

    def warm_spark(self) -> None:
        """Start the Spark session ahead of a spilled round's estimate (the JVM takes seconds)."""
        self._pool.submit(_warm_spark)

    def close(self) -> None:
        """Stop now: pending work is cancelled; jobs open no further round."""
        self._closing.set()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _warm_spark() -> None:
    """Best effort: a failure is logged here and raised again by the estimate itself."""
    try:
        from leteo_fed.data.spark_ldp import warm

        warm()
    except Exception:
        log.warning("could not start Spark", exc_info=True)
