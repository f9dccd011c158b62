"""Share statements: what the CSP accepts as a round's shares and everything it refuses.

Real certificates (an owners' CA from `create_pki`, a rogue CA beside it) and real ECDSA
signatures; the checks are the pure functions the CSP and the aggregator both call."""

from __future__ import annotations

from pathlib import Path

import pytest

from leteo_fed.errors import AccessDenied, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport import membership
from leteo_fed.transport.certs import create_pki
from leteo_fed.transport.signing import ROUND_REQUEST, SHARE_STATEMENT, Signer
from leteo_fed.transport.statements import (
    RoundShares,
    check_digest,
    ciphertext_digest,
    read_statement,
    sign_statement,
)

SITES = ["site-1", "site-2", "site-3"]
WIDTH = 8


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> tuple[dict[str, Signer], bytes, Signer]:
    good = tmp_path_factory.mktemp("pki")
    create_pki(good, SITES)
    rogue = tmp_path_factory.mktemp("rogue")
    create_pki(rogue, ["site-1"])

    def signer(folder: Path, name: str) -> Signer:
        return Signer.from_pem(
            (folder / f"{name}.crt").read_bytes(), (folder / f"{name}.key").read_bytes()
        )

    owners_ca = (good / "owners-ca.crt") if (good / "owners-ca.crt").exists() else good / "ca.crt"
    signers = {s: signer(good, s) for s in SITES} | {"aggregator": signer(good, "aggregator")}
    return signers, owners_ca.read_bytes(), signer(rogue, "site-1")


def statement(site: str, **over) -> pb.ShareStatement:
    fields = dict(
        round_id="pca-1",
        site_id=site,
        key_id="k1",
        protocol="pca",
        invited_root=membership.root(SITES),
        n_invited=len(SITES),
        quorum=3,
        n_ciphertexts=2,
        ciphertext_digest=ciphertext_digest([1, 2], WIDTH),
        masked=True,
        reveal="blinded",
        spec_digest=bytes(32),
    )
    fields.update(over)
    return pb.ShareStatement(**fields)


def round_shares(invited: list[str] = SITES) -> RoundShares:
    """The receiver's view of the round: the invited list it was given beside the shares."""
    return RoundShares("pca-1", "k1", 2, invited=invited)


def test_honest_round_is_admitted_and_meets_its_quorum(pki) -> None:
    signers, ca, _ = pki
    shares = round_shares()
    for site in SITES:
        claims = read_statement(sign_statement(statement(site), signers[site]), ca)
        shares.admit(claims)
        check_digest(claims, [1, 2], WIDTH)
    shares.require_quorum()
    assert shares.sites == SITES


def test_fewer_shares_than_the_signed_quorum_are_refused(pki) -> None:
    signers, ca, _ = pki
    shares = round_shares()
    shares.admit(read_statement(sign_statement(statement("site-1"), signers["site-1"]), ca))
    with pytest.raises(ProtocolError, match="1 distinct owner share.*quorum of 3"):
        shares.require_quorum()
    with pytest.raises(ProtocolError, match="no share"):
        round_shares().require_quorum()


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"round_id": "pca-0"}, "signed for round 'pca-0'.*replay"),
        ({"key_id": "k0"}, "under key k0"),
        ({"n_ciphertexts": 3}, "declares 3 ciphertexts"),
        ({"masked": False}, "not masked by its owner"),
        ({"reveal": "projection"}, "signed for a projection reveal, not blinded"),
        ({"reveal": ""}, "unstated reveal"),
        # a root of another set, the right root under another count (an inflated n_invited)
        (
            {"invited_root": membership.root(["site-1", "site-2"]), "quorum": 2},
            "not the round's invited set",
        ),
        ({"n_invited": 4}, "not the round's invited set"),
        ({"invited_root": b""}, "not the round's invited set"),
        ({"quorum": 0}, "quorum 0"),
        ({"quorum": 4}, "quorum 4"),
    ],
)
def test_a_statement_not_for_this_round_is_refused(pki, over, message) -> None:
    signers, ca, _ = pki
    claims = read_statement(sign_statement(statement("site-1", **over), signers["site-1"]), ca)
    with pytest.raises(ProtocolError, match=message):
        round_shares().admit(claims)


