"""Process pools for Paillier: spread large batches of encryptions/decryptions over all cores.

Why processes: gmpy2 holds the GIL during modular arithmetic, so threads do not help. Why the
**spawn** start method: the services that call us run gRPC threads, and forking a process with
live threads can deadlock or abort the child; spawn starts a fresh interpreter instead. (As with
any spawn pool, a program run as a plain script must guard its entry point with
``if __name__ == "__main__":``; ``python -m leteo_fed`` and the ``leteo-fed`` console script do.)

Why lazy and persistent: spawning a worker costs an interpreter start, the gmpy2 import and, for
encryption, building a fixed-base table (see ``paillier.Encryptor``). We pay that once, on the
first batch that is large enough, and reuse the workers for every later batch. Small batches are
handled in-process, where the start-up cost would dominate.

Randomness: every encryption worker builds its own ``Encryptor``, so each draws its own private
random base y and its own table; the parent's local encryptor has another. Ciphertexts from
different workers are all valid Paillier ciphertexts under the same public key.

Private key: ``DecryptionPool`` hands (p, q) to its workers as pool-initializer arguments. With
the spawn start method these are pickled over an anonymous pipe from this process to its own
child processes, which keep them in memory only; they never leave the host and are never written
to disk, a socket or a log. The workers run as the same user, within the same trust boundary as
the process that already holds the key, and exit on ``close()`` (or when the pool is collected).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from types import TracebackType
from typing import TypeVar

from leteo_fed.crypto.paillier import (
    DEFAULT_RANDOMIZER,
    DEFAULT_WINDOW_BITS,
    RANDOMIZERS,
    Decryptor,
    Encryptor,
    PrivateKey,
    PublicKey,
)
from leteo_fed.errors import EncodingError

DEFAULT_MIN_PER_WORKER = 64  # below this many values per worker, in-process is faster

_Pool = TypeVar("_Pool", bound="_LazyPool")
_T = TypeVar("_T")

# ------------------------------------------------------------------ worker-side state
# One per worker process, built by the pool initializer and reused for every chunk.

_worker_encryptor: Encryptor | None = None
_worker_decryptor: Decryptor | None = None


def _init_encryption_worker(n: int, randomizer: str, window_bits: int) -> None:
    global _worker_encryptor
    enc = Encryptor(PublicKey(n), randomizer, window_bits)
    enc.prepare()  # own random base and table, built once per worker
    _worker_encryptor = enc


def _encrypt_chunk(values: list[int]) -> list[int]:
    assert _worker_encryptor is not None, "encryption worker was not initialized"
    return _worker_encryptor.encrypt_many(values)


def _init_decryption_worker(p: int, q: int) -> None:
    global _worker_decryptor
    _worker_decryptor = Decryptor(PrivateKey(p, q))


def _decrypt_chunk(ciphertexts: list[int]) -> list[int]:
    assert _worker_decryptor is not None, "decryption worker was not initialized"
    return _worker_decryptor.decrypt_many(ciphertexts)


def _ready() -> int:
    """Warm-up task: returning proves the worker has run its initializer."""
    return os.getpid()


# ------------------------------------------------------------------ parent side


def _contiguous_chunks(items: list[int], parts: int) -> list[list[int]]:
    """``parts`` contiguous slices of near-equal length, in order (concatenation == items)."""
    size, extra = divmod(len(items), parts)
    chunks, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        chunks.append(items[start:end])
        start = end
    return chunks


class _LazyPool:
    """A spawn-context ProcessPoolExecutor started on the first large batch and then reused."""

    def __init__(
        self,
        workers: int | None,
        min_per_worker: int,
        initializer: Callable[..., None],
        initargs: tuple,
    ) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if min_per_worker < 1:
            raise ValueError(f"min_per_worker must be >= 1, got {min_per_worker}")
        self.workers = workers
        self.min_per_worker = min_per_worker
        self._initializer = initializer
        self._initargs = initargs
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        """True while worker processes are (being) run; False before the first large batch."""
        return self._executor is not None

    def parts_for(self, count: int) -> int:
        """How many workers a batch of ``count`` items deserves; 1 means stay in-process."""
        if self.workers == 1:
            return 1
        return max(1, min(self.workers, count // self.min_per_worker))

    def _get_executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ProcessPoolExecutor(
                    max_workers=self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=self._initializer,
                    initargs=self._initargs,
                )
            return self._executor

    def start(self) -> None:
        """Start all workers now (e.g. at service start) instead of on the first large batch."""
        if self.workers == 1:
            return
        executor = self._get_executor()
        # The executor spawns a process per submitted task while none is idle; one task per
        # worker, submitted together, therefore brings up every worker and waits for them all.
        futures = [executor.submit(_ready) for _ in range(self.workers)]
        self._wait(futures)

    def _map_chunks(self, fn: Callable[[list[int]], list[int]], items: list[int]) -> list[int]:
        chunks = _contiguous_chunks(items, self.parts_for(len(items)))
        executor = self._get_executor()
        futures = [executor.submit(fn, chunk) for chunk in chunks]
        out: list[int] = []
        for part in self._wait(futures):
            out.extend(part)
        return out

    def _wait(self, futures: list) -> list:
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool:
            # A worker died (killed, out of memory): drop the pool so the next batch starts a
            # fresh one instead of failing forever, and let the caller see this batch fail.
            self._discard()
            raise

    def _discard(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Stop the workers (idempotent). A later large batch would start them again."""
        self._discard()

    def __enter__(self: _Pool) -> _Pool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _no_state() -> None:
    """Initializer of workers that keep nothing between tasks."""


