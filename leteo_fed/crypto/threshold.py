"""Threshold Paillier: m key holders, any t of whom decrypt; fewer learn nothing.

Shoup's RSA threshold scheme as Damgard and Jurik carried it to Paillier (s = 1):

- The modulus n = p q is a product of safe primes p = 2p' + 1, q = 2q' + 1; write m' = p' q'.
  The secret exponent d satisfies d = 0 (mod m') and d = 1 (mod n), so for every ciphertext
  c = (1 + n)^M r^n, c^(4 d) = (1 + n)^(4 M) (mod n^2): r^(4 n d) = 1 because 4 n m' is the
  exponent of the group, and (1 + n)^(4 d M) = (1 + n)^(4 M) because (1 + n) has order n.
- The dealer picks f(X) = d + a_1 X + ... + a_(t-1) X^(t-1) with a_k uniform mod n m', and gives
  holder i the share s_i = f(i) mod n m'. It publishes a random square v and the verification
  keys v_i = v^(Delta s_i) mod n^2, Delta = m!.
- Holder i's partial decryption of c is c_i = c^(2 Delta s_i) mod n^2. Any t of them combine:
  with the integer Lagrange coefficients lambda_j = Delta prod_{k != j} k / (k - j),
  prod_j c_j^(2 lambda_j) = c^(4 Delta^2 d) = (1 + n)^(4 Delta^2 M), so
  M = L(.) (4 Delta^2)^(-1) mod n, L(x) = (x - 1) / n.
- t - 1 shares are t - 1 points of a random polynomial of degree t - 1: they are consistent with
  every value of d, so t - 1 holders (and their partial decryptions) reveal nothing about d.

The owners' encryption is unchanged: (n, g = n + 1) is an ordinary Paillier public key, the key
id is the hash of n as for a single key.

Each holder proves that its partial decryptions used its real share: for the round's ciphertexts
c_1..c_L and its partials d_1..d_L, one proof per round (not per ciphertext). Random exponents
rho_j (128 bits each, hashed from every c_j and d_j, so fixed before the proof) fold them into
C = prod c_j^rho_j and D = prod d_j^rho_j, and a Chaum-Pedersen proof (made non-interactive by
Fiat-Shamir) shows log_(C^4)(D^2) = log_v(v_i) = Delta s_i. A partial that is wrong in any
coordinate makes D^2 miss C^(4 Delta s_i) except with probability about 2^-128: the error's odd-
order part survives the random combination, its order-2 part is squared away (and squared away
in the combination too, so it cannot change a plaintext).

Everything here is a pure function of its arguments (and `secrets` for fresh randomness).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction

import gmpy2
from gmpy2 import mpz

from leteo_fed.crypto.paillier import PublicKey, check_ciphertexts
from leteo_fed.crypto.safe_primes import random_safe_prime
from leteo_fed.errors import EncodingError, ProtocolError

MAX_HOLDERS = 32  # Delta = m! grows every exponent by log2(m!) bits: 118 bits at 32 holders
CHALLENGE_BITS = 128
RHO_BITS = 128
ZK_EXTRA_BITS = 128  # the response hides Delta s_i within statistical distance 2^-128
_DOMAIN = b"leteo-fed threshold-paillier v1"


@dataclass(frozen=True)
class ThresholdKey:
    """The public side of a threshold key: the Paillier key the owners encrypt under, and what
    anyone needs to check a holder's partial decryption and to combine t of them."""

    public: PublicKey
    threshold: int  # t: how many holders decrypt
    holders: int  # m: how many hold a share
    v: int  # a random square mod n^2
    verification: tuple[int, ...]  # v_i = v^(Delta s_i) mod n^2 of holders 1..m

    def __post_init__(self) -> None:
        check_threshold(self.holders, self.threshold)
        if len(self.verification) != self.holders:
            raise ProtocolError(
                f"a {self.threshold}-of-{self.holders} key needs {self.holders} verification "
                f"keys, got {len(self.verification)}"
            )
        check_ciphertexts(self.public.n, [self.v, *self.verification])

    @property
    def key_id(self) -> str:
        return self.public.key_id

    @property
    def delta(self) -> int:
        return math.factorial(self.holders)

    def verification_key(self, index: int) -> int:
        self.check_index(index)
        return self.verification[index - 1]

    def check_index(self, index: int) -> None:
        if not 1 <= index <= self.holders:
            raise ProtocolError(f"holder index {index} is not in 1..{self.holders}")

    @property
    def response_bits(self) -> int:
        """The length of a proof's random exponent r: Delta s_i < Delta n^2, hidden within
        2^-128 by r + e Delta s_i when r has CHALLENGE_BITS + ZK_EXTRA_BITS bits more."""
        return (self.delta * self.public.n_square).bit_length() + CHALLENGE_BITS + ZK_EXTRA_BITS


