"""What an owner signs about its share, and the checks every receiver makes of it.

The CSP is the party that must not be talked into decrypting one site's share: it decrypts
only the sum of the shares of one round, signed by at least the round's quorum of distinct
invited owners, with every statement agreeing on the round, down to the digest of the whole
round spec each owner was sent (`spec_digest`). A statement names the invited set by its Merkle
root and size (`membership`): the receiver is given the list once per round, recomputes its
root, and requires every statement's signed root to equal it and its site to be in it. The
aggregator runs the same checks on arrival only to refuse a bad share early; the CSP's are the
ones that count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from leteo_fed.crypto.paillier import int_to_bytes
from leteo_fed.errors import AccessDenied, DataError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport import membership
from leteo_fed.transport.signing import SHARE_STATEMENT, Signer, verify

SPEC_DIGEST_BYTES = 32  # SHA-256


def ciphertext_digest(ciphertexts: Sequence[int], width: int) -> bytes:
    """SHA-256 over the ciphertexts, each as `width` big-endian bytes."""
    h = hashlib.sha256()
    for c in ciphertexts:
        h.update(int_to_bytes(c, width))
    return h.digest()


def spec_digest(spec: pb.RoundSpec) -> bytes:
    """SHA-256 of the RoundSpec as an owner received it (deterministic serialization), but for
    its own membership proof, the one field that differs between the owners of a round: signed
    in its statement, so the CSP sees whether every owner was sent the same round."""
    if spec.HasField("membership"):
        spec = shared_spec(spec)
    return hashlib.sha256(spec.SerializeToString(deterministic=True)).digest()


def shared_spec(spec: pb.RoundSpec) -> pb.RoundSpec:
    """A copy of the spec without the owner's membership proof: what every owner shares."""
    out = pb.RoundSpec()
    out.CopyFrom(spec)
    out.ClearField("membership")
    return out


def sign_statement(statement: pb.ShareStatement, signer: Signer | None) -> pb.Signed:
    """The owner's signed statement; unsigned only in insecure mode (nothing is authenticated
    there anyway)."""
    body = statement.SerializeToString(deterministic=True)
    if signer is None:
        return pb.Signed(body=body)
    return signer.sign(body, SHARE_STATEMENT)


def read_statement(signed: pb.Signed, owners_ca: bytes | None) -> pb.ShareStatement:
    """The statement, its signature checked against the owners' CA (with TLS) and its signer's
    certificate name equal to its site_id."""
    statement = pb.ShareStatement()
    try:
        statement.ParseFromString(signed.body)
    except DecodeError as exc:
        raise DataError("a share's signed statement is not a ShareStatement") from exc
    if owners_ca is not None:
        signer = verify(signed, SHARE_STATEMENT, owners_ca, "owner", "a share statement")
        if signer.name != statement.site_id:
            raise AccessDenied(
                f"the share statement for site '{statement.site_id}' is signed by '{signer.name}'"
            )
    if not statement.site_id:
        raise DataError("a share statement names no site")
    return statement


@dataclass
class RoundShares:
    """The statements of one round's shares as they arrive, checked against each other.

    `round_id`, `key_id`, `n_ciphertexts` and `reveal` come from the receiver's own view of the
    round, `invited` from the aggregator (sorted, distinct: its root is what every statement
    must have signed); quorum and protocol from the first statement, which every other one
    must repeat (an owner refuses an invitation whose quorum or invited set breaks its policy,
    so these are what the owners agreed to)."""

    round_id: str
    key_id: str
    n_ciphertexts: int
    reveal: str = "blinded"  # the mode the round was opened in at the CSP
    invited: Any = ()  # the round's invited site ids, as the relaying party states them
    first: pb.ShareStatement | None = None
    sites: list[str] = field(default_factory=list)
    invited_root: bytes = b""
    members: frozenset[str] = frozenset()
    counted: set[str] = field(default_factory=set)  # `sites` as a set: no scan per share

    def __post_init__(self) -> None:
        try:
            self.invited = membership.check_sites(self.invited)
        except ProtocolError as exc:
            raise ProtocolError(f"round {self.round_id}: {exc}") from exc
        self.invited_root = membership.root(self.invited)
        self.members = frozenset(self.invited)

    def admit(self, s: pb.ShareStatement) -> None:
        """Count this statement's share, if it fits the round and the shares counted so far."""
        self.check(s)
        if self.first is None:
            self.first = s
        self.sites.append(s.site_id)
        self.counted.add(s.site_id)

    def check(self, s: pb.ShareStatement) -> None:
        where = f"share from '{s.site_id}' in round {self.round_id}"
        if s.round_id != self.round_id:
            raise ProtocolError(f"{where} was signed for round {s.round_id!r}: refused (replay)")
        if s.key_id != self.key_id:
            raise ProtocolError(f"{where} is under key {s.key_id}, not {self.key_id}")
        if s.n_ciphertexts != self.n_ciphertexts:
            raise ProtocolError(
                f"{where} declares {s.n_ciphertexts} ciphertexts, the round has "
                f"{self.n_ciphertexts}"
            )
        if not s.masked:
            raise ProtocolError(f"{where} is not masked by its owner: refused")
        if s.reveal != self.reveal:
            raise ProtocolError(
                f"{where} was signed for a {s.reveal or 'unstated'} reveal, not {self.reveal}: "
                "refused"
            )
        if len(s.spec_digest) != SPEC_DIGEST_BYTES:
            raise ProtocolError(f"{where} names no digest of the round it was sent: refused")
        if s.site_id in self.counted:
            raise ProtocolError(f"{where}: this site's share was already counted")
        if self.first is not None:
            same = (s.protocol, s.invited_root, s.n_invited, s.quorum)
            first = self.first
            agreed = (first.protocol, first.invited_root, first.n_invited, first.quorum)
            if same != agreed:
                raise ProtocolError(
                    f"{where} disagrees with the round's other shares on the protocol, the "
                    "invited owners or the quorum"
                )
            if s.spec_digest != self.first.spec_digest:
                # one owner was sent another round than the others: its share could be separated
                raise ProtocolError(
                    f"{where} was computed for another round spec than the round's other "
                    "shares: refused"
                )
        # after the agreement checks, so a split view is named as such; the first statement
        # is held to the list the receiver was given
        if s.invited_root != self.invited_root or s.n_invited != len(self.invited):
            raise ProtocolError(
                f"{where}: the invited set it signed is not the round's invited set"
            )
        if s.site_id not in self.members:
            raise ProtocolError(f"{where}: the site is not in the invited set it signed")
        if s.quorum < 1 or s.quorum > s.n_invited:
            raise ProtocolError(f"{where}: quorum {s.quorum} for {s.n_invited} invited")

    def require_quorum(self) -> None:
        if self.first is None:
            raise ProtocolError(f"round {self.round_id}: no share was sent")
        if len(self.sites) < self.first.quorum:
            raise ProtocolError(
                f"round {self.round_id}: {len(self.sites)} distinct owner share(s), the owners "
                f"signed a quorum of {self.first.quorum}: refused"
            )


def check_digest(statement: pb.ShareStatement, ciphertexts: Sequence[int], width: int) -> None:
    if ciphertext_digest(ciphertexts, width) != statement.ciphertext_digest:
        raise ProtocolError(
            f"the ciphertexts of the share from '{statement.site_id}' do not match the digest "
            "its owner signed"
        )
