"""A statistic's blocks as a share's integers: the encoding sized by what the blocks can hold,
the check of an owner's rows before they are summed, and the sums encoded block by block,
each within its declared bound (a statistic that breaks its bound is refused, never wrapped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from leteo_fed.encoding.packing import check_finite_and_bounded, encode_fixed
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
)
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols.dp_plan import DpSpec, clip_for_release
from leteo_fed.protocols.round_types import SiteTable
from leteo_fed.protocols.statistic import COUNT, Block, Rows, n_values


def validate_rows(
    x: np.ndarray,
    columns: list[str],
    enc: ShareEncoding,
    bounded: Mapping[str, float] | None = None,
) -> None:
    """An owner's rows before they are summed (`ShareEncoding.check_rows`); the `bounded`
    columns, last, each within its own bound instead of the round's."""
    if not bounded:
        enc.check_rows(x, columns)
        return
    if x.ndim != 2 or x.shape[1] != len(columns):
        raise DataError(f"expected a {len(columns)}-column matrix, got shape {x.shape}")
    check_finite_and_bounded(x, columns, np.inf)
    d = len(columns) - len(bounded)
    enc.check_rows(x[:, :d], columns[:d])
    for j, (name, bound) in enumerate(bounded.items()):
        check_finite_and_bounded(x[:, d + j : d + j + 1], [name], bound)


def statistic_encoding(
    blocks: tuple[Block, ...],
    *,
    scale_bits: int,
    value_bound: float,
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER,
    max_owners: int = DEFAULT_MAX_OWNERS,
    count_scale_bits: int = 0,
    noise_bound: int = 0,
) -> ShareEncoding:
    """The encoding of a share laid out as `blocks` (declared at `value_bound`): its data
    bound is what `max_rows_per_owner` rows can add up to, block by block."""
    check_parameters(scale_bits, value_bound, max_rows_per_owner, max_owners, count_scale_bits)
    return ShareEncoding(
        scale_bits=scale_bits,
        value_bound=value_bound,
        data_bound=data_bound(blocks, max_rows_per_owner, scale_bits, count_scale_bits),
        max_rows_per_owner=max_rows_per_owner,
        max_owners=max_owners,
        count_scale_bits=count_scale_bits,
        noise_bound=noise_bound,
    )


def encode_blocks(
    blocks: tuple[Block, ...], sums: Mapping[str, np.ndarray], enc: ShareEncoding
) -> list[int]:
    """One owner's sums as the share's integers, block by block, each checked against the
    encoding's bound (a statistic that breaks its declared bound is refused, never wrapped)."""
    missing = [b.name for b in blocks if b.name not in sums]
    if missing:
        raise ProtocolError(f"the statistic computed no {', '.join(missing)}")
    out: list[int] = []
    for b in blocks:
        arr = np.asarray(sums[b.name], dtype=np.float64).ravel()
        if arr.size != b.size:
            raise ProtocolError(f"block {b.name!r} has {arr.size} values, declared {b.size}")
        if b.kind == COUNT:
            if not np.all(np.isfinite(arr)) or np.any(arr != np.rint(arr)) or np.any(arr < 0):
                raise ProtocolError(f"block {b.name!r} holds counts: whole numbers >= 0")
            bits = enc.count_scale_bits
            values = [int(v) << bits for v in arr.astype(np.int64).tolist()]
            if max(values, default=0) > enc.data_bound:
                raise EncodingError(f"{b.name}: a count exceeds the declared bound", rule="rows")
            out += values
        else:
            out += encode_fixed(arr, enc.scale_bits, enc.data_bound, b.name)
    return out


def owner_rows(
    table: SiteTable,
    features: list[str],
    bounded: Mapping[str, float],
    enc: ShareEncoding,
    dp: DpSpec | None,
) -> tuple[Rows, np.ndarray]:
    """An owner's rows as a statistic reads them (clipped as the spec says in a DP round), and
    which were clipped. A statistic without numeric columns reads the table itself."""
    numeric = [*features, *bounded]
    x = table.matrix(numeric) if numeric else np.empty((0, 0))
    clipped = np.zeros(len(x), dtype=bool)
    if numeric:
        if dp is not None:
            x, clipped = clip_for_release(x, features, dp, bounded)
        limits = bounded if dp is not None else dict.fromkeys(bounded, enc.value_bound)
        validate_rows(x, numeric, enc, limits)
    return Rows(x, table, enc.value_bound, dp is not None, enc.max_rows_per_owner), clipped


def data_bound(blocks: Sequence[Block], max_rows: int, scale_bits: int, count_bits: int) -> int:
    """The largest |encoded value| of one owner's share: `max_rows` rows each adding at most
    `row_bound` to a value, at that block's scale."""
    out = 1
    for b in blocks:
        bits = count_bits if b.kind == COUNT else scale_bits
        out = max(out, math.ceil(max_rows * b.row_bound) << bits)
    return out


def integer_sensitivity(
    blocks: Sequence[Block],
    scale_bits: int,
    count_bits: int,
    exclusive: Sequence[Sequence[str]] = (),
) -> noise.Sensitivity:
    """The sensitivity of one owner's encoded share, in integer units: a sum block's real-unit
    sensitivity times 2^f plus the rounding slack (|round(aF) - round(bF)| <= |a - b| F + 1 per
    value); a count block's exactly, at 2^count_scale_bits. With `exclusive` groups of blocks
    (`SecureSumStatistic.exclusive_blocks`), of which one row moves a single group, only the
    largest group's L1 and L2 count, beside the blocks outside every group."""
    moved: dict[str, tuple[float, float]] = {}
    for b in blocks:
        if b.kind == COUNT:
            unit = float(2**count_bits)
            moved[b.name] = (b.l1 * unit, (b.l2 * unit) ** 2)
        else:
            unit = float(2**scale_bits)
            moved[b.name] = (b.l1 * unit + b.size, (b.l2 * unit + math.sqrt(b.size)) ** 2)
    grouped = {name for group in exclusive for name in group}
    l1 = sum(moved[name][0] for name in moved if name not in grouped)
    l2_squared = sum(moved[name][1] for name in moved if name not in grouped)
    if exclusive:
        l1 += max(sum(moved[name][0] for name in group) for group in exclusive)
        l2_squared += max(sum(moved[name][1] for name in group) for group in exclusive)
    l2 = math.sqrt(l2_squared)
    return noise.Sensitivity(l1=min(l1, math.sqrt(n_values(blocks)) * l2), l2=l2)
