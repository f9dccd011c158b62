"""One share's ciphertexts checked and multiplied: the pure step every way of summing a round
runs (in the CSP process, on its worker processes, on Spark executors; csp/share_sum.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gmpy2 import mpz

from leteo_fed.crypto.paillier import check_ciphertexts
from leteo_fed.errors import ProtocolError
from leteo_fed.transport.statements import ciphertext_digest


@dataclass(frozen=True)
class ShareCiphertexts:
    """One share as the check needs it (picklable: it travels to a worker)."""

    site: str
    digest: bytes  # what the owner signed: SHA-256 over the fixed-width ciphertexts
    ciphertexts: list[int]


def checked_product(n: int, width: int, shares: Sequence[ShareCiphertexts]) -> list[int]:
    """The coordinate-wise product mod n^2 of the shares' ciphertexts, each share checked
    first: every ciphertext in (0, n^2) and coprime to n, the digest its owner signed.
    ProtocolError for the first share that is not (naming its owner for a wrong digest)."""
    n2 = mpz(n) * mpz(n)
    total: list[mpz] = []
    for share in shares:
        check_ciphertexts(n, share.ciphertexts)
        if ciphertext_digest(share.ciphertexts, width) != share.digest:
            raise ProtocolError(
                f"the ciphertexts of the share from '{share.site}' do not match the digest "
                "its owner signed"
            )
        if total:
            total = [a * c % n2 for a, c in zip(total, share.ciphertexts, strict=True)]
        else:
            total = [mpz(c) for c in share.ciphertexts]
    return [int(c) for c in total]
