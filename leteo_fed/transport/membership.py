"""A round's invited set as a Merkle root: constant-size commitments and log-size proofs.

With thousands of sites, sending every owner the whole invited list (in its RoundSpec, its
signed ShareStatement and the analyst's signed request) makes a round's bytes grow with the
square of the number of owners. Instead every party names the set by `root(sites)`: a SHA-256
Merkle tree over the sorted, distinct site ids, with the number of leaves bound into the root,
so a root fixes both the members and their count. An owner checks its own membership with a
proof of about log2(n) hashes; the CSP, which receives the list once per round, recomputes the
root and so checks every share's site against exactly the set the owners signed.

Hashes are domain-separated (leaf, inner node, root each with its own tag) so a leaf can never
be passed off as a node or a subtree as a root. A level of odd width promotes its last node
unchanged; the verifier replays the same shape from the index and the count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from leteo_fed.errors import ProtocolError

ROOT_BYTES = 32  # SHA-256
MAX_DEPTH = 64  # more siblings than any 2^64-leaf tree has: refused before any hashing
_LEAF = b"leteo-fed/members/leaf\x00"
_NODE = b"leteo-fed/members/node\x00"
_ROOT = b"leteo-fed/members/root\x00"


@dataclass(frozen=True)
class Proof:
    """Where one site sits among the `n` leaves and the sibling hashes from leaf to top."""

    index: int
    siblings: tuple[bytes, ...]


def leaf_hash(site_id: str) -> bytes:
    return hashlib.sha256(_LEAF + site_id.encode("utf-8")).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def _seal(top: bytes, n: int) -> bytes:
    """The root: the tree's top bound to its leaf count, so the same tree under another count
    (an inflated `n_invited`) never verifies."""
    return hashlib.sha256(_ROOT + n.to_bytes(8, "big") + top).digest()


def check_sites(sites: Sequence[str]) -> list[str]:
    """The sites as a committed set must be: non-empty, sorted and distinct (one leaf each, so a
    site cannot be counted twice towards a quorum). ProtocolError otherwise."""
    out = list(sites)
    if not out:
        raise ProtocolError("an invited set must name at least one site")
    if any(not s for s in out):
        raise ProtocolError("an invited set names an empty site id")
    if any(a >= b for a, b in zip(out, out[1:], strict=False)):
        raise ProtocolError("an invited set must be sorted and name every site once")
    return out


def levels(sites: Sequence[str]) -> list[list[bytes]]:
    """Every level of the tree, leaves first, top last (a single hash)."""
    level = [leaf_hash(s) for s in check_sites(sites)]
    out = [level]
    while len(level) > 1:
        nxt = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])  # the odd one out goes up unchanged
        out.append(nxt)
        level = nxt
    return out


def root_of_levels(tree: list[list[bytes]]) -> bytes:
    return _seal(tree[-1][0], len(tree[0]))


def root(sites: Sequence[str]) -> bytes:
    """The commitment to a sorted, distinct set of site ids and its size."""
    return root_of_levels(levels(sites))


def proof_from_levels(tree: list[list[bytes]], index: int) -> Proof:
    """The proof for the leaf at `index` (the tree built once for a whole round)."""
    if not 0 <= index < len(tree[0]):
        raise ProtocolError(f"no leaf {index} among {len(tree[0])}")
    siblings: list[bytes] = []
    i = index
    for level in tree[:-1]:
        j = i ^ 1
        if j < len(level):
            siblings.append(level[j])
        i //= 2
    return Proof(index, tuple(siblings))


def prove(sites: Sequence[str], site_id: str) -> Proof:
    """The proof that `site_id` is in `sites` (sorted, distinct)."""
    tree = levels(sites)
    try:
        index = list(sites).index(site_id)
    except ValueError:
        raise ProtocolError(f"'{site_id}' is not in the invited set") from None
    return proof_from_levels(tree, index)


def verify(site_id: str, proof: Proof, n: int, expected_root: bytes) -> bool:
    """Whether `proof` shows `site_id` as leaf `proof.index` of an `n`-leaf set whose root is
    `expected_root`. Every sibling must be used, in the tree shape `n` dictates."""
    if n < 1 or not 0 <= proof.index < n or len(proof.siblings) > MAX_DEPTH:
        return False
    if len(expected_root) != ROOT_BYTES or any(len(s) != ROOT_BYTES for s in proof.siblings):
        return False
    node, i, width, used = leaf_hash(site_id), proof.index, n, 0
    while width > 1:
        if i % 2 == 1:
            if used == len(proof.siblings):
                return False
            node = _node(proof.siblings[used], node)
            used += 1
        elif i + 1 < width:
            if used == len(proof.siblings):
                return False
            node = _node(node, proof.siblings[used])
            used += 1
        i //= 2
        width = (width + 1) // 2
    return used == len(proof.siblings) and _seal(node, n) == expected_root
