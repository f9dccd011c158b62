"""The LDP round's "sum": reports folded in memory, or spilled to files and estimated on Spark.

Below the report-volume threshold every validated chunk is folded into the protocol's
accumulator with NumPy. Above it, chunks are validated just the same and written to files in a
spill directory; at the end of the round Spark computes their support (`spark_ldp`) and it is
added to whatever was folded in memory before the switch. The directory belongs to the round:
`cleanup` deletes it, whatever the outcome. A `RoundIntake` (`aggregator.rounds.intake`).
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from leteo_fed import extras
from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols.reports import ReportAccumulator
from leteo_fed.protocols.round_types import Outcome

log = logging.getLogger("leteo.aggregator")


@dataclass(frozen=True)
class SpilledChunk:
    """A validated chunk written to a file; its support is computed by Spark."""

    path: Path
    n: int


class ReportIntake:
    key_id = ""  # reports are not encrypted: the spec names no key and no slot layout
    layout: SlotLayout | None = None

    def __init__(self, accumulator: ReportAccumulator, spill_dir: Path | None = None) -> None:
        self.accumulator = accumulator
        self.spill_dir: Path | None = None
        self.chunk_files: list[Path] = []
        self.seconds = 0.0
        self._declared = 0
        self._n_spilled = 0
        self._closed = False
        self._warned = False
        self._lock = threading.Lock()
        if spill_dir is not None and not self.spill(Path(spill_dir)):
            raise DataError("geo, multi-column and naive Bayes rounds keep their reports in memory")

    @property
    def can_spill(self) -> bool:
        return not self.accumulator.keeps_points

    @property
    def engine(self) -> str:
        return "spark" if self.chunk_files else "numpy"

    def declare(self, n_reports: int) -> int:
        """Add reports announced by an upload (negative: withdraw them); returns the total."""
        with self._lock:
            self._declared += n_reports
            return self._declared

    def spill(self, spill_dir: Path) -> bool:
        """Switch to spill mode under `spill_dir` (created). True if it switched now."""
        with self._lock:
            if self.spill_dir is not None or not self.can_spill or self._closed:
                return False
            spill_dir.mkdir(parents=True, exist_ok=True)
            self.spill_dir = spill_dir
            return True

    def spill_if_over(self, expected: int, threshold: int, round_id: str) -> bool:
        """Spill once the round expects more than `threshold` reports; True if it switched."""
        if expected <= threshold or not self.can_spill or self.spill_dir is not None:
            return False
        if not extras.installed("pyspark"):
            if not self._warned:
                self._warned = True
                log.warning(
                    "round %s: %d reports expected, above the Spark threshold %d, but %s; "
                    "folding them in memory",
                    round_id,
                    expected,
                    threshold,
                    extras.hint("spark"),
                )
            return False
        spill_dir = Path(tempfile.mkdtemp(prefix=f"leteo-{round_id}-"))
        if not self.spill(spill_dir):
            spill_dir.rmdir()  # another upload switched first
            return False
        atexit.register(self.cleanup)  # a shutdown mid-round leaves no files
        return True

    def partial(self, reports: np.ndarray):
        """A chunk's contribution, validated so a malformed chunk changes nothing."""
        spill_dir = self.spill_dir
        if spill_dir is None:
            return self.accumulator.partial(reports)
        self.accumulator.check(reports)
        return self._write(reports, spill_dir)

    def _write(self, reports: np.ndarray, spill_dir: Path) -> SpilledChunk:
        from leteo_fed.data.spark_ldp import write_chunk  # pyspark only when spilling

        if self._closed:
            raise ProtocolError("the round is closed; reports refused")
        try:
            path = write_chunk(reports, spill_dir)
        except FileNotFoundError as exc:  # the round closed (and its files went) meanwhile
            if self._closed:
                raise ProtocolError("the round is closed; reports refused") from exc
            raise
        return SpilledChunk(path, len(reports))

    def fold(self, parts: list) -> None:
        """Fold one upload's validated chunks (called under the round's lock)."""
        start = time.perf_counter()
        for part in parts:
            if isinstance(part, SpilledChunk):
                with self._lock:
                    self.chunk_files.append(part.path)
                    self._n_spilled += part.n
            else:
                self.accumulator.fold(part)
        self.seconds += time.perf_counter() - start

    def discard(self, parts: list) -> None:
        """Delete the files of spilled parts that will never be folded (an aborted upload)."""
        for part in parts:
            if isinstance(part, SpilledChunk):
                part.path.unlink(missing_ok=True)

    def finalize(self) -> ReportAccumulator:
        """Add the spilled chunks' support (computed with Spark) to the accumulator."""
        if self.chunk_files:
            from leteo_fed.data.spark_ldp import spark_support

            n, contribution = spark_support(list(self.chunk_files), self.accumulator.spec)
            if n != self._n_spilled:
                raise ProtocolError(
                    f"the chunk files hold {n} reports, {self._n_spilled} were accepted"
                )
            self.accumulator.add(n, contribution, engine="spark")
        return self.accumulator

    def reveal(self, outcome: Outcome) -> None:
        """The round's estimate: the accumulator, the spilled chunks' support added."""
        outcome.reports = self.finalize()
        log.info(
            "round %s: %s estimate from %d reports (%s path)",
            outcome.round_id,
            outcome.reports.spec.mechanism,
            outcome.reports.n,
            outcome.reports.engine,
        )

    def cleanup(self) -> None:
        """End of the round: delete the spill directory and refuse further spilled chunks."""
        with self._lock:
            self._closed = True
            spill_dir = self.spill_dir
        if spill_dir is not None:
            shutil.rmtree(spill_dir, ignore_errors=True)
