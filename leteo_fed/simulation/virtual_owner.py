"""A virtual owner: the real owner agent, sharing an event loop and a thread pool with others.

`VirtualOwner` is `OwnerAgentService` itself (its authorization, policy, audit log, privacy
ledger, `ShareRunner`, signing and result handling run unchanged) with three things swapped:

- **transport**: its aggregator and CSP stubs (or, with `[keyholders]`, one stub per key holder
  under the real `KeyHolders` custody) are `LoopStub`s over grpc.aio channels of its own, made
  with its own certificate and key (`TlsConfig.channel_credentials`): one connection to the
  aggregator per virtual owner; the CSP's or a holder's is opened only if the owner ever calls
  it (a new key, a withdrawal), and never shared between owners, since the CSP and the holders
  know the site by its certificate;
- **the stream**: its `Connect` stream is a coroutine on the worker's event loop (`run_link`)
  instead of a thread (`owner_agent.uplink.AggregatorLink`); each task it brings is handled on the
  worker's thread pool, one at a time per owner and in order, as the real link does;
- **start-up**: the key (the CSP's, or the threshold key at least t holders agree on) and its
  randomizer table are fetched and built once per worker and shared by its virtual owners (a real agent builds its own; the table is the largest thing an
  agent holds, so sharing it keeps a worker of thousands of owners within memory).

`stop_before_upload` makes the owner behave as a site that crashes after accepting an
invitation and before its share leaves: it drops its connection and goes silent (no decline).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from concurrent.futures import Executor

import grpc

from leteo_fed import __version__
from leteo_fed.config import OwnerConfig
from leteo_fed.crypto.paillier import Encryptor
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.simulation.loop_stub import LoopStub
from leteo_fed.transport.grpc_io import CHANNEL_OPTIONS, rpc_error_message
from leteo_fed.transport.rounds import Invitation
from owner_agent.key_custody import KeyCustody, KeyHolders, SingleCsp
from owner_agent.service import MAX_AWAITING, OwnerAgentService
from owner_agent.shares import ShareUpload
from owner_agent.uplink import FIRST_RETRY_SECONDS, next_delay

log = logging.getLogger("leteo.simulation")


TRAFFIC = (
    "invites",
    "invite_bytes",
    "results",
    "result_bytes",
    "shares",
    "statement_bytes",
    "ciphertext_bytes",
)


class SiteStopped(BaseException):  # noqa: N818 - not an error: the simulated crash itself
    """Raised where a crashing site's share would have been uploaded: nothing after it runs
    (a BaseException, so the share runner's error handling does not decline on its behalf)."""


class VirtualOwner(OwnerAgentService):
    def __init__(
        self,
        config: OwnerConfig,
        loop: asyncio.AbstractEventLoop,
        pool: Executor,
        encryptor: Encryptor,
        stop_before_upload: bool = False,
        on_connected: Callable[[bool], None] | None = None,
    ) -> None:
        self._loop = loop
        self._pool = pool
        self._stop_before_upload = stop_before_upload
        self._on_connected = on_connected or (lambda _up: None)
        self._call: grpc.aio.UnaryStreamCall | None = None
        self.stopped = False  # the simulated crash happened
        self.connected = False
        self.connections = 0
        # bytes of what this owner received and sent per kind (serialized messages)
        self.traffic = dict.fromkeys(TRAFFIC, 0)
        super().__init__(config)
        self.keys.add(encryptor)  # the worker's shared key: no CSP call, no table of its own

    # ------------------------------------------------------------------ what differs

    def _open_peers(self) -> tuple[LoopStub, KeyCustody]:  # type: ignore[override]
        """The aggregator's stub, and the key's custody the config names: one CSP, or every
        key holder (`[keyholders]`), each a `LoopStub` of this owner's own, opened at its
        first call (a round does not call them: the worker fetched the key)."""
        tls, config = self.config.tls, self.config

        def opener(target: str, peer: str) -> Callable[[], grpc.aio.Channel]:
            return lambda: _aio_channel(tls, target, peer)

        self._to_aggregator = LoopStub(
            self._loop, opener(config.aggregator, "aggregator"), pb_grpc.AggregatorStub
        )
        custody: KeyCustody
        if config.keyholders is not None:
            self._to_key = {
                address: LoopStub(self._loop, opener(address, "keyholder"), pb_grpc.KeyHolderStub)
                for address in config.keyholders.addresses
            }
            custody = KeyHolders(self._to_key, config.keyholders.threshold)
        else:
            to_csp = LoopStub(
                self._loop, opener(config.csp, "csp"), pb_grpc.CryptoServiceProviderStub
            )
            self._to_key = {config.csp: to_csp}
            custody = SingleCsp(to_csp, config.csp)
        return self._to_aggregator, custody  # their channels closed by `close_channels`

    def _reconnect_aggregator(self):
        return self._aggregator  # one channel for the owner's life (gRPC reconnects it)

    def _run_job(self, name: str, target: Callable[..., object], *args: object) -> object:
        return self._pool.submit(target, *args)

    def start_background(self) -> None:
        """Connect (the worker prepared the key and loaded the protocols before)."""
        asyncio.run_coroutine_threadsafe(self.run_link(), self._loop)

    def send_share(self, inv: Invitation, upload: ShareUpload) -> None:
        if self._stop_before_upload:
            log.warning(
                "round %s: %s stops before uploading (simulated crash)",
                inv.round_id,
                self.config.site_id,
            )
            asyncio.run_coroutine_threadsafe(self._drop(), self._loop).result()
            raise SiteStopped(self.config.site_id)
        super().send_share(inv, upload)
        width = self.encryptor(inv.key_id).public.ciphertext_bytes
        self.traffic["shares"] += 1
        self.traffic["statement_bytes"] += upload.statement.ByteSize()
        self.traffic["ciphertext_bytes"] += len(upload.ciphertexts) * width

    def stop(self) -> None:
        self.closing()
        if not self._loop.is_closed():
            future = asyncio.run_coroutine_threadsafe(self.close_channels(), self._loop)
            try:
                future.result(10)
            except Exception:  # the loop is stopping: the process exits anyway
                log.debug("closing %s failed", self.config.site_id, exc_info=True)

    def closing(self) -> None:
        """No reconnecting from now on (a worker then closes all channels at once)."""
        self._stop.set()

    # ------------------------------------------------------------------ the stream

    async def run_link(self, gate: asyncio.Semaphore | None = None) -> None:
        """Keep the owner's Connect stream open (reconnecting with the agent's backoff) and
        hand each task to the pool, in order; ends at `stop` or the simulated crash."""
        rng = random.Random()
        delay = FIRST_RETRY_SECONDS
        while not (self._stop.is_set() or self.stopped):
            if await self._stream(gate):
                delay = FIRST_RETRY_SECONDS
            if self._stop.is_set() or self.stopped:
                return
            wait, delay = next_delay(delay, rng)
            await asyncio.sleep(wait)

    async def _stream(self, gate: asyncio.Semaphore | None) -> bool:
        hello = pb.OwnerHello(
            site_id=self.config.site_id,
            version=__version__,
            awaiting=list(self._awaiting)[-MAX_AWAITING:],
            instance=self.link.instance if self.link is not None else "",
        )
        established = False
        loop = asyncio.get_running_loop()
        held = gate is not None
        if gate is not None:
            await gate.acquire()  # a bounded number of handshakes at a time per worker
        try:
            call = self._to_aggregator.stub().Connect(hello)
            self._call = call
            async for task in call:
                if not established:
                    established = True
                    self.connected = True
                    self.connections += 1
                    self._on_connected(True)
                    if held and gate is not None:
                        gate.release()
                        held = False
                kind = task.WhichOneof("task")
                if kind in ("invite", "result"):
                    await loop.run_in_executor(self._pool, self._handle, task)
        except grpc.RpcError as exc:
            if not (self._stop.is_set() or self.stopped):
                log.info("%s: stream ended (%s)", self.config.site_id, rpc_error_message(exc))
        except grpc.aio.UsageError:  # the channel was closed (stop, crash)
            pass
        finally:
            self._call = None
            if held and gate is not None:
                gate.release()
            if established:
                self.connected = False
                self._on_connected(False)
        return established

    def _handle(self, task: pb.OwnerTask) -> None:
        """On a pool thread: what `AggregatorLink._handle` does with a task."""
        kind = task.WhichOneof("task")
        self.traffic[f"{kind}s"] += 1
        self.traffic[f"{kind}_bytes"] += task.ByteSize()
        try:
            if kind == "invite":
                self._invited_over_link(task.invite)
            elif kind == "result":
                self.receive_result(task.result)
        except Exception:
            log.exception("%s: handling the aggregator's %s failed", self.config.site_id, kind)

    async def _drop(self) -> None:
        """The simulated crash: the connection goes, nothing more is said."""
        self.stopped = True
        if self._call is not None:
            self._call.cancel()
        await self._to_aggregator.close()

    async def close_channels(self) -> None:
        if self._call is not None:
            self._call.cancel()
        await self._to_aggregator.close()
        for stub in self._to_key.values():
            await stub.close()


def _aio_channel(tls, target: str, peer: str) -> grpc.aio.Channel:
    """An aio channel to `peer` with this owner's own certificate (on the running loop)."""
    return grpc.aio.secure_channel(target, tls.channel_credentials(peer), options=CHANNEL_OPTIONS)
