"""What every way of decrypting a round's sum shares, on the aggregator's side.

A round's shares are decrypted by whoever holds the secret key: one CSP (`secure_sum.SecureSum`)
or t of m key holders (`threshold_sum.ThresholdSecureSum`). Either is given the same stream
(header, then each share's signed statement and ciphertexts), verifies and sums the shares
itself, and has its gRPC refusals told apart from outages the same way. Once the masked sum's
plaintexts are known, the aggregator removes the owners' masks (from their seeds), decodes the
slot totals and records what it learned, the same way whoever decrypted.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc

from leteo_fed.crypto.paillier import PublicKey
from leteo_fed.encoding.packing import (
    SlotLayout,
    masks_from_seed,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import LeteoError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.round_types import ProjectionQuery, ProjectionReply
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import batches

# statuses with which a reachable key service refuses a request (an oversized round, say)
REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)
MODES = ("blinded", "projection")


@dataclass
class Share:
    """One owner's upload, held until the round is revealed (one per owner, never summed here)."""

    site: str
    statement: pb.Signed  # relayed to the key service as signed
    claims: pb.ShareStatement  # its parsed body
    mask_seed: bytes
    ciphertexts: list[int]


def share_stream(chunk_type, header, shares: list[Share], width: int) -> Iterator:
    """Header, then every share's signed statement and ciphertexts, as a CSP or a key holder
    reads them (`chunk_type`: pb.DecryptChunk or pb.ProjectionChunk)."""
    yield chunk_type(header=header)
    for share in shares:
        yield chunk_type(share=share.statement)
        for chunk in batches(share.ciphertexts, width):
            yield chunk_type(batch=pb.CiphertextBatch(ciphertexts=chunk))


def rpc_failure(exc: grpc.RpcError, what: str, who: str) -> LeteoError:
    """A failed call to the key service `who` as the error the round fails with: a refusal of
    a service that is up is a ProtocolError; an outage, or a service that restarted and forgot
    the round's opening, is PeerUnavailable (the job then waits for it and runs the round
    again)."""
    message = rpc_error_message(exc)
    details = exc.details() if hasattr(exc, "details") else ""
    if exc.code() == grpc.StatusCode.NOT_FOUND and "never opened" in (details or ""):
        return PeerUnavailable(f"{what} failed: {message} ({who} restarted?)")
    if exc.code() in REFUSALS:
        return ProtocolError(f"{what} refused: {message}")
    return PeerUnavailable(f"{what} failed: {message}")


def same_contributors(contributors, shares: list[Share]) -> bool:
    """Whether the key service summed exactly the shares sent (by their signers)."""
    return sorted(contributors) == sorted(s.site for s in shares)


def mask_sums(shares: list[Share], n_ciphertexts: int, layout: SlotLayout) -> list[int]:
    """Per ciphertext, the sum of the shares' one-time masks (re-derived from their seeds)."""
    total = [0] * n_ciphertexts
    for share in shares:
        own = masks_from_seed(share.mask_seed, n_ciphertexts, layout)
        total = [a + b for a, b in zip(total, own, strict=True)]
    return total


class Revealer(ABC):
    """The aggregator's side of whoever holds the secret key: its public key, round
    announcements, and the decryption of a round's verified, masked sum."""

    def __init__(self, transcript: Path | None) -> None:
        self._transcript = transcript
        self._lock = threading.Lock()

    def check_mode(self, mode: str) -> None:
        """Refuse, before anything is opened, a reveal mode this key service cannot serve."""
        if mode not in MODES:
            raise ProtocolError(f"unknown reveal mode {mode!r}; expected one of {MODES}")

    @abstractmethod
    def public_key(self, key_id: str = "") -> PublicKey:
        """The current key (asked at every round opening: a rotation takes effect with the
        next round), or with `key_id` that key."""

    @abstractmethod
    def open(self, round_id: str, key_id: str, n_ciphertexts: int, mode: str) -> None:
        """Announce a round, its key and its ciphertext count."""

    @abstractmethod
    def reveal(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        n_values: int,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> tuple[list[int], dict[str, float]]:
        """(signed integer totals, the key service's timings)."""

    @abstractmethod
    def project(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        query: ProjectionQuery,
        encoding: ShareEncoding,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> ProjectionReply:
        """Projection-only rounds: directions of the rotated aggregate."""

    @abstractmethod
    def close(self) -> None:
        """Close the channels to the key service."""

    def unmask(
        self,
        round_id: str,
        plaintexts: list[int],
        shares: list[Share],
        n_values: int,
        layout: SlotLayout,
        timings: dict[str, float],
    ) -> list[int]:
        """The round's totals from its masked sum's plaintexts: the owners' masks removed,
        the slots decoded; recorded in the transcript."""
        start = time.perf_counter()
        packed = remove_masks(plaintexts, mask_sums(shares, len(plaintexts), layout), layout)
        totals = slot_totals(unpack(packed, n_values, layout), len(shares), layout)
        timings["unmask_seconds"] = time.perf_counter() - start
        self.record(round_id, {"mode": "blinded", "aggregate_totals": [str(v) for v in totals]})
        return totals

    def record(self, round_id: str, learned: dict) -> None:
        """Audit transcript of what the aggregator learned in each round."""
        if self._transcript is None:
            return
        with self._lock, open(self._transcript, "a") as out:
            out.write(json.dumps({"round_id": round_id, **learned}) + "\n")
