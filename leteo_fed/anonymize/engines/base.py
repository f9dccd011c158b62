"""The engine interface: what the anonymization job hands an engine and gets back.

An engine is a :class:`Release`: given a checked :class:`JobInput`, it reads the input, runs the
algorithm, writes the release into a staging folder and measures what it wrote, returning
:class:`Staged`. Two engines implement it, :func:`engines.local.job.release` (pyarrow + NumPy, in
process) and :func:`engines.spark.job.release`; :mod:`engines.choice` picks one for a job. Kept
apart from :mod:`job` so the engines need not import the job that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.output import Output


class AnonymizationFailed(Exception):
    """The run produced a release that does not meet its own configuration (a bug, not bad input).

    Not a :class:`~leteo_fed.errors.LeteoError`: the CLI reports it as a run failure (exit 1).
    """


@dataclass(frozen=True)
class JobInput:
    """A checked job: what to read, how to anonymize, where to write."""

    path: str
    fmt: str
    config: AnonymizationConfig
    hierarchies: dict[str, Hierarchy]
    key: bytes | None
    out: Output


@dataclass(frozen=True)
class Staged:
    """An engine's result: the release written under the staging folder, and its measurement."""

    written: Path
    measured: dict[str, Any]
    stats: Any
    timings: dict[str, float]
    measured_on: str


def phase_timings(
    start: float, read: float, anonymized: float, written: float, measured: float
) -> dict[str, float]:
    """Seconds per phase of an engine's run, from the perf_counter() at each phase's end."""
    return {
        "read": read - start,
        "anonymize": anonymized - read,
        "write": written - anonymized,
        "measure": measured - written,
    }


Progress = Callable[[str], None]


class Release(Protocol):
    """An engine: run ``job`` up to a measured release in ``staging``, saying each step."""

    def __call__(self, job: JobInput, staging: Path, say: Progress) -> Staged: ...
