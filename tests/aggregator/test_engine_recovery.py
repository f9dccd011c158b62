"""The round engine with a state store, crashed and restarted in memory (no network).

Fakes stand in for the owners (every invitation accepted at once), the CSP (records the rounds
it opened and refuses an id twice, as the real one does) and the reveal (the rounds' intakes sum
the owners' real encoded shares slot-wise, as the homomorphic sum computes it). A "crash" drops
the engine with its rounds open; a new engine on the same state dir recovers. Checked: k-means
resumes from its last completed iteration under new round ids and ends where an uninterrupted
run ends, a round open at the crash fails and is published once (a single-round job then runs
again under a new attempt id), no result is published twice, and `stored_status` answers for
everything from before the restart. Also the k-means snapshot's
JSON round trip.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import time
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_iris

from aggregator.rounds.engine import RoundEngine
from aggregator.rounds.intake import RoundIntake
from aggregator.rounds.jobs import Job
from aggregator.rounds.lifecycle import IntakeOpener
from aggregator.rounds.recovery import RESTARTED
from aggregator.rounds.round import round_status
from aggregator.service import _rebuild
from aggregator.state import StateStore
from leteo_fed.crypto.paillier import PublicKey
from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import DuplicateError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.kmeans_round import PROTOCOL as KMEANS
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.round_types import Outcome, RoundPlan
from leteo_fed.transport.rounds import (
    common_from_proto,
    request_from_proto,
    request_to_proto,
    result_from_proto,
)

NAMES = ["sl", "sw", "pl", "pw"]
SITES = ["site-1", "site-2", "site-3"]
INIT = np.array([[5.0, 3.0, 1.5, 0.2], [6.0, 2.8, 4.5, 1.5], [7.0, 3.0, 6.0, 2.0]])
DEADLINE = 3600.0  # rounds end by the test's hand, never by their deadline
WAIT = 10.0


class Table:
    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def matrix(self, columns) -> np.ndarray:
        return self.x[:, [NAMES.index(c) for c in columns]]


class Site:
    is_local = True
    uses_spark = False

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def read(self, columns) -> Table:
        return Table(self.x)


DATA = {
    s: Site(load_iris().data[idx])
    for s, idx in zip(
        SITES,
        np.array_split(np.random.default_rng(1).permutation(150), 3),
        strict=True,
    )
}


class Owners:
    """Every owner registered and accepting at once; the round ids invited, in order."""

    def __init__(self) -> None:
        self.invited: queue.Queue[str] = queue.Queue()

    def sites(self) -> list[str]:
        return list(SITES)

    def check_invited(self, invited, quorum) -> None:
        pass

    def invite(self, site: str, spec: pb.RoundSpec, done) -> None:
        if site == SITES[0]:
            self.invited.put(spec.round_id)
        done("")

    def next_round(self) -> str:
        return self.invited.get(timeout=WAIT)


class Csp:
    """Opens each round id once; its key is only a modulus of the right size."""

    def __init__(self, opened: set[str]) -> None:
        self.opened = opened  # shared between the engines of one "deployment"
        self.public = PublicKey((1 << 2047) | 1)

    def public_key(self, key_id: str = "") -> PublicKey:
        return self.public

    def check_mode(self, mode: str) -> None:
        """Every mode is served."""

    def open(self, round_id: str, key_id: str, n_ciphertexts: int, mode: str) -> None:
        if round_id in self.opened:
            raise DuplicateError(f"round {round_id} was already used here")
        self.opened.add(round_id)


def _sum(shares: list[list[int]], layout) -> list[int]:
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    return slot_totals(unpack(summed, len(shares[0]), layout), len(shares), layout)


class PlainSum:
    """A round's intake as opened at the (fake) CSP, revealing the plain sum of the owners'
    shares in place of the CSP's decryption."""

    def __init__(self, opened: RoundIntake, job: Job) -> None:
        self.opened = opened
        self.job = job

    @property
    def key_id(self) -> str:
        return self.opened.key_id

    @property
    def layout(self):
        return self.opened.layout

    def fold(self, contribution: Any) -> None:
        self.opened.fold(contribution)

    def reveal(self, outcome: Outcome) -> None:
        plan = outcome.plan
        enc, layout = plan.share_encoding, self.layout
        shares = [
            self.job.protocol.share_values(plan.spec, enc, plan.dp, DATA[s], {})
            for s in sorted(outcome.submitted)
        ]
        outcome.totals = _sum(shares, layout)
        outcome.encoding = encoding_facts(enc, layout, plan.n_values, 2048)

    def cleanup(self) -> None:
        self.opened.cleanup()


