"""The engine's worker threads: rounds closing (quorum, reveal, publication) and results going
out to owners. At a restart the publications it starts are collected, so that a resumed job
invites no owner before the owners have heard how the lost round ended."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

WORKERS = 16


class Workers:
    def __init__(self, max_workers: int = WORKERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="round")
        self._collected: list[Future] | None = None  # work to wait for (`collect`)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future = self._pool.submit(fn, *args)
        collected = self._collected
        if collected is not None:
            collected.append(future)
        return future

    @contextmanager
    def collect(self) -> Iterator[list[Future]]:
        """The work submitted while inside: the list fills as it is submitted."""
        futures: list[Future] = []
        self._collected = futures
        try:
            yield futures
        finally:
            self._collected = None

    def close(self) -> None:
        """Stop now: pending work is cancelled."""
        self._pool.shutdown(wait=False, cancel_futures=True)