def test_a_site_outside_the_list_or_a_list_not_matching_the_root_is_refused(pki) -> None:
    signers, ca, _ = pki
    others = ["site-2", "site-3"]
    outside = statement("site-1", invited_root=membership.root(others), n_invited=2, quorum=2)
    claims = read_statement(sign_statement(outside, signers["site-1"]), ca)
    with pytest.raises(ProtocolError, match="not in the invited set it signed"):
        round_shares(others).admit(claims)
    # the relaying party hands over a list other than the one the owners signed the root of
    honest = read_statement(sign_statement(statement("site-1"), signers["site-1"]), ca)
    for listed in (["site-1", "site-2"], [*SITES, "site-4"], ["site-1", "site-2", "site-x"]):
        with pytest.raises(ProtocolError, match="not the round's invited set"):
            round_shares(listed).admit(honest)
    # a list that is not a set (unsorted, repeated, empty) is refused before any share
    for bad in (["site-2", "site-1", "site-3"], ["site-1", "site-1", "site-2"], []):
        with pytest.raises(ProtocolError, match="invited set"):
            round_shares(bad)


def test_statements_must_agree_and_each_site_counts_once(pki) -> None:
    signers, ca, _ = pki
    shares = round_shares()
    shares.admit(read_statement(sign_statement(statement("site-1"), signers["site-1"]), ca))
    again = read_statement(sign_statement(statement("site-1"), signers["site-1"]), ca)
    with pytest.raises(ProtocolError, match="already counted"):
        shares.admit(again)
    lower = statement("site-2", quorum=2)  # a weaker quorum than the other owners signed
    with pytest.raises(ProtocolError, match="disagrees"):
        shares.admit(read_statement(sign_statement(lower, signers["site-2"]), ca))


def test_forged_unsigned_or_tampered_statements_are_refused(pki) -> None:
    signers, ca, rogue = pki
    body = statement("site-1")
    with pytest.raises(AccessDenied, match="not signed"):
        read_statement(sign_statement(body, None), ca)
    with pytest.raises(AccessDenied, match="not issued by the owners' certificate authority"):
        read_statement(sign_statement(body, rogue), ca)
    # the aggregator's own certificate cannot vouch for a site
    with pytest.raises(AccessDenied):
        read_statement(sign_statement(statement("aggregator"), signers["aggregator"]), ca)
    # another owner's signature on site-1's statement
    with pytest.raises(AccessDenied, match="signed by 'site-2'"):
        read_statement(sign_statement(body, signers["site-2"]), ca)
    # one changed byte of the body
    signed = sign_statement(body, signers["site-1"])
    tampered = pb.Signed()
    tampered.CopyFrom(signed)
    tampered.body = statement("site-1", quorum=2).SerializeToString(deterministic=True)
    with pytest.raises(AccessDenied, match="does not match"):
        read_statement(tampered, ca)
    # a signature made for another purpose (a round request) never verifies as a statement
    other = signers["site-1"].sign(body.SerializeToString(deterministic=True), ROUND_REQUEST)
    with pytest.raises(AccessDenied, match="does not match"):
        read_statement(other, ca)
    assert SHARE_STATEMENT != ROUND_REQUEST


def test_ciphertexts_must_match_the_signed_digest(pki) -> None:
    claims = statement("site-1")
    check_digest(claims, [1, 2], WIDTH)
    with pytest.raises(ProtocolError, match="do not match the digest"):
        check_digest(claims, [1, 3], WIDTH)
    with pytest.raises(ProtocolError, match="do not match the digest"):
        check_digest(claims, [2, 1], WIDTH)  # order matters: slots are positional
