"""Which rounds this CSP has used, and how each ended, kept across restarts.

A share is signed for one round, and a round is decrypted at most once, so "each share in
exactly one decryption ever" holds as long as a restart cannot reopen a round. A round is
claimed (appended and fsynced) before any decryption starts; its outcome follows. A round that
ended refused, or that an owner withdrew before it was claimed, can never be decrypted: that is
what lets an owner take back the budget its share was charged.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from leteo_fed.errors import DuplicateError

FILE_NAME = "decrypted-rounds.jsonl"
CLAIMED, DECRYPTED, REFUSED, WITHDRAWN = "claimed", "decrypted", "refused", "withdrawn"
NOT_INCLUDED = "not_included"  # decrypted, but without the asking owner's share


class DecryptLog:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._state: dict[str, str] = {}
        self._contributors: dict[str, frozenset[str]] = {}  # decrypted round -> its signers
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    self._state[record["round_id"]] = record.get("state", CLAIMED)
                    if "contributors" in record:
                        self._contributors[record["round_id"]] = frozenset(record["contributors"])

    def __contains__(self, round_id: str) -> bool:
        with self._lock:
            return round_id in self._state

    def state(self, round_id: str) -> str | None:
        with self._lock:
            return self._state.get(round_id)

    def claim(self, round_id: str, mode: str) -> None:
        """Mark the round used, durably, before anything of it is decrypted."""
        with self._lock:
            if round_id in self._state:
                raise DuplicateError(
                    f"round {round_id} was already decrypted or withdrawn; the CSP decrypts a "
                    "round once"
                )
            self._append(round_id, CLAIMED, mode=mode)

    def settle(
        self, round_id: str, decrypted: bool, reason: str = "", contributors: Sequence[str] = ()
    ) -> None:
        """How a claimed round ended: decrypted (by the shares of `contributors`), or refused
        before any decryption."""
        with self._lock:
            if decrypted and contributors:
                self._contributors[round_id] = frozenset(contributors)
                self._append(round_id, DECRYPTED, contributors=sorted(contributors))
            elif decrypted:  # who contributed is not known: no owner is told it was left out
                self._append(round_id, DECRYPTED)
            else:
                self._append(round_id, REFUSED, reason=reason)

    def withdraw(self, round_id: str, by: str) -> str:
        """An owner closes a round for good: 'withdrawn' if it was never decrypted (and now
        never will be), 'not_included' if it was decrypted without `by`'s share (it is decrypted
        once: that share never will be), else its state ('decrypted', or 'claimed' while
        decryption runs)."""
        with self._lock:
            state = self._state.get(round_id)
            signers = self._contributors.get(round_id)
            if state == DECRYPTED and signers is not None and by not in signers:
                return NOT_INCLUDED
            if state in (DECRYPTED, CLAIMED):
                return state
            if state is None:
                self._append(round_id, WITHDRAWN, by=by)
            return WITHDRAWN

    def _append(self, round_id: str, state: str, **facts: object) -> None:
        self._state[round_id] = state
        if self.path is None:
            return
        record = {"round_id": round_id, "state": state, "time": time.time(), **facts}
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
