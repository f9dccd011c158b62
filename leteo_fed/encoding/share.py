"""The public encoding of one share, one type for every secure-sum protocol.

A protocol states how large one owner's encoded statistics can get (`data_bound`, from its own
formula: value bound, rows, dimension, scale); the encoding adds room for DP noise and derives
the slot layout from that. Owners never need the protocol's formula to pack: a value beyond
`data_bound` is refused when it is encoded, and the layout's masks hide any aggregate of up to
`max_owners` shares of that size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.encoding.packing import (
    DEFAULT_STATISTICAL_SECURITY,
    SlotLayout,
    check_finite_and_bounded,
    make_layout,
)
from leteo_fed.errors import DataError, EncodingError, ProtocolError

DEFAULT_MAX_ROWS_PER_OWNER = 2**31
DEFAULT_MAX_OWNERS = 1024


def check_parameters(
    scale_bits: int,
    value_bound: float,
    max_rows_per_owner: int,
    max_owners: int,
    count_scale_bits: int = 0,
) -> None:
    """The checks every encoding's parameters pass before a protocol derives its bound."""
    if not 0 <= scale_bits <= 64:
        raise EncodingError(f"scale_bits must be in 0..64, got {scale_bits}")
    if not 0 <= count_scale_bits <= 64:
        raise EncodingError(f"count_scale_bits must be in 0..64, got {count_scale_bits}")
    if not (math.isfinite(value_bound) and value_bound > 0):
        raise EncodingError(f"value_bound must be a positive number, got {value_bound}")
    if max_rows_per_owner < 1 or max_owners < 1:
        raise EncodingError("max_rows_per_owner and max_owners must be positive")


def check_row_count(n: int, max_rows: int) -> None:
    """An owner's row count: at most the round's max_rows_per_owner (0: no limit)."""
    if max_rows and n > max_rows:
        raise DataError(f"{n} rows exceed the round's max_rows_per_owner {max_rows}", rule="rows")


@dataclass(frozen=True)
class ShareEncoding:
    """Public parameters of a round's share encoding; identical for all owners."""

    scale_bits: int
    value_bound: float  # every input value satisfies |x| <= value_bound (after DP clipping)
    data_bound: int  # largest |encoded statistic| of one owner, before noise
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER
    max_owners: int = DEFAULT_MAX_OWNERS
    statistical_security: int = DEFAULT_STATISTICAL_SECURITY
    rotation_dimension: int = 0  # >0: rows are rotated (projection-only mode)
    count_scale_bits: int = 0  # DP rounds encode counts at 2^count_scale_bits
    noise_bound: int = 0  # DP rounds: bound on one owner's |noise| per encoded value

    def __post_init__(self) -> None:
        check_parameters(
            self.scale_bits,
            self.value_bound,
            self.max_rows_per_owner,
            self.max_owners,
            self.count_scale_bits,
        )
        if self.data_bound < 1:
            raise EncodingError(f"data_bound must be >= 1, got {self.data_bound}")
        if self.noise_bound < 0:
            raise EncodingError("noise_bound must be >= 0")

    def per_owner_bound(self) -> int:
        """Largest |encoded value| one owner sends: its statistics plus its noise."""
        return self.data_bound + self.noise_bound

    def check_rows(self, x: np.ndarray, columns: Sequence[str]) -> None:
        """An owner's rows before they are summed: the declared shape, at least one row, no
        more than the encoding allows, every value finite and within its value bound."""
        if x.ndim != 2 or x.shape[1] != len(columns):
            raise DataError(f"expected a {len(columns)}-column matrix, got shape {x.shape}")
        if x.shape[0] == 0:
            raise DataError("the data source has no rows", rule="rows")
        check_row_count(x.shape[0], self.max_rows_per_owner)
        check_finite_and_bounded(x, columns, self.value_bound)

    def layout(self, key_bits: int) -> SlotLayout:
        return make_layout(
            key_bits, self.per_owner_bound(), self.max_owners, self.statistical_security
        )


def require_bound(enc: ShareEncoding, expected: int) -> None:
    """Owners recompute the protocol's bound from the public parameters: a declared bound that
    differs (a forged slot offset) is refused before anything is computed."""
    if enc.data_bound != expected:
        raise ProtocolError(
            "the encoding's slot offset does not follow from its parameters "
            f"(2^{math.log2(max(enc.data_bound, 1)):.1f} declared, 2^{math.log2(expected):.1f} "
            "expected)"
        )