class PlainSums(IntakeOpener):
    def open(self, job: Job, plan: RoundPlan, round_id: str) -> RoundIntake:
        return PlainSum(super().open(job, plan, round_id), job)


def _engine(owners: Owners, csp: Csp, publish, **kw) -> RoundEngine:
    """The engine with the fake owners and CSP, its rounds revealing plain sums."""
    return RoundEngine(
        owners,  # type: ignore[arg-type]
        csp,  # type: ignore[arg-type]
        publish,
        intakes=PlainSums(csp, None),  # type: ignore[arg-type]
        **kw,
    )


class Deployment:
    """The parts that outlive an aggregator crash: the state dir, the CSP, what owners got."""

    def __init__(self, state_dir) -> None:
        self.state_dir = state_dir
        self.opened: set[str] = set()
        self.published: list[pb.RoundStatus] = []
        self.store: StateStore | None = None

    def engine(self, rebuild: Any = _rebuild) -> tuple[RoundEngine, Owners]:
        if self.store is not None:
            self.store.close()  # the crashed engine writes nothing any more
        self.store = StateStore(self.state_dir)
        owners = Owners()
        engine = _engine(
            owners,
            Csp(self.opened),
            lambda rnd: self.published.append(round_status(rnd)),
            store=self.store,
            rebuild=rebuild,
        )
        return engine, owners

    def results(self, round_id: str) -> list[str]:
        return [s.state for s in self.published if s.round_id == round_id]

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


@pytest.fixture
def deployment(tmp_path):
    d = Deployment(tmp_path / "state")
    yield d
    d.close()


def _signed(protocol: str, request: Any, **common) -> pb.Signed:
    msg = request_to_proto(
        protocol, request, deadline_seconds=DEADLINE, value_bound=100.0, **common
    )
    return pb.Signed(body=msg.SerializeToString())  # unsigned: no analysts' CA in these tests


def _start(engine: RoundEngine, signed: pb.Signed):
    msg = pb.RoundRequest.FromString(signed.body)
    protocol, payload = request_from_proto(msg)
    return engine.start(
        protocol, payload, lambda n: common_from_proto(msg, n), [], "analyst", signed
    )


def _complete(engine: RoundEngine, round_id: str) -> None:
    """Every owner's share arrives: the round closes."""
    rnd = engine.round(round_id)
    for site in SITES:
        rnd.submitted[site] = {"encrypt_seconds": 0.0}
    engine.finalize(rnd)


def _kmeans(iterations: int = 5) -> pb.Signed:
    request = KmeansRequest(
        k=3, centers=tuple(INIT.ravel()), iterations=iterations, features=tuple(NAMES)
    )
    return _signed("kmeans", request, min_owners=3)


def _run_to_end(engine: RoundEngine, owners: Owners, job_id: str) -> list[str]:
    rounds = []
    job = engine.job(job_id)
    assert job is not None
    while not job.done.is_set():
        try:
            round_id = owners.next_round()
        except queue.Empty:
            break
        rounds.append(round_id)
        _complete(engine, round_id)
        job.done.wait(0.2)
    assert job.done.wait(WAIT)
    return rounds


def _uninterrupted(tmp_path, iterations: int = 5) -> dict:
    reference = Deployment(tmp_path / "reference")
    try:
        engine, owners = reference.engine()
        job = _start(engine, _kmeans(iterations))
        _run_to_end(engine, owners, job.job_id)
        assert job.status == "COMPLETED", job.message
        return json.loads(json.dumps(KMEANS.snapshot(job.state)))
    finally:
        reference.close()


# ---------------------------------------------------------------------- k-means resumes


