"""Fixed-point encoding, slot packing and blinding: exact round trips and refusals that fire
before anything can wrap modulo a slot or modulo n."""

from __future__ import annotations

import random
import warnings
from fractions import Fraction

import numpy as np
import pytest

from leteo_fed.encoding.packing import (
    SlotLayout,
    check_finite_and_bounded,
    encode_fixed,
    make_layout,
    masks_from_seed,
    new_mask_seed,
    pack,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.errors import DataError, EncodingError

KEY_BITS = 2048


@pytest.fixture(scope="module")
def layout() -> SlotLayout:
    return make_layout(KEY_BITS, per_owner_bound=2**90 + 12345, max_owners=5)


def random_signed(count: int, offset: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    values = [rng.randint(-offset, offset) for _ in range(count)]
    # the extremes must round-trip too
    values[0], values[-1] = offset, -offset
    if count > 2:
        values[1] = 0
    return values


# ------------------------------------------------------------------ encode_fixed


@pytest.mark.parametrize("scale", [0, 1, 8, 20, 32])
def test_encode_fixed_round_trip_within_half_step(scale: int) -> None:
    rng = np.random.default_rng(scale)
    values = np.concatenate(
        [rng.normal(scale=1000.0, size=200), [-0.5, 0.5, -1.25, 2.75, -1e-9, 0.0, -3.0, 1 / 3]]
    )
    out = encode_fixed(values, scale, bound=2**80, what="x")
    assert len(out) == values.size
    assert all(type(v) is int for v in out)
    half_step = Fraction(1, 2 ** (scale + 1))
    for v, e in zip(values.tolist(), out, strict=True):
        assert abs(Fraction(e, 2**scale) - Fraction(v)) <= half_step
    # negative values stay negative (no unsigned wrap)
    assert all(
        (e < 0) == (v < 0) for v, e in zip(values, out, strict=True) if abs(v) * 2**scale >= 1
    )


def test_encode_fixed_exact_for_representable_values() -> None:
    values = np.array([[1.5, -2.25], [0.0, -1024.125]])
    assert encode_fixed(values, 3, bound=10**6, what="x") == [12, -18, 0, -8193]


@pytest.mark.parametrize(("bad", "position"), [(np.nan, 2), (np.inf, 0), (-np.inf, 4)])
def test_encode_fixed_refuses_non_finite_naming_position(bad: float, position: int) -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    values[position] = bad
    with pytest.raises(DataError, match=rf"\bposition {position}\b"):
        encode_fixed(values, 8, bound=2**40, what="sum of x")
    with pytest.raises(DataError, match="sum of x"):
        encode_fixed(values, 8, bound=2**40, what="sum of x")


def test_encode_fixed_bound_is_inclusive_and_checked_on_magnitude() -> None:
    # -3 * 2^4 = -48: magnitude 48
    assert encode_fixed(np.array([0.5, -3.0]), 4, bound=48, what="v") == [8, -48]
    with pytest.raises(EncodingError, match="v"):
        encode_fixed(np.array([0.5, -3.0]), 4, bound=47, what="v")
    with pytest.raises(EncodingError):
        encode_fixed(np.array([2.0**60]), 8, bound=2**67, what="v")


def test_encode_fixed_large_finite_value_refused_as_encoding_error() -> None:
    # within float64 after scaling: must be refused by the bound check, not wrapped
    big = 2.0**1000
    with pytest.raises(EncodingError):
        encode_fixed(np.array([1.0, big]), 16, bound=2**64, what="v")


def test_encode_fixed_refuses_overflowing_scale_with_encoding_error() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(EncodingError):
            encode_fixed(np.array([1e300]), 64, bound=2**64, what="v")


def test_encode_fixed_encodes_huge_value_within_bound_exactly() -> None:
    v = 1e300
    expected = int(v) << 64  # exact: v is an integer-valued float
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert encode_fixed(np.array([v]), 64, bound=expected, what="v") == [expected]


# ------------------------------------------------------------------ pack / unpack


@pytest.mark.parametrize("extra", [0, 1, 7])
def test_pack_unpack_round_trip_with_partial_last(layout: SlotLayout, extra: int) -> None:
    k = layout.slots_per_ciphertext
    count = 2 * k + extra
    values = random_signed(count, layout.offset, extra)
    packed = pack(values, layout)
    assert len(packed) == layout.n_ciphertexts(count) == -(-count // k)
    assert all(0 <= p < 2 ** (KEY_BITS - 1) for p in packed)
    # independent reconstruction of the first plaintext
    w = layout.slot_bits
    assert packed[0] == sum((v + layout.offset) << (j * w) for j, v in enumerate(values[:k]))
    slots = unpack(packed, count, layout)
    assert slots == [v + layout.offset for v in values]
    assert [s - layout.offset for s in slots] == values


def test_pack_refuses_values_beyond_offset(layout: SlotLayout) -> None:
    o = layout.offset
    for bad in (o + 1, -o - 1):
        values = [0, 1, 2, bad]
        with pytest.raises(EncodingError, match=r"position 3\b"):
            pack(values, layout)
    pack([o, -o], layout)  # the bound itself is allowed


def test_unpack_refuses_too_few_ciphertexts(layout: SlotLayout) -> None:
    k = layout.slots_per_ciphertext
    packed = pack([1] * (k + 1), layout)
    with pytest.raises(EncodingError):
        unpack(packed[:1], k + 1, layout)


def test_masks_from_seed_range_determinism_and_independence(layout: SlotLayout) -> None:
    seed = new_mask_seed()
    masks = masks_from_seed(seed, 200, layout)
    assert len(masks) == 200
    assert masks == masks_from_seed(seed, 200, layout)  # the aggregator re-derives them
    assert masks[:5] == masks_from_seed(seed, 5, layout)
    assert all(0 <= r < 2**layout.mask_bits for r in masks)
    assert len(set(masks)) == 200  # collisions have probability ~2^-2000
    assert max(masks).bit_length() > layout.mask_bits - 16
    assert set(masks).isdisjoint(masks_from_seed(new_mask_seed(), 200, layout))


def test_masks_from_seed_refuses_short_seed(layout: SlotLayout) -> None:
    with pytest.raises(EncodingError, match="16 bytes"):
        masks_from_seed(b"short", 1, layout)


# ------------------------------------------------------------------ make_layout


@pytest.mark.parametrize("key_bits", [1024, 2048, 3072])
@pytest.mark.parametrize("bound", [1, 3, 2**40 - 1, 2**100 + 7])
@pytest.mark.parametrize("owners", [1, 3, 1024])
@pytest.mark.parametrize("security", [40, 64, 128])
def test_make_layout_invariants(key_bits: int, bound: int, owners: int, security: int) -> None:
    lay = make_layout(key_bits, bound, owners, security)
    aggregate = 2 * bound * owners
    packed_bits = lay.slot_bits * lay.slots_per_ciphertext
    assert lay.offset == bound and lay.max_owners == owners
    assert lay.statistical_security == security
    # no carry: the largest slot total fits its slot
    assert aggregate < 2**lay.slot_bits
    # statistical hiding: one owner's mask range >= 2^kappa times the largest packed sum
    assert lay.mask_bits == packed_bits + security
    # max_owners masked shares at their worst stay below 2^(key_bits - 1) <= n
    assert lay.slots_per_ciphertext >= 1
    assert owners * (2**packed_bits - 1 + 2**lay.mask_bits - 1) < 2 ** (key_bits - 1)
    # and packs as many slots as fit
    more = lay.slot_bits * (lay.slots_per_ciphertext + 1) + security + owners.bit_length() + 1
    assert more > key_bits - 1


def test_make_layout_refuses_slot_wider_than_key() -> None:
    with pytest.raises(EncodingError, match="does not fit"):
        make_layout(256, 2**200, 4)
    # boundary: one slot of w bits needs w + kappa + bits(N_max) + 2 key bits
    lay = make_layout(2048, 1, 1, 64)  # aggregate 2 -> 2-bit slot
    assert lay.slot_bits == 2
    key_bits = lay.slot_bits + 64 + 1 + 2
    assert make_layout(key_bits, 1, 1, 64).slots_per_ciphertext == 1
    with pytest.raises(EncodingError):
        make_layout(key_bits - 1, 1, 1, 64)


@pytest.mark.parametrize(
    ("bound", "owners", "security"), [(0, 1, 64), (-5, 1, 64), (1, 0, 64), (1, 1, 39)]
)
def test_make_layout_refuses_bad_parameters(bound: int, owners: int, security: int) -> None:
    with pytest.raises(EncodingError):
        make_layout(2048, bound, owners, security)


# ------------------------------------------------------------------ owner masks


def masked_sum(owners: list[list[int]], lay: SlotLayout) -> tuple[list[int], list[int]]:
    """What the CSP decrypts (the sum of owner-masked packed shares) and the mask sums the
    aggregator derives from the owners' seeds."""
    count = len(owners[0])
    n_plain = lay.n_ciphertexts(count)
    plain, mask_sums = [0] * n_plain, [0] * n_plain
    for vec in owners:
        masks = masks_from_seed(new_mask_seed(), n_plain, lay)
        share = [p + r for p, r in zip(pack(vec, lay), masks, strict=True)]
        plain = [a + b for a, b in zip(plain, share, strict=True)]
        mask_sums = [a + b for a, b in zip(mask_sums, masks, strict=True)]
    return plain, mask_sums


def test_masked_sum_unmasks_to_signed_sum(layout: SlotLayout) -> None:
    count = 3 * layout.slots_per_ciphertext - 2
    owners = [random_signed(count, layout.offset, seed) for seed in range(4)]
    plain, mask_sums = masked_sum(owners, layout)
    assert all(p < 2 ** (KEY_BITS - 1) for p in plain)
    slots = unpack(remove_masks(plain, mask_sums, layout), count, layout)
    expected = [sum(col) for col in zip(*owners, strict=True)]
    assert slot_totals(slots, len(owners), layout) == expected


def test_worst_case_masked_sum_stays_below_n_and_exact(layout: SlotLayout) -> None:
    """All owners at +offset (or -offset) and every mask at its maximum: still exact, < n."""
    count = layout.slots_per_ciphertext + 3
    n = layout.max_owners
    n_plain = layout.n_ciphertexts(count)
    for sign in (1, -1):
        owners = [[sign * layout.offset] * count for _ in range(n)]
        top = 2**layout.mask_bits - 1
        plain = [sum(col) + n * top for col in zip(*(pack(v, layout) for v in owners), strict=True)]
        assert all(p < 2 ** (KEY_BITS - 1) for p in plain)
        slots = unpack(remove_masks(plain, [n * top] * n_plain, layout), count, layout)
        assert slot_totals(slots, n, layout) == [sign * n * layout.offset] * count


def test_remove_masks_refuses_wrong_masks(layout: SlotLayout) -> None:
    owners = [random_signed(6, layout.offset, 10 + i) for i in range(3)]
    plain, mask_sums = masked_sum(owners, layout)
    with pytest.raises(EncodingError, match="plaintext 0"):
        remove_masks(plain, [m + plain[0] for m in mask_sums], layout)  # below zero
    with pytest.raises(EncodingError, match="plaintext 0"):
        remove_masks(plain, [0] * len(plain), layout)  # the masks left in: far too large
    with pytest.raises(EncodingError):
        remove_masks(plain, mask_sums[:-1] if len(plain) > 1 else [], layout)


def test_slot_totals_refuses_corrupted_aggregate(layout: SlotLayout) -> None:
    shift = 3 * layout.offset
    with pytest.raises(EncodingError, match=r"slot 1\b"):
        slot_totals([0, 2 * shift + 1], 3, layout)
    assert slot_totals([0, 2 * shift], 3, layout) == [-shift, shift]  # the edges are accepted
    with pytest.raises(EncodingError, match="max_owners"):
        slot_totals([0], layout.max_owners + 1, layout)


# ------------------------------------------------------------------ data checks


def test_check_finite_names_column_with_nan() -> None:
    x = np.ones((4, 3))
    x[2, 1] = np.nan
    x[3, 1] = np.inf
    with pytest.raises(DataError, match="'b'") as info:
        check_finite_and_bounded(x, ["a", "b", "c"], 10.0)
    assert info.value.field == "b"
    assert "2 " in str(info.value)  # two bad values counted


def test_check_finite_names_first_bad_column() -> None:
    x = np.ones((3, 3))
    x[0, 2] = -np.inf
    x[1, 1] = np.nan
    with pytest.raises(DataError) as info:
        check_finite_and_bounded(x, ["a", "b", "c"], 10.0)
    assert info.value.field == "b"


def test_check_bounded_names_column_beyond_bound() -> None:
    x = np.zeros((3, 3))
    x[1, 2] = -10.5
    with pytest.raises(DataError, match="'c'") as info:
        check_finite_and_bounded(x, ["a", "b", "c"], 10.0)
    assert info.value.field == "c"
    x[1, 2] = -10.0  # exactly the bound is allowed
    check_finite_and_bounded(x, ["a", "b", "c"], 10.0)
    check_finite_and_bounded(np.empty((0, 3)), ["a", "b", "c"], 10.0)
