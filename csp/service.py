"""The crypto service provider: holds the Paillier secret keys, decrypts only verified sums.

Rules it enforces, whatever the aggregator does: only the aggregator (by certificate) may open
rounds and ask for decryption; it decrypts only the sum it computes itself from shares whose
statements are signed by distinct owners (certificates from the owners' CA), all for this round,
at least the quorum those owners signed, each share's ciphertexts matching its signed digest; a
round is decrypted at most once, recorded on disk before decryption, so no share is ever used
in two decryptions, across restarts too. In blinded rounds every share carries its owner's
one-time mask, so the plaintexts it returns are masked sums. The secret keys never leave this
process and are never logged. Keys rotate (csp/keys.py): new rounds use the current key, a
round is decrypted with the key it was opened with, and a retired key decrypts nothing more.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from csp.keys import HeldKey, KeyRing
from csp.projection import check_projection_header
from csp.round_gate import RoundGate
from leteo_fed import __version__, defaults
from leteo_fed.crypto.paillier import (
    PrivateKey,
    bytes_to_int,
    int_to_bytes,
)
from leteo_fed.encoding.packing import remove_masks, slot_totals, unpack
from leteo_fed.errors import ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import discriminant, moments, rotation
from leteo_fed.transport.grpc_io import require_role, rpc_method, rpc_stream_method
from leteo_fed.transport.messages import BATCH_SIZE, encoding_from_proto, public_key_to_proto

log = logging.getLogger("leteo.csp")

PARALLEL_MIN_PER_WORKER = defaults.CSP_MIN_CIPHERTEXTS_PER_WORKER


class CspService(RoundGate[HeldKey], pb_grpc.CryptoServiceProviderServicer):
    modes = ("blinded", "projection")

    def __init__(
        self,
        keys: KeyRing | PrivateKey,
        name: str = "csp",
        transcript: Path | None = None,
        owners_ca: bytes | None = None,
        state_dir: Path | None = None,
        spark_threshold: int = 0,
    ) -> None:
        # every key held (csp/keys.py), each with its decryption pool: all cores for large
        # aggregates; a private key goes only to our own child processes
        if isinstance(keys, PrivateKey):
            keys = KeyRing.single(keys, min_per_worker=PARALLEL_MIN_PER_WORKER)
        super().__init__(keys, owners_ca, state_dir, spark_threshold)
        self._name = name
        self._transcript = transcript
        current = keys.current().public
        log.info("CSP ready: current key %s (%d-bit Paillier)", current.key_id, current.bits)

    def warm_up(self) -> None:
        """Start the current key's decryption workers now rather than on the first large round
        (a key that becomes current later starts its own on its first large round)."""
        try:
            self._keys.current().pool.start()
        except Exception:  # never fatal: decryption falls back to this process
            log.exception("could not start decryption workers; decrypting in-process")

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(party=self._name, role="csp", version=__version__, status="SERVING")

    @rpc_method
    def GetPublicKey(self, request, context):
        require_role(context, "owner", "aggregator", "analyst")
        # no key_id: the current key, re-read if a rotation replaced it; else a held key by id
        held = self._keys.held(request.key_id) if request.key_id else self._keys.current()
        return public_key_to_proto(held.public)

    @rpc_method
    def OpenRound(self, request, context):
        caller = require_role(context, "aggregator")
        return self.open_round(request, caller.name)

    @rpc_stream_method
    def DecryptBlinded(self, request_iterator, context) -> Iterator[pb.PlaintextBatch]:
        require_role(context, "aggregator")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("DecryptBlinded must start with a header naming the round")
        round_id = first.header.round_id
        entry = self.claim(round_id, "blinded", first.header.key_id or None)
        summed = self.verified_sum(round_id, entry, request_iterator, list(first.header.invited))
        start = time.perf_counter()
        plaintexts = summed.key.pool.decrypt_many(summed.ciphertexts)
        self.settle_opened(round_id, summed.contributors)
        seconds = time.perf_counter() - start
        self.metrics.decrypted("blinded", summed.verify_seconds, seconds)
        log.info(
            "round %s: decrypted %d masked ciphertexts in %.3f s",
            round_id,
            len(plaintexts),
            seconds,
        )
        self._record(round_id, "blinded", plaintexts)
        width = summed.key.public.plaintext_bytes
        for i in range(0, len(plaintexts), BATCH_SIZE):
            chunk = [int_to_bytes(p, width) for p in plaintexts[i : i + BATCH_SIZE]]
            yield pb.PlaintextBatch(
                plaintexts=chunk,
                decrypt_seconds=seconds,
                verify_seconds=summed.verify_seconds,
                sum_seconds=summed.sum_seconds,
                contributors=summed.contributors,
            )

    @rpc_method
    def ComputeProjection(self, request_iterator, context) -> pb.ProjectionResult:
        """Projection-only rounds: the aggregate is rotated by a matrix the CSP never sees."""
        require_role(context, "aggregator")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("ComputeProjection must start with a header naming the round")
        head = first.header
        check_projection_header(head, self._keys.held(head.key_id).public.bits)  # unclaimed yet
        entry = self.claim(head.round_id, "projection", head.key_id)
        summed = self.verified_sum(head.round_id, entry, request_iterator, list(head.invited))
        n_owners = len(summed.contributors)  # verified signers, not the aggregator's count
        start = time.perf_counter()
        enc, layout = encoding_from_proto(head.encoding, summed.key.public.bits)
        if enc.rotation_dimension != head.dimension:
            raise ProtocolError("projection rounds need a rotated encoding of the same dimension")
        groupings = rotation.placeholder_groupings(list(head.classes_per_grouping))
        n_values = moments.n_values(head.dimension, groupings)
        if layout.n_ciphertexts(n_values) != len(summed.ciphertexts):
            raise ProtocolError(
                f"{len(summed.ciphertexts)} ciphertexts do not hold {n_values} values"
            )
        decrypt_start = time.perf_counter()
        plaintexts = summed.key.pool.decrypt_many(summed.ciphertexts)
        self.settle_opened(head.round_id, summed.contributors)
        decrypt_seconds = time.perf_counter() - decrypt_start
        self.metrics.decrypted("projection", summed.verify_seconds, decrypt_seconds)
        if len(head.mask_sums) != len(plaintexts):
            raise ProtocolError(
                f"{len(head.mask_sums)} mask sums for {len(plaintexts)} ciphertexts"
            )
        # a wrong mask sum only yields an out-of-range (refused) or wrong rotated aggregate
        packed = remove_masks(plaintexts, [bytes_to_int(m) for m in head.mask_sums], layout)
        self._record(head.round_id, "projection", packed)  # what it learns: the rotated sum
        totals = slot_totals(unpack(packed, n_values, layout), n_owners, layout)
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
            n_owners,
            seconds,
        )
        return pb.ProjectionResult(
            eigenvalues=evals,
            components=comps.ravel().tolist(),
            explained_variance_ratio=evr,
            ridge=used,
            compute_seconds=seconds,
            verify_seconds=summed.verify_seconds,
            sum_seconds=summed.sum_seconds,
            contributors=summed.contributors,
        )

    @rpc_method
    def WithdrawRound(self, request, context):
        caller = require_role(context, "owner")
        return self.withdraw_round(request, caller.name)

    def _record(self, round_id: str, mode: str, plaintexts: list[int]) -> None:
        """Audit transcript of everything the CSP decrypted (blinded, or rotated aggregates)."""
        if self._transcript is None:
            return
        record = {"round_id": round_id, "mode": mode, "plaintexts": [hex(p) for p in plaintexts]}
        with self._lock, open(self._transcript, "a") as out:
            out.write(json.dumps(record) + "\n")


def add_to_server(server: grpc.Server, service: CspService) -> None:
    pb_grpc.add_CryptoServiceProviderServicer_to_server(service, server)