def test_kmeans_resumes_from_its_last_completed_iteration(deployment, tmp_path):
    reference = _uninterrupted(tmp_path)
    assert len(reference["iterations"]) >= 3  # the crash below falls inside the job

    engine, owners = deployment.engine()
    job = _start(engine, _kmeans())
    first = owners.next_round()
    assert first == f"{job.job_id}-it1"
    _complete(engine, first)
    second = owners.next_round()
    assert second == f"{job.job_id}-it2"
    engine.round(second).submitted["site-1"] = {}  # a share arrived, then the crash

    engine, owners = deployment.engine()  # the restart
    engine.recover()
    # the open round failed, and its owners were told once
    assert deployment.results(second) == ["FAILED"]
    failed = [s for s in deployment.published if s.round_id == second][0]
    assert failed.message == RESTARTED.format(round_id=second)
    # iteration 2 again, under a new id (the CSP refuses the old one), then the rest
    again = owners.next_round()
    assert again == f"{job.job_id}-it2-r2"
    resumed = engine.job(job.job_id)
    assert resumed is not None and resumed.attempt == 2
    assert again in resumed.message  # "iteration 2 of 5 open (<job>-it2-r2)"
    _complete(engine, again)
    rest = _run_to_end(engine, owners, job.job_id)
    assert rest[0] == f"{job.job_id}-it3-r2"
    assert resumed.status == "COMPLETED", resumed.message

    # the same centers as the uninterrupted run, iteration by iteration
    result = resumed.result
    assert [it.centers for it in result.iterations] == [
        it["centers"] for it in reference["iterations"]
    ]
    assert result.centers == reference["centers"]
    assert [it.round_id for it in result.iterations][:3] == [first, again, rest[0]]
    # every round's result went out once; the lost round's failure once
    ids = [s.round_id for s in deployment.published]
    assert len(ids) == len(set(ids))
    assert ids[:3] == [first, second, again]
    # what GetRound answers for the rounds and the job
    assert engine.stored_status(first).state == "COMPLETED"
    assert engine.stored_status(second).state == "FAILED"
    final = engine.stored_status(job.job_id)
    assert final.state == "COMPLETED"
    assert result_from_proto(final.result).iterations_run == len(reference["iterations"])


def test_a_job_resumes_again_after_a_second_restart(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans())
    _complete(engine, owners.next_round())
    owners.next_round()  # iteration 2 open: crash
    engine, owners = deployment.engine()
    engine.recover()
    again = owners.next_round()
    _complete(engine, again)
    third = owners.next_round()
    assert third == f"{job.job_id}-it3-r2"  # open: crash again
    engine, owners = deployment.engine()
    engine.recover()
    assert owners.next_round() == f"{job.job_id}-it3-r3"
    assert deployment.results(third) == ["FAILED"]
    assert deployment.results(again) == ["COMPLETED"]  # not again


def test_kmeans_with_no_completed_iteration_fails(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans())
    first = owners.next_round()
    engine, owners = deployment.engine()
    engine.recover()
    status = engine.stored_status(job.job_id)
    assert status.state == "FAILED"
    assert RESTARTED.format(round_id=first) in status.message
    assert "iteration 1 of 5 failed" in status.message
    assert "no round of the job had completed" in status.message
    assert deployment.results(first) == ["FAILED"]
    with pytest.raises(queue.Empty):
        owners.invited.get(timeout=0.3)  # nothing reopens
    assert engine.job(job.job_id) is None


def test_without_a_way_to_plan_kept_requests_the_job_fails(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans())
    _complete(engine, owners.next_round())
    second = owners.next_round()
    engine, owners = deployment.engine(rebuild=None)
    engine.recover()
    status = engine.stored_status(job.job_id)
    assert status.state == "FAILED"
    assert RESTARTED.format(round_id=second) in status.message
    assert "cannot resume" in status.message


