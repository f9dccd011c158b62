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
when it connects, if that is within INVITE_RECONNECT_SECONDS; a result it missed it asks for on
reconnecting (`OwnerHello.awaiting`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from aggregator.deadlines import Deadlines
from aggregator.links import Link, heartbeat
from leteo_fed import defaults
from leteo_fed.errors import DuplicateError, NotFoundError, Overloaded, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import TlsConfig, rpc_error_message
from leteo_fed.transport.published import owner_status

log = logging.getLogger("leteo.aggregator")

INBOUND, OUTBOUND = "inbound", "outbound"
MAX_AWAITING = 1000  # round ids one hello may ask results for
SEEN_SAVE_SECONDS = 10.0  # last-seen times are written in one batch this often, not per answer

Answer = Callable[[str], None]


@dataclass
class Pending:
    """An invitation waiting for its answer."""

    spec: pb.RoundSpec
    done: Answer
    delivered: bool = False
    seconds: float = 0.0  # how long it waits for its answer


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
        on_seen: Callable[[dict[str, float]], None] | None = None,
        on_remove: Callable[[str], None] | None = None,
    ) -> None:
        """`idle_seconds`: an owner not heard from for longer is not invited by default
        (None: never); `on_seen` ({site: unix time}, every SEEN_SAVE_SECONDS and at `close`)
        and `on_remove` (site) keep the state."""
        self._tls = tls
        self._max_connected = max_connected
        # round id -> its final status if the round is over (answers OwnerHello.awaiting)
        self.final_status = final_status or (lambda _round_id: None)
        self._on_register = on_register  # (site, mode, address): persists registrations
        self._idle_seconds = idle_seconds
        self._on_seen = on_seen
        self._on_remove = on_remove
        self._owners: dict[str, Owner] = {}
        self._connected = 0  # owners with an open stream (kept, never counted by a scan)
        self._pending: dict[str, dict[str, Pending]] = {}  # site -> round id -> invitation
        self._deadlines = Deadlines("invitation-timeouts")
        self._unsaved_seen: dict[str, float] = {}  # last-seen times not yet in the state
        # inbound: one channel per address, kept open (and connected from registration on)
        self._connections: dict[str, tuple[grpc.Channel, pb_grpc.OwnerAgentStub]] = {}
        self._lock = threading.Lock()
        self._closed = False
        # told the site whose stream ended: rounds waiting for it may close at once
        self.on_disconnect: Callable[[str], None] | None = None
        self._saved = threading.Event()
        if on_seen is not None:
            threading.Thread(target=self._save_seen_loop, name="last-seen", daemon=True).start()

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
            self._put(Owner(site, INBOUND, address))
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
        """The owner was heard from (an answer, a disconnection): it is not idle. Kept in
        memory now, in the state with the next batch (no disk write per answer)."""
        now = time.time()
        with self._lock:
            owner = self._owners.get(site)
            if owner is None:
                return
            owner.last_seen = now
            if not self._closed:  # the state may be closed with the service: not written
                self._unsaved_seen[site] = now

    def save_seen(self) -> int:
        """Write the last-seen times gathered since the last batch, in one transaction; how
        many. A failed write keeps them for the next batch."""
        with self._lock:
            batch, self._unsaved_seen = self._unsaved_seen, {}
        if not batch or self._on_seen is None:
            return 0
        try:
            self._on_seen(batch)
        except Exception:
            log.exception("could not record when %d owner(s) were last seen", len(batch))
            with self._lock:
                self._unsaved_seen = {**batch, **self._unsaved_seen}
            return 0
        return len(batch)

    def _save_seen_loop(self) -> None:
        while not self._saved.wait(SEEN_SAVE_SECONDS):
            self.save_seen()

    def connected_count(self) -> int:
        with self._lock:
            return self._connected

    def _put(self, owner: Owner) -> None:
        """Set a site's entry, keeping the count of open streams (call with the lock)."""
        old = self._owners.get(owner.site)
        self._connected += (owner.link is not None) - (old is not None and old.link is not None)
        self._owners[owner.site] = owner

    def _pop(self, site: str) -> Owner:
        owner = self._owners.pop(site)
        self._connected -= owner.link is not None
        return owner

    def remove(self, sites: list[str]) -> None:
        """Forget owners (the operator's `aggregator owners remove`): no longer invited; an
        open stream is closed (a running outbound owner registers again when it reconnects)."""
        with self._lock:
            unknown = [s for s in sites if s not in self._owners]
            if unknown:
                raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
            removed = [self._pop(s) for s in dict.fromkeys(sites)]
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
        link = Link(site, instance=hello.instance)
        with self._lock:
            if self._closed:
                raise ProtocolError("the aggregator is shutting down")
            previous = self._owners.get(site)
            live = previous.link if previous is not None else None
            if live is not None:
                _refuse_another_agent(live, hello.instance)
            elif self._connected >= self._max_connected:
                raise Overloaded(
                    f"the aggregator serves at most {self._max_connected} connected owners "
                    "(aggregator serve --max-owners); try again later"
                )
            if live is not None:
                live.close()  # the owner reconnected: the old stream is dead to it
            new = previous is None or previous.mode != OUTBOUND
            self._put(Owner(site, OUTBOUND, "", link))
            waiting = list(self._pending.get(site, {}).values())
        if new:
            self._persist(site, OUTBOUND, "")
        log.info("owner %s connected (outbound); %d invitation(s) waiting", site, len(waiting))
        link.send(heartbeat())  # tells the owner it is connected
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
        """The link's tasks to a blocking consumer (the event-loop server iterates
        `link.stream()` and calls `disconnected` itself)."""
        try:
            yield from link.tasks(is_active)
        finally:
            self.disconnected(link)

    def disconnected(self, link: Link) -> None:
        with self._lock:
            owner = self._owners.get(link.site)
            if owner is None or owner.link is not link:
                return  # replaced by a newer stream already
            owner.link = None
            self._connected -= 1
            closed = self._closed
        if closed:  # the aggregator is stopping: `close` logged the links it ended and kept
            # when each was last seen; a stream may end after the service's last line
            log.debug("owner %s disconnected (aggregator stopping)", link.site)
            return
        log.info("owner %s disconnected", link.site)
        self.seen(link.site)
        if self.on_disconnect is not None:
            try:
                self.on_disconnect(link.site)
            except Exception:
                log.exception("handling the disconnection of %s failed", link.site)

    def answer(self, site: str, round_id: str, reason: str) -> None:
        """An outbound owner's answer to an invitation ('' = accepted)."""
        pending = self._take_pending(site, round_id)
        if pending is None:
            raise NotFoundError(
                f"no invitation of {site} to round {round_id!r} is waiting for an answer "
                "(it timed out, was answered already, or never existed)"
            )
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
        pending = Pending(spec, done)
        with self._lock:
            waiting = self._pending.setdefault(site, {})
            if spec.round_id in waiting:
                done(f"{site} is already invited to round {spec.round_id}")
                return
            waiting[spec.round_id] = pending
            owner = self._owners.get(site)
            link = owner.link if owner is not None else None
            # a connected owner has the time to answer; one that is away, the time to come back
            # (a round does not wait long for an owner that may not)
            if link is not None:
                pending.delivered, pending.seconds = True, defaults.INVITE_TIMEOUT_SECONDS
            else:
                pending.seconds = defaults.INVITE_RECONNECT_SECONDS
        self._deadlines.after(pending.seconds, functools.partial(self._expire, site, spec.round_id))
        if link is not None:
            link.send(pb.OwnerTask(invite=spec))
        else:
            log.info("round %s: %s is not connected; the invitation waits", spec.round_id, site)

    def _take_pending(self, site: str, round_id: str) -> Pending | None:
        with self._lock:
            waiting = self._pending.get(site)
            pending = waiting.pop(round_id, None) if waiting else None
            if waiting is not None and not waiting:
                del self._pending[site]
            return pending

    def _expire(self, site: str, round_id: str) -> None:
        pending = self._take_pending(site, round_id)
        if pending is None:  # answered in time
            return
        with self._lock:
            owner = self._owners.get(site)
            connected = owner is not None and owner.link is not None
        seconds = pending.seconds
        if not pending.delivered:
            why = f"unreachable: {site} did not connect within {seconds:g} s of the invitation"
        elif connected:
            why = f"unreachable: no answer to the invitation within {seconds:g} s"
        else:
            why = f"unreachable: {site} disconnected before answering the invitation"
        _call(pending.done, why, site)

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
        """End every stream and channel (waiting invitations are dropped: the engine is closing).
        Connected owners are marked seen now, while the state is still open: the streams end
        later, when nothing may be written any more."""
        with self._lock:
            connected = [o.site for o in self._owners.values() if o.link is not None]
        for site in connected:
            self.seen(site)
        self._saved.set()
        self.save_seen()
        with self._lock:
            self._closed = True
            links = [o.link for o in self._owners.values() if o.link is not None]
            self._pending = {}
            channels = [channel for channel, _ in self._connections.values()]
        self._deadlines.close()
        if links:
            log.info("closing the links of %d connected owner(s)", len(links))
        for link in links:
            link.close()
        for channel in channels:
            channel.close()


def _refuse_another_agent(live: Link, instance: str) -> None:
    """A site connects from one agent at a time. The same agent process reconnecting (its
    old stream broke on its side first) replaces its stream; a different one is refused
    while the first is connected, or both would take each other's stream in a loop. A
    crashed agent's stream ends when its socket closes (or keepalive finds it dead), and its
    restart, retrying, gets in then. Agents that send no instance replace as before."""
    if not instance or not live.instance or instance == live.instance:
        return
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(live.since))
    raise DuplicateError(
        f"site {live.site} is already connected from another agent since {since}: one agent "
        "per site identity (stop the other agent; if it crashed, this one gets in as soon as "
        "its connection is found closed)"
    )


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
