"""The CSP checks a projection header's sizes by arithmetic before it claims the round: a header
naming 2^32 classes or dimensions is refused at once, not after building them (found by
tests/fuzz/)."""

from __future__ import annotations

import math

import pytest

from csp.projection import check_projection_header
from leteo_fed.errors import LeteoError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import moments_round
from leteo_fed.transport.messages import encoding_to_proto

KEY_BITS = 1024


def honest(method: str = "pca", classes: tuple[int, ...] = ()) -> pb.ProjectionRequest:
    d = 3
    enc = moments_round.encoding(rotation_dimension=d)
    layout = enc.layout(KEY_BITS)
    n_values = d * (d + 1) // 2 + (sum(classes) if classes else 1) * (d + 1)
    return pb.ProjectionRequest(
        round_id="pca-0123456789ab",
        method=method,
        dimension=d,
        classes_per_grouping=list(classes),
        encoding=encoding_to_proto(enc, layout),
        components=2,
        mask_sums=[b"\x01"] * layout.n_ciphertexts(n_values),
    )


@pytest.mark.parametrize(
    "method, classes", [("pca", ()), ("dca", (3,)), ("lda", (2,)), ("mdr", (2, 4))]
)
def test_honest_headers_pass(method: str, classes: tuple[int, ...]) -> None:
    check_projection_header(honest(method, classes), KEY_BITS)


@pytest.mark.parametrize(
    "changes, phrase",
    [
        ({"method": "PCA"}, "unknown method"),
        ({"dimension": 0}, "dimension"),
        ({"dimension": 2**32 - 1}, "dimension"),
        ({"classes_per_grouping": [2**32 - 1, 2**32 - 1]}, "classes_per_grouping"),
        ({"method": "dca", "classes_per_grouping": [2**32 - 1]}, "mask sums"),
        ({"method": "dca", "classes_per_grouping": [0]}, "classes_per_grouping"),
        ({"mask_sums": []}, "mask sums"),
        ({"components": 0}, "components"),
        ({"components": 4}, "components"),
        ({"rho": math.nan}, "rho"),
        ({"rho": -1.0}, "rho"),
        ({"rho_prime": math.inf}, "rho_prime"),
        ({"ridge_noise_floor": -1.0}, "ridge_noise_floor"),
        ({"encoding": pb.Encoding()}, "noise bound"),
    ],
)
def test_bad_headers_are_refused_naming_the_field(changes: dict, phrase: str) -> None:
    head = honest()
    for name, value in changes.items():
        head.ClearField(name)
        if isinstance(value, list):
            getattr(head, name).extend(value)
        elif isinstance(value, pb.Encoding):
            getattr(head, name).CopyFrom(value)
        else:
            setattr(head, name, value)
    with pytest.raises(LeteoError, match=phrase):
        check_projection_header(head, KEY_BITS)


def test_a_negative_rho_prime_is_allowed() -> None:
    head = honest("dca", (3,))
    head.rho_prime = -0.5  # DCA's rho' may be negative (as the aggregator's planner allows)
    check_projection_header(head, KEY_BITS)
