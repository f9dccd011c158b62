"""Calls due at a time, run by one thread: a round of a thousand owners arms a thousand
invitation timeouts, which as `threading.Timer`s would be a thousand threads.

A call cannot be cancelled; it is meant for work that checks whether it is still due (an
invitation's timeout finds the invitation answered already and does nothing).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("leteo.aggregator")


class Deadlines:
    def __init__(self, name: str = "deadlines") -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # equal times run in the order they were armed
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def after(self, seconds: float, call: Callable[[], None]) -> None:
        when = time.monotonic() + max(0.0, seconds)
        with self._cv:
            if self._closed:
                return
            heapq.heappush(self._heap, (when, next(self._order), call))
            if self._heap[0][2] is call:  # the earliest now: the thread waits less
                self._cv.notify()

    def close(self) -> None:
        """Drop every call not yet run and stop the thread."""
        with self._cv:
            self._closed = True
            self._heap.clear()
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._cv.wait(timeout)
                if self._closed:
                    return
                _, _, call = heapq.heappop(self._heap)
            try:
                call()
            except Exception:  # one failing call must not stop the others
                log.exception("a deadline's call failed")
