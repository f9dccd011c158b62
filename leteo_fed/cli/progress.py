"""Live progress of a federated job on the analyst's terminal.

On a terminal one status line is rewritten in place; otherwise (a log, a pipe) a line is
printed whenever something other than the elapsed time changed. Each owner's decline is printed
once, with its rule, as soon as it is known.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:  # the CLI imports no gRPC or protobuf before a command runs
    from leteo_fed.proto import leteo_pb2 as pb


def describe(status: pb.RoundStatus) -> str:
    """One line: round k of T, phase, owners invited/accepted/declined, shares versus quorum,
    the job's own message (e.g. how far the centers moved), elapsed time."""
    p = status.progress
    if not p.round_id:
        return f"{status.round_id}: {status.state.lower()} {status.message}".rstrip()
    step = f"round {p.round} of {p.rounds}" if p.rounds > 1 else "round"
    parts = [
        f"{status.round_id} {step} {p.phase}",
        f"owners {len(p.accepted)}/{len(p.invited)} accepted, {len(p.declined)} declined",
        f"shares {len(p.submitted)}/{p.quorum} needed",
    ]
    line = ", ".join(parts)
    if p.previous:
        line += f" | {p.previous}"
    return line


class ProgressPrinter:
    """`tick(status)` for `AnalystClient.wait`; `done()` ends the status line."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._start = time.monotonic()
        self._last = ""
        self._declines: set[tuple[str, str]] = set()
        self._width = 0

    def tick(self, status: pb.RoundStatus) -> None:
        for site, reason in sorted(status.progress.declined.items()):
            key = (status.progress.round_id, site)
            if key not in self._declines:
                self._declines.add(key)
                self._emit(f"{site} declined: {reason}", keep=True)
        line = describe(status)
        if self.tty or line != self._last:
            self._emit(line, keep=not self.tty)
        self._last = line

    def done(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def _emit(self, text: str, keep: bool) -> None:
        stamped = f"[{time.monotonic() - self._start:7.1f}s] {text}"
        if self.tty:
            pad = max(0, self._width - len(stamped))
            self.stream.write("\r" + stamped + " " * pad + ("\n" if keep else ""))
            self._width = 0 if keep else len(stamped)
        else:
            self.stream.write(stamped + "\n")
        self.stream.flush()
