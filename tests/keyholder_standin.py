"""In-process stand-ins for key holders (tests only): real partial decryptions and proofs
(`leteo_fed.crypto.threshold`) behind a real gRPC server, without the holder service's checks.

A stand-in reads PartialDecrypt's stream as a holder does (header, then each share's signed
statement and ciphertext batches), multiplies the shares itself and answers its partial
decryptions of the product in BATCH_SIZE batches, the proof, the sum's digest, the contributors
and its timings on the last one. `behaviour` makes it misbehave: "wrong" squares one partial
decryption, "refuse" refuses to decrypt (FAILED_PRECONDITION), "closed" refuses to open any
round, "slow" answers after a while, "other_key" answers GetPublicKey with another key. Several
combine: "slow wrong".
"""

from __future__ import annotations

import socket
import time
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from gmpy2 import mpz

from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import bytes_to_int, int_to_bytes
from leteo_fed.crypto.threshold import KeyShare, ThresholdKey
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.health import ServiceHealth
from leteo_fed.transport.messages import BATCH_SIZE, proof_to_proto, threshold_key_to_proto
from leteo_fed.transport.statements import ciphertext_digest

SLOW_SECONDS = 1.5


class StandInHolder(pb_grpc.KeyHolderServicer):
    def __init__(
        self, share: KeyShare, behaviour: str = "honest", other: ThresholdKey | None = None
    ) -> None:
        self.share = share
        self.behaviour = behaviour
        self.other = other  # the key "other_key" answers with
        self.opened: dict[str, pb.CspRoundRequest] = {}
        self.decrypted: list[str] = []

    def GetPublicKey(self, request, context):
        key = self.other if self.behaviour == "other_key" and self.other else self.share.key
        if request.key_id and request.key_id != key.key_id:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no key {request.key_id} here")
        return threshold_key_to_proto(key, self.share.index)

    def OpenRound(self, request, context):
        if self.behaviour == "closed":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this holder opens no round")
        if request.mode == "projection":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no projection with a threshold key")
        self.opened[request.round_id] = request
        return pb.Ack(ok=True)

    def PartialDecrypt(self, request_iterator, context):
        first = next(request_iterator)
        header = first.header
        if header.round_id not in self.opened:
            context.abort(grpc.StatusCode.NOT_FOUND, f"round {header.round_id} was never opened")
        if "refuse" in self.behaviour:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this holder decrypts nothing")
        contributors: list[str] = []
        shares: list[list[int]] = []
        for msg in request_iterator:
            if msg.WhichOneof("part") == "share":
                contributors.append(pb.ShareStatement.FromString(msg.share.body).site_id)
                shares.append([])
            else:
                shares[-1].extend(bytes_to_int(c) for c in msg.batch.ciphertexts)
        key = self.share.key
        n2 = mpz(key.public.n_square)
        product = [mpz(c) for c in shares[0]]
        for share in shares[1:]:
            product = [a * b % n2 for a, b in zip(product, share, strict=True)]
        product_ints = [int(x) for x in product]
        start = time.perf_counter()
        partials = threshold.partial_decrypt(self.share, product_ints)
        if "wrong" in self.behaviour:
            partials[0] = partials[0] * partials[0] % int(n2)
        partial_seconds = time.perf_counter() - start
        start = time.perf_counter()
        context_bytes = threshold.proof_context(header.round_id, header.key_id)
        proof = threshold.prove(self.share, product_ints, partials, context_bytes)
        prove_seconds = time.perf_counter() - start
        self.decrypted.append(header.round_id)
        if "slow" in self.behaviour:
            time.sleep(SLOW_SECONDS)
        width = key.public.ciphertext_bytes
        for i in range(0, len(partials), BATCH_SIZE):
            batch = pb.PartialDecryptionBatch(
                partials=[int_to_bytes(p, width) for p in partials[i : i + BATCH_SIZE]],
                index=self.share.index,
            )
            if i + BATCH_SIZE >= len(partials):
                proof_to_proto(proof, batch)
                batch.sum_digest = ciphertext_digest(product_ints, width)
                batch.contributors.extend(contributors)
                batch.partial_seconds = partial_seconds
                batch.prove_seconds = prove_seconds
            yield batch

    def WithdrawRound(self, request, context):
        state = "decrypted" if request.round_id in self.decrypted else "withdrawn"
        return pb.WithdrawReply(round_id=request.round_id, state=state)


@dataclass
class StandIns:
    """Running stand-ins by address; `down` addresses have nothing listening."""

    holders: dict[str, StandInHolder] = field(default_factory=dict)
    servers: list[grpc.Server] = field(default_factory=list)
    addresses: list[str] = field(default_factory=list)  # every holder's, in index order

    def stop(self) -> None:
        for server in self.servers:
            server.stop(None)


def free_address() -> str:
    """An address nothing listens on (a holder that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def start_standins(
    shares: list[KeyShare],
    behaviours: dict[int, str] | None = None,
    other: ThresholdKey | None = None,
) -> StandIns:
    """One stand-in per share (by index: its behaviour, or "down" for none at all)."""
    behaviours = behaviours or {}
    out = StandIns()
    for share in shares:
        behaviour = behaviours.get(share.index, "honest")
        if behaviour == "down":
            out.addresses.append(free_address())
            continue
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        holder = StandInHolder(share, behaviour, other)
        pb_grpc.add_KeyHolderServicer_to_server(holder, server)
        ServiceHealth([]).attach(server)  # grpc.health.v1, as `owner check` asks
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        address = f"127.0.0.1:{port}"
        out.holders[address] = holder
        out.servers.append(server)
        out.addresses.append(address)
    return out
