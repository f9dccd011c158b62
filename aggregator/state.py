"""The aggregator's durable state: owner registrations, jobs and rounds, kept across restarts.

Without it a restarted aggregator forgets every registration, every running job and every
result. With a state dir it keeps them in one embedded SQLite database,
`<state_dir>/aggregator.sqlite3`, so that after a crash or a restart:

- owners need not register again before the next job (inbound owners are dialled at once);
- a round that was open is failed and the failure published to its owners (their DP budget
  comes back from the CSP, which never decrypted it), a finished round that was never
  published is published once, and none is published twice;
- a multi-round job (k-means) resumes from its last completed iteration;
- `GetRound` still answers for jobs and rounds from before the restart.

What is kept is what the aggregator may see anyway: owner addresses, the analyst's signed
request, statuses and results as published, and a multi-round protocol's state between
iterations. Never a share, a mask or a ciphertext: a round open at a crash cannot resume.

Why SQLite: one file, transactions (every write below is one, so nothing is ever
half-written), and WAL with synchronous=FULL makes a committed write survive a power loss.
One connection serves every thread, guarded by a lock: the writes are few and small.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from leteo_fed.errors import LeteoError

log = logging.getLogger("leteo.aggregator")

DB_NAME = "aggregator.sqlite3"
LOCK_NAME = ".lock"  # held while an aggregator uses the folder
SCHEMA_VERSION = 1
OWNER_MODES = ("inbound", "outbound")
OPEN = "OPEN"  # a job or round still running (the engine's state names)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS owners (
    site_id TEXT PRIMARY KEY,
    mode TEXT NOT NULL CHECK (mode IN ('inbound', 'outbound')),
    address TEXT NOT NULL,
    updated_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    protocol TEXT NOT NULL,           -- the protocol's registry name
    label TEXT NOT NULL,
    caller TEXT NOT NULL,
    request BLOB NOT NULL,            -- the analyst's signed StartRound envelope (pb.Signed)
    invited TEXT NOT NULL,            -- JSON list of site ids
    status TEXT NOT NULL,             -- OPEN | COMPLETED | FAILED
    message TEXT NOT NULL DEFAULT '',
    status_proto BLOB,                -- the final pb.RoundStatus of the job
    snapshot TEXT,                    -- JSON: protocol state after the last completed round
    attempt INTEGER NOT NULL DEFAULT 1,  -- 1 + how often the job was resumed
    created_unix REAL NOT NULL,
    updated_unix REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (status);
CREATE TABLE IF NOT EXISTS rounds (
    round_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (job_id),
    idx INTEGER NOT NULL,             -- the round's index in its job (k-means: the iteration)
    label TEXT NOT NULL,
    state TEXT NOT NULL,              -- OPEN | COMPLETED | FAILED
    done INTEGER NOT NULL DEFAULT 0,  -- the round ended its job (the protocol's Step.done)
    status_proto BLOB,                -- the final pb.RoundStatus, as published
    published INTEGER NOT NULL DEFAULT 0,
    opened_unix REAL NOT NULL,
    updated_unix REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS rounds_by_job ON rounds (job_id);
"""


class StateError(LeteoError):
    """The state database cannot be opened, read or written."""


@dataclass(frozen=True)
class StoredJob:
    job_id: str
    protocol: str
    label: str
    caller: str
    request: bytes  # the signed envelope, serialized
    invited: list[str]
    status: str
    message: str
    status_proto: bytes | None
    snapshot: dict[str, Any] | None
    attempt: int
    created_unix: float
    updated_unix: float


@dataclass(frozen=True)
class StoredRound:
    round_id: str
    job_id: str
    idx: int
    label: str
    state: str
    done: bool
    status_proto: bytes | None
    published: bool


_JOB_COLUMNS = (
    "job_id, protocol, label, caller, request, invited, status, message, status_proto, "
    "snapshot, attempt, created_unix, updated_unix"
)
_ROUND_COLUMNS = "round_id, job_id, idx, label, state, done, status_proto, published"


def _job(row: tuple) -> StoredJob:
    (job_id, protocol, label, caller, request, invited, status, message) = row[:8]
    proto, snapshot, attempt, created, updated = row[8:]
    return StoredJob(
        job_id=job_id,
        protocol=protocol,
        label=label,
        caller=caller,
        request=bytes(request),
        invited=list(json.loads(invited)),
        status=status,
        message=message,
        status_proto=bytes(proto) if proto is not None else None,
        snapshot=json.loads(snapshot) if snapshot is not None else None,
        attempt=int(attempt),
        created_unix=float(created),
        updated_unix=float(updated),
    )


def _round(row: tuple) -> StoredRound:
    round_id, job_id, idx, label, state, done, proto, published = row
    return StoredRound(
        round_id,
        job_id,
        int(idx),
        label,
        state,
        bool(done),
        bytes(proto) if proto is not None else None,
        bool(published),
    )