def test_a_job_whose_end_was_not_kept_completes_at_the_restart(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans(iterations=2))
    _run_to_end(engine, owners, job.job_id)
    assert job.status == "COMPLETED"
    expected = job.result
    # as if the aggregator died between the last round's end and the job's
    db = sqlite3.connect(deployment.store.path)
    db.execute("UPDATE jobs SET status = 'OPEN', status_proto = NULL")
    db.commit()
    db.close()
    before = len(deployment.published)
    engine, owners = deployment.engine()
    engine.recover()
    status = engine.stored_status(job.job_id)
    assert status.state == "COMPLETED", status.message
    got = result_from_proto(status.result)
    assert [list(c) for c in got.centers] == expected.centers and got.iterations_run == 2
    assert len(deployment.published) == before  # nothing published again


def test_a_graceful_stop_between_iterations_leaves_the_job_to_resume(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans())
    first = owners.next_round()
    engine.close()  # SIGTERM: the next iteration does not open
    _complete(engine, first)
    assert job.done.wait(WAIT) and job.status == "FAILED"
    assert deployment.store.job(job.job_id).status == "OPEN"  # kept for the next start
    engine, owners = deployment.engine()
    engine.recover()
    assert owners.next_round() == f"{job.job_id}-it2-r2"


# ---------------------------------------------------------------------- single-round jobs


def _pca() -> pb.Signed:
    return _signed(
        "moments", MomentsRequest(method="pca", features=tuple(NAMES), components=2), min_owners=3
    )


def test_a_single_round_job_open_at_the_crash_runs_again_under_a_new_attempt(deployment):
    """The lost attempt fails (published once, before the new invitation); the job runs again
    as `<job>-r2`, then `<job>-r3` after a second crash, and completes with every row."""
    engine, owners = deployment.engine()
    job = _start(engine, _pca())
    assert owners.next_round() == job.job_id
    engine, owners = deployment.engine()
    engine.recover()
    lost = engine.stored_round_status(job.job_id)
    assert (lost.state, lost.message) == ("FAILED", RESTARTED.format(round_id=job.job_id))
    assert list(lost.invited) == SITES
    assert deployment.results(job.job_id) == ["FAILED"]
    assert owners.next_round() == f"{job.job_id}-r2"
    assert engine.job(job.job_id).status == "OPEN"  # GetRound on the job id: still running
    engine, owners = deployment.engine()  # a second crash inside the second attempt
    engine.recover()
    assert owners.next_round() == f"{job.job_id}-r3"
    _complete(engine, f"{job.job_id}-r3")
    again = engine.job(job.job_id)
    assert again.done.wait(WAIT) and again.status == "COMPLETED", again.message
    assert again.result.n_samples == 150
    status = engine.stored_status(job.job_id)
    assert (status.round_id, status.state) == (job.job_id, "COMPLETED")
    # an owner asking for the lost attempt still hears that it failed
    assert engine.stored_round_status(job.job_id).state == "FAILED"
    assert deployment.results(job.job_id) == ["FAILED"]
    assert deployment.results(f"{job.job_id}-r2") == ["FAILED"]
    assert deployment.results(f"{job.job_id}-r3") == ["COMPLETED"]
    engine, owners = deployment.engine()  # a third start publishes nothing again
    engine.recover()
    assert deployment.results(job.job_id) == ["FAILED"]
    assert engine.stored_status(job.job_id).state == "COMPLETED"


def test_a_finished_round_never_published_is_published_once(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _pca())
    owners.next_round()
    engine.rounds.publish = lambda rnd: None  # the crash falls between the end and publishing
    _complete(engine, job.job_id)
    assert job.done.wait(WAIT) and job.status == "COMPLETED"
    assert deployment.published == []
    db = sqlite3.connect(deployment.store.path)  # the round's end kept, nothing after it
    db.execute("UPDATE jobs SET status = 'OPEN', status_proto = NULL")
    db.execute("UPDATE rounds SET published = 0")
    db.commit()
    db.close()
    engine, owners = deployment.engine()
    engine.recover()
    assert deployment.results(job.job_id) == ["COMPLETED"]
    status = engine.stored_status(job.job_id)
    assert status.state == "COMPLETED"
    assert result_from_proto(status.result).n_samples == 150
    engine, owners = deployment.engine()
    engine.recover()
    assert deployment.results(job.job_id) == ["COMPLETED"]


