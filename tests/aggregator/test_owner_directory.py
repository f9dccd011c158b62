"""The aggregator's owner directory: invitations go out at once and answer through a callback."""

from __future__ import annotations

import threading
import time

import pytest

from aggregator.owners import OwnerDirectory
from leteo_fed.demo.cluster import free_port
from leteo_fed.errors import ConfigError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import TlsConfig, make_server

SLOW_REPLY_S = 0.5


class _SlowOwner(pb_grpc.OwnerAgentServicer):
    """Answers every invitation after SLOW_REPLY_S; refuses the rounds named "refuse"."""

    def Invite(self, request, context):
        time.sleep(SLOW_REPLY_S)
        if request.round_id == "refuse":
            return pb.InviteReply(accepted=False, reason="not this one")
        return pb.InviteReply(accepted=True)


class _Answers:
    def __init__(self, expected: int) -> None:
        self.reasons: dict[str, str] = {}
        self._lock = threading.Lock()
        self._expected = expected
        self.all_in = threading.Event()

    def callback(self, site: str):
        def done(reason: str) -> None:
            with self._lock:
                self.reasons[site] = reason
                if len(self.reasons) == self._expected:
                    self.all_in.set()

        return done


def test_invitations_do_not_wait_for_replies_and_every_owner_answers() -> None:
    server, port = make_server(TlsConfig.insecure_as("owners", "owner"), "127.0.0.1:0", workers=40)
    pb_grpc.add_OwnerAgentServicer_to_server(_SlowOwner(), server)
    server.start()
    directory = OwnerDirectory(TlsConfig.insecure_as("aggregator", "aggregator"))
    try:
        sites = [f"site-{i}" for i in range(30)]
        for site in sites:  # 30 owners behind one address: one channel, connected at registration
            directory.register(site, f"127.0.0.1:{port}")
        directory.register("site-gone", f"127.0.0.1:{free_port()}")  # nothing listens there
        answers = _Answers(len(sites) + 2)
        start = time.monotonic()
        for site in sites:
            directory.invite(site, pb.RoundSpec(round_id="r1"), answers.callback(site))
        directory.invite("site-0", pb.RoundSpec(round_id="refuse"), answers.callback("refused"))
        directory.invite("site-gone", pb.RoundSpec(round_id="r1"), answers.callback("site-gone"))
        assert time.monotonic() - start < SLOW_REPLY_S  # nobody waited for a reply
        assert answers.all_in.wait(10)
        # all in parallel: far less than 31 replies one after the other (or in waves of 16)
        assert time.monotonic() - start < 4 * SLOW_REPLY_S
    finally:
        directory.close()
        server.stop(0)
    assert all(answers.reasons[site] == "" for site in sites)
    assert answers.reasons["refused"] == "not this one"
    assert answers.reasons["site-gone"].startswith("unreachable: UNAVAILABLE")


def test_local_ports_are_never_handed_out_twice() -> None:
    """Two owners told the same port would share it (gRPC servers set SO_REUSEPORT by default);
    free_port never repeats, and our servers refuse a port in use."""
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    tls = TlsConfig.insecure_as("owners", "owner")
    first, port = make_server(tls, "127.0.0.1:0", workers=1)
    try:
        # grpcio raises RuntimeError ("Failed to bind"); an older one returns port 0: ConfigError
        with pytest.raises((RuntimeError, ConfigError)):
            make_server(tls, f"127.0.0.1:{port}", workers=1)
    finally:
        first.stop(0)
