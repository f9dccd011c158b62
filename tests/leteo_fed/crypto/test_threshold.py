"""Threshold Paillier (leteo_fed/crypto/threshold.py): any t of m holders decrypt, fewer learn
nothing usable, and a holder's batched proof catches any wrong partial decryption.

Small keys (512 bits) keep these fast; the math does not depend on the size. Everything random
comes from `secrets` (the scheme's own randomness): the assertions hold with overwhelming
probability (a failure of a proof check would need a 2^-128 event), not by a fixed seed."""

from __future__ import annotations

import itertools
import math
import secrets

import gmpy2
import pytest

from leteo_fed.crypto import threshold as th
from leteo_fed.crypto.paillier import Encryptor, add_ciphertexts
from leteo_fed.crypto.safe_primes import random_safe_prime
from leteo_fed.errors import EncodingError, ProtocolError

CONTEXT = th.proof_context("round-1", "key")


@pytest.fixture(scope="module")
def dealt():
    key, shares = th.deal(512, 5, 3)
    return key, shares


@pytest.fixture(scope="module")
def round_(dealt):
    key, shares = dealt
    enc = Encryptor(key.public)
    messages = [secrets.randbelow(key.public.n) for _ in range(12)] + [0, 1, key.public.n - 1]
    ciphertexts = enc.encrypt_many(messages)
    partials = {s.index: th.partial_decrypt(s, ciphertexts, threads=2) for s in shares}
    return messages, ciphertexts, partials


