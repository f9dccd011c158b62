"""Fixed-point encoding, slot packing and one-time masks for Paillier shares.

Layout of one share: a list of signed integers v_i (the encoded statistics). Each owner adds a
public offset O >= max|v_i| so every slot u_i = v_i + O lies in [0, 2 O], then packs
k slots of w = bits(2 O N_max) bits into one plaintext P < 2^(k w): the slots of a sum of up
to N_max shares never carry into each other.

Masks are per plaintext, not per slot, and chosen by the owners: each owner adds its own
R uniform in [0, 2^mask_bits), mask_bits = k w + kappa, to every packed plaintext before
encrypting, and tells only the aggregator the seed R was drawn from. The CSP decrypts the sum
of the shares, i.e. sum(P) + sum(R); one honest owner's R alone hides sum(P) < 2^(k w) to
statistical distance 2^-kappa per plaintext. k is the largest count with
k w + kappa + bits(N_max) + 1 <= bits(n) - 1, so N_max masked shares never reach n. The
statistical margin is paid once per plaintext instead of once per slot.
"""

from __future__ import annotations

import hashlib
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
    """Most slots per plaintext such that max_owners masked shares sum below n."""
    if per_owner_bound < 1 or max_owners < 1:
        raise EncodingError("per-owner bound and max_owners must be positive")
    if statistical_security < 40:
        raise EncodingError(f"statistical security {statistical_security} < 40 bits is refused")
    slot_bits = (2 * per_owner_bound * max_owners).bit_length()
    room = key_bits - 2 - statistical_security - max_owners.bit_length()
    slots = room // slot_bits
    if slots < 1:
        raise EncodingError(
            f"a {slot_bits}-bit slot does not fit a {key_bits}-bit key: lower the value bound, "
            "scale bits, max rows or max owners, or use a larger key"
        )
    mask_bits = slots * slot_bits + statistical_security
    return SlotLayout(
        slot_bits, slots, per_owner_bound, mask_bits, max_owners, statistical_security
    )


def encode_fixed(values: np.ndarray, scale_bits: int, bound: int, what: str) -> list[int]:
    """round(v * 2^scale_bits) as exact Python ints; refuses NaN/inf and |encoded| > bound."""
    arr = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise DataError(f"{what}: non-finite value at position {bad}", rule="values")
    scaled = np.rint(np.ldexp(arr, scale_bits))  # exact power-of-two scaling, then round
    out = [int(v) for v in np.where(np.isfinite(scaled), scaled, 0.0).tolist()]
    for i in np.flatnonzero(~np.isfinite(scaled)).tolist():
        # |v| * 2^f overflowed float64; such a v is an integer, so the shift is exact.
        out[i] = int(arr[i]) << scale_bits
    worst = max((abs(v) for v in out), default=0)
    if worst > bound:
        raise EncodingError(
            f"{what}: encoded magnitude 2^{math.log2(worst):.1f} exceeds the declared bound "
            f"2^{math.log2(bound):.1f}",
            rule="bounds",
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
                    f"(|v| = 2^{math.log2(abs(v)):.1f} > 2^{math.log2(offset):.1f})",
                    rule="bounds",
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


MASK_DOMAIN = b"leteo/v1/share-mask\x00"


def masks_from_seed(seed: bytes, n_ciphertexts: int, layout: SlotLayout) -> list[int]:
    """An owner's one-time masks, one per plaintext, uniform in [0, 2^mask_bits).

    SHAKE-256 of the seed: the owner sends 32 bytes to the aggregator instead of the masks."""
    if len(seed) < 16:
        raise EncodingError(f"a mask seed needs at least 16 bytes, got {len(seed)}")
    width = (layout.mask_bits + 7) // 8
    stream = hashlib.shake_256(MASK_DOMAIN + seed).digest(width * n_ciphertexts)
    excess = width * 8 - layout.mask_bits
    return [
        int.from_bytes(stream[i * width : (i + 1) * width], "big") >> excess
        for i in range(n_ciphertexts)
    ]


def new_mask_seed() -> bytes:
    return secrets.token_bytes(32)


def remove_masks(
    plaintexts: Sequence[int], mask_sums: Sequence[int], layout: SlotLayout
) -> list[int]:
    """sum(P) + sum(R) -> sum(P); refuses a result outside [0, 2^(k w)) (wrong masks or a
    corrupted aggregate)."""
    if len(plaintexts) != len(mask_sums):
        raise EncodingError(f"{len(plaintexts)} plaintexts but {len(mask_sums)} mask sums")
    ceiling = 1 << (layout.slots_per_ciphertext * layout.slot_bits)
    out = []
    for i, (p, r) in enumerate(zip(plaintexts, mask_sums, strict=True)):
        v = p - r
        if not 0 <= v < ceiling:
            raise EncodingError(f"plaintext {i} is out of range once unmasked: corrupted")
        out.append(v)
    return out


def slot_totals(slots: Sequence[int], n_owners: int, layout: SlotLayout) -> list[int]:
    """Summed slots of n_owners shares -> signed totals (their offsets removed)."""
    if n_owners > layout.max_owners:
        raise EncodingError(f"{n_owners} shares exceed the layout's max_owners {layout.max_owners}")
    shift = n_owners * layout.offset
    totals = []
    for i, u in enumerate(slots):
        t = u - shift
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
                f"column '{name}' has {count} missing, NaN or infinite value(s)",
                field=name,
                rule="values",
            )
    for name, top in zip(columns, max_abs, strict=True):
        if top is not None and top > bound:
            raise DataError(
                f"column '{name}' has |x| = {top:.6g} above the round's value bound "
                f"{bound:.6g}; raise the bound (--value-bound) or rescale the column",
                field=name,
                rule="bounds",
            )
