"""Paillier over gmpy2: correctness of encryption, CRT decryption, homomorphic operations and
the checks that keep malformed ciphertexts and plaintexts out."""

from __future__ import annotations

import hashlib
import math
import secrets

import gmpy2
import pytest

from leteo_fed.crypto.paillier import (
    Decryptor,
    Encryptor,
    PrivateKey,
    add_ciphertexts,
    add_plaintexts,
    bytes_to_int,
    check_ciphertext,
    exponent_bits,
    generate_keypair,
    int_to_bytes,
)
from leteo_fed.errors import EncodingError, ProtocolError

BITS = 2048
RANDOMIZERS = ("short-exponent", "fixed-base", "textbook")


@pytest.fixture(scope="module")
def key() -> PrivateKey:
    return generate_keypair(BITS)


@pytest.fixture(scope="module")
def decryptor(key: PrivateKey) -> Decryptor:
    return Decryptor(key)


@pytest.fixture(scope="module", params=RANDOMIZERS)
def encryptor(request: pytest.FixtureRequest, key: PrivateKey) -> Encryptor:
    enc = Encryptor(key.public, randomizer=request.param)
    enc.prepare()
    return enc


def textbook_decrypt(key: PrivateKey, c: int) -> int:
    """Paillier (1999) decryption with lambda = lcm(p-1, q-1), independent of the CRT path."""
    n = key.p * key.q
    n2 = n * n
    lam = math.lcm(key.p - 1, key.q - 1)
    mu = pow((int(gmpy2.powmod(n + 1, lam, n2)) - 1) // n, -1, n)
    return (int(gmpy2.powmod(c, lam, n2)) - 1) // n * mu % n


# ------------------------------------------------------------------ key generation


def test_keygen_exact_bits_distinct_primes(key: PrivateKey) -> None:
    assert key.p != key.q
    assert key.public.n == key.p * key.q
    assert key.public.n.bit_length() == BITS
    assert key.public.bits == BITS
    assert key.p.bit_length() == BITS // 2 and key.q.bit_length() == BITS // 2
    assert gmpy2.is_prime(key.p, 50) and gmpy2.is_prime(key.q, 50)
    # g = n + 1 needs gcd(n, (p-1)(q-1)) = 1
    assert math.gcd(key.public.n, (key.p - 1) * (key.q - 1)) == 1


def test_public_key_derived_properties(key: PrivateKey) -> None:
    pub = key.public
    n = key.p * key.q
    assert pub.n_square == n * n
    assert pub.ciphertext_bytes == 2 * BITS // 8
    assert pub.plaintext_bytes == BITS // 8
    raw = n.to_bytes(BITS // 8, "big")
    assert pub.key_id == hashlib.sha256(raw).hexdigest()[:32]


@pytest.mark.insecure_small_key
@pytest.mark.parametrize("bits", [256, 512, 768])
def test_keygen_small_sizes_exact_bits(bits: int) -> None:
    k = generate_keypair(bits)
    assert (k.p * k.q).bit_length() == bits
    assert k.p != k.q


@pytest.mark.parametrize("bits", [255, 128, 0, 1025])
def test_keygen_refuses_bad_sizes(bits: int) -> None:
    with pytest.raises(EncodingError):
        generate_keypair(bits)


# ------------------------------------------------------------------ encrypt / decrypt


def test_round_trip_edge_values(
    key: PrivateKey, encryptor: Encryptor, decryptor: Decryptor
) -> None:
    n = key.public.n
    values = [0, 1, 2, n - 1, n - 2, n // 2, secrets.randbelow(n), secrets.randbelow(n)]
    for m in values:
        c = encryptor.encrypt(m)
        assert 0 < c < n * n
        check_ciphertext(key.public, c)
        assert decryptor.decrypt(c) == m
        assert textbook_decrypt(key, c) == m


def test_encrypt_many_and_decrypt_many(
    key: PrivateKey, encryptor: Encryptor, decryptor: Decryptor
) -> None:
    values = [secrets.randbelow(key.public.n) for _ in range(5)]
    assert decryptor.decrypt_many(encryptor.encrypt_many(values)) == values


def test_encryption_is_randomized(
    key: PrivateKey, encryptor: Encryptor, decryptor: Decryptor
) -> None:
    for m in (0, 1, key.public.n - 1):
        c1, c2 = encryptor.encrypt(m), encryptor.encrypt(m)
        assert c1 != c2
        assert decryptor.decrypt(c1) == decryptor.decrypt(c2) == m
        # with g = n + 1, c = (1 + m n) * r^n: the randomizer itself must not be trivial
        n2 = key.public.n_square
        r_n = c1 * pow(1 + m * key.public.n, -1, n2) % n2
        assert r_n != 1


@pytest.mark.parametrize("randomizer", ["short-exponent", "fixed-base"])
@pytest.mark.parametrize("window_bits", [1, 3, 5, 8])
def test_fixed_base_windows_decrypt(
    key: PrivateKey, decryptor: Decryptor, window_bits: int, randomizer: str
) -> None:
    enc = Encryptor(key.public, randomizer, window_bits=window_bits)
    m = secrets.randbelow(key.public.n)
    assert decryptor.decrypt(enc.encrypt(m)) == m


def test_exponent_lengths_of_the_fixed_base_randomizers(key: PrivateKey) -> None:
    """short-exponent: ceil(k/2) bits (Hastad-Schrift-Shamir); fixed-base: k + 128 bits
    (statistically close to uniform); the table has one row per w bits of exponent."""
    k = key.public.bits
    assert exponent_bits(k, "short-exponent") == -(-k // 2)
    assert exponent_bits(2047, "short-exponent") == 1024
    assert exponent_bits(k, "fixed-base") == k + 128
    for randomizer in ("short-exponent", "fixed-base"):
        enc = Encryptor(key.public, randomizer, window_bits=5)
        enc.prepare()
        assert len(enc._table) == -(-exponent_bits(k, randomizer) // 5)
        assert all(len(row) == 32 for row in enc._table)
        base = enc._table[0][1]
        n2 = key.public.n_square
        assert enc._table[0][17] == pow(base, 17, n2)  # odd and (squared) even entries
        assert enc._table[0][18] == pow(base, 18, n2)
        assert enc._table[1][1] == pow(base, 32, n2)  # the next row starts at base^(2^w)


def test_two_encryptors_use_independent_bases(key: PrivateKey, decryptor: Decryptor) -> None:
    a, b = Encryptor(key.public), Encryptor(key.public)
    a.prepare()
    b.prepare()
    assert a._table[0][1] != b._table[0][1]
    assert decryptor.decrypt(a.encrypt(7)) == decryptor.decrypt(b.encrypt(7)) == 7


@pytest.mark.parametrize("randomizer", RANDOMIZERS)
def test_encrypt_refuses_out_of_range(key: PrivateKey, randomizer: str) -> None:
    enc = Encryptor(key.public, randomizer)
    n = key.public.n
    for m in (-1, n, n + 1, 2 * n):
        with pytest.raises(EncodingError):
            enc.encrypt(m)


def test_encryptor_refuses_bad_options(key: PrivateKey) -> None:
    with pytest.raises(ValueError):
        Encryptor(key.public, randomizer="none")
    for w in (0, 9):
        with pytest.raises(ValueError):
            Encryptor(key.public, window_bits=w)


# ------------------------------------------------------------------ homomorphic operations


def test_add_ciphertexts_sums_mod_n(
    key: PrivateKey, encryptor: Encryptor, decryptor: Decryptor
) -> None:
    n = key.public.n
    a = [0, 5, n - 1, n - 1, secrets.randbelow(n)]
    b = [0, 7, 1, n - 1, secrets.randbelow(n)]
    ca, cb = encryptor.encrypt_many(a), encryptor.encrypt_many(b)
    total = add_ciphertexts(key.public, ca, cb)
    assert decryptor.decrypt_many(total) == [(x + y) % n for x, y in zip(a, b, strict=True)]
    for c in total:
        check_ciphertext(key.public, c)


def test_add_plaintexts_sums_mod_n(
    key: PrivateKey, encryptor: Encryptor, decryptor: Decryptor
) -> None:
    n = key.public.n
    a = [0, 5, n - 1, secrets.randbelow(n)]
    k = [0, 11, 2, secrets.randbelow(n)]
    out = add_plaintexts(key.public, encryptor.encrypt_many(a), k)
    assert decryptor.decrypt_many(out) == [(x + y) % n for x, y in zip(a, k, strict=True)]


def test_homomorphic_ops_refuse_mismatched_or_bad_input(
    key: PrivateKey, encryptor: Encryptor
) -> None:
    c = encryptor.encrypt_many([1, 2])
    with pytest.raises(ProtocolError):
        add_ciphertexts(key.public, c, c[:1])
    with pytest.raises(ProtocolError):
        add_plaintexts(key.public, c, [1])
    for bad in (-1, key.public.n):
        with pytest.raises(EncodingError):
            add_plaintexts(key.public, c, [0, bad])


# ------------------------------------------------------------------ ciphertext validation


def test_check_ciphertext_refuses_non_units(key: PrivateKey) -> None:
    pub = key.public
    n, n2 = pub.n, pub.n_square
    for bad in (0, -1, n2, n2 + 1, key.p, 3 * key.p, key.q, n, n * 5):
        with pytest.raises(ProtocolError):
            check_ciphertext(pub, bad)


def test_check_ciphertext_accepts_units(key: PrivateKey) -> None:
    pub = key.public
    for ok in (1, pub.n + 1, pub.n_square - 1):
        check_ciphertext(pub, ok)


# ------------------------------------------------------------------ byte framing


def test_int_bytes_round_trip_fixed_width(key: PrivateKey, encryptor: Encryptor) -> None:
    width = key.public.ciphertext_bytes
    values = [0, 1, 255, 256, encryptor.encrypt(3), key.public.n_square - 1]
    for v in values:
        raw = int_to_bytes(v, width)
        assert len(raw) == width
        assert bytes_to_int(raw) == v
        assert raw == v.to_bytes(width, "big")


def test_int_bytes_minimal_width() -> None:
    assert int_to_bytes(0) == b"\x00"
    assert int_to_bytes(255) == b"\xff"
    assert int_to_bytes(256) == b"\x01\x00"
    v = (1 << 2047) + 12345
    assert len(int_to_bytes(v)) == 256
    assert bytes_to_int(int_to_bytes(v)) == v


def test_int_to_bytes_refuses_negative() -> None:
    with pytest.raises(EncodingError):
        int_to_bytes(-1)
    with pytest.raises(EncodingError):
        int_to_bytes(-1, 8)
