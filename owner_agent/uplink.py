"""Outbound mode: the owner's own connection to the aggregator.

A site behind a firewall or NAT accepts no inbound connection. The agent opens `Connect` to the
aggregator (mTLS, its owner certificate) and keeps it open: invitations and results come down
that stream, in order, and are handled one at a time. When the stream breaks (network, an
aggregator restart) the agent connects again, waiting 0.2 s, then twice as long after every
failed attempt up to RECONNECT_MAX_SECONDS, with jitter so that a hundred sites do not come back
in lockstep. On reconnecting it names the rounds it still awaits a result for, so a result
published while it was away is not lost. Its hello carries a random id of this process: while
another agent with the site's identity is connected, the aggregator refuses this one
(ALREADY_EXISTS), which says so once and keeps retrying quietly.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable

import grpc

from leteo_fed import __version__, defaults
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.grpc_io import rpc_error_message

log = logging.getLogger("leteo.owner")

FIRST_RETRY_SECONDS = 0.2


def next_delay(delay: float, rng: random.Random) -> tuple[float, float]:
    """(how long to wait now, the base of the next wait): exponential backoff with full
    jitter on the upper half, capped at RECONNECT_MAX_SECONDS."""
    cap = defaults.RECONNECT_MAX_SECONDS
    base = min(max(delay, FIRST_RETRY_SECONDS), cap)
    return base * (0.5 + 0.5 * rng.random()), min(base * 2, cap)


class AggregatorLink:
    def __init__(
        self,
        new_stub: Callable[[], object],
        site_id: str,
        on_invite: Callable[[pb.RoundSpec], None],
        on_result: Callable[[pb.RoundStatus], None],
        awaiting: Callable[[], list[str]],
        stop: threading.Event,
    ) -> None:
        # an AggregatorStub on a fresh channel: a new channel looks the aggregator's name up
        # again at once (a restarted container has a new address; an old channel keeps dialling
        # the old one for up to half a minute)
        self._new_stub = new_stub
        self._stub = new_stub()
        self._site_id = site_id
        self._on_invite = on_invite
        self._on_result = on_result
        self._awaiting = awaiting
        self._stop = stop
        self._call: grpc.Call | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.connected = threading.Event()
        self.connections = 0  # streams opened so far (1 + reconnections)
        # this process: the aggregator refuses a second agent of the site, not this one's return
        self.instance = uuid.uuid4().hex
        self._refused = False  # the refusal was said (once, until connected again)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="aggregator-link", daemon=True)
        self._thread.start()

    def close(self, timeout: float = 1.0) -> None:
        """Stop reconnecting, end the open stream now and wait (at most `timeout`) for the
        link's thread to leave gRPC: a thread still inside a call when the interpreter exits
        can abort the process."""
        self._stop.set()
        with self._lock:
            call = self._call
        if call is not None:
            call.cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        rng = random.Random()
        delay = FIRST_RETRY_SECONDS
        while not self._stop.is_set():
            if self._stream():
                delay = FIRST_RETRY_SECONDS  # it was up: the next attempt starts fast again
            wait, delay = next_delay(delay, rng)
            self._stop.wait(wait)
            if not self._stop.is_set():
                self._stub = self._new_stub()

    def _stream(self) -> bool:
        """One connection, until it ends; True if it was established."""
        hello = pb.OwnerHello(
            site_id=self._site_id,
            version=__version__,
            awaiting=self._awaiting(),
            instance=self.instance,
        )
        call = self._stub.Connect(hello)  # type: ignore[attr-defined]
        with self._lock:
            self._call = call
        if self._stop.is_set():  # close() ran before the call existed
            call.cancel()
        established = False
        try:
            for task in call:
                if not established:
                    established = True
                    self._refused = False
                    self.connections += 1
                    self.connected.set()
                    log.info("connected to the aggregator (outbound)")
                self._handle(task)
            if not self._stop.is_set():
                log.warning("the aggregator closed the connection; reconnecting")
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.ALREADY_EXISTS and not established:
                self._said_refused(exc)
            elif not self._stop.is_set():
                how = "lost the connection to" if established else "cannot connect to"
                log.warning("%s the aggregator (%s); retrying", how, rpc_error_message(exc))
        finally:
            self.connected.clear()
            with self._lock:
                self._call = None
        return established

    def _said_refused(self, exc: grpc.RpcError) -> None:
        """Another agent holds the site's connection: one clear line, then quiet retries with
        the usual backoff (this agent takes over once the other is gone, e.g. it crashed and
        its connection is found closed)."""
        if self._refused:
            log.debug("still refused by the aggregator: %s", rpc_error_message(exc))
            return
        self._refused = True
        log.error(
            "refused by the aggregator: %s; retrying quietly every few seconds",
            rpc_error_message(exc),
        )

    def _handle(self, task: pb.OwnerTask) -> None:
        kind = task.WhichOneof("task")
        try:
            if kind == "invite":
                self._on_invite(task.invite)
            elif kind == "result":
                self._on_result(task.result)
        except Exception:  # one bad task must not end the connection loop
            log.exception("handling the aggregator's %s failed", kind)
