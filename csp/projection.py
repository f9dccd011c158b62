"""What a ComputeProjection header must say, checked before the CSP claims the round.

The header comes from the aggregator. Its sizes decide how much the CSP builds (one placeholder
class per declared class, a d x d eigenproblem), so they are checked against each other and
against the encoding first, by arithmetic only: a header naming 2^32 classes or a dimension of
2^32 is refused in microseconds instead of exhausting memory after the shares were summed. A
refused header leaves the round unclaimed; it was never decrypted.
"""

from __future__ import annotations

import math

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.messages import encoding_from_proto

GROUPINGS = {"pca": 0, "dca": 1, "lda": 1, "mdr": 2}  # label columns each method declares


def check_projection_header(head: pb.ProjectionRequest, key_bits: int) -> None:
    """DataError / ProtocolError naming the field of `head` that cannot describe a projection
    of the rotated aggregate under a `key_bits` key."""
    method = head.method
    if method not in GROUPINGS:
        raise DataError(
            f"unknown method {method[:40]!r}; expected one of {tuple(GROUPINGS)}", field="method"
        )
    enc, layout = encoding_from_proto(head.encoding, key_bits)
    d = head.dimension
    if d < 1 or enc.rotation_dimension != d:
        raise ProtocolError(
            f"projection rounds need a rotated encoding of the same dimension (dimension {d}, "
            f"encoding rotated in {enc.rotation_dimension})"
        )
    classes = list(head.classes_per_grouping)
    if len(classes) != GROUPINGS[method]:
        raise DataError(
            f"classes_per_grouping: {method} declares {GROUPINGS[method]} grouping(s), the "
            f"header has {len(classes)}",
            field="classes_per_grouping",
        )
    if any(k < 1 for k in classes):
        raise DataError(
            "classes_per_grouping: every grouping needs at least one class",
            field="classes_per_grouping",
        )
    n_values = d * (d + 1) // 2 + (sum(classes) if classes else 1) * (d + 1)
    n_ciphertexts = layout.n_ciphertexts(n_values)
    if len(head.mask_sums) != n_ciphertexts:
        raise ProtocolError(
            f"{len(head.mask_sums)} mask sums for the {n_ciphertexts} ciphertexts of "
            f"{n_values} values (dimension {d}, classes {classes})"
        )
    if not 1 <= head.components <= d:
        raise DataError(f"components must be in 1..{d}, got {head.components}", field="components")
    for name, non_negative in (("rho", True), ("rho_prime", False)):
        value = getattr(head, name)
        if head.HasField(name) and not (math.isfinite(value) and (value >= 0 or not non_negative)):
            sign = " non-negative" if non_negative else ""
            raise DataError(f"{name} must be a finite{sign} number, got {value}", field=name)
    floor = head.ridge_noise_floor
    if not (math.isfinite(floor) and floor >= 0):
        raise DataError(
            f"ridge_noise_floor must be a finite number >= 0, got {floor}",
            field="ridge_noise_floor",
        )