def test_safe_primes_are_safe():
    for bits in (32, 64, 128):
        p = random_safe_prime(bits)
        assert p.bit_length() == bits
        assert gmpy2.is_prime(p) and gmpy2.is_prime((p - 1) // 2)


def test_every_share_matches_its_verification_key(dealt):
    key, shares = dealt
    assert [s.index for s in shares] == [1, 2, 3, 4, 5]
    assert all(s.matches() for s in shares)
    assert not th.KeyShare(key, 1, shares[0].secret + 1).matches()
    assert "secret" not in repr(shares[0])


def test_any_t_holders_decrypt_and_more_do_too(dealt, round_):
    key, _ = dealt
    messages, _, partials = round_
    for chosen in itertools.combinations(range(1, 6), 3):
        assert th.combine(key, {i: partials[i] for i in chosen}) == messages
    assert th.combine(key, partials) == messages  # all five: the first three are used


def test_the_sum_of_ciphertexts_decrypts_to_the_sum(dealt):
    key, shares = dealt
    enc = Encryptor(key.public)
    a, b = (
        [secrets.randbelow(2**200) for _ in range(4)],
        [secrets.randbelow(2**200) for _ in range(4)],
    )
    total = add_ciphertexts(key.public, enc.encrypt_many(a), enc.encrypt_many(b))
    partials = {s.index: th.partial_decrypt(s, total) for s in shares[1:4]}
    assert th.combine(key, partials) == [x + y for x, y in zip(a, b, strict=True)]


def test_fewer_than_t_partial_decryptions_do_not_combine(dealt, round_):
    key, _ = dealt
    messages, _, partials = round_
    for chosen in itertools.combinations(range(1, 6), 2):
        some = {i: partials[i] for i in chosen}
        with pytest.raises(ProtocolError, match="the key needs 3 of its 5 holders"):
            th.combine(key, some)
        # interpolating the t - 1 anyway yields numbers unrelated to the plaintexts
        wrong = th.combine_indices(key, some)
        assert not any(w == m for w, m in zip(wrong, messages[:12], strict=False))


def test_a_holders_proof_verifies(dealt, round_):
    key, shares = dealt
    _, ciphertexts, partials = round_
    for share in shares:
        proof = th.prove(share, ciphertexts, partials[share.index], CONTEXT)
        assert th.verify(key, share.index, ciphertexts, partials[share.index], proof, CONTEXT)


@pytest.mark.parametrize("position", [0, 7, 14])
def test_one_wrong_partial_anywhere_fails_the_proof(dealt, round_, position):
    key, shares = dealt
    _, ciphertexts, partials = round_
    share = shares[1]
    bad = list(partials[share.index])
    bad[position] = bad[position] * ciphertexts[position] % key.public.n_square
    proof = th.prove(share, ciphertexts, bad, CONTEXT)
    assert not th.verify(key, share.index, ciphertexts, bad, proof, CONTEXT)
    # nor does the honest proof cover the tampered list
    honest = th.prove(share, ciphertexts, partials[share.index], CONTEXT)
    assert not th.verify(key, share.index, ciphertexts, bad, honest, CONTEXT)


def test_a_proof_is_bound_to_its_holder_round_and_ciphertexts(dealt, round_):
    key, shares = dealt
    _, ciphertexts, partials = round_
    share = shares[2]
    mine = partials[share.index]
    proof = th.prove(share, ciphertexts, mine, CONTEXT)
    assert not th.verify(key, share.index, ciphertexts, mine, proof, th.proof_context("r2", "key"))
    assert not th.verify(key, 4, ciphertexts, mine, proof, CONTEXT)  # claimed as another holder
    other = list(reversed(ciphertexts))
    assert not th.verify(key, share.index, other, mine, proof, CONTEXT)
    # another holder's (right) partials passed off as holder 3's
    assert not th.verify(
        key,
        share.index,
        ciphertexts,
        partials[1],
        th.prove(share, ciphertexts, partials[1], CONTEXT),
        CONTEXT,
    )
    assert not th.verify(key, share.index, ciphertexts, mine[:-1], proof, CONTEXT)
    oversized = th.PartialProof(proof.challenge, proof.response << 200)
    assert not th.verify(key, share.index, ciphertexts, mine, oversized, CONTEXT)


def test_a_sign_flip_passes_but_cannot_change_a_plaintext(dealt, round_):
    """-d_j has the same square as d_j: the proof (on squares) accepts it, and the combination
    (which squares every partial) is unchanged by it, so it is harmless."""
    key, shares = dealt
    messages, ciphertexts, partials = round_
    n2 = key.public.n_square
    flipped = [n2 - d for d in partials[1]]
    proof = th.prove(shares[0], ciphertexts, flipped, CONTEXT)
    assert th.verify(key, 1, ciphertexts, flipped, proof, CONTEXT)
    assert th.combine(key, {1: flipped, 2: partials[2], 3: partials[3]}) == messages


@pytest.mark.parametrize(
    ("holders", "threshold", "message"),
    [
        (4, 2, "not a majority"),
        (5, 2, "not a majority"),
        (3, 1, "must be in 2..3"),
        (1, 1, "2..32 holders"),
        (33, 20, "2..32 holders"),
    ],
)
def test_thresholds_that_are_not_a_majority_are_refused(holders, threshold, message):
    with pytest.raises(EncodingError, match=message):
        th.check_threshold(holders, threshold)


def test_lagrange_coefficients_are_integers_times_delta():
    delta = math.factorial(5)
    for chosen in itertools.combinations(range(1, 6), 3):
        coefficients = th.lagrange_at_zero(chosen, delta)
        # sum of Lagrange basis values at 0 is 1: here delta
        assert sum(coefficients.values()) == delta


def test_multi_power_equals_the_product_of_powers():
    modulus = random_safe_prime(64) * random_safe_prime(64)
    bases = [secrets.randbelow(modulus) for _ in range(9)]
    exponents = [secrets.randbits(b) for b in (1, 5, 64, 128, 0, 3, 100, 128, 17)]
    expected = (
        math.prod(pow(b, e, modulus) for b, e in zip(bases, exponents, strict=True)) % modulus
    )
    assert th.multi_power(bases, exponents, modulus) == expected


@pytest.mark.parametrize("window", [1, 4, 5, 8])
def test_multi_power_at_every_window_and_for_empty_or_zero_exponents(window):
    modulus = random_safe_prime(64) * random_safe_prime(64)
    bases = [secrets.randbelow(modulus) for _ in range(6)]
    exponents = [secrets.randbits(130), 0, 1, (1 << 128) - 1, secrets.randbits(7), 2**64]
    expected = math.prod(pow(b, e, modulus) for b, e in zip(bases, exponents, strict=True))
    assert th.multi_power(bases, exponents, modulus, window) == expected % modulus
    assert th.multi_power(bases, [0] * 6, modulus, window) == 1
    assert th.multi_power([], [], modulus, window) == 1
