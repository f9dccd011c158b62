"""Checks of what arrives on the wire that the fuzzing of tests/fuzz/ called for, one by one:
round ids owners name files after, results lacking a part, requests whose bytes do not parse,
status messages too long for a gRPC header."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import pytest

from leteo_fed.errors import DataError, NotFoundError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols.results import RESULT_TYPES
from leteo_fed.transport.codec import from_proto
from leteo_fed.transport.grpc_io import (
    MAX_STATUS_MESSAGE_CHARS,
    TlsConfig,
    make_server,
    rpc_method,
)
from leteo_fed.transport.rounds import check_round_id, result_from_proto


@pytest.mark.parametrize(
    "round_id", ["pca-0123456789ab", "kmeans-0123456789ab-it3", "r1", "weighted_stats-a.b_c"]
)
def test_round_ids_the_aggregator_makes_are_accepted(round_id: str) -> None:
    assert check_round_id(round_id) == round_id


@pytest.mark.parametrize(
    "round_id",
    ["", ".", "..", "../../x", "/tmp/x", "a/b", "a\\b", "a\x00", "a b", "é", "x" * 129, ".hidden"],
)
def test_round_ids_that_are_no_plain_file_name_are_refused(round_id: str) -> None:
    with pytest.raises(DataError, match="invalid round_id") as err:
        check_round_id(round_id)
    assert err.value.field == "round_id"
    assert len(str(err.value)) < 300  # a huge id is not echoed whole


def test_a_result_lacking_a_sub_message_is_a_data_error_naming_it() -> None:
    msg = pb.RoundResult(ldp_points=pb.LdpPointsResult(protocol="ldp"))
    with pytest.raises(DataError, match="LdpPointsResult lacks timings") as err:
        result_from_proto(msg)
    assert err.value.field == "LdpPointsResult.timings"
    # and through the generic codec, for every result type: an empty message names what lacks
    for name, cls in RESULT_TYPES.items():
        try:
            from_proto(getattr(pb.RoundResult(), name), cls)
        except DataError as exc:
            assert "lacks" in str(exc)


class _Echo(pb_grpc.OwnerAgentServicer):
    """Refuses with a message quoting the round id; Health streams nothing in."""

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(status="SERVING")

    @rpc_method
    def PublishResult(self, request, context):
        raise NotFoundError(f"unknown round {request.round_id!r}")


class _Uploads(pb_grpc.AggregatorServicer):
    @rpc_method
    def SubmitShare(self, request_iterator, context):
        n = sum(1 for _ in request_iterator)
        return pb.Ack(ok=True, message=f"{n} chunks")


@contextmanager
def _server() -> Iterator[grpc.Channel]:
    server, port = make_server(TlsConfig.insecure_as("aggregator", "aggregator"), "127.0.0.1:0", 2)
    pb_grpc.add_OwnerAgentServicer_to_server(_Echo(), server)
    pb_grpc.add_AggregatorServicer_to_server(_Uploads(), server)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel
    finally:
        channel.close()
        server.stop(0)


@pytest.mark.parametrize("raw", [b"\x0a\x85", b"\x0a\x02\xff\xfe", b"\x0f\x01", b"\x00\x01"])
def test_undecodable_requests_are_invalid_argument(raw: bytes) -> None:
    with _server() as channel:
        unary = channel.unary_unary("/leteo.v1.OwnerAgent/PublishResult")
        with pytest.raises(grpc.RpcError) as err:
            unary(raw, timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "undecodable request" in (err.value.details() or "")
        assert "RoundStatus" in (err.value.details() or "")
        stream = channel.stream_unary("/leteo.v1.Aggregator/SubmitShare")
        good = pb.ShareChunk(header=pb.ShareHeader(round_id="r")).SerializeToString()
        with pytest.raises(grpc.RpcError) as err:
            stream(iter([good, raw]), timeout=5)  # the bad chunk comes second
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ShareChunk" in (err.value.details() or "")
        # decodable requests are served as before
        assert pb.Ack.FromString(stream(iter([good, good]), timeout=5)).message == "2 chunks"
        health = pb_grpc.OwnerAgentStub(channel).Health(pb.HealthRequest(), timeout=5)
        assert health.status == "SERVING"


def test_a_refusal_quoting_a_huge_field_keeps_its_status() -> None:
    with _server() as channel:
        stub = pb_grpc.OwnerAgentStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.PublishResult(pb.RoundStatus(round_id="é" * 30_000), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        details = err.value.details() or ""
        assert details.startswith("unknown round 'éé") and details.endswith("(truncated)")
        assert len(details) <= MAX_STATUS_MESSAGE_CHARS
