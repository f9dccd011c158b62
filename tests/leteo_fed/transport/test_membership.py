"""The invited set's Merkle root and membership proofs."""

from __future__ import annotations

import pytest

from leteo_fed.errors import ProtocolError
from leteo_fed.transport import membership as m


def sites(n: int) -> list[str]:
    return sorted(f"site-{i:05d}" for i in range(n))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 9, 33, 100])
def test_every_member_proves_membership_and_proofs_are_log_size(n: int) -> None:
    s = sites(n)
    tree = m.levels(s)
    r = m.root_of_levels(tree)
    assert r == m.root(s)
    for i, site in enumerate(s):
        proof = m.proof_from_levels(tree, i)
        assert proof == m.prove(s, site)
        assert len(proof.siblings) <= max(1, (n - 1).bit_length())
        assert m.verify(site, proof, n, r)


def test_single_site_has_an_empty_proof_and_its_own_root() -> None:
    proof = m.prove(["a"], "a")
    assert proof == m.Proof(0, ())
    assert m.verify("a", proof, 1, m.root(["a"]))
    assert not m.verify("b", proof, 1, m.root(["a"]))
    assert m.root(["a"]) != m.leaf_hash("a")


def test_a_non_member_or_wrong_index_does_not_verify() -> None:
    s = sites(9)
    r = m.root(s)
    proof = m.prove(s, s[4])
    assert not m.verify("site-99999", proof, 9, r)
    for index in (3, 5, 8, 9, -1):
        assert not m.verify(s[4], m.Proof(index, proof.siblings), 9, r)


@pytest.mark.parametrize("n", [2, 7, 8, 9])
def test_the_count_is_bound_into_the_root(n: int) -> None:
    s = sites(n)
    r = m.root(s)
    proof = m.prove(s, s[0])
    for wrong in (n - 1, n + 1, 2 * n, 0):
        assert not m.verify(s[0], proof, wrong, r)


def test_forged_missing_or_extra_siblings_do_not_verify() -> None:
    s = sites(10)
    r = m.root(s)
    proof = m.prove(s, s[6])
    for k in range(len(proof.siblings)):
        forged = list(proof.siblings)
        forged[k] = bytes(32)
        assert not m.verify(s[6], m.Proof(6, tuple(forged)), 10, r)
    assert not m.verify(s[6], m.Proof(6, proof.siblings[:-1]), 10, r)
    assert not m.verify(s[6], m.Proof(6, proof.siblings + (bytes(32),)), 10, r)
    assert not m.verify(s[6], m.Proof(6, (b"short",) + proof.siblings[1:]), 10, r)
    assert not m.verify(s[6], proof, 10, r[:16])


def test_roots_differ_for_other_sets_and_a_subtree_is_no_root() -> None:
    s = sites(8)
    assert m.root(s) != m.root(s[:7])
    assert m.root(s) != m.root([*s[:7], "site-99999"])
    tree = m.levels(s)
    # the unsealed top of the tree is not its root, and an inner node is no leaf
    assert tree[-1][0] != m.root(s)
    assert m.leaf_hash(s[0]) not in tree[1]


@pytest.mark.parametrize("bad", [[], ["b", "a"], ["a", "a"], ["a", "b", "b"], ["", "a"]], ids=str)
def test_unsorted_duplicate_or_empty_sets_are_refused(bad: list[str]) -> None:
    with pytest.raises(ProtocolError):
        m.root(bad)


def test_prove_refuses_a_non_member() -> None:
    with pytest.raises(ProtocolError, match="not in the invited set"):
        m.prove(sites(3), "elsewhere")
