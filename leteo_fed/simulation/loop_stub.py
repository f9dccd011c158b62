"""A blocking face on a grpc.aio stub: the owner agent's calls, made from worker threads.

The owner agent calls its peers with blocking stubs (`stub.AnswerInvite(request, timeout=...)`).
A virtual owner's calls go over its own grpc.aio channel instead, on its process's event loop:
each call is run there as a coroutine and the calling thread waits for it. So one virtual owner
is one connection, and a thousand of them need no thread each. Never call from the loop itself
(it would wait for itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc


class LoopStub:
    """`stub_class(channel)`'s methods, blocking; the channel is opened on the loop at the first
    call (`open_channel`, a coroutine-side factory), so a peer never called costs nothing."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        open_channel: Callable[[], grpc.aio.Channel],
        stub_class: type,
    ) -> None:
        self._loop = loop
        self._open_channel = open_channel
        self._stub_class = stub_class
        self._channel: grpc.aio.Channel | None = None
        self._stub: Any = None
        self._closed = False

    def _ensure(self) -> Any:
        """The stub (on the loop): its channel opened now if this is the first call."""
        if self._closed:
            raise grpc.aio.UsageError("the channel was closed")
        if self._stub is None:
            self._channel = self._open_channel()
            self._stub = self._stub_class(self._channel)
        return self._stub

    @property
    def channel(self) -> grpc.aio.Channel | None:
        return self._channel

    def stub(self) -> Any:
        """The aio stub itself, for coroutines on the loop (the owner's stream)."""
        return self._ensure()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)

        def call(request: Any, **kwargs: Any) -> Any:
            async def run() -> Any:
                return await getattr(self._ensure(), method)(request, **kwargs)

            return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

        return call

    async def close(self) -> None:
        """On the loop: close the channel (its calls end as cancelled); later calls fail."""
        self._closed = True
        if self._channel is not None:
            await self._channel.close()
