"""Paillier encryption over gmpy2, with g = n + 1 and CRT decryption.

Why our own and not `phe`: shares are packed integers, not floats, so we need no exponent
(phe's unencrypted exponent leaks magnitude), we encrypt whole vectors, and we make the
randomizer cheap. Every randomizer is an n-th power r^n mod n^2 (so decryption is unchanged);
three ways to draw it are offered:

- ``"short-exponent"`` (default) and ``"fixed-base"``: each encryptor draws its own random base
  y in Z_n^*, computes h_s = y^n mod n^2 once, and encrypts with h_s^alpha = (y^alpha)^n. The
  power comes from a table of h_s^(j * 2^(w i)), so an encryption costs about bits(alpha)/w
  multiplications instead of one full exponentiation (the construction of Damgard, Jurik and
  Nielsen, 2010). The base is never shared, so no other party (not even the CSP) influences the
  randomness. The two differ in the length of alpha:

  - ``"fixed-base"``: alpha uniform over [0, 2^(bits(n) + 128)). alpha mod ord(y) is then within
    2^-128 of uniform, so y^alpha is statistically close to uniform in <y>: nothing beyond
    Paillier's own assumption (DCR) is needed.
  - ``"short-exponent"``: alpha uniform over [0, 2^ceil(bits(n) / 2)), the exponent length of
    Damgard, Jurik and Nielsen's practical variant; half the table rows and half the
    multiplications per encryption. Security argument: y -> y^n mod n^2 is an isomorphism from
    Z_n^* onto the n-th residues, so telling h_s^alpha for a short alpha from one for a
    full-length alpha is telling y^alpha mod n for a half-length alpha from a full-length one in
    Z_n^*. Hastad, Schrift and Shamir (J. Comput. Syst. Sci. 47, 1993) show that the discrete
    logarithm modulo a composite hides half of its bits, i.e. the two are indistinguishable
    unless n can be factored, and factoring n breaks Paillier anyway. A hybrid argument then
    gives the semantic security of the full-length scheme. This is an argument by reduction to
    factoring, not a statistical one: sites that want no assumption beyond DCR choose
    ``"fixed-base"`` (``[crypto] randomizer`` in the owner config).
- ``"textbook"``: r uniform in Z_n^*, r^n mod n^2, exactly as in Paillier (1999).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import gmpy2
from gmpy2 import mpz

from leteo_fed.errors import EncodingError, ProtocolError

MIN_SECURE_BITS = 2048
RANDOMIZERS = ("short-exponent", "fixed-base", "textbook")
DEFAULT_RANDOMIZER = "short-exponent"
# short exponents at 2048 bits: 205 rows of 32 entries, built in ~40 ms; ~1 ms per encryption
DEFAULT_WINDOW_BITS = 5
_ALPHA_EXTRA_BITS = 128  # statistical distance of alpha mod ord(y) from uniform <= 2^-128


@dataclass(frozen=True)
class PublicKey:
    n: int

    @property
    def bits(self) -> int:
        return int(self.n).bit_length()

    @property
    def n_square(self) -> int:
        return self.n * self.n

    @property
    def key_id(self) -> str:
        return key_id_of(self.n)

    @property
    def ciphertext_bytes(self) -> int:
        return (2 * self.bits + 7) // 8

    @property
    def plaintext_bytes(self) -> int:
        return (self.bits + 7) // 8


def key_id_of(n: int) -> str:
    raw = int(n).to_bytes((int(n).bit_length() + 7) // 8, "big")
    return hashlib.sha256(raw).hexdigest()[:32]


@dataclass(frozen=True)
class PrivateKey:
    p: int
    q: int
    public: PublicKey = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "public", PublicKey(self.p * self.q))


def generate_keypair(bits: int = MIN_SECURE_BITS) -> PrivateKey:
    """Two random primes of bits/2 bits each whose product has exactly ``bits`` bits."""
    if bits < 256 or bits % 2:
        raise EncodingError(f"key size must be an even number of bits >= 256, got {bits}")
    half = bits // 2
    while True:
        p = _random_prime(half)
        q = _random_prime(half)
        n = p * q
        if p != q and n.bit_length() == bits:
            return PrivateKey(int(p), int(q))


def _random_prime(bits: int) -> mpz:
    candidate = mpz(secrets.randbits(bits)) | (mpz(3) << (bits - 2)) | 1
    return gmpy2.next_prime(candidate)


class Encryptor:
    """Encrypts non-negative integers below n. Build once per key; reuse for every share."""

    def __init__(
        self,
        public: PublicKey,
        randomizer: str = DEFAULT_RANDOMIZER,
        window_bits: int = DEFAULT_WINDOW_BITS,
    ) -> None:
        if randomizer not in RANDOMIZERS:
            raise ValueError(f"randomizer must be one of {RANDOMIZERS}, got {randomizer!r}")
        if not 1 <= window_bits <= 8:
            raise ValueError(f"window_bits must be in 1..8, got {window_bits}")
        self.public = public
        self.randomizer = randomizer
        self._n = mpz(public.n)
        self._n2 = self._n * self._n
        self._window = window_bits
        self._digit_mask = (1 << window_bits) - 1
        # alpha has rows * w >= bits(n) + 128 uniform bits, drawn as independent w-bit digits
        self._rows = -(-exponent_bits(public.bits, randomizer) // window_bits)
        self._table: list[list[mpz]] | None = None

    def prepare(self) -> None:
        """Build the fixed-base table now instead of on the first encryption."""
        if self.randomizer != "textbook" and self._table is None:
            self._table = self._build_table()

    def _build_table(self) -> list[list[mpz]]:
        n, n2 = self._n, self._n2
        base = gmpy2.powmod(_random_unit(n), n, n2)  # h_s = y^n for a private random y
        size = 1 << self._window
        table = []
        for _ in range(self._rows):
            row = [mpz(1), base] + [mpz(0)] * (size - 2)
            for j in range(2, size):  # even powers by squaring, which is cheaper
                half = row[j >> 1]
                row[j] = (half * half if j % 2 == 0 else row[j - 1] * base) % n2
            table.append(row)
            base = row[-1] * base % n2  # base^(2^w): the next digit position
        return table

    def _randomizer_value(self) -> mpz:
        n2 = self._n2
        if self.randomizer == "textbook":
            return gmpy2.powmod(_random_unit(self._n), self._n, n2)
        if self._table is None:
            self.prepare()
        table = self._table
        if table is None:  # prepare() always builds it for the fixed-base randomizer
            raise RuntimeError("fixed-base randomizer table was not built")
        acc = mpz(1)
        mask = self._digit_mask
        for row, byte in zip(table, secrets.token_bytes(self._rows), strict=True):
            digit = byte & mask  # low w bits of a uniform byte are uniform
            if digit:
                acc = acc * row[digit] % n2
        return acc

    def encrypt(self, m: int) -> int:
        if not 0 <= m < self.public.n:
            raise EncodingError(
                f"plaintext out of range [0, n): {int(m).bit_length()} bits for a "
                f"{self.public.bits}-bit key"
            )
        # (1 + n)^m = 1 + m n  (mod n^2), already below n^2 as m < n
        return int((1 + mpz(m) * self._n) * self._randomizer_value() % self._n2)

    def encrypt_many(self, values: Iterable[int]) -> list[int]:
        return [self.encrypt(v) for v in values]


def exponent_bits(key_bits: int, randomizer: str) -> int:
    """Length of the random exponent alpha of a fixed-base randomizer h_s^alpha (see the
    module docstring for why each length is enough)."""
    if randomizer == "short-exponent":
        return -(-key_bits // 2)
    return key_bits + _ALPHA_EXTRA_BITS


def _random_unit(n: mpz) -> mpz:
    while True:
        r = mpz(secrets.randbelow(int(n) - 1) + 1)
        if gmpy2.gcd(r, n) == 1:
            return r


class Decryptor:
    """CRT decryption: two half-size exponentiations instead of one full one."""

    def __init__(self, key: PrivateKey) -> None:
        p, q = mpz(key.p), mpz(key.q)
        self.public = key.public
        self._p, self._q = p, q
        self._p2, self._q2 = p * p, q * q
        self._n = p * q
        g = self._n + 1
        self._hp = gmpy2.invert(self._l(gmpy2.powmod(g, p - 1, self._p2), p), p)
        self._hq = gmpy2.invert(self._l(gmpy2.powmod(g, q - 1, self._q2), q), q)
        self._q_inv_p = gmpy2.invert(q, p)

    @staticmethod
    def _l(x: mpz, d: mpz) -> mpz:
        return (x - 1) // d

    def decrypt(self, c: int) -> int:
        c = mpz(c)
        p, q = self._p, self._q
        mp = self._l(gmpy2.powmod(c, p - 1, self._p2), p) * self._hp % p
        mq = self._l(gmpy2.powmod(c, q - 1, self._q2), q) * self._hq % q
        return int(mq + ((mp - mq) * self._q_inv_p % p) * q)

    def decrypt_many(self, ciphertexts: Iterable[int]) -> list[int]:
        return [self.decrypt(c) for c in ciphertexts]


# ------------------------------------------------------------------ homomorphic operations


def add_ciphertexts(public: PublicKey, a: Sequence[int], b: Sequence[int]) -> list[int]:
    """E[x] (*) E[y] = E[x + y], element-wise."""
    if len(a) != len(b):
        raise ProtocolError(f"cannot add ciphertext vectors of lengths {len(a)} and {len(b)}")
    n2 = mpz(public.n_square)
    return [int(mpz(x) * y % n2) for x, y in zip(a, b, strict=True)]


def add_plaintexts(
    public: PublicKey, ciphertexts: Sequence[int], plain: Sequence[int]
) -> list[int]:
    """E[x] (*) (1 + k n) = E[x + k]: adds public constants (e.g. blinding masks) in place."""
    if len(ciphertexts) != len(plain):
        raise ProtocolError(f"cannot add {len(plain)} plaintexts to {len(ciphertexts)} ciphertexts")
    n, n2 = mpz(public.n), mpz(public.n_square)
    out = []
    for c, k in zip(ciphertexts, plain, strict=True):
        if not 0 <= k < public.n:
            raise EncodingError("plaintext constant out of range [0, n)")
        out.append(int(mpz(c) * ((1 + mpz(k) * n) % n2) % n2))
    return out


NOT_A_UNIT = "malformed ciphertext: not an element of Z*_{n^2}"


def check_ciphertext(public: PublicKey, c: int) -> None:
    """A valid ciphertext is a unit modulo n^2; anything else is malformed or hostile."""
    check_ciphertexts(public.n, [c])


def check_ciphertexts(n: int, ciphertexts: Iterable[int]) -> None:
    """Every one a unit modulo n^2: in (0, n^2) and coprime to n. Tested at once: their
    product mod n is coprime to n iff each of them is (a prime factor of n divides a product
    iff it divides a factor), one gcd instead of one per ciphertext (a tenth of the cost)."""
    n_ = mpz(n)
    n2 = n_ * n_
    product = mpz(1)
    for c in ciphertexts:
        if not 0 < c < n2:
            raise ProtocolError(NOT_A_UNIT)
        product = product * c % n_
    if gmpy2.gcd(product, n_) != 1:
        raise ProtocolError(NOT_A_UNIT)


# ------------------------------------------------------------------ byte framing


def int_to_bytes(value: int, length: int | None = None) -> bytes:
    if value < 0:
        raise EncodingError("only non-negative integers travel on the wire")
    size = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return int(value).to_bytes(size, "big")


def bytes_to_int(raw: bytes) -> int:
    return int.from_bytes(raw, "big")