@dataclass(frozen=True)
class KeyShare:
    """One holder's share of the secret exponent. Its repr never shows the share."""

    key: ThresholdKey
    index: int  # 1..m
    secret: int = field(repr=False)

    def __post_init__(self) -> None:
        self.key.check_index(self.index)

    def matches(self) -> bool:
        """Whether the share is the one the verification key was made from."""
        key = self.key
        n2 = mpz(key.public.n_square)
        return gmpy2.powmod(key.v, key.delta * self.secret, n2) == key.verification_key(self.index)


@dataclass(frozen=True)
class PartialProof:
    """A holder's batched proof for one round: Fiat-Shamir challenge and response."""

    challenge: int
    response: int


def check_threshold(holders: int, threshold: int) -> None:
    """2 <= t <= m <= MAX_HOLDERS and t > m / 2. The majority is what keeps a round decrypted
    once: each holder opens a round once, and any two sets of t holders share one, so two
    different sums of one round can never both gather t partial decryptions."""
    if not 2 <= holders <= MAX_HOLDERS:
        raise EncodingError(f"a threshold key needs 2..{MAX_HOLDERS} holders, got {holders}")
    if not 2 <= threshold <= holders:
        raise EncodingError(f"the threshold must be in 2..{holders} (the holders), got {threshold}")
    if 2 * threshold <= holders:
        raise EncodingError(
            f"a threshold of {threshold} of {holders} holders is not a majority: two disjoint "
            f"sets of {threshold} could each decrypt a different sum of one round. Use at "
            f"least {holders // 2 + 1}"
        )


# ---------------------------------------------------------------------- the dealer


