"""A round's shares as the aggregator relays them to the CSP, read and summed.

The stream (after its header) is every share's signed statement followed by that share's
ciphertext batches. Each statement is verified as it arrives (its owner's signature, this round,
the invited set, the quorum: `RoundShares`); each share's ciphertexts go to the round's
`ShareSum`, which checks them (units mod n^2, the digest their owner signed) and multiplies them
into the round's product. The same for blinded and projection rounds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from csp.share_check import ShareCiphertexts
from csp.share_sum import ShareSum
from leteo_fed.crypto.paillier import bytes_to_int
from leteo_fed.errors import ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.site_names import name_sites
from leteo_fed.transport.statements import RoundShares, read_statement

log = logging.getLogger("leteo.csp")


@dataclass
class StreamSum:
    """The product of a round's verified shares, who signed them, and what it took."""

    ciphertexts: list[int]
    contributors: list[str]
    verify_seconds: float  # the statements: signatures and the round's checks
    sum_seconds: float  # the ciphertexts: checked and multiplied (`ShareSum.seconds`)


def read_and_sum(
    round_id: str,
    request_iterator: Iterable,  # DecryptChunk or ProjectionChunk messages after the header
    shares: RoundShares,
    summer: ShareSum,
    owners_ca: bytes | None,
) -> StreamSum:
    """The stream's shares: statements verified here, as they arrive; ciphertexts checked
    and multiplied by `summer`. ProtocolError (or the statement's own error) for the first
    share that is not as the round requires, and unless the quorum signed."""
    n, verify_s = shares.n_ciphertexts, 0.0
    statement: pb.ShareStatement | None = None
    pending: list[int] = []

    def fold() -> None:
        assert statement is not None
        if len(pending) != n:
            raise ProtocolError(
                f"round {round_id}: the share from '{statement.site_id}' has "
                f"{len(pending)} of its {n} ciphertexts"
            )
        summer.add(ShareCiphertexts(statement.site_id, statement.ciphertext_digest, pending))

    for msg in request_iterator:
        part = msg.WhichOneof("part")
        if part == "share":
            if statement is not None:
                fold()
            start = time.perf_counter()
            statement = read_statement(msg.share, owners_ca)
            shares.admit(statement)
            verify_s += time.perf_counter() - start
            pending = []
        elif part == "batch":
            if statement is None:
                raise ProtocolError("ciphertexts must follow their share's signed statement")
            pending.extend(bytes_to_int(c) for c in msg.batch.ciphertexts)
            if len(pending) > n:
                raise ProtocolError(f"round {round_id}: a share has more than {n} ciphertexts")
        else:
            raise ProtocolError("only signed shares and their ciphertexts follow the header")
    if statement is not None:
        fold()
    total = summer.total()
    shares.require_quorum()
    log.info(
        "round %s: %d signed shares verified (%s) in %.3f s; ciphertexts checked and "
        "summed in %.3f s (%s)",
        round_id,
        len(shares.sites),
        name_sites(list(shares.sites)),
        verify_s,
        summer.seconds,
        summer.engine,
    )
    return StreamSum(total, list(shares.sites), verify_s, summer.seconds)
