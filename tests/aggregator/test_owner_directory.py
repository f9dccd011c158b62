"""The aggregator's owner directory: invitations go out at once and answer through a callback."""

from __future__ import annotations

import threading
import time

import pytest

from aggregator.owners import OwnerDirectory
from leteo_fed import defaults
from leteo_fed.demo.ports import free_port
from leteo_fed.errors import ConfigError, DuplicateError, NotFoundError, Overloaded
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


# ---------------------------------------------------------------- outbound owners (no network)


def _tasks(stream, n: int) -> list[pb.OwnerTask]:
    """The next n tasks that are not heartbeats."""
    out = []
    while len(out) < n:
        task = next(stream)
        if task.WhichOneof("task") != "heartbeat":
            out.append(task)
    return out


def _outbound(**kwargs) -> OwnerDirectory:
    return OwnerDirectory(TlsConfig.insecure_as("aggregator", "aggregator"), **kwargs)


def test_an_outbound_owner_gets_its_invitation_on_its_stream_and_answers() -> None:
    directory = _outbound()
    link, stream = directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)
    assert next(stream).WhichOneof("task") == "heartbeat"  # tells the owner it is connected
    listing = {o.site_id: o for o in directory.listing()}
    assert listing["site-1"].mode == "outbound" and listing["site-1"].connected
    answers = _Answers(1)
    directory.invite("site-1", pb.RoundSpec(round_id="r1"), answers.callback("site-1"))
    (task,) = _tasks(stream, 1)
    assert task.invite.round_id == "r1"
    assert not answers.all_in.is_set()  # no answer yet
    directory.answer("site-1", "r1", "no such column")
    assert answers.all_in.wait(1) and answers.reasons["site-1"] == "no such column"
    with pytest.raises(NotFoundError, match="no invitation of site-1 to round 'r1'"):
        directory.answer("site-1", "r1", "")  # answered once only
    link.close()
    assert list(stream) == []  # the stream ends
    assert not {o.site_id: o for o in directory.listing()}["site-1"].connected
    directory.close()


def test_an_invitation_waits_for_an_owner_that_connects_within_the_timeout(monkeypatch) -> None:
    monkeypatch.setattr(defaults, "INVITE_RECONNECT_SECONDS", 0.5)  # it is away when invited
    directory = _outbound()
    link, stream = directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)
    link.close()
    list(stream)  # site-1 is known but gone
    answers = _Answers(2)
    directory.invite("site-1", pb.RoundSpec(round_id="r1"), answers.callback("site-1"))
    directory.invite("site-1", pb.RoundSpec(round_id="r2"), answers.callback("late"))
    # it comes back, having missed the result of r0 (the aggregator knows it)
    final = {"r0": pb.RoundStatus(round_id="r0", state="COMPLETED")}
    directory.final_status = final.get
    _, stream = directory.connect(
        "site-1", pb.OwnerHello(site_id="site-1", awaiting=["r0", "unknown"]), lambda: True
    )
    tasks = _tasks(stream, 3)
    # the missed result first (its budget comes back before the next invitation), then both
    assert tasks[0].result.round_id == "r0"
    assert sorted(t.invite.round_id for t in tasks[1:]) == ["r1", "r2"]
    directory.answer("site-1", "r1", "")
    assert answers.all_in.wait(2)  # r2 was never answered: the timeout answers for it
    assert answers.reasons["site-1"] == ""
    assert answers.reasons["late"] == "unreachable: no answer to the invitation within 0.5 s"
    directory.close()


def test_an_owner_that_never_connects_is_answered_unreachable(monkeypatch) -> None:
    monkeypatch.setattr(defaults, "INVITE_RECONNECT_SECONDS", 0.2)
    directory = _outbound()
    directory.restore([("site-9", "outbound", "")])  # known from an earlier run
    directory.check_invited(["site-9"], 1)
    answers = _Answers(2)
    directory.invite("site-9", pb.RoundSpec(round_id="r1"), answers.callback("site-9"))
    directory.invite("nobody", pb.RoundSpec(round_id="r1"), answers.callback("nobody"))
    assert answers.all_in.wait(2)
    assert (
        answers.reasons["site-9"]
        == "unreachable: site-9 did not connect within 0.2 s of the invitation"
    )
    assert answers.reasons["nobody"] == "unreachable: nobody is not registered"
    directory.close()


def test_a_reconnecting_owner_replaces_its_old_stream_and_capacity_is_enforced() -> None:
    directory = _outbound(max_connected=2)
    _, first = directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)
    _, second = directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)
    assert [t.WhichOneof("task") for t in first] == ["heartbeat"]  # the old stream ended
    directory.connect("site-2", pb.OwnerHello(site_id="site-2"), lambda: True)
    with pytest.raises(Overloaded, match="at most 2 connected owners"):
        directory.connect("site-3", pb.OwnerHello(site_id="site-3"), lambda: True)
    # publishing reaches a connected owner's stream; a disconnected one asks when it is back
    directory.publish("site-1", pb.RoundStatus(round_id="r1", state="FAILED"))
    assert _tasks(second, 1)[0].result.round_id == "r1"
    directory.close()
    assert [t.WhichOneof("task") for t in second] == []


def test_a_second_agent_of_a_connected_site_is_refused_and_the_first_keeps_its_stream() -> None:
    directory = _outbound()
    hello = pb.OwnerHello(site_id="site-1", instance="a" * 32)
    link, first = directory.connect("site-1", hello, lambda: True)
    other = pb.OwnerHello(site_id="site-1", instance="b" * 32)
    with pytest.raises(DuplicateError, match="site site-1 is already connected from another"):
        directory.connect("site-1", other, lambda: True)
    assert directory.listing()[0].connected
    directory.publish("site-1", pb.RoundStatus(round_id="r1", state="FAILED"))
    assert _tasks(first, 1)[0].result.round_id == "r1"  # the first stream is untouched
    # the first agent's stream ends (its process died): the second one gets in
    link.close()
    assert [t.WhichOneof("task") for t in first] == []
    _, second = directory.connect("site-1", other, lambda: True)
    # the same agent reconnecting replaces its own stream, as before
    _, again = directory.connect("site-1", other, lambda: True)
    assert [t.WhichOneof("task") for t in second] == ["heartbeat"]
    directory.close()


def test_registrations_are_reported_for_persistence() -> None:
    seen: list[tuple[str, str, str]] = []
    directory = _outbound(on_register=lambda *entry: seen.append(entry))
    directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)
    directory.connect("site-1", pb.OwnerHello(site_id="site-1"), lambda: True)  # no change
    directory.register("site-2", "127.0.0.1:1")
    assert seen == [("site-1", "outbound", ""), ("site-2", "inbound", "127.0.0.1:1")]
    directory.close()


def test_last_seen_times_are_written_in_batches_not_per_answer() -> None:
    batches: list[dict[str, float]] = []
    directory = _outbound(on_seen=batches.append)
    for site in ("site-1", "site-2"):
        directory.connect(site, pb.OwnerHello(site_id=site), lambda: True)
    for _ in range(50):  # answers, disconnections: kept in memory only
        directory.seen("site-1")
        directory.seen("site-2")
    assert batches == []
    assert directory.save_seen() == 2  # one write for both, with their latest times
    assert len(batches) == 1 and set(batches[0]) == {"site-1", "site-2"}
    assert directory.save_seen() == 0  # nothing new
    directory.seen("site-1")
    directory.close()  # what is unsaved is written at shutdown
    assert len(batches) == 2 and set(batches[1]) >= {"site-1"}
