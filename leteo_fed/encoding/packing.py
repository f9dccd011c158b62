"""Fixed-point encoding, slot packing and blinding masks for Paillier shares.

Layout of one share: a list of signed integers v_i (the encoded statistics). Each owner adds a
public offset O >= max|v_i| so every slot u_i = v_i + O lies in [0, 2 O], then packs
k = floor((bits(n) - 1) / w) slots of w bits into one plaintext. The aggregate of N <= N_max
owners has slots in [0, A] with A = 2 O N_max. The aggregator adds masks r_i uniform in
[0, 2^mask_bits) with 2^mask_bits >= 2^kappa * A (statistical hiding, distance <= 2^-kappa), and
w = mask_bits + 1 guarantees that no slot carries into its neighbour and no plaintext reaches n.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.errors import DataError, EncodingError, ProtocolError

DEFAULT_STATISTICAL_SECURITY = 64


@dataclass(frozen=True)
class SlotLayout:
    slot_bits: int
    slots_per_ciphertext: int
    offset: int
    mask_bits: int
    max_owners: int
    statistical_security: int

    def n_ciphertexts(self, n_values: int) -> int:
        return -(-n_values // self.slots_per_ciphertext)


def check_declared_layout(
    layout: SlotLayout, slot_bits: int, slots_per_ciphertext: int, offset: int, mask_bits: int
) -> None:
    """A peer's declared slot layout must be the one its encoding parameters imply."""
    declared = (slot_bits, slots_per_ciphertext, offset, mask_bits)
    derived = (layout.slot_bits, layout.slots_per_ciphertext, layout.offset, layout.mask_bits)
    if declared != derived:
        raise ProtocolError(
            f"encoding layout {declared[:2]} does not follow from its parameters {derived[:2]}"
        )


def make_layout(
    key_bits: int,
    per_owner_bound: int,
    max_owners: int,
    statistical_security: int = DEFAULT_STATISTICAL_SECURITY,
) -> SlotLayout:
    """Smallest slot that holds any aggregate of max_owners shares plus a hiding mask."""
    if per_owner_bound < 1 or max_owners < 1:
        raise EncodingError("per-owner bound and max_owners must be positive")
    if statistical_security < 40:
        raise EncodingError(f"statistical security {statistical_security} < 40 bits is refused")
    aggregate_bound = 2 * per_owner_bound * max_owners
    mask_bits = aggregate_bound.bit_length() + statistical_security
    slot_bits = mask_bits + 1
    slots = (key_bits - 1) // slot_bits
    if slots < 1:
        raise EncodingError(
            f"a {slot_bits}-bit slot does not fit a {key_bits}-bit key: lower the value bound, "
            "scale bits, max rows or max owners, or use a larger key"
        )
    return SlotLayout(
        slot_bits, slots, per_owner_bound, mask_bits, max_owners, statistical_security
    )


