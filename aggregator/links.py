"""One outbound owner's open stream: tasks queued from any thread, written by whoever serves it.

The aggregator serves owners' streams on an event loop (`LoopServer`): ten thousand connected
owners are ten thousand idle coroutines, not ten thousand threads. Invitations and results are
queued from worker threads (the round engine, other owners' calls), so the queue is a thread-safe
one and the stream's coroutine is woken through its loop. `tasks()` serves the same queue to a
plain thread (unit tests, a thread-pool server).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from leteo_fed.proto import leteo_pb2 as pb

HEARTBEAT_SECONDS = 20.0  # an idle stream carries a heartbeat this often (NAT mappings, liveness)
_CLOSE = object()  # ends a link's stream


def heartbeat() -> pb.OwnerTask:
    return pb.OwnerTask(heartbeat=pb.Heartbeat(sent_unix=time.time()))


@dataclass(eq=False)
class Link:
    site: str
    instance: str = ""  # the agent process's OwnerHello.instance ('' from older agents)
    since: float = field(default_factory=time.time)  # unix seconds
    _queue: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _loop: asyncio.AbstractEventLoop | None = None
    _wake: asyncio.Event | None = None

    def send(self, task: pb.OwnerTask | object) -> None:
        self._queue.put(task)
        with self._lock:
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            # a stopped loop raises: its stream is over anyway
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def close(self) -> None:
        self.send(_CLOSE)

    async def stream(self) -> AsyncIterator[pb.OwnerTask]:
        """The tasks, on the running event loop, with a heartbeat when idle; ends at `close`."""
        wake = asyncio.Event()
        with self._lock:
            self._loop, self._wake = asyncio.get_running_loop(), wake
        while True:
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                wake.clear()
                if not self._queue.empty():  # queued between the get and the clear
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), HEARTBEAT_SECONDS)
                    continue
                except TimeoutError:
                    task = heartbeat()
            if task is _CLOSE:
                return
            yield task

    def tasks(self, is_active: Callable[[], bool]) -> Iterator[pb.OwnerTask]:
        """The same tasks to a blocking consumer; ends at `close` or when `is_active` turns
        false at a heartbeat."""
        while True:
            try:
                task = self._queue.get(timeout=HEARTBEAT_SECONDS)
            except queue.Empty:
                if not is_active():
                    return
                task = heartbeat()
            if task is _CLOSE:
                return
            yield task
