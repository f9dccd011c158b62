"""A key holder: one share of a threshold key; it partially decrypts only verified sums.

It enforces what the CSP enforces, whatever the aggregator does (csp/round_gate.py): only the
aggregator may open rounds and ask for decryption; it opens only the sum it computes itself
from shares signed by distinct owners, all for this round, at least the quorum they signed,
each matching its signed digest; a round is opened at most once, recorded on disk first.
Then, where the CSP decrypts, a holder returns c^(2 m! s_i) mod n^2 for every ciphertext c of
that sum, and one proof that it used its real share s_i (leteo_fed/crypto/threshold.py).

What a holder learns: the masked shares and their sum, as ciphertexts; nothing decrypted. Its
partial decryptions reveal nothing until t of them are combined, and the combined plaintexts
are the owners' masked sums, which only the aggregator can unmask. Its share never leaves this
process and is never logged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import grpc

from csp.keys import HeldShare, ShareRing
from csp.round_gate import RoundGate
from leteo_fed import __version__
from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import int_to_bytes
from leteo_fed.crypto.threshold import KeyShare
from leteo_fed.errors import ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import require_role, rpc_method, rpc_stream_method
from leteo_fed.transport.messages import BATCH_SIZE, proof_to_proto, threshold_key_to_proto
from leteo_fed.transport.statements import ciphertext_digest

log = logging.getLogger("leteo.keyholder")


class KeyHolderService(RoundGate[HeldShare], pb_grpc.KeyHolderServicer):
    party = "key holder"

    def __init__(
        self,
        keys: ShareRing | KeyShare,
        name: str = "keyholder",
        owners_ca: bytes | None = None,
        state_dir: Path | None = None,
        spark_threshold: int = 0,
        threads: int | None = None,
    ) -> None:
        if isinstance(keys, KeyShare):
            keys = ShareRing(None, key=keys)
        super().__init__(keys, owners_ca, state_dir, spark_threshold)
        self._name = name
        self._threads = threads or os.cpu_count() or 1
        current = keys.current().share
        log.info(
            "key holder %d of %d ready: current key %s (%d-bit, any %d decrypt)",
            current.index,
            current.key.holders,
            current.key.key_id,
            current.key.public.bits,
            current.key.threshold,
        )

    def unknown_mode(self, mode: str) -> str:
        if mode == "projection":
            return (
                "projection-only rounds need a single CSP: with a threshold key the combiner "
                "would see the rotated aggregate (use blinded rounds)"
            )
        return super().unknown_mode(mode)

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(
            party=self._name, role="keyholder", version=__version__, status="SERVING"
        )

    @rpc_method
    def GetPublicKey(self, request, context):
        require_role(context, "owner", "aggregator", "analyst")
        held = self._keys.held(request.key_id) if request.key_id else self._keys.current()
        return threshold_key_to_proto(held.share.key, held.share.index)

    @rpc_method
    def OpenRound(self, request, context):
        caller = require_role(context, "aggregator")
        return self.open_round(request, caller.name)

    @rpc_stream_method
    def PartialDecrypt(self, request_iterator, context) -> Iterator[pb.PartialDecryptionBatch]:
        require_role(context, "aggregator")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("PartialDecrypt must start with a header naming the round")
        head = first.header
        entry = self.claim(head.round_id, "blinded", head.key_id or None)
        summed = self.verified_sum(head.round_id, entry, request_iterator, list(head.invited))
        share = summed.key.share
        start = time.perf_counter()
        partials = threshold.partial_decrypt(share, summed.ciphertexts, self._threads)
        partial_seconds = time.perf_counter() - start
        # recorded before anything leaves: a holder that returns restarts knowing it opened
        self.settle_opened(head.round_id, summed.contributors)
        start = time.perf_counter()
        context_bytes = threshold.proof_context(head.round_id, share.key.key_id)
        proof = threshold.prove(share, summed.ciphertexts, partials, context_bytes)
        prove_seconds = time.perf_counter() - start
        self.metrics.decrypted("partial", summed.verify_seconds, partial_seconds + prove_seconds)
        log.info(
            "round %s: %d partial decryptions in %.3f s and their proof in %.3f s (shares of %d "
            "owners)",
            head.round_id,
            len(partials),
            partial_seconds,
            prove_seconds,
            len(summed.contributors),
        )
        width = share.key.public.ciphertext_bytes
        for i in range(0, len(partials), BATCH_SIZE):
            batch = pb.PartialDecryptionBatch(
                partials=[int_to_bytes(p, width) for p in partials[i : i + BATCH_SIZE]],
                index=share.index,
            )
            if i + BATCH_SIZE >= len(partials):  # the last batch carries the proof
                proof_to_proto(proof, batch)
                batch.sum_digest = ciphertext_digest(summed.ciphertexts, width)
                batch.partial_seconds = partial_seconds
                batch.prove_seconds = prove_seconds
                batch.verify_seconds = summed.verify_seconds
                batch.sum_seconds = summed.sum_seconds
                batch.contributors.extend(summed.contributors)
            yield batch

    @rpc_method
    def WithdrawRound(self, request, context):
        caller = require_role(context, "owner")
        return self.withdraw_round(request, caller.name)


def add_to_server(server: grpc.Server, service: KeyHolderService) -> None:
    pb_grpc.add_KeyHolderServicer_to_server(service, server)
