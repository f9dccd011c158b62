"""A virtual owner's key custody over its loop stubs: the blocking stub's `.future` calls the
key holders' custody makes (`LoopStub`), the key-agreement rule and the withdrawal asked of
every holder over grpc.aio channels on a shared loop (in-process holders with a real threshold
key: tests/keyholder_standin.py), and a virtual owner configured with `[keyholders]`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from keyholder_standin import free_address, start_standins

from leteo_fed.config import load_owner_config
from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import Encryptor
from leteo_fed.errors import PeerUnavailable
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.simulation.loop_stub import LoopFuture, LoopStub
from leteo_fed.transport.grpc_io import CHANNEL_OPTIONS
from owner_agent.key_custody import WITHDRAWN, KeyHolders


@pytest.fixture()
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@pytest.fixture(scope="module")
def dealt():
    return threshold.deal(512, 5, 3)


class _Echo:
    """An aio stub's stand-in: Echo answers its request, Hang never answers."""

    def __init__(self, channel: object) -> None:
        self.channel = channel

    async def Echo(self, request: str, timeout: float | None = None) -> str:
        return f"{request}:{timeout}"

    async def Hang(self, request: str) -> str:
        await asyncio.sleep(3600)
        return request


def test_a_loop_stub_calls_blocking_or_as_futures(loop) -> None:
    opened: list[int] = []

    def open_channel() -> str:
        opened.append(1)
        return "channel"

    stub = LoopStub(loop, open_channel, _Echo)
    assert not opened  # no channel before the first call
    assert stub.Echo("a", timeout=2) == "a:2"
    call = stub.Echo.future("b")
    assert isinstance(call, LoopFuture) and call.result(5) == "b:None" and call.done()
    seen: list[object] = []
    done = threading.Event()
    later = stub.Echo.future("c")

    def finished(future: LoopFuture) -> None:
        seen.append(future)
        done.set()

    later.add_done_callback(finished)
    assert done.wait(5) and seen == [later] and later.exception() is None
    hanging = stub.Hang.future("d")
    with pytest.raises(grpc.FutureTimeoutError):
        hanging.result(0.05)
    assert hanging.cancel()
    with pytest.raises(grpc.FutureCancelledError):  # as gRPC's own futures
        hanging.result(5)
    assert hanging.cancelled() and opened == [1]  # one channel for every call


def _holder_stubs(loop, addresses: list[str]) -> dict[str, LoopStub]:
    """What `VirtualOwner._open_peers` builds per holder (without TLS: the stand-ins)."""

    def opener(address: str):
        return lambda: grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)

    return {a: LoopStub(loop, opener(a), pb_grpc.KeyHolderStub) for a in addresses}


async def _close(stubs: dict[str, LoopStub]) -> None:
    for stub in stubs.values():
        await stub.close()


def test_key_holders_custody_over_loop_stubs(loop, dealt) -> None:
    """The agreed key with a holder down (t answers suffice; the slow call is cancelled), a
    minority's own key refused, and a withdrawal given back by the three holders that answer."""
    key, shares = dealt
    holders = start_standins(shares, {5: "down"})
    stubs = _holder_stubs(loop, holders.addresses)
    few: dict[str, LoopStub] = {}
    try:
        custody = KeyHolders(stubs, 3, timeout=2.0)
        assert custody.public_key() == key.public
        assert custody.public_key(key.key_id) == key.public
        said = custody.withdraw("r1")
        assert said.state == WITHDRAWN and "4 of 5" in said.says
        # two holders up, three down: no t agree, and the silent could still make it up
        few = _holder_stubs(loop, holders.addresses[:2] + [free_address() for _ in range(3)])
        with pytest.raises(PeerUnavailable, match="at most 2 agree"):
            KeyHolders(few, 3, timeout=1.0).public_key()
    finally:
        asyncio.run_coroutine_threadsafe(_close(stubs | few), loop).result(10)
        holders.stop()


def test_a_virtual_owner_with_keyholders_holds_one_lazy_stub_per_holder(
    loop, dealt, tmp_path: Path, monkeypatch
) -> None:
    from leteo_fed.simulation.virtual_owner import VirtualOwner

    key, _ = dealt
    monkeypatch.chdir(tmp_path)
    (tmp_path / "site-1.csv").write_text("x,y\n1,2\n")
    addresses = ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
    quoted = ", ".join(f'"{a}"' for a in addresses)
    (tmp_path / "site-1.toml").write_text(
        'site_id = "site-1"\n\n[data]\npath = "site-1.csv"\n\n[peers]\n'
        'aggregator = "127.0.0.1:9"\n\n'
        f"[keyholders]\naddresses = [{quoted}]\nthreshold = 2\n\n[tls]\ninsecure = true\n"
    )
    config = load_owner_config(tmp_path / "site-1.toml")
    with ThreadPoolExecutor(2) as pool:
        owner = VirtualOwner(config, loop, pool, Encryptor(key.public, config.randomizer))
        assert isinstance(owner.custody, KeyHolders) and owner.custody.threshold == 2
        assert owner.custody.holders == 3 and sorted(owner._to_key) == addresses
        assert all(s.channel is None for s in owner._to_key.values())  # none opened yet
        assert owner.encryptor(key.key_id).public == key.public  # the worker's key, no call
        asyncio.run_coroutine_threadsafe(owner.close_channels(), loop).result(10)
