"""The owners the aggregator knows: where to reach them, inviting them, publishing to them."""

from __future__ import annotations

import logging
import threading

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
        self._stubs: dict[str, pb_grpc.OwnerAgentStub] = {}
        self._channels: list[grpc.Channel] = []
        self._lock = threading.Lock()

    def register(self, site: str, address: str) -> None:
        with self._lock:
            previous = self._owners.get(site)
            self._owners[site] = address
        if previous != address:
            log.info("owner %s registered at %s", site, address)

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

    def _stub(self, site: str) -> pb_grpc.OwnerAgentStub:
        with self._lock:
            address = self._owners[site]
            stub = self._stubs.get(address)
            if stub is None:
                channel = self._tls.channel(address, peer="owner")
                self._channels.append(channel)
                stub = pb_grpc.OwnerAgentStub(channel)
                self._stubs[address] = stub
            return stub

    def invite(self, site: str, spec: pb.RoundSpec) -> str:
        """'' if the owner accepted, else why it cannot take part."""
        try:
            reply = self._stub(site).Invite(spec, timeout=defaults.INVITE_TIMEOUT_SECONDS)
            return "" if reply.accepted else reply.reason or "declined"
        except grpc.RpcError as exc:
            return f"unreachable: {rpc_error_message(exc)}"

    def publish(self, site: str, status: pb.RoundStatus) -> None:
        try:
            self._stub(site).PublishResult(status, timeout=defaults.PUBLISH_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            log.info(
                "could not publish %s to %s: %s", status.round_id, site, rpc_error_message(exc)
            )

    def close(self) -> None:
        with self._lock:
            for channel in self._channels:
                channel.close()
