"""Picking up after a restart what the state kept from an earlier run of the aggregator.

The state holds every job with the analyst's signed request, each round from when it opened to
when it ended (with, for a multi-round protocol, its state after every completed round), and
whether each round's end was published. From that, at start-up and before any new job: open
rounds fail, single-round jobs run again, multi-round jobs resume from their last completed
round, and every unpublished end is published once (`Recovery.recover`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from aggregator.rounds.job_loop import JobLoop
from aggregator.rounds.jobs import Job, JobRegistry
from aggregator.rounds.lifecycle import RoundLifecycle
from aggregator.rounds.round import COMPLETED, FAILED, Round, status_proto
from aggregator.rounds.workers import Workers
from aggregator.state import StateStore, StoredJob, StoredRound
from leteo_fed import defaults
from leteo_fed.errors import LeteoError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.round_types import Step

log = logging.getLogger("leteo.aggregator")

RESTARTED = (
    "the aggregator restarted while round {round_id} was open; the shares sent to it were lost"
)

# the analyst's signed request (serialized pb.Signed) -> (protocol, request payload, the common
# round fields for n invited owners, the pb.Signed): how a job is planned again after a restart
Rebuild = Callable[[bytes], tuple[FederatedProtocol, Any, Callable[[int], Common], Any]]


class Recovery:
    def __init__(
        self,
        store: StateStore | None,
        rebuild: Rebuild | None,
        registry: JobRegistry,
        loop: JobLoop,
        rounds: RoundLifecycle,
        workers: Workers,
    ) -> None:
        """`rebuild`: how a kept request is planned again (None: no job resumes)."""
        self.store = store
        self._rebuild = rebuild
        self.registry = registry
        self.loop = loop
        self.rounds = rounds
        self.workers = workers

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
            job = _job_from(stored, protocol, plan, state, authorization, stored.attempt)
            result = protocol.job_result(plan, state, Step(None, True, last_message))
            self.loop.end(job, COMPLETED, last_message, result)
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
        job = _job_from(stored, protocol, plan, state, authorization, attempt)
        job.message = (
            f"resumed after an aggregator restart from round {completed[-1].round_id}: "
            f"{why_stopped}"
        )
        self.registry.add_job(job)
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
        job = _job_from(stored, protocol, plan, state, authorization, attempt)
        job.message = f"running again after an aggregator restart: {_message(last)}"
        self.registry.add_job(job)
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
        with self.workers.collect() as futures:
            for r in self.store.unpublished_rounds():
                assert r.status_proto is not None
                status = pb.RoundStatus.FromString(r.status_proto)
                try:
                    self.rounds.publish(Round.ended(status))
                except Exception:
                    log.exception("round %s: publishing its kept status failed", r.round_id)
                    continue
                self.rounds.record_published(r.round_id)
                log.info(
                    "round %s: its %s status published after the restart", r.round_id, status.state
                )
        return futures

    def _resume(self, job: Job, index: int, published: list[Future]) -> None:
        concurrent.futures.wait(published, timeout=defaults.PUBLISH_TIMEOUT_SECONDS + 1.0)
        self.loop.run(job, None, index)


def _job_from(
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


def _message(r: StoredRound) -> str:
    if r.status_proto is None:
        return ""
    return pb.RoundStatus.FromString(r.status_proto).message
