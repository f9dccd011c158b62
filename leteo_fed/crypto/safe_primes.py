"""Safe primes p = 2p' + 1 (p' prime), which threshold Paillier's modulus needs.

A random window of candidates p' is sieved at once (NumPy) against the small primes for both p'
and 2p' + 1, so only about one candidate in a hundred reaches a modular exponentiation; a
base-2 Fermat test of p then discards most of the rest before the Miller-Rabin rounds of gmpy2.
A 1024-bit safe prime takes a few seconds on one core (the search time is random).
"""

from __future__ import annotations

import secrets

import gmpy2
import numpy as np
from gmpy2 import mpz

SIEVE_LIMIT = 1 << 15  # small primes tried against every candidate, by the sieve
WINDOW = 1 << 13  # candidates p' = base + 6 k, k < WINDOW, sieved together
MILLER_RABIN_ROUNDS = 40


def _small_primes(limit: int) -> np.ndarray:
    flags = np.ones(limit, dtype=bool)
    flags[:2] = False
    for k in range(2, int(limit**0.5) + 1):
        if flags[k]:
            flags[k * k :: k] = False
    primes = np.nonzero(flags)[0]
    return primes[primes > 3].astype(np.int64)  # 2 and 3 are ruled out by p' = 5 mod 6


_PRIMES = _small_primes(SIEVE_LIMIT)


def random_safe_prime(bits: int) -> int:
    """A uniformly drawn window's first safe prime p of exactly `bits` bits (top two bits set,
    so the product of two has exactly 2 * bits bits)."""
    if bits < 16:
        raise ValueError(f"safe primes need at least 16 bits, got {bits}")
    offsets = 6 * np.arange(WINDOW, dtype=np.int64)
    limit = 1 << (bits - 3)
    primes = _PRIMES[np.less(_PRIMES, limit)]
    while True:
        # p' has bits - 1 bits with its top two set; p' = 5 (mod 6) makes p' and 2p' + 1 odd
        # and prime to 3
        base = mpz(secrets.randbits(bits - 1)) | (mpz(3) << (bits - 3))
        base += (5 - base % 6) % 6
        residues = np.array([int(base % int(q)) for q in primes], dtype=np.int64)
        # candidate k is out if l | p' or l | 2p' + 1, i.e. p' = 0 or p' = (l - 1) / 2 (mod l)
        at = (residues[:, None] + offsets[None, :]) % primes[:, None]
        out = (at == 0) | (at == (primes[:, None] - 1) // 2)
        for k in np.nonzero(~out.any(axis=0))[0]:
            half = base + 6 * int(k)
            p = 2 * half + 1
            if p.bit_length() != bits:
                break
            if gmpy2.powmod(2, p - 1, p) != 1:
                continue
            if gmpy2.is_prime(half, MILLER_RABIN_ROUNDS) and gmpy2.is_prime(p, MILLER_RABIN_ROUNDS):
                return int(p)