def encode_fixed(values: np.ndarray, scale_bits: int, bound: int, what: str) -> list[int]:
    """round(v * 2^scale_bits) as exact Python ints; refuses NaN/inf and |encoded| > bound."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise DataError(f"{what}: non-finite value at position {bad}")
    scaled = np.rint(np.ldexp(arr, scale_bits))  # exact power-of-two scaling, then round
    out = [int(v) for v in np.where(np.isfinite(scaled), scaled, 0.0).tolist()]
    for i in np.flatnonzero(~np.isfinite(scaled)).tolist():
        # |v| * 2^f overflowed float64; such a v is an integer, so the shift is exact.
        out[i] = int(arr[i]) << scale_bits
    worst = max((abs(v) for v in out), default=0)
    if worst > bound:
        raise EncodingError(
            f"{what}: encoded magnitude 2^{math.log2(worst):.1f} exceeds the declared bound "
            f"2^{math.log2(bound):.1f}"
        )
    return out


def pack(values: Sequence[int], layout: SlotLayout) -> list[int]:
    """Signed values -> packed non-negative plaintexts (offset added, bounds checked)."""
    offset, width, k = layout.offset, layout.slot_bits, layout.slots_per_ciphertext
    packed = []
    for start in range(0, len(values), k):
        acc = 0
        for j, v in enumerate(values[start : start + k]):
            if not -offset <= v <= offset:
                raise EncodingError(
                    f"value at position {start + j} exceeds the slot offset "
                    f"(|v| = 2^{math.log2(abs(v)):.1f} > 2^{math.log2(offset):.1f})"
                )
            acc |= (v + offset) << (j * width)
        packed.append(acc)
    return packed


def unpack(packed: Sequence[int], n_values: int, layout: SlotLayout) -> list[int]:
    width, k = layout.slot_bits, layout.slots_per_ciphertext
    if len(packed) != layout.n_ciphertexts(n_values):
        raise EncodingError(
            f"{n_values} values need {layout.n_ciphertexts(n_values)} plaintexts, got {len(packed)}"
        )
    mask = (1 << width) - 1
    out: list[int] = []
    for i, p in enumerate(packed):
        count = min(k, n_values - i * k)
        out.extend((p >> (j * width)) & mask for j in range(count))
        if p >> (count * width):
            raise EncodingError(f"plaintext {i} has bits beyond its {count} slots: corrupted")
    return out


def pack_raw(values: Sequence[int], layout: SlotLayout) -> list[int]:
    """Non-negative slot values (masks) -> packed plaintexts, no offset."""
    width, k = layout.slot_bits, layout.slots_per_ciphertext
    packed = []
    for start in range(0, len(values), k):
        acc = 0
        for j, v in enumerate(values[start : start + k]):
            if not 0 <= v < (1 << width):
                raise EncodingError("mask does not fit its slot")
            acc |= v << (j * width)
        packed.append(acc)
    return packed


def draw_masks(n_values: int, layout: SlotLayout) -> list[int]:
    return [secrets.randbits(layout.mask_bits) for _ in range(n_values)]


def unblind(
    blinded_slots: Sequence[int], masks: Sequence[int], n_owners: int, layout: SlotLayout
) -> list[int]:
    """Masked aggregate slots -> signed totals. Refuses anything outside the declared range."""
    if n_owners > layout.max_owners:
        raise EncodingError(f"{n_owners} shares exceed the layout's max_owners {layout.max_owners}")
    if len(blinded_slots) != len(masks):
        raise EncodingError("blinded slots and masks differ in length")
    shift = n_owners * layout.offset
    totals = []
    for i, (b, r) in enumerate(zip(blinded_slots, masks, strict=True)):
        t = b - r - shift
        if not -shift <= t <= shift:
            raise EncodingError(f"aggregate slot {i} is out of range: the aggregate is corrupted")
        totals.append(t)
    return totals


def check_finite_and_bounded(x: np.ndarray, columns: Sequence[str], bound: float) -> None:
    """Names the first column with NaN/inf or a value beyond the declared bound."""
    finite = np.isfinite(x)
    bad = (~finite).sum(axis=0)
    max_abs = np.abs(np.where(finite, x, 0.0)).max(axis=0) if x.size else np.zeros(len(columns))
    raise_column_problem(columns, bad.tolist(), max_abs.tolist(), bound)


def raise_column_problem(
    columns: Sequence[str], bad_counts: Sequence[int], max_abs: Sequence[float], bound: float
) -> None:
    """One wording for every engine (NumPy here, Spark in leteo_fed.data.spark_stats)."""
    for name, count in zip(columns, bad_counts, strict=True):
        if count:
            raise DataError(
                f"column '{name}' has {count} missing, NaN or infinite value(s)", field=name
            )
    for name, top in zip(columns, max_abs, strict=True):
        if top is not None and top > bound:
            raise DataError(
                f"column '{name}' has |x| = {top:.6g} above the round's value bound "
                f"{bound:.6g}; raise the bound (--value-bound) or rescale the column",
                field=name,
            )
