"""A job's rounds, one after the other, each in its own thread.

The job opens a round, invites, waits for the round to end, and either stops (the protocol's
last step, or a failed round) or opens the protocol's next round. A round that failed because
the CSP could not be reached runs again, under a new attempt id, once the CSP answers again
(at most MAX_CSP_RETRIES times per job). With a state store the job is kept with the analyst's
signed request when it starts, and with its final status when it ends.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from aggregator.owners import OwnerDirectory
from aggregator.rounds.jobs import Job, JobRegistry, not_kept
from aggregator.rounds.lifecycle import RoundLifecycle
from aggregator.rounds.reveal import Revealer
from aggregator.rounds.round import COMPLETED, FAILED, Round, status_proto
from aggregator.state import StateStore
from leteo_fed import defaults
from leteo_fed.errors import LeteoError, PeerUnavailable, ProtocolError
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.requests import Common

log = logging.getLogger("leteo.aggregator")

MAX_CSP_RETRIES = 3  # rounds of one job run again after the CSP was unreachable
CSP_POLL_SECONDS = 1.0


def _envelope(authorization: Any) -> bytes:
    """The signed request as stored (b'' when there is none: tests without an analyst)."""
    return authorization.SerializeToString() if authorization is not None else b""


class JobLoop:
    def __init__(
        self,
        owners: OwnerDirectory,
        rounds: RoundLifecycle,
        registry: JobRegistry,
        secure_sum: Revealer,
        store: StateStore | None,
        stopping: threading.Event,
    ) -> None:
        """`secure_sum`: asked for its key to learn that an unreachable CSP is back;
        `stopping`: set once the aggregator stops (no job opens a further round)."""
        self.owners = owners
        self.rounds = rounds
        self.registry = registry
        self.secure_sum = secure_sum
        self.store = store
        self.stopping = stopping

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
        first = self.rounds.open(job, 1)  # the first round opens now: CSP refusals reach the caller
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
        self.registry.add_job(job)
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
            target=self.run, args=(job, first), name=f"job-{job_id}", daemon=True
        ).start()
        return job

    def run(self, job: Job, rnd: Round | None, index: int = 1) -> None:
        """Run the job's rounds from round `index` (`rnd`, or opened here when None) on."""
        try:
            if rnd is None:
                rnd = self._open_retrying(job, index)
            while True:
                self.rounds.invite_all(rnd)
                wait = job.plan.deadline_seconds + defaults.CSP_TIMEOUT_SECONDS + 60
                if not rnd.done.wait(wait):
                    raise ProtocolError(f"round {rnd.round_id} did not finish")
                if rnd.state != COMPLETED or rnd.step is None:
                    if rnd.csp_unreachable and self._await_csp(job, rnd.message):
                        rnd = self._open_retrying(job, index)  # the same round, a new attempt
                        continue
                    self.end(job, FAILED, job.protocol.failure(job.plan, index, rnd.message))
                    log.warning("job %s failed: %s", job.job_id, job.message)
                    return
                step = rnd.step
                if step.done:
                    break
                with job.lock:
                    job.message = step.message or job.message
                    job.previous = step.message
                if self.stopping.is_set():
                    raise PeerUnavailable("the aggregator is shutting down")
                index += 1
                rnd = self._open_retrying(job, index)
            message = step.message or rnd.message
            self.end(job, COMPLETED, message, job.protocol.job_result(job.plan, job.state, step))
            log.info("job %s completed: %s", job.job_id, job.message)
        except LeteoError as exc:
            self.end(job, FAILED, job.protocol.failure(job.plan, index, str(exc)))
            log.error("job %s failed: %s", job.job_id, job.message)
        except Exception as exc:  # a bug must still end the job, never leave it hanging
            log.exception("job %s crashed", job.job_id)
            self.end(job, FAILED, f"internal error: {type(exc).__name__}")

    def _open_retrying(self, job: Job, index: int) -> Round:
        """Open round `index`; if the CSP cannot be reached, wait for it (`_await_csp`) and
        open it again under a new attempt."""
        while True:
            try:
                return self.rounds.open_kept(job, index)
            except PeerUnavailable as exc:
                if not self._await_csp(job, str(exc)):
                    raise

    def _await_csp(self, job: Job, why: str) -> bool:
        """The CSP was unreachable: wait for it up to one round deadline, at most
        MAX_CSP_RETRIES times per job. True once it answers again; the job's next round then
        opens under a new attempt id (owners and the CSP take each round id once; a share
        charged in the failed attempt comes back to its owner when the CSP attests it never
        decrypted it, as after any failure)."""
        if job.csp_retries >= MAX_CSP_RETRIES or self.stopping.is_set():
            return False
        job.csp_retries += 1
        log.warning("job %s: %s; waiting for the CSP to come back", job.job_id, why)
        end = time.monotonic() + job.plan.deadline_seconds
        while not self.stopping.is_set():
            try:
                self.secure_sum.public_key()
                break
            except LeteoError:
                if time.monotonic() >= end:
                    return False
                self.stopping.wait(CSP_POLL_SECONDS)
        else:
            return False
        if self.store is not None:
            job.attempt = self.store.next_attempt(job.job_id)
        else:
            job.attempt += 1
        log.info("job %s: the CSP answers again; attempt %d", job.job_id, job.attempt)
        return True

    def end(self, job: Job, status: str, message: str, result: Any = None) -> None:
        """Keep the job's final status, then end it (whoever waits for the job finds it kept).
        A job that fails because the aggregator is stopping stays unfinished in the state: the
        next start resumes or fails it."""
        if self.store is not None and status == FAILED and self.stopping.is_set():
            log.info("job %s: left for the next start of the aggregator to recover", job.job_id)
        elif self.store is not None:
            try:
                final = status_proto(
                    job.job_id, job.label, status, message, job.invited, job.submitted(), result
                )
                self.store.finish_job(job.job_id, status, message, final.SerializeToString())
            except Exception:
                not_kept(f"job {job.job_id}: its end", self.stopping.is_set())
        job.finish(status, message, result)
