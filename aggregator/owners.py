"""The owners the aggregator knows: how to reach them, inviting them, publishing to them.

Two ways to reach an owner:

- **outbound** (the default of the owner agent): the owner opened `Connect` itself, from behind
  its firewall, and keeps it open; invitations and results are queued on that stream and the
  owner answers an invitation with `AnswerInvite`;
- **inbound**: the owner registered a `host:port` and the aggregator dials its `Invite` and
  `PublishResult`.

Either way `invite` returns at once and its callback gets the answer ('' = accepted, else why
not) exactly once: the owner's answer, or "unreachable" when no answer came within
INVITE_TIMEOUT_SECONDS. An outbound owner that is not connected when invited gets the invitation
when it connects, if that is within the timeout; a result it missed it asks for on reconnecting
(`OwnerHello.awaiting`).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from leteo_fed import defaults
from leteo_fed.errors import NotFoundError, Overloaded, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import TlsConfig, rpc_error_message
from leteo_fed.transport.published import owner_status

log = logging.getLogger("leteo.aggregator")

INBOUND, OUTBOUND = "inbound", "outbound"
HEARTBEAT_SECONDS = 20.0  # an idle stream carries a heartbeat this often (NAT mappings, liveness)
MAX_AWAITING = 1000  # round ids one hello may ask results for
_CLOSE = object()  # ends a link's stream

Answer = Callable[[str], None]


@dataclass
class Link:
    """One outbound owner's open stream: what is queued for it."""

    site: str
    tasks: queue.Queue = field(default_factory=queue.Queue)

    def send(self, task: pb.OwnerTask) -> None:
        self.tasks.put(task)

    def close(self) -> None:
        self.tasks.put(_CLOSE)


@dataclass
class Pending:
    """An invitation waiting for its answer."""

    spec: pb.RoundSpec
    done: Answer
    timer: threading.Timer
    delivered: bool = False


@dataclass
class Owner:
    site: str
    mode: str
    address: str = ""
    link: Link | None = None  # outbound, while connected
    last_seen: float = field(default_factory=time.time)  # unix seconds: last registration,
    # connection, disconnection or answer


