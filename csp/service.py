"""The crypto service provider: holds the Paillier secret key, decrypts only blinded aggregates.

Rules it enforces: only the aggregator (by certificate) may open rounds and ask for decryption;
each round is announced first with its ciphertext count and decrypted at most once, with
exactly that many ciphertexts. It returns plaintexts that are one-time-pad blinded; it never
sees the masks. The secret key never leaves this process and is never logged.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from leteo_fed import __version__
from leteo_fed.crypto.paillier import (
    PrivateKey,
    bytes_to_int,
    check_ciphertext,
    int_to_bytes,
)
from leteo_fed.crypto.parallel import DecryptionPool
from leteo_fed.encoding.packing import unblind, unpack
from leteo_fed.errors import DuplicateError, NotFoundError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import discriminant, moments, rotation
from leteo_fed.transport.grpc_io import require_role, rpc_method, rpc_stream_method
from leteo_fed.transport.messages import BATCH_SIZE, encoding_from_proto, public_key_to_proto

log = logging.getLogger("leteo.csp")

MAX_CIPHERTEXTS_PER_ROUND = 1_000_000
PARALLEL_MIN_PER_WORKER = 32  # a warm pool pays off from ~64 ciphertexts on 2 cores


MODES = ("blinded", "projection")


@dataclass
class _CspRound:
    n_ciphertexts: int
    opened_at: float
    mode: str = "blinded"
    used: bool = False


class CspService(pb_grpc.CryptoServiceProviderServicer):
    def __init__(self, key: PrivateKey, name: str = "csp", transcript: Path | None = None) -> None:
        # all cores for large aggregates; the private key goes only to our own child processes
        self._decryptor = DecryptionPool(key, min_per_worker=PARALLEL_MIN_PER_WORKER)
        self._public = key.public
        self._name = name
        self._rounds: dict[str, _CspRound] = {}
        self._lock = threading.Lock()
        self._transcript = transcript
        log.info("CSP ready: %d-bit Paillier key %s", self._public.bits, self._public.key_id)

    def warm_up(self) -> None:
        """Start the decryption workers now rather than on the first large round."""
        try:
            self._decryptor.start()
        except Exception:  # never fatal: decryption falls back to this process
            log.exception("could not start decryption workers; decrypting in-process")

    def close(self) -> None:
        self._decryptor.close()

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(party=self._name, role="csp", version=__version__, status="SERVING")

    @rpc_method
    def GetPublicKey(self, request, context):
        require_role(context, "owner", "aggregator", "analyst")
        return public_key_to_proto(self._public)

    @rpc_method
    def OpenRound(self, request, context):
        caller = require_role(context, "aggregator")
        if request.key_id != self._public.key_id:
            raise ProtocolError(f"round {request.round_id} uses key {request.key_id}, not ours")
        if not request.round_id:
            raise ProtocolError("round_id is empty")
        if not 0 < request.n_ciphertexts <= MAX_CIPHERTEXTS_PER_ROUND:
            raise ProtocolError(f"n_ciphertexts must be in 1..{MAX_CIPHERTEXTS_PER_ROUND}")
        mode = request.mode or "blinded"
        if mode not in MODES:
            raise ProtocolError(f"unknown round mode {mode!r}; expected one of {MODES}")
        with self._lock:
            if request.round_id in self._rounds:
                raise DuplicateError(f"round {request.round_id} is already open")
            self._rounds[request.round_id] = _CspRound(request.n_ciphertexts, time.time(), mode)
        log.info(
            "round %s opened by %s: %d ciphertexts expected",
            request.round_id,
            caller.name,
            request.n_ciphertexts,
        )
        return pb.Ack(ok=True)

    def _claim(self, round_id: str, mode: str) -> _CspRound:
        with self._lock:
            entry = self._rounds.get(round_id)
            if entry is None:
                raise NotFoundError(f"round {round_id} was never opened at this CSP")
            if entry.mode != mode:
                raise ProtocolError(f"round {round_id} was opened for {entry.mode}, not {mode}")
            if entry.used:
                raise DuplicateError(
                    f"round {round_id} was already decrypted; the CSP decrypts once"
                )
            entry.used = True  # claimed before decrypting: no second request can race in
        return entry

    def _receive(self, round_id: str, entry: _CspRound, request_iterator) -> list[int]:
        ciphertexts: list[int] = []
        for msg in request_iterator:
            if msg.WhichOneof("part") != "batch":
                raise ProtocolError("only ciphertext batches may follow the header")
            ciphertexts.extend(bytes_to_int(c) for c in msg.batch.ciphertexts)
            if len(ciphertexts) > entry.n_ciphertexts:
                break
        if len(ciphertexts) != entry.n_ciphertexts:
            raise ProtocolError(
                f"round {round_id}: announced {entry.n_ciphertexts} ciphertexts, "
                f"received {len(ciphertexts)}"
            )
        for c in ciphertexts:
            check_ciphertext(self._public, c)
        return ciphertexts

    @rpc_stream_method
    def DecryptBlinded(self, request_iterator, context) -> Iterator[pb.PlaintextBatch]:
        require_role(context, "aggregator")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("DecryptBlinded must start with a header naming the round")
        round_id = first.header.round_id
        entry = self._claim(round_id, "blinded")
        ciphertexts = self._receive(round_id, entry, request_iterator)
        start = time.perf_counter()
        plaintexts = self._decryptor.decrypt_many(ciphertexts)
        seconds = time.perf_counter() - start
        log.info(
            "round %s: decrypted %d blinded ciphertexts in %.3f s",
            round_id,
            len(plaintexts),
            seconds,
        )
        self._record(round_id, "blinded", plaintexts)
        width = self._public.plaintext_bytes
        for i in range(0, len(plaintexts), BATCH_SIZE):
            chunk = [int_to_bytes(p, width) for p in plaintexts[i : i + BATCH_SIZE]]
            yield pb.PlaintextBatch(plaintexts=chunk, decrypt_seconds=seconds)

    @rpc_method
    def ComputeProjection(self, request_iterator, context) -> pb.ProjectionResult:
        """Projection-only rounds: the aggregate is rotated by a matrix the CSP never sees."""
        require_role(context, "aggregator")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("ComputeProjection must start with a header naming the round")
        head = first.header
        if head.key_id != self._public.key_id:
            raise ProtocolError(f"round {head.round_id} uses key {head.key_id}, not ours")
        entry = self._claim(head.round_id, "projection")
        ciphertexts = self._receive(head.round_id, entry, request_iterator)
        start = time.perf_counter()
        enc, layout = encoding_from_proto(head.encoding, self._public.bits)
        if enc.rotation_dimension != head.dimension:
            raise ProtocolError("projection rounds need a rotated encoding of the same dimension")
        groupings = rotation.placeholder_groupings(list(head.classes_per_grouping))
        n_values = moments.n_values(head.dimension, groupings)
        if layout.n_ciphertexts(n_values) != len(ciphertexts):
            raise ProtocolError(f"{len(ciphertexts)} ciphertexts do not hold {n_values} values")
        plaintexts = self._decryptor.decrypt_many(ciphertexts)
        self._record(head.round_id, "projection", plaintexts)
        slots = unpack(plaintexts, n_values, layout)
        totals = unblind(slots, [0] * n_values, head.n_owners, layout)  # offsets only, no masks
        agg = moments.decode_totals(
            totals,
            head.dimension,
            groupings,
            enc.scale_bits,
            enc.count_scale_bits,
            noisy=enc.noise_bound > 0,
        )
        ridge = discriminant.Ridge(
            head.rho if head.HasField("rho") else None,
            head.rho_prime if head.HasField("rho_prime") else None,
            head.ridge_noise_floor,
        )
        evals, comps, evr, used = rotation.directions(
            agg, head.method, groupings, head.components, ridge, noisy=enc.noise_bound > 0
        )
        seconds = time.perf_counter() - start
        log.info(
            "round %s: %s directions from the rotated aggregate of %d owners in %.3f s",
            head.round_id,
            head.method,
            head.n_owners,
            seconds,
        )
        return pb.ProjectionResult(
            eigenvalues=evals,
            components=comps.ravel().tolist(),
            explained_variance_ratio=evr,
            ridge=used,
            compute_seconds=seconds,
        )

    def _record(self, round_id: str, mode: str, plaintexts: list[int]) -> None:
        """Audit transcript of everything the CSP decrypted (blinded, or rotated aggregates)."""
        if self._transcript is None:
            return
        record = {"round_id": round_id, "mode": mode, "plaintexts": [hex(p) for p in plaintexts]}
        with self._lock, open(self._transcript, "a") as out:
            out.write(json.dumps(record) + "\n")


def add_to_server(server: grpc.Server, service: CspService) -> None:
    pb_grpc.add_CryptoServiceProviderServicer_to_server(service, server)
