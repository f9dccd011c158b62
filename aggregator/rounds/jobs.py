"""Jobs and their status: the registry of the jobs and rounds this aggregator runs, the status
GetRound and ListJobs answer for them, and what the state kept of the jobs and rounds from
before a restart (those answers included).

A request becomes a job (its id is the round id for single-round protocols); the job runs its
rounds one after the other (`job_loop`), each round through its lifecycle (`lifecycle`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aggregator.rounds.round import COMPLETED, OPEN, Round, status_proto
from aggregator.state import StateStore
from leteo_fed.errors import LeteoError, NotFoundError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.interface import FederatedProtocol

log = logging.getLogger("leteo.aggregator")


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


def not_kept(what: str, stopping: bool) -> None:
    """A write to the state failed (called in an except block): the work goes on in memory."""
    if stopping:  # the state closes with the service: expected, one line
        log.warning("%s was not kept in the state: the aggregator is stopping", what)
    else:
        log.exception("%s could not be kept in the state", what)


class JobRegistry:
    """The jobs and rounds of this run of the aggregator, by id; with a state store, also what
    it kept of earlier runs."""

    def __init__(self, store: StateStore | None) -> None:
        self.store = store
        self._jobs: dict[str, Job] = {}
        self._rounds: dict[str, Round] = {}
        self._lock = threading.Lock()

    def add_job(self, job: Job) -> None:
        with self._lock:
            self._jobs[job.job_id] = job

    def add_round(self, rnd: Round) -> None:
        with self._lock:
            self._rounds[rnd.round_id] = rnd

    def job(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def round(self, round_id: str) -> Round:
        with self._lock:
            rnd = self._rounds.get(round_id)
        if rnd is None:
            raise NotFoundError(f"unknown round {round_id!r}")
        return rnd

    def open_rounds_of(self, site: str) -> list[Round]:
        """The open rounds `site` is invited to."""
        with self._lock:
            return [r for r in self._rounds.values() if r.state == OPEN and site in r.invited_set]

    def listing(self, caller: str | None, limit: int) -> list[pb.JobSummary]:
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
