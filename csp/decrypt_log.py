"""Which rounds this CSP has decrypted, kept across restarts.

A share is signed for one round, and a round is decrypted at most once, so "each share in
exactly one decryption ever" holds as long as a restart cannot reopen a round. The log is
appended and fsynced before any decryption starts.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from leteo_fed.errors import DuplicateError

FILE_NAME = "decrypted-rounds.jsonl"


class DecryptLog:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._rounds: set[str] = set()
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    self._rounds.add(json.loads(line)["round_id"])

    def __contains__(self, round_id: str) -> bool:
        with self._lock:
            return round_id in self._rounds

    def claim(self, round_id: str, mode: str) -> None:
        """Mark the round used, durably, before anything of it is decrypted."""
        with self._lock:
            if round_id in self._rounds:
                raise DuplicateError(
                    f"round {round_id} was already decrypted; the CSP decrypts a round once"
                )
            self._rounds.add(round_id)
            if self.path is None:
                return
            record = {"round_id": round_id, "mode": mode, "time": time.time()}
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, (json.dumps(record) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
