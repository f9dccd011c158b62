"""A blocking face on a grpc.aio stub: the owner agent's calls, made from worker threads.

The owner agent calls its peers with blocking stubs (`stub.AnswerInvite(request, timeout=...)`).
A virtual owner's calls go over its own grpc.aio channel instead, on its process's event loop:
each call is run there as a coroutine and the calling thread waits for it (or, with
`stub.Method.future(...)`, holds a `LoopFuture`, as the owner asks every key holder at once). So
one virtual owner is one connection, and a thousand of them need no thread each. Never wait
from the loop itself (it would wait for itself).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
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

    def __getattr__(self, method: str) -> _Method:
        if method.startswith("_"):
            raise AttributeError(method)
        return _Method(self, method)

    def _submit(self, method: str, request: Any, kwargs: dict[str, Any]) -> Future:
        async def run() -> Any:
            return await getattr(self._ensure(), method)(request, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self._loop)

    async def close(self) -> None:
        """On the loop: close the channel (its calls end as cancelled); later calls fail."""
        self._closed = True
        if self._channel is not None:
            await self._channel.close()


class _Method:
    """One method of a `LoopStub`, as a blocking stub's: `method(request, timeout=...)` waits
    for the answer, `method.future(request, ...)` does not (the key holders' calls, made to
    every holder at once)."""

    def __init__(self, stub: LoopStub, name: str) -> None:
        self._stub = stub
        self._name = name

    def __call__(self, request: Any, **kwargs: Any) -> Any:
        return self._stub._submit(self._name, request, kwargs).result()

    def future(self, request: Any, **kwargs: Any) -> LoopFuture:
        return LoopFuture(self._stub._submit(self._name, request, kwargs))


class LoopFuture:
    """What a blocking stub's `.future` returns (`grpc.Future`'s result, exception, done,
    cancel and add_done_callback) for a call running on the loop: a cancelled call raises
    `grpc.FutureCancelledError` and a wait that times out `grpc.FutureTimeoutError`, as gRPC's
    own futures do; callbacks get this future."""

    def __init__(self, inner: Future) -> None:
        self._inner = inner

    def result(self, timeout: float | None = None) -> Any:
        try:
            return self._inner.result(timeout)
        except CancelledError:
            raise grpc.FutureCancelledError() from None
        except TimeoutError:
            raise grpc.FutureTimeoutError() from None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        try:
            return self._inner.exception(timeout)
        except CancelledError:
            raise grpc.FutureCancelledError() from None
        except TimeoutError:
            raise grpc.FutureTimeoutError() from None

    def done(self) -> bool:
        return self._inner.done()

    def cancelled(self) -> bool:
        return self._inner.cancelled()

    def running(self) -> bool:
        return not self._inner.done()

    def cancel(self) -> bool:
        """Cancel the call on the loop (False once it finished)."""
        return self._inner.cancel()

    def add_done_callback(self, fn: Callable[[LoopFuture], Any]) -> None:
        self._inner.add_done_callback(lambda _inner: fn(self))