class StateStore:
    """The aggregator's database in `state_dir` (created 0700; the file is 0600: it holds the
    analysts' signed requests and every result)."""

    def __init__(self, state_dir: Path | str) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / DB_NAME
        self._lock_fd = -1
        try:
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(self.state_dir, 0o700)  # mkdir's mode is masked by the umask
            self._lock_fd = _lock(self.state_dir / LOCK_NAME)
            # create the file 0600 before SQLite opens it (its WAL and shm files get its mode)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
            os.chmod(self.path, 0o600)
            self._db = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
        except (OSError, sqlite3.Error) as exc:
            self._unlock()
            raise StateError(f"cannot open the aggregator's state at {self.path}: {exc}") from exc
        except BaseException:
            self._unlock()
            raise
        self._lock = threading.Lock()
        self._closed = False
        try:
            self._setup()
        except BaseException:
            self._db.close()
            self._unlock()
            raise

    def _setup(self) -> None:
        try:
            with self._lock:
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StateError(f"{self.path}: SQLite refused WAL mode (got {mode})")
                self._db.execute("PRAGMA synchronous=FULL")  # a commit survives a power loss
                self._db.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StateError(f"cannot open the aggregator's state at {self.path}: {exc}") from exc
        with self._tx() as db:
            # statement by statement: executescript would commit the open transaction
            for statement in _SCHEMA.split(";\n"):
                if statement.strip():
                    db.execute(statement)
            row = db.execute("SELECT max(version) FROM schema_version").fetchone()
            version = row[0]
            if version is None:
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version > SCHEMA_VERSION:
                raise StateError(
                    f"{self.path} was written by a newer version of the aggregator (schema "
                    f"{version}; this one reads {SCHEMA_VERSION})"
                )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction (BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any error) under the lock."""
        with self._lock:
            self._check_open()
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StateError(f"cannot write the aggregator's state: {exc}") from exc
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException as exc:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    log.exception("rolling back a state transaction failed")
                if isinstance(exc, sqlite3.Error):
                    raise StateError(f"cannot write the aggregator's state: {exc}") from exc
                raise

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            self._check_open()
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StateError(f"cannot read the aggregator's state: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._db.close()
            self._unlock()

    def _check_open(self) -> None:
        """After `close` (the aggregator stopping): one clear error, not SQLite's."""
        if self._closed:
            raise StateError(f"the aggregator's state at {self.path} is closed (it is stopping)")

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1

    # ------------------------------------------------------------------ owners

    def save_owner(self, site_id: str, mode: str, address: str) -> None:
        """An owner's registration (inbound: the address it is dialled at; outbound: '')."""
        if mode not in OWNER_MODES:
            raise ValueError(f"mode must be one of {OWNER_MODES}, got {mode!r}")
        with self._tx() as db:
            db.execute(
                "INSERT INTO owners (site_id, mode, address, updated_unix) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (site_id) DO UPDATE SET mode = excluded.mode, "
                "address = excluded.address, updated_unix = excluded.updated_unix",
                (site_id, mode, address, time.time()),
            )

    def touch_owners(self, seen: dict[str, float]) -> None:
        """When owners were last heard from (`updated_unix`: the registration, later the last
        answer or disconnection), a batch in one transaction."""
        with self._tx() as db:
            db.executemany(
                "UPDATE owners SET updated_unix = ? WHERE site_id = ?",
                [(when, site) for site, when in seen.items()],
            )

    def delete_owner(self, site_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM owners WHERE site_id = ?", (site_id,))

    def owners_last_seen(self) -> dict[str, float]:
        rows = self._read("SELECT site_id, updated_unix FROM owners")
        return {s: float(t) for s, t in rows}

    def owners(self) -> list[tuple[str, str, str]]:
        """Every registration kept: (site_id, mode, address), sorted by site."""
        rows = self._read("SELECT site_id, mode, address FROM owners ORDER BY site_id")
        return [(s, m, a) for s, m, a in rows]

    # ------------------------------------------------------------------ jobs and rounds

    def start_job(
        self,
        job_id: str,
        protocol: str,
        label: str,
        caller: str,
        request: bytes,
        invited: list[str],
        round_id: str,
        round_label: str,
    ) -> None:
        """A new job with its first round (index 1) open, in one transaction."""
        now = time.time()
        with self._tx() as db:
            db.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, '', NULL, NULL, 1, ?, ?)",
                (job_id, protocol, label, caller, request, json.dumps(invited), OPEN, now, now),
            )
            _insert_round(db, round_id, job_id, 1, round_label, now)

    def open_round(
        self, round_id: str, job_id: str, idx: int, label: str, job_message: str = ""
    ) -> None:
        """A further round of a running job (and the job's progress message)."""
        now = time.time()
        with self._tx() as db:
            _insert_round(db, round_id, job_id, idx, label, now)
            db.execute(
                "UPDATE jobs SET message = ?, updated_unix = ? WHERE job_id = ?",
                (job_message, now, job_id),
            )

    def finish_round(
        self,
        round_id: str,
        state: str,
        status_proto: bytes,
        done: bool = False,
        snapshot: dict[str, Any] | None = None,
        job_message: str | None = None,
    ) -> None:
        """A round's end and its final status; with `snapshot`, the job's protocol state after
        it, in the same transaction (a snapshot always matches the rounds marked completed)."""
        now = time.time()
        text = json.dumps(snapshot) if snapshot is not None else None
        with self._tx() as db:
            cur = db.execute(
                "UPDATE rounds SET state = ?, status_proto = ?, done = ?, updated_unix = ? "
                "WHERE round_id = ?",
                (state, status_proto, int(done), now, round_id),
            )
            if cur.rowcount != 1:
                raise StateError(f"round {round_id} is not in the aggregator's state")
            if text is not None or job_message is not None:
                db.execute(
                    "UPDATE jobs SET snapshot = coalesce(?, snapshot), "
                    "message = coalesce(?, message), updated_unix = ? "
                    "WHERE job_id = (SELECT job_id FROM rounds WHERE round_id = ?)",
                    (text, job_message, now, round_id),
                )

    def mark_published(self, round_id: str) -> None:
        """The round's final status went out to its owners: never publish it again."""
        with self._tx() as db:
            db.execute(
                "UPDATE rounds SET published = 1, updated_unix = ? WHERE round_id = ?",
                (time.time(), round_id),
            )

    def unpublished_rounds(self) -> list[StoredRound]:
        """Finished rounds whose status has not been published yet, oldest first."""
        rows = self._read(
            f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE published = 0 AND state != ? "
            "AND status_proto IS NOT NULL ORDER BY rowid",
            (OPEN,),
        )
        return [_round(r) for r in rows]

    def open_rounds(self) -> list[StoredRound]:
        """Rounds still open (after a restart: the rounds it interrupted), oldest first."""
        rows = self._read(
            f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE state = ? ORDER BY rowid", (OPEN,)
        )
        return [_round(r) for r in rows]

    def next_attempt(self, job_id: str) -> int:
        """The job resumes once more: its new attempt number (2 at the first resume)."""
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET attempt = attempt + 1, updated_unix = ? WHERE job_id = ?",
                (time.time(), job_id),
            )
            row = db.execute("SELECT attempt FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            raise StateError(f"job {job_id} is not in the aggregator's state")
        return int(row[0])

    def finish_job(self, job_id: str, status: str, message: str, status_proto: bytes) -> None:
        """The job's end and its final status."""
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET status = ?, message = ?, status_proto = ?, updated_unix = ? "
                "WHERE job_id = ?",
                (status, message, status_proto, time.time(), job_id),
            )

    def unfinished_jobs(self) -> list[StoredJob]:
        """Jobs still running when the aggregator stopped, oldest first."""
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = ? ORDER BY rowid",
            (OPEN,),
        )
        return [_job(r) for r in rows]

    def recent_jobs(self, caller: str | None, limit: int) -> list[StoredJob]:
        """The newest jobs first; only `caller`'s unless None."""
        where, args = ("WHERE caller = ?", (caller,)) if caller is not None else ("", ())
        rows = self._read(
            f"SELECT {_JOB_COLUMNS} FROM jobs {where} ORDER BY created_unix DESC, rowid DESC "
            "LIMIT ?",
            (*args, limit),
        )
        return [_job(r) for r in rows]

    def job(self, job_id: str) -> StoredJob | None:
        rows = self._read(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def job_rounds(self, job_id: str) -> list[StoredRound]:
        """A job's rounds in the order they were opened."""
        rows = self._read(
            f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE job_id = ? ORDER BY rowid",
            (job_id,),
        )
        return [_round(r) for r in rows]

    def round(self, round_id: str) -> StoredRound | None:
        rows = self._read(f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE round_id = ?", (round_id,))
        return _round(rows[0]) if rows else None

    def final_status(self, ident: str) -> bytes | None:
        """The final status (a serialized pb.RoundStatus) of the job or round `ident`; None while
        it runs or if unknown. A single-round job's id is also its round's: the job's wins."""
        rows = self._read(
            "SELECT status_proto FROM jobs WHERE job_id = ? AND status_proto IS NOT NULL "
            "UNION ALL SELECT status_proto FROM rounds WHERE round_id = ? "
            "AND status_proto IS NOT NULL",
            (ident, ident),
        )
        return bytes(rows[0][0]) if rows else None


def _insert_round(
    db: sqlite3.Connection, round_id: str, job_id: str, idx: int, label: str, now: float
) -> None:
    db.execute(
        f"INSERT INTO rounds ({_ROUND_COLUMNS}, opened_unix, updated_unix) "
        "VALUES (?, ?, ?, ?, ?, 0, NULL, 0, ?, ?)",
        (round_id, job_id, idx, label, OPEN, now, now),
    )


def _lock(path: Path) -> int:
    """Hold an exclusive lock on the folder for as long as the store is open (the kernel drops it
    when the process dies, even by SIGKILL): two aggregators on one state dir would each resume
    the other's jobs."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StateError(
            f"{path.parent} is in use by another aggregator (one aggregator per state dir)"
        ) from None
    return fd
