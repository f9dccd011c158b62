"""What one owner receives and sends for a round, beyond its ciphertexts, grows as log(n).

Built with the functions the services use (request_to_proto and name_owners for the analyst's
signed request, spec_to_proto + the membership tree for the aggregator's per-owner spec, the
owner's ShareStatement, owner_status for the published result), for 10 to 10,000 named owners.
"""

from __future__ import annotations

import pytest

from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport import membership
from leteo_fed.transport.published import owner_status
from leteo_fed.transport.rounds import (
    common_from_proto,
    request_from_proto,
    request_to_proto,
    spec_to_proto,
    with_membership,
)
from leteo_fed.transport.statements import spec_digest

KEY_BITS = 2048


def sites(n: int) -> list[str]:
    return sorted(f"hospital-{i:05d}.example.org" for i in range(n))


def owner_bytes(n: int) -> dict[str, int]:
    """Serialized sizes of what the first site of an n-owner PCA round gets and signs."""
    invited = sites(n)
    request = request_to_proto(
        "moments", MomentsRequest(method="pca", features=("a", "b", "c")), owners=invited
    )
    request.nonce, request.issued_unix = "n" * 32, 1.7e9
    signed = pb.Signed(body=request.SerializeToString(deterministic=True), signature=b"s" * 72)
    protocol, payload = request_from_proto(request)
    plan = protocol.plan(payload, common_from_proto(request, n))
    rnd = protocol.next_round(plan, protocol.start(plan, "pca-0123456789ab", invited), 1)
    assert rnd.encoding is not None
    tree = membership.levels(invited)
    shared = spec_to_proto(
        "pca-0123456789ab",
        protocol,
        rnd,
        "k" * 32,
        1.7e9,
        rnd.encoding.layout(KEY_BITS),
        plan.min_owners,
        "pca-0123456789ab",
        signed,
        membership.root_of_levels(tree),
        n,
    )
    site = invited[0]  # leaf 0 has a sibling at every level: the longest proof
    spec = with_membership(shared, membership.proof_from_levels(tree, 0))
    proof = membership.Proof(0, tuple(spec.membership.siblings))
    assert membership.verify(site, proof, n, spec.invited_root)
    statement = pb.ShareStatement(
        round_id=spec.round_id,
        site_id=site,
        key_id=spec.key_id,
        protocol=spec.protocol,
        invited_root=spec.invited_root,
        n_invited=spec.n_invited,
        quorum=spec.min_owners,
        n_ciphertexts=spec.n_ciphertexts,
        ciphertext_digest=bytes(32),
        masked=True,
        reveal="blinded",
        spec_digest=spec_digest(spec),
    )
    # the analyst's full status of the finished round, with per-owner lists and timings
    full = pb.RoundStatus(
        round_id=spec.round_id,
        protocol="pca",
        state="COMPLETED",
        invited=invited,
        submitted=invited,
    )
    full.result.pca.owners.extend(invited)
    full.result.pca.declined[invited[0]] = "policy.min_rows"
    full.result.pca.eigenvalues.extend([3.0, 2.0, 1.0])
    for s in invited:
        full.result.pca.timings.owners[s].seconds["encrypt_seconds"] = 0.5
    published = owner_status(full, site)
    assert published.included and published.n_invited == n and published.n_submitted == n
    assert list(published.result.pca.eigenvalues) == [3.0, 2.0, 1.0]
    assert not published.result.pca.owners and not published.result.pca.timings.owners
    return {
        "spec": spec.ByteSize(),
        "statement": statement.ByteSize(),
        "status": published.ByteSize(),
        "full_status": full.ByteSize(),
    }


def test_spec_digest_is_the_same_for_every_owner_of_a_round() -> None:
    invited = sites(5)
    tree = membership.levels(invited)
    base = pb.RoundSpec(round_id="r", invited_root=membership.root_of_levels(tree), n_invited=5)
    digests = {
        spec_digest(with_membership(base, membership.proof_from_levels(tree, i))) for i in range(5)
    }
    assert digests == {spec_digest(base)}
    other = pb.RoundSpec()
    other.CopyFrom(base)
    other.n_invited = 6
    assert spec_digest(other) != spec_digest(base)


@pytest.mark.parametrize("n", [10, 100, 1000, 10_000])
def test_per_owner_bytes_grow_as_log_n(n: int) -> None:
    small, big = owner_bytes(10), owner_bytes(n)
    per_owner = big["spec"] + big["statement"] + big["status"]
    print(f"n={n}: {big}, per owner {per_owner} bytes")
    # one more sibling hash (34 bytes on the wire) per doubling of n, nothing per owner
    doublings = max(0, (n - 1).bit_length() - (10 - 1).bit_length())
    grown = per_owner - (small["spec"] + small["statement"] + small["status"])
    assert grown <= 34 * doublings + 16
    assert big["statement"] - small["statement"] <= 4  # the count's varint
    assert big["status"] - small["status"] <= 4
    if n >= 1000:  # the analyst's full status does grow with n: owners no longer get it
        assert big["full_status"] > 20 * n