def test_everything_is_kept_as_it_happens(deployment):
    engine, owners = deployment.engine()
    job = _start(engine, _kmeans(iterations=2))
    rounds = _run_to_end(engine, owners, job.job_id)
    store = deployment.store
    end = time.monotonic() + WAIT  # the last publication's flag is written after the job ends
    while store.unpublished_rounds() and time.monotonic() < end:
        time.sleep(0.01)
    kept = store.job(job.job_id)
    assert kept.status == "COMPLETED" and kept.caller == "analyst"
    assert pb.Signed.FromString(kept.request) == job.authorization
    assert kept.snapshot is not None and len(kept.snapshot["iterations"]) == 2
    assert [(r.round_id, r.state, r.published) for r in store.job_rounds(job.job_id)] == [
        (rounds[0], "COMPLETED", True),
        (rounds[1], "COMPLETED", True),
    ]
    assert store.job_rounds(job.job_id)[-1].done
    assert store.unfinished_jobs() == [] and store.unpublished_rounds() == []


def test_without_a_store_nothing_is_kept():
    engine = _engine(Owners(), Csp(set()), lambda rnd: None)
    engine.recover()  # nothing to do
    assert engine.stored_status("anything") is None


# ---------------------------------------------------------------------- the snapshot


def _state_after(iterations: int):
    plan = KMEANS.plan(
        KmeansRequest(k=3, centers=tuple(INIT.ravel()), iterations=5, features=tuple(NAMES)),
        Common(n_invited=3, value_bound=100.0),
    )
    state = KMEANS.start(plan, "kmeans-x", SITES)
    for index in range(1, iterations + 1):
        rnd = KMEANS.next_round(plan, state, index)
        enc = rnd.share_encoding
        shares = [KMEANS.share_values(rnd.spec, enc, None, DATA[s], {}) for s in SITES]
        outcome = Outcome(
            f"kmeans-x-it{index}", rnd, SITES, {s: {"read_seconds": 0.25} for s in SITES}, {}
        )
        outcome.totals = _sum(shares, enc.layout(2048))
        outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
        outcome.csp = {"decrypt_seconds": 0.5}
        KMEANS.finish_round(plan, state, outcome)
    return plan, state


def test_kmeans_snapshot_round_trips_through_json():
    plan, state = _state_after(2)
    doc = json.loads(json.dumps(KMEANS.snapshot(state)))
    restored = KMEANS.restore(plan, "kmeans-x", SITES, doc)
    assert np.array_equal(restored.spec.centers, state.spec.centers)
    assert restored.records == state.records  # nested dataclasses, timings included
    assert restored.encoding == state.encoding
    assert restored.converged == state.converged
    assert restored.invited == SITES
    # and the job continues exactly as it would have
    _, direct = _state_after(3)
    rnd = KMEANS.next_round(plan, restored, 3)
    enc = rnd.share_encoding
    outcome = Outcome("kmeans-x-it3", rnd, SITES, {s: {"read_seconds": 0.25} for s in SITES}, {})
    shares = [KMEANS.share_values(rnd.spec, enc, None, DATA[s], {}) for s in SITES]
    outcome.totals = _sum(shares, enc.layout(2048))
    outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
    KMEANS.finish_round(plan, restored, outcome)
    assert np.array_equal(restored.spec.centers, direct.spec.centers)
    assert len(restored.records) == 3


def test_a_snapshot_that_does_not_fit_is_refused():
    plan, state = _state_after(1)
    doc = KMEANS.snapshot(state)
    for bad in (
        {**doc, "version": 99},
        {**doc, "job_id": "kmeans-other"},
        {**doc, "centers": [[1.0, 2.0]]},
        {**doc, "iterations": [{**doc["iterations"][0], "extra": 1}]},
        {k: v for k, v in doc.items() if k != "converged"},
    ):
        with pytest.raises(ProtocolError, match="snapshot of k-means job kmeans-x"):
            KMEANS.restore(plan, "kmeans-x", SITES, bad)


def test_single_round_protocols_keep_no_snapshot():
    from leteo_fed.protocols.moments_round import PROTOCOL as MOMENTS

    assert MOMENTS.snapshot(None) is None
    with pytest.raises(ProtocolError, match="cannot resume"):
        MOMENTS.restore(None, "x", [], {})
