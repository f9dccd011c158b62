"""The owners the aggregator knows: where to reach them, inviting them, publishing to them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc

from leteo_fed import defaults
from leteo_fed.errors import NotFoundError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import TlsConfig, rpc_error_message

log = logging.getLogger("leteo.aggregator")


class OwnerDirectory:
    def __init__(self, tls: TlsConfig) -> None:
        self._tls = tls
        self._owners: dict[str, str] = {}
        # one channel per address, kept open (and connected from registration on)
        self._connections: dict[str, tuple[grpc.Channel, pb_grpc.OwnerAgentStub]] = {}
        self._lock = threading.Lock()

    def register(self, site: str, address: str) -> None:
        with self._lock:
            previous = self._owners.get(site)
            self._owners[site] = address
        if previous != address:
            log.info("owner %s registered at %s", site, address)
            # connect now: the TLS handshake is not left to the first invitation, where with
            # many owners starting their shares at once it can outlast the invitation's timeout
            _start_connecting(self._connection(site)[0])

    def listing(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self._owners.items())

    def check_invited(self, invited: list[str], quorum: int) -> None:
        """Every invited owner is registered, and there are at least `quorum` of them."""
        with self._lock:
            registered = dict(self._owners)
        unknown = [s for s in invited if s not in registered]
        if unknown:
            raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
        if len(invited) < quorum:
            raise ProtocolError(
                f"{len(invited)} owner(s) registered, the round needs at least {quorum}"
            )

    def _connection(self, site: str) -> tuple[grpc.Channel, pb_grpc.OwnerAgentStub]:
        with self._lock:
            address = self._owners[site]
            connection = self._connections.get(address)
            if connection is None:
                channel = self._tls.channel(address, peer="owner")
                connection = (channel, pb_grpc.OwnerAgentStub(channel))
                self._connections[address] = connection
            return connection

    def _stub(self, site: str) -> pb_grpc.OwnerAgentStub:
        return self._connection(site)[1]

    def invite(self, site: str, spec: pb.RoundSpec, done: Callable[[str], None]) -> None:
        """Send the invitation and return at once; `done` gets '' if the owner accepted, else
        why it cannot take part. No thread waits for the reply (with hundreds of owners, a
        pool thread per pending invitation would make the invitations go out in waves)."""

        def answered(future: grpc.Future) -> None:
            try:
                reply = future.result()
                reason = "" if reply.accepted else reply.reason or "declined"
            except grpc.RpcError as exc:
                reason = f"unreachable: {rpc_error_message(exc)}"
            except grpc.FutureCancelledError:
                reason = "unreachable: the invitation was cancelled"
            try:
                done(reason)
            except Exception:  # a callback's exception would vanish inside gRPC
                log.exception("invitation of %s: handling the reply failed", site)

        try:
            future = self._stub(site).Invite.future(spec, timeout=defaults.INVITE_TIMEOUT_SECONDS)
        except Exception as exc:  # e.g. the directory was closed: still an answer for the round
            done(f"unreachable: {exc}")
            return
        future.add_done_callback(answered)

    def publish(self, site: str, status: pb.RoundStatus) -> None:
        try:
            self._stub(site).PublishResult(status, timeout=defaults.PUBLISH_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            log.info(
                "could not publish %s to %s: %s", status.round_id, site, rpc_error_message(exc)
            )

    def close(self) -> None:
        with self._lock:
            for channel, _ in self._connections.values():
                channel.close()


def _ignore(_state: grpc.ChannelConnectivity) -> None:
    pass


def _start_connecting(channel: grpc.Channel) -> None:
    """Have the channel connect now, without waiting and without keeping a watcher (gRPC's
    poll thread asks for the connection once, then ends)."""
    channel.subscribe(_ignore, try_to_connect=True)
    channel.unsubscribe(_ignore)
