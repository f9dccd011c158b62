"""Slot packing changes nothing: with a real 2048-bit key, the packed aggregate (many values per
ciphertext) decodes to the same integers as an unpacked one (one value per ciphertext), and both
equal the plain integer sums of the owners' encoded statistics."""

from __future__ import annotations

import secrets

import numpy as np
import pytest
from sklearn.datasets import load_wine

from leteo_fed.crypto.paillier import (
    Decryptor,
    Encryptor,
    PrivateKey,
    add_ciphertexts,
    add_plaintexts,
    generate_keypair,
)
from leteo_fed.encoding.packing import (
    masks_from_seed,
    new_mask_seed,
    pack,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.protocols import moments, pca
from leteo_fed.protocols.moments_round import encoding as moments_encoding

BITS = 2048
N_OWNERS = 3


@pytest.fixture(scope="module")
def key() -> PrivateKey:
    return generate_keypair(BITS)


@pytest.fixture(scope="module")
def wine() -> np.ndarray:
    return load_wine().data


@pytest.fixture(scope="module")
def owner_values(wine: np.ndarray) -> list[list[int]]:
    """Each owner's encoded share (R upper triangle, V, Q) for an uneven 3-way split of wine."""
    enc = moments_encoding()
    parts = np.split(wine, [50, 120])  # 50, 70 and 58 rows
    assert len(parts) == N_OWNERS
    return [pca.share_values(pca.local_statistics(x), enc) for x in parts]


def _sum_ciphertext_vectors(key: PrivateKey, vectors: list[list[int]]) -> list[int]:
    total = vectors[0]
    for v in vectors[1:]:
        total = add_ciphertexts(key.public, total, v)
    return total


def _packed_totals(key: PrivateKey, values: list[list[int]]) -> list[int]:
    layout = moments_encoding().layout(key.public.bits)
    n_values = len(values[0])
    assert layout.slots_per_ciphertext > 1  # the point of the comparison
    encryptor = Encryptor(key.public)
    n_plain = layout.n_ciphertexts(n_values)
    seeds = [new_mask_seed() for _ in values]  # every owner masks its own share
    shares = [
        encryptor.encrypt_many(
            [
                p + r
                for p, r in zip(
                    pack(v, layout), masks_from_seed(seed, n_plain, layout), strict=True
                )
            ]
        )
        for v, seed in zip(values, seeds, strict=True)
    ]
    assert all(len(s) == n_plain for s in shares)
    aggregate = _sum_ciphertext_vectors(key, shares)
    mask_sums = [
        sum(col) for col in zip(*(masks_from_seed(s, n_plain, layout) for s in seeds), strict=True)
    ]
    plain = remove_masks(Decryptor(key).decrypt_many(aggregate), mask_sums, layout)
    return slot_totals(unpack(plain, n_values, layout), len(values), layout)


def _unpacked_totals(key: PrivateKey, values: list[list[int]]) -> list[int]:
    """Independent of the packing code: E[v + O] per value, summed, masked, decrypted."""
    layout = moments_encoding().layout(key.public.bits)
    offset, mask_bits = layout.offset, layout.statistical_security + 128
    encryptor = Encryptor(key.public)
    shares = [encryptor.encrypt_many([v + offset for v in owner]) for owner in values]
    aggregate = _sum_ciphertext_vectors(key, shares)
    masks = [secrets.randbits(mask_bits) for _ in aggregate]
    blinded = add_plaintexts(key.public, aggregate, masks)
    plain = Decryptor(key).decrypt_many(blinded)
    return [p - r - len(values) * offset for p, r in zip(plain, masks, strict=True)]


def test_packed_and_unpacked_aggregates_are_identical(
    key: PrivateKey, owner_values: list[list[int]], wine: np.ndarray
) -> None:
    d = wine.shape[1]
    assert all(len(v) == pca.n_values(d) for v in owner_values)
    plain = [sum(column) for column in zip(*owner_values, strict=True)]

    packed = _packed_totals(key, owner_values)
    unpacked = _unpacked_totals(key, owner_values)

    assert all(type(t) is int for t in packed + unpacked)
    assert packed == unpacked == plain

    # Sanity: the totals describe the pooled data (count, and PCA close to the plain one).
    agg = moments.decode_totals(packed, d, [moments.ALL_ROWS], moments_encoding().scale_bits)
    assert agg.n == len(wine)
    result = pca.pca_from_moments(agg, [f"x{i}" for i in range(d)], components=3)
    ref_evals, ref_vecs, ref_mean = pca.reference_pca(wine, components=3)
    np.testing.assert_allclose(result.eigenvalues, ref_evals, rtol=1e-9)
    np.testing.assert_allclose(np.array(result.components).T, ref_vecs, atol=1e-8)
    np.testing.assert_allclose(result.mean, ref_mean, rtol=0, atol=1e-9)  # 2^-32 fixed point