class OwnerDirectory:
    def __init__(
        self,
        tls: TlsConfig,
        max_connected: int = defaults.MAX_CONNECTED_OWNERS,
        final_status: Callable[[str], pb.RoundStatus | None] | None = None,
        on_register: Callable[[str, str, str], None] | None = None,
        idle_seconds: float | None = None,
        on_seen: Callable[[str, float], None] | None = None,
        on_remove: Callable[[str], None] | None = None,
    ) -> None:
        """`idle_seconds`: an owner not heard from for longer is not invited by default
        (None: never); `on_seen` (site, unix time) and `on_remove` (site) keep the state."""
        self._tls = tls
        self._max_connected = max_connected
        # round id -> its final status if the round is over (answers OwnerHello.awaiting)
        self.final_status = final_status or (lambda _round_id: None)
        self._on_register = on_register  # (site, mode, address): persists registrations
        self._idle_seconds = idle_seconds
        self._on_seen = on_seen
        self._on_remove = on_remove
        self._owners: dict[str, Owner] = {}
        self._pending: dict[tuple[str, str], Pending] = {}  # (site, round id)
        # inbound: one channel per address, kept open (and connected from registration on)
        self._connections: dict[str, tuple[grpc.Channel, pb_grpc.OwnerAgentStub]] = {}
        self._lock = threading.Lock()
        self._closed = False
        # told the site whose stream ended: rounds waiting for it may close at once
        self.on_disconnect: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ who is there

    def restore(
        self, entries: list[tuple[str, str, str]], last_seen: dict[str, float] | None = None
    ) -> None:
        """Registrations kept from an earlier run (site, mode, address), with when each owner
        was last heard from: inbound owners are dialled again at once; outbound ones count as
        registered until they reconnect."""
        seen = last_seen or {}
        for site, mode, address in entries:
            with self._lock:
                owner = Owner(site, mode, address)
                if site in seen:
                    owner.last_seen = seen[site]
                self._owners.setdefault(site, owner)
            if mode == INBOUND:
                _start_connecting(self._connection(site)[1])
        if entries:
            log.info("%d owner registration(s) restored", len(entries))

    def register(self, site: str, address: str) -> None:
        """An inbound owner's address (RegisterOwner)."""
        with self._lock:
            previous = self._owners.get(site)
            changed = previous is None or previous.mode != INBOUND or previous.address != address
            if previous is not None and previous.link is not None:
                previous.link.close()  # it switched to inbound
            self._owners[site] = Owner(site, INBOUND, address)
        if changed:
            log.info("owner %s registered at %s (inbound)", site, address)
            self._persist(site, INBOUND, address)
            # connect now: the TLS handshake is not left to the first invitation, where with
            # many owners starting their shares at once it can outlast the invitation's timeout
            _start_connecting(self._connection(site)[1])

    def listing(self) -> list[pb.OwnerRegistration]:
        with self._lock:
            owners = sorted(self._owners.values(), key=lambda o: o.site)
            now = time.time()
            return [
                pb.OwnerRegistration(
                    site_id=o.site,
                    address=o.address,
                    mode=o.mode,
                    connected=o.mode == INBOUND or o.link is not None,
                    last_seen_unix=now if o.link is not None else o.last_seen,
                    idle=self._idle(o, now),
                )
                for o in owners
            ]

    def _idle(self, owner: Owner, now: float) -> bool:
        """Not heard from for longer than `idle_seconds` (a connected owner never is)."""
        if self._idle_seconds is None or owner.link is not None:
            return False
        return now - owner.last_seen > self._idle_seconds

    def sites(self, include_idle: bool = False) -> list[str]:
        """The owners a round invites when the analyst names none: idle ones left out."""
        with self._lock:
            now = time.time()
            return sorted(
                o.site for o in self._owners.values() if include_idle or not self._idle(o, now)
            )

    def seen(self, site: str) -> None:
        """The owner was heard from (an answer, a disconnection): it is not idle."""
        now = time.time()
        with self._lock:
            owner = self._owners.get(site)
            if owner is None:
                return
            owner.last_seen = now
        if self._on_seen is not None:
            try:
                self._on_seen(site, now)
            except Exception:
                log.exception("could not record when %s was last seen", site)

    def remove(self, sites: list[str]) -> None:
        """Forget owners (the operator's `aggregator owners remove`): no longer invited; an
        open stream is closed (a running outbound owner registers again when it reconnects)."""
        with self._lock:
            unknown = [s for s in sites if s not in self._owners]
            if unknown:
                raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
            removed = [self._owners.pop(s) for s in dict.fromkeys(sites)]
            channels = []
            for owner in removed:
                if owner.mode == INBOUND and not any(
                    o.address == owner.address for o in self._owners.values()
                ):
                    connection = self._connections.pop(owner.address, None)
                    if connection is not None:
                        channels.append(connection[0])
        for owner in removed:
            if owner.link is not None:
                owner.link.close()
            log.info("owner %s removed by the operator", owner.site)
            if self._on_remove is not None:
                self._on_remove(owner.site)
        for channel in channels:
            channel.close()

    def is_gone(self, site: str) -> bool:
        """Known not to be connected: an outbound owner without an open stream. (Nothing is
        known of an inbound owner between calls: it never counts as gone.)"""
        with self._lock:
            owner = self._owners.get(site)
            return owner is not None and owner.mode == OUTBOUND and owner.link is None

    def check_invited(self, invited: list[str], quorum: int) -> None:
        """Every invited owner is registered, and there are at least `quorum` of them."""
        with self._lock:
            registered = set(self._owners)
        unknown = [s for s in invited if s not in registered]
        if unknown:
            raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
        if len(invited) < quorum:
            raise ProtocolError(
                f"{len(invited)} owner(s) registered, the round needs at least {quorum}"
            )

    def _persist(self, site: str, mode: str, address: str) -> None:
        if self._on_register is not None:
            try:
                self._on_register(site, mode, address)
            except Exception:  # the registration itself still holds for this run
                log.exception("could not persist the registration of %s", site)

    # ------------------------------------------------------------------ outbound streams

    def connect(
        self, site: str, hello: pb.OwnerHello, is_active: Callable[[], bool]
    ) -> tuple[Link, Iterator[pb.OwnerTask]]:
        """Open the stream of an outbound owner (replacing an older one of the same site) and
        queue what it missed: invitations still waiting for an answer, results it awaits."""
        if len(hello.awaiting) > MAX_AWAITING:
            raise ProtocolError(
                f"awaiting lists {len(hello.awaiting)} rounds, at most {MAX_AWAITING}"
            )
        link = Link(site)
        with self._lock:
            if self._closed:
                raise ProtocolError("the aggregator is shutting down")
            connected = sum(1 for o in self._owners.values() if o.link is not None)
            previous = self._owners.get(site)
            if previous is not None and previous.link is not None:
                previous.link.close()  # the owner reconnected: the old stream is dead to it
                connected -= 1
            if connected >= self._max_connected:
                raise Overloaded(
                    f"the aggregator serves at most {self._max_connected} connected owners"
                )
            new = previous is None or previous.mode != OUTBOUND
            self._owners[site] = Owner(site, OUTBOUND, "", link)
            waiting = [p for (s, _), p in self._pending.items() if s == site]
        if new:
            self._persist(site, OUTBOUND, "")
        log.info("owner %s connected (outbound); %d invitation(s) waiting", site, len(waiting))
        link.send(pb.OwnerTask(heartbeat=_heartbeat()))  # tells the owner it is connected
        # results first: a failure the owner missed gives its budget back before it answers
        # the next invitation (e.g. the retry of a k-means iteration after a restart)
        for round_id in dict.fromkeys(hello.awaiting):
            status = self.final_status(round_id)
            if status is not None:
                link.send(pb.OwnerTask(result=owner_status(status, site)))  # slim
        for pending in waiting:
            pending.delivered = True
            link.send(pb.OwnerTask(invite=pending.spec))
        return link, self._stream(link, is_active)

    def _stream(self, link: Link, is_active: Callable[[], bool]) -> Iterator[pb.OwnerTask]:
        try:
            while True:
                try:
                    task = link.tasks.get(timeout=HEARTBEAT_SECONDS)
                except queue.Empty:
                    if not is_active():
                        return
                    task = pb.OwnerTask(heartbeat=_heartbeat())
                if task is _CLOSE:
                    return
                yield task
        finally:
            self.disconnected(link)

    def disconnected(self, link: Link) -> None:
        with self._lock:
            owner = self._owners.get(link.site)
            if owner is None or owner.link is not link:
                return  # replaced by a newer stream already
            owner.link = None
        log.info("owner %s disconnected", link.site)
        self.seen(link.site)
        if self.on_disconnect is not None:
            try:
                self.on_disconnect(link.site)
            except Exception:
                log.exception("handling the disconnection of %s failed", link.site)

    def answer(self, site: str, round_id: str, reason: str) -> None:
        """An outbound owner's answer to an invitation ('' = accepted)."""
        with self._lock:
            pending = self._pending.pop((site, round_id), None)
        if pending is None:
            raise NotFoundError(
                f"no invitation of {site} to round {round_id!r} is waiting for an answer "
                "(it timed out, was answered already, or never existed)"
            )
        pending.timer.cancel()
        self.seen(site)
        _call(pending.done, reason, site)

    # ------------------------------------------------------------------ invitations, results

    def invite(self, site: str, spec: pb.RoundSpec, done: Answer) -> None:
        """Send the invitation and return at once; `done` gets '' if the owner accepted, else
        why it cannot take part. No thread waits for the reply (with hundreds of owners, a
        pool thread per pending invitation would make the invitations go out in waves)."""
        with self._lock:
            owner = self._owners.get(site)
        if owner is None:
            done(f"unreachable: {site} is not registered")
        elif owner.mode == INBOUND:
            self._invite_inbound(site, spec, done)
        else:
            self._invite_outbound(site, spec, done)

    def _invite_outbound(self, site: str, spec: pb.RoundSpec, done: Answer) -> None:
        key = (site, spec.round_id)
        timer = threading.Timer(defaults.INVITE_TIMEOUT_SECONDS, self._expire, args=(key,))
        timer.daemon = True
        pending = Pending(spec, done, timer)
        with self._lock:
            if key in self._pending:
                done(f"{site} is already invited to round {spec.round_id}")
                return
            self._pending[key] = pending
            owner = self._owners.get(site)
            link = owner.link if owner is not None else None
            if link is not None:
                pending.delivered = True
        timer.start()
        if link is not None:
            link.send(pb.OwnerTask(invite=spec))
        else:
            log.info("round %s: %s is not connected; the invitation waits", spec.round_id, site)

    def _expire(self, key: tuple[str, str]) -> None:
        with self._lock:
            pending = self._pending.pop(key, None)
            owner = self._owners.get(key[0])
            connected = owner is not None and owner.link is not None
        if pending is None:
            return
        seconds = defaults.INVITE_TIMEOUT_SECONDS
        if not pending.delivered:
            why = f"unreachable: {key[0]} did not connect within {seconds:.0f} s of the invitation"
        elif connected:
            why = f"unreachable: no answer to the invitation within {seconds:.0f} s"
        else:
            why = f"unreachable: {key[0]} disconnected before answering the invitation"
        _call(pending.done, why, key[0])

    def _invite_inbound(self, site: str, spec: pb.RoundSpec, done: Answer) -> None:
        def answered(future: grpc.Future) -> None:
            try:
                reply = future.result()
                reason = "" if reply.accepted else reply.reason or "declined"
                self.seen(site)
            except grpc.RpcError as exc:
                reason = f"unreachable: {rpc_error_message(exc)}"
            except grpc.FutureCancelledError:
                reason = "unreachable: the invitation was cancelled"
            _call(done, reason, site)

        try:
            future = self._stub(site).Invite.future(spec, timeout=defaults.INVITE_TIMEOUT_SECONDS)
        except Exception as exc:  # e.g. the directory was closed: still an answer for the round
            done(f"unreachable: {exc}")
            return
        future.add_done_callback(answered)

    def publish(self, site: str, status: pb.RoundStatus) -> None:
        with self._lock:
            owner = self._owners.get(site)
        if owner is None:
            return
        if owner.mode == OUTBOUND:
            link = owner.link
            if link is None:
                log.info(
                    "%s is not connected: it gets the result of %s when it reconnects",
                    site,
                    status.round_id,
                )
            else:
                link.send(pb.OwnerTask(result=status))
            return
        try:
            self._stub(site).PublishResult(status, timeout=defaults.PUBLISH_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            log.info(
                "could not publish %s to %s: %s", status.round_id, site, rpc_error_message(exc)
            )

    # ------------------------------------------------------------------ inbound channels

    def _connection(self, site: str) -> tuple[grpc.Channel, pb_grpc.OwnerAgentStub]:
        with self._lock:
            address = self._owners[site].address
            connection = self._connections.get(address)
            if connection is None:
                channel = self._tls.channel(address, peer="owner")
                connection = (channel, pb_grpc.OwnerAgentStub(channel))
                self._connections[address] = connection
            return connection

    def _stub(self, site: str) -> pb_grpc.OwnerAgentStub:
        return self._connection(site)[1]

    def close(self) -> None:
        """End every stream and channel (waiting invitations are dropped: the engine is closing)."""
        with self._lock:
            self._closed = True
            links = [o.link for o in self._owners.values() if o.link is not None]
            pending, self._pending = list(self._pending.values()), {}
            channels = [channel for channel, _ in self._connections.values()]
        for link in links:
            link.close()
        for p in pending:
            p.timer.cancel()
        for channel in channels:
            channel.close()


def _heartbeat() -> pb.Heartbeat:
    return pb.Heartbeat(sent_unix=time.time())


def _call(done: Answer, reason: str, site: str) -> None:
    try:
        done(reason)
    except Exception:  # a callback's exception would vanish inside gRPC or a timer
        log.exception("invitation of %s: handling the answer failed", site)


def _start_connecting(stub: pb_grpc.OwnerAgentStub) -> None:
    """Have the channel connect now, without waiting: a Health call whose answer nobody reads
    (a connectivity watcher would leave a gRPC thread that fails when the channel closes)."""
    try:
        call = stub.Health.future(pb.HealthRequest(), timeout=defaults.INVITE_TIMEOUT_SECONDS)
    except ValueError:  # the channel is closed already (the aggregator is stopping)
        return
    call.add_done_callback(_ignore)


def _ignore(_call: grpc.Future) -> None:
    pass
