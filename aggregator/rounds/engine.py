"""The round engine: one lifecycle for every protocol, assembled from its parts.

- `jobs`: the jobs and rounds by id, their status, and what the state kept of them;
- `job_loop`: a job's rounds one after the other, a round run again when the CSP was out;
- `lifecycle`: one round from its opening to its publication (invite, collect, close, reveal);
- `intake`: where a round's contributions go, secure-sum shares or LDP reports alike;
- `recovery`: picking up after a restart what the state kept.

With a state store (`aggregator.state`) every step is kept as it happens: the job with the
analyst's signed request when it starts, each round when it opens and when it ends (with, for a
multi-round protocol, its state after every completed round), and each result once it is
published. `recover` picks up from there after a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from aggregator.owners import OwnerDirectory
from aggregator.rounds.job_loop import JobLoop
from aggregator.rounds.jobs import Job, JobRegistry
from aggregator.rounds.lifecycle import IntakeOpener, RoundLifecycle
from aggregator.rounds.recovery import Rebuild, Recovery
from aggregator.rounds.reveal import Revealer
from aggregator.rounds.round import Round
from aggregator.rounds.workers import Workers
from aggregator.state import StateStore
from leteo_fed import defaults
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.requests import Common
from leteo_fed.transport.metrics import AggregatorMetrics

log = logging.getLogger("leteo.aggregator")

SPARK_REPORT_THRESHOLD = defaults.SPARK_REPORT_THRESHOLD


class RoundEngine:
    def __init__(
        self,
        owners: OwnerDirectory,
        secure_sum: Revealer,
        publish: Callable[[Round], None],
        spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
        owners_ca: bytes | None = None,
        store: StateStore | None = None,
        rebuild: Rebuild | None = None,
        metrics: AggregatorMetrics | None = None,
        intakes: IntakeOpener | None = None,
    ) -> None:
        """`store`: where jobs and rounds are kept (None: in memory only, a restart forgets
        them); `rebuild`: how a kept request is planned again (multi-round jobs resume only
        with it); `metrics`: where rounds and declines are counted (None: a registry of its
        own); `intakes`: how rounds' intakes are opened (None: secure-sum rounds at
        `secure_sum`, their share statements checked against `owners_ca`)."""
        if spark_report_threshold < 0:
            raise ValueError(f"spark_report_threshold must be >= 0, got {spark_report_threshold}")
        self.owners = owners
        self.secure_sum = secure_sum
        self.spark_report_threshold = spark_report_threshold
        self.store = store
        self.metrics = metrics if metrics is not None else AggregatorMetrics()
        self._stopping = threading.Event()
        self.workers = Workers()
        self.jobs = JobRegistry(store)
        self.rounds = RoundLifecycle(
            owners,
            intakes if intakes is not None else IntakeOpener(secure_sum, owners_ca),
            publish,
            self.jobs,
            store,
            self.metrics,
            self.workers,
            self._stopping,
        )
        self.loop = JobLoop(owners, self.rounds, self.jobs, secure_sum, store, self._stopping)
        self.recovery = Recovery(store, rebuild, self.jobs, self.loop, self.rounds, self.workers)
        owners.on_disconnect = self.rounds.owner_gone

    # ------------------------------------------------------------------ jobs and their status

    def job(self, job_id: str) -> Job | None:
        return self.jobs.job(job_id)

    def round(self, round_id: str) -> Round:
        return self.jobs.round(round_id)

    def jobs_listing(self, caller: str | None, limit: int) -> list[pb.JobSummary]:
        return self.jobs.listing(caller, limit)

    def stored_status(self, ident: str) -> pb.RoundStatus | None:
        return self.jobs.stored_status(ident)

    def stored_round_status(self, round_id: str) -> pb.RoundStatus | None:
        return self.jobs.stored_round_status(round_id)

    # ------------------------------------------------------------------ jobs and rounds

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
        return self.loop.start(protocol, request, common_of, owners, caller, authorization)

    def decline(self, rnd: Round, site: str, reason: str) -> None:
        self.rounds.decline(rnd, site, reason)

    def accepted(self, rnd: Round, complete: bool) -> None:
        """An upload was folded into the round; `complete`: every owner has now answered."""
        self.rounds.accepted(rnd, complete)

    def upload_failed(self, rnd: Round) -> None:
        self.rounds.upload_failed(rnd)

    def finalize(self, rnd: Round) -> None:
        self.rounds.finalize(rnd)

    def recover(self) -> None:
        """Pick up what the state kept from an earlier run (`Recovery.recover`)."""
        self.recovery.recover()

    # ------------------------------------------------------------------ background work

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run background work (publishing results) on the engine's pool."""
        return self.workers.submit(fn, *args)

    def warm_spark(self) -> None:
        """Start the Spark session ahead of a spilled round's estimate (the JVM takes seconds)."""
        self.workers.submit(_warm_spark)

    def close(self) -> None:
        """Stop now: pending work is cancelled; jobs open no further round."""
        self._stopping.set()
        self.workers.close()


def _warm_spark() -> None:
    """Best effort: a failure is logged here and raised again by the estimate itself."""
    try:
        from leteo_fed.data.spark_ldp import warm

        warm()
    except Exception:
        log.warning("could not start Spark", exc_info=True)
