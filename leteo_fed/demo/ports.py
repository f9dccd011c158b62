"""Loopback ports for local deployments, never handed out twice while they may still be bound.

A probe socket is closed before the child binds the port, so the kernel may offer the same
port to the next probe; two servers told the same port would both listen on it (gRPC servers
set SO_REUSEPORT) and split each other's calls. With 100 owners in one process that happened,
and two local deployments (or two test workers) on one machine can meet the same way across
processes. So each port handed out is also written to a registry file of this user's in the
temp folder, read and rewritten under an exclusive lock, and kept there RESERVE_SECONDS (ample
for a child to bind it). Without the file (another user's, a read-only folder) only this
process's own record protects.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RESERVE_SECONDS = 300.0

_HANDED_OUT: set[int] = set()
_LOCK = threading.Lock()


def registry_path() -> Path:
    return Path(tempfile.gettempdir()) / f"leteo-fed-ports-{os.getuid()}"


def free_port() -> int:
    """A loopback port that is free now and that no process of this user took recently."""
    with _LOCK, _registry() as taken:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED_OUT and port not in taken:
                _HANDED_OUT.add(port)
                taken[port] = time.time()
                return port


@contextmanager
def _registry() -> Iterator[dict[int, float]]:
    """{port: time handed out} of the unexpired entries, written back on exit, under flock."""
    try:
        fd = os.open(registry_path(), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield {}
        return
    with os.fdopen(fd, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        now = time.time()
        taken: dict[int, float] = {}
        for line in f.read().splitlines():
            fields = line.split()
            try:
                port, stamp = int(fields[0]), float(fields[1])
            except (IndexError, ValueError):
                continue  # a line cut short by a crash: the port is just not reserved
            if now - stamp < RESERVE_SECONDS:
                taken[port] = stamp
        yield taken
        f.seek(0)
        f.truncate()
        f.write("".join(f"{p} {t:.3f}\n" for p, t in taken.items()))
