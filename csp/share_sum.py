"""The CSP's own sum of a round's shares: each share's ciphertexts checked (units mod n^2, the
digest its owner signed) and multiplied, coordinate by coordinate, into the round's product.

A round of a thousand owners is a thousand shares; one of wide statistics is millions of
ciphertexts. So shares are checked and multiplied in batches on every core (`TaskPool`), while
the handler keeps reading the stream, with memory bounded by the batches in flight: the product,
the share being received and at most IN_FLIGHT_PER_WORKER batches per worker. A small round is
summed in-process, where starting workers would cost more than it saves. Either way the sum is
the same product mod n^2, and a bad share is refused by the same message naming its owner.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from gmpy2 import mpz

from leteo_fed.crypto.paillier import check_ciphertexts
from leteo_fed.crypto.parallel import TaskPool
from leteo_fed.errors import ProtocolError
from leteo_fed.transport.statements import ciphertext_digest

BATCH_CIPHERTEXTS = 8192  # ciphertexts per task (4 MiB at a 2048-bit key)
IN_FLIGHT_PER_WORKER = 2  # tasks queued per worker while the stream is read
# below this many ciphertexts in a round (shares x ciphertexts per share), one process is faster
PARALLEL_MIN_CIPHERTEXTS = 50_000


@dataclass(frozen=True)
class ShareCiphertexts:
    """One share as the check needs it (picklable: it travels to a worker)."""

    site: str
    digest: bytes  # what the owner signed: SHA-256 over the fixed-width ciphertexts
    ciphertexts: list[int]


def checked_product(n: int, width: int, shares: Sequence[ShareCiphertexts]) -> list[int]:
    """The coordinate-wise product mod n^2 of the shares' ciphertexts, each share checked
    first: every ciphertext in (0, n^2) and coprime to n, the digest its owner signed.
    ProtocolError for the first share that is not (naming its owner for a wrong digest)."""
    n2 = mpz(n) * mpz(n)
    total: list[mpz] = []
    for share in shares:
        check_ciphertexts(n, share.ciphertexts)
        if ciphertext_digest(share.ciphertexts, width) != share.digest:
            raise ProtocolError(
                f"the ciphertexts of the share from '{share.site}' do not match the digest "
                "its owner signed"
            )
        if total:
            total = [a * c % n2 for a, c in zip(total, share.ciphertexts, strict=True)]
        else:
            total = [mpz(c) for c in share.ciphertexts]
    return [int(c) for c in total]


@dataclass
class ShareSum:
    """The running sum of one round, fed share by share from the stream the CSP reads."""

    n: int
    width: int
    pool: TaskPool | None  # None: in-process
    product: list[int] = field(default_factory=list)
    seconds: float = 0.0  # spent checking and multiplying (in-process) or waiting for workers
    _batch: list[ShareCiphertexts] = field(default_factory=list)
    _batch_size: int = 0
    _running: deque[Future[list[int]]] = field(default_factory=deque)

    def add(self, share: ShareCiphertexts) -> None:
        """In-process, checked now (a bad share is refused before the next is read, as it
        arrived); on the pool, once its batch is full."""
        self._batch.append(share)
        self._batch_size += len(share.ciphertexts)
        if self.pool is None or self._batch_size >= BATCH_CIPHERTEXTS:
            self._flush()

    def total(self) -> list[int]:
        """The product of every share added; ProtocolError if any was bad."""
        self._flush()
        start = time.perf_counter()
        while self._running:
            self._take()
        self.seconds += time.perf_counter() - start
        return self.product

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


def summer_for(n: int, width: int, expected_ciphertexts: int, pool: TaskPool) -> ShareSum:
    """In-process below PARALLEL_MIN_CIPHERTEXTS (or on one core), else on the pool."""
    parallel = pool.workers > 1 and expected_ciphertexts >= PARALLEL_MIN_CIPHERTEXTS
    return ShareSum(n, width, pool if parallel else None)