class TaskPool(_LazyPool):
    """Module-level functions over ``workers`` processes, one future per task: for a caller
    that streams its work and keeps a bounded number of tasks in flight (the CSP's sum of a
    round's shares)."""

    def __init__(self, workers: int | None = None) -> None:
        super().__init__(workers, 1, _no_state, ())

    def submit(self, fn: Callable[..., _T], *args: object) -> Future[_T]:
        return self._get_executor().submit(fn, *args)

    def result(self, future: Future[_T]) -> _T:
        """The task's result; a dead worker drops the pool (`_wait`) and raises here."""
        return self._wait([future])[0]


class EncryptionPool(_LazyPool):
    """``Encryptor.encrypt_many`` over ``workers`` processes, results in input order."""

    def __init__(
        self,
        public: PublicKey,
        workers: int | None = None,
        randomizer: str = DEFAULT_RANDOMIZER,
        window_bits: int = DEFAULT_WINDOW_BITS,
        min_per_worker: int = DEFAULT_MIN_PER_WORKER,
    ) -> None:
        if randomizer not in RANDOMIZERS:
            raise ValueError(f"randomizer must be one of {RANDOMIZERS}, got {randomizer!r}")
        super().__init__(
            workers,
            min_per_worker,
            _init_encryption_worker,
            (int(public.n), randomizer, window_bits),
        )
        self.public = public
        self.randomizer = randomizer
        self._window_bits = window_bits
        self._local: Encryptor | None = None  # built on the first small batch only

    def _local_encryptor(self) -> Encryptor:
        with self._lock:
            if self._local is None:
                self._local = Encryptor(self.public, self.randomizer, self._window_bits)
            return self._local

    def encrypt_many(self, values: Iterable[int]) -> list[int]:
        items = [int(v) for v in values]
        n = self.public.n
        for v in items:  # check here so a bad value fails before any work is shipped
            if not 0 <= v < n:
                raise EncodingError(
                    f"plaintext out of range [0, n): {v.bit_length()} bits for a "
                    f"{self.public.bits}-bit key"
                )
        if self.parts_for(len(items)) == 1:
            return self._local_encryptor().encrypt_many(items)
        return self._map_chunks(_encrypt_chunk, items)


class DecryptionPool(_LazyPool):
    """``Decryptor.decrypt_many`` over ``workers`` processes, results in input order.

    The private key reaches the workers only as initializer arguments over the local spawn pipe
    (see the module docstring); it is never written anywhere.
    """

    def __init__(
        self,
        key: PrivateKey,
        workers: int | None = None,
        min_per_worker: int = DEFAULT_MIN_PER_WORKER,
    ) -> None:
        super().__init__(workers, min_per_worker, _init_decryption_worker, (int(key.p), int(key.q)))
        self.public = key.public
        self._local = Decryptor(key)  # cheap (two small inversions), always available

    def decrypt_many(self, ciphertexts: Sequence[int] | Iterable[int]) -> list[int]:
        items = [int(c) for c in ciphertexts]
        if self.parts_for(len(items)) == 1:
            return self._local.decrypt_many(items)
        return self._map_chunks(_decrypt_chunk, items)
