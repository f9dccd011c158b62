"""The aggregator's state database (aggregator/state.py): what goes in comes out after a reopen,
every write is whole or absent, the files are private, and the flags recovery relies on
(unfinished jobs, open and unpublished rounds) say what they should."""

from __future__ import annotations

import os
import sqlite3
import stat
import threading

import pytest

from aggregator.state import DB_NAME, StateError, StateStore


@pytest.fixture
def store(tmp_path):
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


def _start(store: StateStore, job_id: str = "kmeans-1", first: str = "kmeans-1-it1") -> None:
    store.start_job(
        job_id, "kmeans", "kmeans", "analyst", b"\x0a\x03abc", ["s1", "s2"], first, "kmeans"
    )


def test_the_state_dir_and_database_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        store = StateStore(tmp_path / "a" / "state")
        store.save_owner("s1", "inbound", "127.0.0.1:1")
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE((tmp_path / "a" / "state").stat().st_mode) == 0o700
        for path in (tmp_path / "a" / "state").iterdir():  # the database, its WAL and shm
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
        assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
        assert store.path.name == DB_NAME
    finally:
        store.close()


def test_an_existing_state_dir_is_made_private(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir(mode=0o755)
    StateStore(folder).close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_wal_and_full_sync(store):
    db = sqlite3.connect(store.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_owner_registrations_round_trip_and_survive_a_reopen(tmp_path):
    store = StateStore(tmp_path)
    store.save_owner("site-2", "outbound", "")
    store.save_owner("site-1", "inbound", "127.0.0.1:5001")
    store.save_owner("site-1", "inbound", "127.0.0.1:5002")  # moved
    store.save_owner("site-2", "inbound", "10.0.0.2:443")  # switched mode
    with pytest.raises(ValueError, match="mode"):
        store.save_owner("site-3", "sideways", "")
    store.close()
    again = StateStore(tmp_path)
    try:
        assert again.owners() == [
            ("site-1", "inbound", "127.0.0.1:5002"),
            ("site-2", "inbound", "10.0.0.2:443"),
        ]
    finally:
        again.close()


def test_a_job_and_its_rounds_round_trip(tmp_path):
    store = StateStore(tmp_path)
    _start(store)
    store.finish_round("kmeans-1-it1", "COMPLETED", b"status-1", snapshot={"centers": [[1.5]]})
    store.open_round("kmeans-1-it2", "kmeans-1", 2, "kmeans", "iteration 2 of 5 open")
    store.close()
    store = StateStore(tmp_path)
    try:
        job = store.job("kmeans-1")
        assert job is not None
        assert (job.protocol, job.label, job.caller) == ("kmeans", "kmeans", "analyst")
        assert job.request == b"\x0a\x03abc"
        assert job.invited == ["s1", "s2"]
        assert (job.status, job.message, job.status_proto) == (
            "OPEN",
            "iteration 2 of 5 open",
            None,
        )
        assert job.snapshot == {"centers": [[1.5]]}
        assert job.attempt == 1
        rounds = store.job_rounds("kmeans-1")
        assert [(r.round_id, r.idx, r.state, r.published) for r in rounds] == [
            ("kmeans-1-it1", 1, "COMPLETED", False),
            ("kmeans-1-it2", 2, "OPEN", False),
        ]
        assert rounds[0].status_proto == b"status-1"
        assert store.final_status("kmeans-1-it1") == b"status-1"
        assert store.final_status("kmeans-1-it2") is None  # still open
        assert store.final_status("kmeans-1") is None  # the job runs
        assert store.final_status("nothing") is None
        assert [r.round_id for r in store.open_rounds()] == ["kmeans-1-it2"]
        assert store.next_attempt("kmeans-1") == 2
        assert store.next_attempt("kmeans-1") == 3
    finally:
        store.close()


def test_a_failed_round_keeps_the_last_snapshot(store):
    _start(store)
    store.finish_round("kmeans-1-it1", "COMPLETED", b"s1", snapshot={"it": 1})
    store.open_round("kmeans-1-it2", "kmeans-1", 2, "kmeans")
    store.finish_round("kmeans-1-it2", "FAILED", b"s2")
    assert store.job("kmeans-1").snapshot == {"it": 1}


def test_unfinished_jobs_and_the_job_status_wins_over_its_rounds(store):
    _start(store, "pca-1", "pca-1")
    _start(store, "kmeans-1")
    store.finish_round("pca-1", "COMPLETED", b"round", done=True)
    assert [j.job_id for j in store.unfinished_jobs()] == ["pca-1", "kmeans-1"]
    assert store.final_status("pca-1") == b"round"  # a single-round job's id is its round's
    store.finish_job("pca-1", "COMPLETED", "done", b"job")
    assert [j.job_id for j in store.unfinished_jobs()] == ["kmeans-1"]
    assert store.final_status("pca-1") == b"job"
    assert store.job_rounds("pca-1")[0].done


def test_published_flags(store):
    _start(store)
    assert store.unpublished_rounds() == []  # an open round is not publishable
    store.finish_round("kmeans-1-it1", "COMPLETED", b"s1")
    store.open_round("kmeans-1-it2", "kmeans-1", 2, "kmeans")
    store.finish_round("kmeans-1-it2", "FAILED", b"s2")
    assert [r.round_id for r in store.unpublished_rounds()] == ["kmeans-1-it1", "kmeans-1-it2"]
    store.mark_published("kmeans-1-it1")
    assert [r.round_id for r in store.unpublished_rounds()] == ["kmeans-1-it2"]
    store.mark_published("kmeans-1-it2")
    assert store.unpublished_rounds() == []
    assert all(r.published for r in store.job_rounds("kmeans-1"))


def test_a_failed_write_leaves_nothing_half_written(store):
    _start(store)
    # the job's row goes in, then its first round's id clashes: neither is kept
    with pytest.raises(StateError):
        store.start_job("kmeans-2", "kmeans", "kmeans", "a", b"", [], "kmeans-1-it1", "kmeans")
    assert store.job("kmeans-2") is None
    # an unknown round: its job's snapshot is not written either
    with pytest.raises(StateError, match="not in the aggregator's state"):
        store.finish_round("kmeans-1-it9", "COMPLETED", b"x", snapshot={"it": 9})
    assert store.job("kmeans-1").snapshot is None
    # an error raised in the middle of a transaction rolls it back
    with pytest.raises(RuntimeError), store._tx() as db:
        db.execute("UPDATE jobs SET message = 'half' WHERE job_id = 'kmeans-1'")
        raise RuntimeError("crash")
    assert store.job("kmeans-1").message == ""
    store.save_owner("s1", "outbound", "")  # the store still works
    assert store.owners() == [("s1", "outbound", "")]


def test_a_snapshot_goes_in_with_its_round_or_not_at_all(store):
    _start(store)
    with pytest.raises(TypeError):  # not JSON: nothing is written, the round stays open
        store.finish_round("kmeans-1-it1", "COMPLETED", b"s", snapshot={"x": object()})
    assert store.job_rounds("kmeans-1")[0].state == "OPEN"
    assert store.job("kmeans-1").snapshot is None


def test_a_newer_schema_is_refused(tmp_path):
    StateStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE schema_version SET version = 99")
    db.commit()
    db.close()
    with pytest.raises(StateError, match="newer version"):
        StateStore(tmp_path)


def test_an_unusable_state_dir_is_a_state_error(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(StateError, match="cannot open"):
        StateStore(tmp_path / "file")


def test_writes_from_many_threads(store):
    errors: list[BaseException] = []

    def register(t: int) -> None:
        try:
            for i in range(50):
                store.save_owner(f"site-{t}-{i}", "inbound", f"127.0.0.1:{1000 + i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=register, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(store.owners()) == 400


def test_one_aggregator_per_state_dir(tmp_path):
    first = StateStore(tmp_path)
    with pytest.raises(StateError, match="in use by another aggregator"):
        StateStore(tmp_path)
    first.close()
    StateStore(tmp_path).close()  # free again once the first is closed (or its process died)
