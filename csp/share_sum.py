"""The CSP's own sum of a round's shares: each share's ciphertexts checked (units mod n^2, the
digest its owner signed) and multiplied, coordinate by coordinate, into the round's product.

A round of a thousand owners is a thousand shares; one of wide statistics is millions of
ciphertexts. So shares are checked and multiplied in batches on every core (`TaskPool`), while
the handler keeps reading the stream, with memory bounded by the batches in flight: the product,
the share being received and at most IN_FLIGHT_PER_WORKER batches per worker. A small round is
summed in-process, where starting workers would cost more than it saves. Above the CSP's Spark
threshold (`csp serve --spark-ciphertext-threshold`) shares are spilled to Parquet as they
arrive and checked and multiplied on Spark (`csp.spark_sum`). Every way gives the same product
mod n^2, and a bad share is refused by the same message naming its owner.
"""

from __future__ import annotations

import atexit
import logging
import shutil
import tempfile
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from gmpy2 import mpz

from csp.share_check import ShareCiphertexts, checked_product
from leteo_fed import extras
from leteo_fed.crypto.parallel import TaskPool

log = logging.getLogger("leteo.csp")

BATCH_CIPHERTEXTS = 8192  # ciphertexts per task (4 MiB at a 2048-bit key)
IN_FLIGHT_PER_WORKER = 2  # tasks queued per worker while the stream is read
# below this many ciphertexts in a round (shares x ciphertexts per share), one process is faster
PARALLEL_MIN_CIPHERTEXTS = 50_000


@dataclass
class ShareSum:
    """The running sum of one round, fed share by share from the stream the CSP reads."""

    n: int
    width: int
    pool: TaskPool | None  # None: in-process
    spill: Path | None = None  # a folder: shares spilled there and summed on Spark
    product: list[int] = field(default_factory=list)
    seconds: float = 0.0  # spent checking and multiplying (in-process) or waiting for workers
    _batch: list[ShareCiphertexts] = field(default_factory=list)
    _batch_size: int = 0
    _running: deque[Future[list[int]]] = field(default_factory=deque)
    _spilled: int = 0

    def add(self, share: ShareCiphertexts) -> None:
        """In-process, checked now (a bad share is refused before the next is read, as it
        arrived); on the pool, once its batch is full."""
        if self.spill is not None:
            from csp.spark_sum import write_share

            start = time.perf_counter()
            write_share(self._spilled, share, self.width, self.spill)
            self._spilled += 1
            self.seconds += time.perf_counter() - start
            return
        self._batch.append(share)
        self._batch_size += len(share.ciphertexts)
        if self.pool is None or self._batch_size >= BATCH_CIPHERTEXTS:
            self._flush()

    def total(self) -> list[int]:
        """The product of every share added; ProtocolError if any was bad."""
        if self.spill is not None:
            return self._spark_total(self.spill)
        self._flush()
        start = time.perf_counter()
        while self._running:
            self._take()
        self.seconds += time.perf_counter() - start
        return self.product

    def _spark_total(self, spill: Path) -> list[int]:
        from csp.spark_sum import spark_product

        start = time.perf_counter()
        try:
            self.product = spark_product(sorted(spill.glob("share-*.parquet")), self.n, self.width)
        finally:
            self.seconds += time.perf_counter() - start
            shutil.rmtree(spill, ignore_errors=True)
        return self.product

    def close(self) -> None:
        """Drop what a refused or finished round left: spilled files, tasks in flight."""
        for future in self._running:
            future.cancel()
        self._running.clear()
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)

    @property
    def engine(self) -> str:
        if self.spill is not None:
            return "spark"
        return "in-process" if self.pool is None else f"{self.pool.workers} processes"

    def _flush(self) -> None:
        batch, self._batch, self._batch_size = self._batch, [], 0
        if not batch:
            return
        start = time.perf_counter()
        if self.pool is None:
            self._fold(checked_product(self.n, self.width, batch))
        else:
            while len(self._running) >= IN_FLIGHT_PER_WORKER * self.pool.workers:
                self._take()
            self._running.append(self.pool.submit(checked_product, self.n, self.width, batch))
        self.seconds += time.perf_counter() - start

    def _take(self) -> None:
        assert self.pool is not None
        future = self._running.popleft()
        try:
            part = self.pool.result(future)
        except BaseException:
            for other in self._running:  # a refused round: the rest is not worth finishing
                other.cancel()
            self._running.clear()
            raise
        self._fold(part)

    def _fold(self, part: list[int]) -> None:
        if not self.product:
            self.product = part
            return
        n2 = mpz(self.n) * mpz(self.n)
        self.product = [int(mpz(a) * b % n2) for a, b in zip(self.product, part, strict=True)]


def summer_for(
    n: int,
    width: int,
    expected_ciphertexts: int,
    pool: TaskPool,
    spark_threshold: int = 0,
    round_id: str = "",
) -> ShareSum:
    """In-process below PARALLEL_MIN_CIPHERTEXTS (or on one core), on the pool above it, and on
    Spark above `spark_threshold` ciphertexts (0: never; without the Spark extra: the pool)."""
    if 0 < spark_threshold <= expected_ciphertexts:
        if extras.installed("pyspark"):
            spill = Path(tempfile.mkdtemp(prefix=f"leteo-csp-{round_id}-"))
            atexit.register(shutil.rmtree, spill, ignore_errors=True)  # a stop mid-round
            return ShareSum(n, width, None, spill)
        log.warning(
            "round %s: %d ciphertexts expected, above the Spark threshold %d, but %s; "
            "summing on this host's cores",
            round_id,
            expected_ciphertexts,
            spark_threshold,
            extras.hint("spark"),
        )
    parallel = pool.workers > 1 and expected_ciphertexts >= PARALLEL_MIN_CIPHERTEXTS
    return ShareSum(n, width, pool if parallel else None)
