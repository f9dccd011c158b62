"""The one secure-sum path every Paillier protocol uses.

open at the CSP -> homomorphic sum of the owners' shares -> mask -> CSP decrypts -> unblind.

The aggregator sees ciphertexts, its own masks and the unblinded totals; the CSP sees only
masked plaintexts (or, in projection-only mode, the rotated aggregate, never the rotation).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import grpc

from leteo_fed import defaults
from leteo_fed.crypto.paillier import (
    PublicKey,
    add_ciphertexts,
    add_plaintexts,
    bytes_to_int,
    check_ciphertext,
)
from leteo_fed.encoding.packing import SlotLayout, draw_masks, pack_raw, unblind, unpack
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.base import ProjectionQuery, ProjectionReply
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import batches, encoding_to_proto, fetch_public_key


class EncryptedSum:
    """The running homomorphic sum of one round's shares (the round's intake)."""

    def __init__(self, public: PublicKey, layout: SlotLayout, n_values: int) -> None:
        self.public = public
        self.layout = layout
        self.n_ciphertexts = layout.n_ciphertexts(n_values)
        self.aggregate: list[int] | None = None
        self.seconds = 0.0

    def read(self, request_iterator) -> list[int]:
        """The rest of an upload stream: exactly `n_ciphertexts` valid ciphertexts."""
        expected = self.n_ciphertexts
        ciphertexts: list[int] = []
        for msg in request_iterator:
            if msg.WhichOneof("part") != "batch":
                raise ProtocolError("only ciphertext batches may follow the share header")
            for raw in msg.batch.ciphertexts:
                c = bytes_to_int(raw)
                check_ciphertext(self.public, c)
                ciphertexts.append(c)
            if len(ciphertexts) > expected:
                raise DataError(f"share has more than the {expected} ciphertexts it declared")
        if len(ciphertexts) != expected:
            raise ProtocolError(
                f"incomplete share: {len(ciphertexts)} of {expected} ciphertexts arrived"
            )
        return ciphertexts

    def fold(self, ciphertexts: list[int]) -> None:
        start = time.perf_counter()
        if self.aggregate is None:
            self.aggregate = ciphertexts
        else:
            self.aggregate = add_ciphertexts(self.public, self.aggregate, ciphertexts)
        self.seconds += time.perf_counter() - start

    def take(self) -> list[int]:
        """The aggregate, once: nothing of the encrypted sum outlives the round."""
        if self.aggregate is None:
            raise ProtocolError("no share was folded")
        aggregate, self.aggregate = self.aggregate, None
        return aggregate


class SecureSum:
    """The aggregator's side of the CSP: key, round announcements, decryption of blinded sums."""

    def __init__(self, channel: grpc.Channel, address: str, transcript: Path | None) -> None:
        from leteo_fed.proto import leteo_pb2_grpc as pb_grpc

        self._csp = pb_grpc.CryptoServiceProviderStub(channel)
        self._address = address
        self._public: PublicKey | None = None
        self._transcript = transcript
        self._lock = threading.Lock()

    def public_key(self) -> PublicKey:
        if self._public is None:
            self._public = fetch_public_key(self._csp, self._address)
        return self._public

    def open(self, round_id: str, n_ciphertexts: int, mode: str) -> None:
        """Announce a round and its ciphertext count to the CSP."""
        try:
            self._csp.OpenRound(
                pb.CspRoundRequest(
                    round_id=round_id,
                    key_id=self.public_key().key_id,
                    n_ciphertexts=n_ciphertexts,
                    mode=mode,
                ),
                timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS,
            )
        except grpc.RpcError as exc:
            raise PeerUnavailable(
                f"the CSP refused to open the round: {rpc_error_message(exc)}"
            ) from exc

    def reveal(
        self,
        round_id: str,
        aggregate: list[int],
        n_values: int,
        layout: SlotLayout,
        n_owners: int,
        timings: dict[str, float],
    ) -> tuple[list[int], float]:
        """Mask, have the CSP decrypt, unblind: (signed integer totals, CSP decrypt seconds)."""
        public = self.public_key()
        start = time.perf_counter()
        masks = draw_masks(n_values, layout)
        blinded = add_plaintexts(public, aggregate, pack_raw(masks, layout))
        timings["mask_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        plaintexts, csp_seconds = self._decrypt(round_id, blinded)
        timings["csp_round_trip_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        slots = unpack(plaintexts, n_values, layout)
        totals = unblind(slots, masks, n_owners, layout)
        timings["unmask_seconds"] = time.perf_counter() - start
        self.record(round_id, {"mode": "blinded", "aggregate_totals": [str(v) for v in totals]})
        return totals, csp_seconds

    def _decrypt(self, round_id: str, blinded: list[int]) -> tuple[list[int], float]:
        public = self.public_key()

        def requests():
            yield pb.DecryptChunk(
                header=pb.CspRoundRequest(
                    round_id=round_id, key_id=public.key_id, n_ciphertexts=len(blinded)
                )
            )
            for chunk in batches(blinded, public.ciphertext_bytes):
                yield pb.DecryptChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

        plaintexts: list[int] = []
        seconds = 0.0
        try:
            for reply in self._csp.DecryptBlinded(requests(), timeout=defaults.CSP_TIMEOUT_SECONDS):
                plaintexts.extend(bytes_to_int(p) for p in reply.plaintexts)
                seconds = reply.decrypt_seconds
        except grpc.RpcError as exc:
            raise PeerUnavailable(f"CSP decryption failed: {rpc_error_message(exc)}") from exc
        if len(plaintexts) != len(blinded):
            raise ProtocolError(f"the CSP returned {len(plaintexts)} of {len(blinded)} plaintexts")
        return plaintexts, seconds

    def project(
        self,
        round_id: str,
        aggregate: list[int],
        query: ProjectionQuery,
        encoding: ShareEncoding,
        layout: SlotLayout,
        n_owners: int,
        timings: dict[str, float],
    ) -> ProjectionReply:
        """Projection-only rounds: the CSP eigendecomposes the rotated aggregate."""
        public = self.public_key()
        head = pb.ProjectionRequest(
            round_id=round_id,
            key_id=public.key_id,
            method=query.method,
            dimension=query.dimension,
            classes_per_grouping=list(query.classes_per_grouping),
            encoding=encoding_to_proto(encoding, layout),
            n_owners=n_owners,
            components=query.components,
            ridge_noise_floor=query.ridge_noise_floor,
        )
        if query.rho is not None:
            head.rho = query.rho
        if query.rho_prime is not None:
            head.rho_prime = query.rho_prime

        def requests():
            yield pb.ProjectionChunk(header=head)
            for chunk in batches(aggregate, public.ciphertext_bytes):
                yield pb.ProjectionChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

        start = time.perf_counter()
        try:
            reply = self._csp.ComputeProjection(requests(), timeout=defaults.CSP_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            raise PeerUnavailable(f"CSP projection failed: {rpc_error_message(exc)}") from exc
        timings["csp_round_trip_seconds"] = time.perf_counter() - start
        k, d = query.components, query.dimension
        if len(reply.components) != k * d or len(reply.eigenvalues) != k:
            raise ProtocolError("the CSP's projection has the wrong shape")
        result = ProjectionReply(
            eigenvalues=tuple(reply.eigenvalues),
            components=tuple(reply.components),
            explained_variance_ratio=tuple(reply.explained_variance_ratio),
            ridge=dict(reply.ridge),
            compute_seconds=reply.compute_seconds,
        )
        rotated = [list(result.components[i * d : (i + 1) * d]) for i in range(k)]
        self.record(
            round_id,
            {
                "mode": "projection",
                "eigenvalues": list(result.eigenvalues),
                "rotated_components": rotated,
            },
        )
        return result

    def record(self, round_id: str, learned: dict) -> None:
        """Audit transcript of what the aggregator learned in each round."""
        if self._transcript is None:
            return
        with self._lock, open(self._transcript, "a") as out:
            out.write(json.dumps({"round_id": round_id, **learned}) + "\n")