def deal(bits: int, holders: int, threshold: int) -> tuple[ThresholdKey, list[KeyShare]]:
    """A fresh threshold key and its m shares. The factors, m' and d exist only inside this
    call (Python cannot wipe memory; the caller should exit once the shares are written)."""
    check_threshold(holders, threshold)
    if bits < 256 or bits % 2:
        raise EncodingError(f"key size must be an even number of bits >= 256, got {bits}")
    while True:
        p, q = random_safe_prime(bits // 2), random_safe_prime(bits // 2)
        n = p * q
        if p != q and n.bit_length() == bits:
            break
    return split_key(p, q, holders, threshold)


def split_key(p: int, q: int, holders: int, threshold: int) -> tuple[ThresholdKey, list[KeyShare]]:
    """The threshold key of n = p q (safe primes) and its shares: `deal`'s second half, also
    for benchmarks that compare one CSP holding (p, q) with holders of the same modulus."""
    check_threshold(holders, threshold)
    n = mpz(p) * q
    m_prime = mpz((p - 1) // 2) * ((q - 1) // 2)
    modulus = n * m_prime
    d = m_prime * gmpy2.invert(m_prime, n)  # 0 mod m', 1 mod n
    coefficients = [d] + [mpz(secrets.randbelow(int(modulus))) for _ in range(threshold - 1)]
    secrets_ = [_evaluate(coefficients, i, modulus) for i in range(1, holders + 1)]
    n2 = n * n
    v = gmpy2.powmod(_random_unit(n2), 2, n2)
    delta = math.factorial(holders)
    verification = tuple(int(gmpy2.powmod(v, delta * s, n2)) for s in secrets_)
    key = ThresholdKey(PublicKey(int(n)), threshold, holders, int(v), verification)
    shares = [KeyShare(key, i, int(s)) for i, s in enumerate(secrets_, start=1)]
    return key, shares


def _evaluate(coefficients: Sequence[mpz], x: int, modulus: mpz) -> mpz:
    acc = mpz(0)
    for a in reversed(coefficients):
        acc = (acc * x + a) % modulus
    return acc


def _random_unit(modulus: mpz) -> mpz:
    while True:
        r = mpz(secrets.randbelow(int(modulus) - 2) + 2)
        if gmpy2.gcd(r, modulus) == 1:
            return r


# ---------------------------------------------------------------------- a holder


def partial_decrypt(share: KeyShare, ciphertexts: Sequence[int], threads: int = 1) -> list[int]:
    """c^(2 Delta s_i) mod n^2 for every c. gmpy2 releases the GIL for a list of bases under one
    exponent, so `threads` threads use as many cores without copying the share anywhere."""
    key = share.key
    n2 = mpz(key.public.n_square)
    exponent = mpz(2 * key.delta) * share.secret
    bases = [mpz(c) for c in ciphertexts]
    parts = max(1, min(threads, len(bases)))
    if parts == 1:
        return [int(x) for x in gmpy2.powmod_base_list(bases, exponent, n2)]
    size = -(-len(bases) // parts)
    chunks = [bases[i : i + size] for i in range(0, len(bases), size)]
    with ThreadPoolExecutor(len(chunks)) as pool:
        done = pool.map(lambda chunk: gmpy2.powmod_base_list(chunk, exponent, n2), chunks)
        return [int(x) for part in done for x in part]


def proof_context(round_id: str, key_id: str) -> bytes:
    """What a holder's proof is bound to besides the ciphertexts: the round and the key."""
    return f"round={round_id}|key={key_id}".encode()


def prove(
    share: KeyShare, ciphertexts: Sequence[int], partials: Sequence[int], context: bytes
) -> PartialProof:
    """One proof that every partial decryption of this round used `share` (see the module
    docstring). `context` binds it to the round (its id and key)."""
    key = share.key
    n2 = mpz(key.public.n_square)
    u, w = _folded(key, share.index, ciphertexts, partials, context)
    r = mpz(secrets.randbits(key.response_bits))
    a, b = _powers_in_parallel([u, mpz(key.v)], r, n2)
    e = _challenge(key, share.index, context, u, w, a, b)
    return PartialProof(e, int(r + e * key.delta * share.secret))


def verify(
    key: ThresholdKey,
    index: int,
    ciphertexts: Sequence[int],
    partials: Sequence[int],
    proof: PartialProof,
    context: bytes,
) -> bool:
    """Whether holder `index`'s partial decryptions of `ciphertexts` are right."""
    key.check_index(index)
    if len(partials) != len(ciphertexts) or not ciphertexts:
        return False
    z, e = proof.response, proof.challenge
    if not 0 <= z < 1 << (key.response_bits + 1) or not 0 <= e < 1 << CHALLENGE_BITS:
        return False
    try:
        check_ciphertexts(key.public.n, partials)
    except ProtocolError:
        return False
    n2 = mpz(key.public.n_square)
    u, w = _folded(key, index, ciphertexts, partials, context)
    u_z, v_z = _powers_in_parallel([u, mpz(key.v)], z, n2)
    a = u_z * gmpy2.powmod(w, -e, n2) % n2
    b = v_z * gmpy2.powmod(key.verification_key(index), -e, n2) % n2
    return _challenge(key, index, context, u, w, a, b) == e


def _powers_in_parallel(bases: list[mpz], exponent: mpz, modulus: mpz) -> list[mpz]:
    """b^exponent for each base, one thread each (gmpy2 releases the GIL for base lists)."""
    with ThreadPoolExecutor(len(bases)) as pool:
        return [
            part[0]
            for part in pool.map(lambda b: gmpy2.powmod_base_list([b], exponent, modulus), bases)
        ]


def _folded(
    key: ThresholdKey, index: int, ciphertexts: Sequence[int], partials: Sequence[int], context
) -> tuple[mpz, mpz]:
    """(C^4, D^2) of the random linear combination with exponents hashed from the round."""
    if len(partials) != len(ciphertexts):
        raise ProtocolError(
            f"{len(partials)} partial decryptions of {len(ciphertexts)} ciphertexts"
        )
    width = key.public.ciphertext_bytes
    digest = hashlib.sha256(_DOMAIN + b"|rho|" + context + index.to_bytes(4, "big"))
    for value in (*ciphertexts, *partials):
        digest.update(int(value).to_bytes(width, "big"))
    stream = hashlib.shake_256(digest.digest()).digest(len(ciphertexts) * RHO_BITS // 8)
    step = RHO_BITS // 8
    rho = [
        int.from_bytes(stream[j * step : (j + 1) * step], "big") for j in range(len(ciphertexts))
    ]
    n2 = mpz(key.public.n_square)
    big_c = multi_power(ciphertexts, rho, n2)
    big_d = multi_power(partials, rho, n2)
    return gmpy2.powmod(big_c, 4, n2), gmpy2.powmod(big_d, 2, n2)


def multi_power(
    bases: Sequence[int], exponents: Sequence[int], modulus: int, window: int = 5
) -> mpz:
    """prod b_j^(e_j) mod `modulus` for short non-negative exponents, by buckets (Pippenger):
    for each w-bit digit position, the bases are multiplied into the bucket of their digit and
    the buckets summed by a running product, so the squarings are shared and no base needs a
    table: about bits(e) + (bits(e) / w) (L + 2^(w+1)) multiplications, a fifth fewer than
    Straus's at L = 74 and 128-bit exponents."""
    mod = mpz(modulus)
    mask = (1 << window) - 1
    values = [mpz(b) % mod for b in bases]
    powers = [int(e) for e in exponents]
    digits = -(-max((e.bit_length() for e in powers), default=0) // window)
    acc: mpz | None = None
    for position in reversed(range(digits)):
        shift = position * window
        buckets: dict[int, mpz] = {}
        for value, e in zip(values, powers, strict=True):
            digit = (e >> shift) & mask
            if digit:
                held = buckets.get(digit)
                buckets[digit] = value if held is None else held * value % mod
        if acc is not None:
            acc = gmpy2.powmod(acc, 1 << window, mod)
        running: mpz | None = None
        total: mpz | None = None
        for digit in range(max(buckets, default=0), 0, -1):  # prod_d bucket_d^d
            held = buckets.get(digit)
            if held is not None:
                running = held if running is None else running * held % mod
            if running is not None:
                total = running if total is None else total * running % mod
        if total is not None:
            acc = total if acc is None else acc * total % mod
    return mpz(1) if acc is None else acc


def _challenge(key: ThresholdKey, index: int, context: bytes, *values: mpz) -> int:
    width = key.public.ciphertext_bytes
    digest = hashlib.sha256(_DOMAIN + b"|challenge|" + context + index.to_bytes(4, "big"))
    for value in (key.v, key.verification_key(index), *values):
        digest.update(int(value).to_bytes(width, "big"))
    return int.from_bytes(digest.digest()[: CHALLENGE_BITS // 8], "big")


# ---------------------------------------------------------------------- the combiner


def lagrange_at_zero(indices: Sequence[int], delta: int) -> dict[int, int]:
    """Delta times the Lagrange coefficients at 0 of the holders `indices`: integers, because
    Delta = m! is divisible by every product of index differences."""
    out = {}
    for j in indices:
        value = Fraction(delta)
        for k in indices:
            if k != j:
                value *= Fraction(k, k - j)
        if value.denominator != 1:
            raise ProtocolError(f"holder indices {list(indices)} are not distinct in 1..m")
        out[j] = value.numerator
    return out


def combine(key: ThresholdKey, partials: Mapping[int, Sequence[int]]) -> list[int]:
    """The plaintexts from the verified partial decryptions of at least t holders (the first t
    by index are used). Fewer than t: ProtocolError, as they determine nothing."""
    if len(partials) < key.threshold:
        raise ProtocolError(
            f"{len(partials)} partial decryptions cannot decrypt: the key needs {key.threshold} "
            f"of its {key.holders} holders"
        )
    chosen = sorted(partials)[: key.threshold]
    for index in chosen:
        key.check_index(index)
    lengths = {len(partials[i]) for i in chosen}
    if len(lengths) != 1:
        raise ProtocolError("the holders' partial decryptions have different lengths")
    return combine_indices(key, {i: partials[i] for i in chosen})


def combine_indices(key: ThresholdKey, partials: Mapping[int, Sequence[int]]) -> list[int]:
    """Lagrange interpolation at 0 over exactly the given holders: the plaintexts when they are
    t or more, numbers unrelated to them when fewer (what the tests show)."""
    n = mpz(key.public.n)
    n2 = n * n
    coefficients = lagrange_at_zero(sorted(partials), key.delta)
    scale = gmpy2.invert(4 * mpz(key.delta) ** 2, n)
    # positive and negative coefficients apart: one inversion for the whole round (Montgomery's
    # trick) instead of one per partial decryption with a negative coefficient
    above = [mpz(1)] * len(next(iter(partials.values())))
    below = list(above)
    for index, values in partials.items():
        exponent = 2 * coefficients[index]
        side = above if exponent > 0 else below
        powered = gmpy2.powmod_base_list([mpz(v) for v in values], abs(exponent), n2)
        for position, value in enumerate(powered):
            side[position] = side[position] * value % n2
    out = []
    for num, inverse in zip(above, _inverses(below, n2), strict=True):
        acc = num * inverse % n2
        out.append(int((acc - 1) // n * scale % n))
    return out


def _inverses(values: Sequence[mpz], modulus: mpz) -> list[mpz]:
    """Every value's inverse mod `modulus` with one modular inversion (Montgomery's trick):
    prefix products, the inverse of the whole product, then back down."""
    prefix = [mpz(1)]
    for value in values:
        prefix.append(prefix[-1] * value % modulus)
    inverse = gmpy2.invert(prefix[-1], modulus)
    out: list[mpz] = [mpz(0)] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inverse * prefix[i] % modulus
        inverse = inverse * values[i] % modulus
    return out
