"""Federated PCA math: shares of several partitions of the wine data, summed as the aggregator
would after unblinding, must give the pooled-data PCA that NumPy computes centrally."""

from __future__ import annotations

import re
import warnings
from fractions import Fraction

import numpy as np
import pytest
from sklearn.datasets import load_wine

from leteo_fed.encoding.packing import (
    masks_from_seed,
    new_mask_seed,
    pack,
    remove_masks,
    slot_totals,
    unpack,
)
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.protocols import moments
from leteo_fed.protocols.moments_round import encoding as moments_encoding
from leteo_fed.protocols.pca import (
    LocalStatistics,
    local_statistics,
    n_values,
    pca_from_moments,
    pca_from_scatter,
    share_values,
)


def validate_rows(x, names, enc: ShareEncoding) -> None:
    """The owner's check of its rows before they are summed (`ShareEncoding.check_rows`)."""
    enc.check_rows(x, names)


KEY_BITS = 2048


def decode(totals, d: int, scale_bits: int) -> moments.IntegerMoments:
    """PCA totals (R, V, Q) as the aggregator decodes them: one grouping, one class."""
    return moments.decode_totals(totals, d, [moments.ALL_ROWS], scale_bits)


# Sizes of the partitions (one per owner); a 2-row owner is included on purpose.
PART_SIZES = (2, 40, 61, 75)


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, list[str]]:
    data = load_wine()
    names = [re.sub(r"\W+", "_", n).strip("_") for n in data.feature_names]
    x = np.asarray(data.data, dtype=np.float64)
    assert x.shape == (178, 13) and sum(PART_SIZES) == 178
    return x, names


def partitions(x: np.ndarray, seed: int = 7) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(len(x))
    cuts = np.cumsum(PART_SIZES)[:-1]
    return [x[np.sort(idx)] for idx in np.split(order, cuts)]


def summed_shares(parts: list[np.ndarray], names: list[str], enc: ShareEncoding) -> list[int]:
    totals: list[int] | None = None
    for part in parts:
        validate_rows(part, names, enc)
        share = share_values(local_statistics(part), enc)
        totals = share if totals is None else [a + b for a, b in zip(totals, share, strict=True)]
    assert totals is not None
    return totals


def wine_encoding(x: np.ndarray, scale_bits: int) -> ShareEncoding:
    return moments_encoding(
        scale_bits=scale_bits,
        value_bound=float(np.abs(x).max()),
        max_rows_per_owner=1000,
        max_owners=len(PART_SIZES),
    )


def numpy_eig(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w, v = np.linalg.eigh(c)
    return w[::-1], v[:, ::-1]


# ------------------------------------------------------------------ exact aggregator math


def test_exact_scatter_is_correctly_rounded(wine) -> None:
    x, names = wine
    enc = wine_encoding(x, 32)
    agg = decode(summed_shares(partitions(x), names, enc), 13, enc.scale_bits)
    s = moments.total_scatter(agg)
    assert s.shape == (13, 13)
    np.testing.assert_array_equal(s, s.T)
    f, q = agg.scale_bits, agg.n
    for i in range(13):
        for j in range(13):
            exact = Fraction(agg.r[i][j], 2**f) - Fraction(
                agg.v[0][0][i] * agg.v[0][0][j], q * 4**f
            )
            assert s[i, j] == float(exact), (i, j)


def test_integer_valued_data_gives_exact_pooled_scatter(wine) -> None:
    """Wine in units of 1/100 is integer-valued, so owners' float sums are exact and the only
    rounding left is the final one per entry: the scatter equals the exact pooled one."""
    x, names = wine
    xi = np.rint(x * 100)
    assert np.all(np.abs(xi - x * 100) < 0.5) and (xi**2).sum(axis=0).max() < 2**53
    enc = wine_encoding(xi, 0)
    agg = decode(summed_shares(partitions(xi), names, enc), 13, 0)
    s = moments.total_scatter(agg)
    rows = [[int(v) for v in row] for row in xi.tolist()]
    n = len(rows)
    for i in range(13):
        for j in range(i, 13):
            r = sum(row[i] * row[j] for row in rows)
            vi, vj = sum(row[i] for row in rows), sum(row[j] for row in rows)
            assert s[i, j] == float(Fraction(n * r - vi * vj, n)), (i, j)
    assert agg.n == n
    assert agg.v[0][0].tolist() == [sum(row[i] for row in rows) for i in range(13)]


# ------------------------------------------------------------------ end-to-end vs NumPy


@pytest.mark.parametrize("seed", [7, 11])
def test_pca_matches_numpy_covariance(wine, seed: int) -> None:
    x, names = wine
    enc = wine_encoding(x, 64)  # 2^-64 steps: the encoding adds nothing at float64 precision
    agg = decode(summed_shares(partitions(x, seed), names, enc), 13, 64)
    res = pca_from_moments(agg, names, components=13)

    ref_w, ref_v = numpy_eig(np.cov(x, rowvar=False))
    assert res.n_samples == 178 and res.features == names and not res.standardized
    # Eigenvalues: rtol 1e-12, plus an absolute floor of 16 ulps of lambda_max. The wine
    # covariance has condition number ~1e7, and float64 eigensolvers (and the owners' float64
    # sums) are accurate relative to the norm, not to each tiny eigenvalue.
    ulps = 16 * np.finfo(np.float64).eps * ref_w[0]
    np.testing.assert_allclose(res.eigenvalues, ref_w, rtol=1e-12, atol=ulps)
    np.testing.assert_allclose(res.eigenvalues[:3], ref_w[:3], rtol=1e-12, atol=0)
    comps = np.array(res.components).T
    np.testing.assert_allclose(np.linalg.norm(comps, axis=0), 1.0, atol=1e-14)
    cos = np.abs(np.sum(comps * ref_v, axis=0))
    assert np.all(cos >= 1 - 1e-12), cos
    np.testing.assert_allclose(res.mean, x.mean(axis=0), rtol=1e-12, atol=0)
    np.testing.assert_allclose(
        res.explained_variance_ratio, ref_w / ref_w.sum(), rtol=1e-12, atol=1e-12
    )
    # deterministic orientation: the largest-magnitude weight is positive
    for c in res.components:
        assert c[int(np.argmax(np.abs(c)))] > 0


def test_pca_default_scale_within_quantization_bound(wine) -> None:
    """At scale 2^-f each owner's R_ij and V_i are off by <= 2^-(f+1); propagate that bound."""
    x, names = wine
    f = 32
    enc = wine_encoding(x, f)
    agg = decode(summed_shares(partitions(x), names, enc), 13, f)
    res = pca_from_moments(agg, names, components=13)
    n, owners, m = len(x), len(PART_SIZES), np.abs(x.mean(axis=0))
    step = owners * 2.0 ** -(f + 1)  # bound on |error| of a summed R_ij or V_i
    np.testing.assert_allclose(res.mean, x.mean(axis=0), rtol=1e-14, atol=step / n)
    entry = step * (1 + m[:, None] + m[None, :] + step / n) / (n - 1)
    float_err = 1e-12 * np.abs(np.cov(x, rowvar=False)).max()
    weyl = np.linalg.norm(entry) + float_err  # |d lambda| <= ||dC||_2 <= ||dC||_F
    ref_w, ref_v = numpy_eig(np.cov(x, rowvar=False))
    assert np.all(np.abs(np.array(res.eigenvalues) - ref_w) <= weyl)
    cos = np.abs(np.sum(np.array(res.components[:3]).T * ref_v[:, :3], axis=0))
    assert np.all(cos >= 1 - 1e-9)


@pytest.mark.parametrize("seed", [7, 11])
def test_standardized_pca_matches_correlation_matrix(wine, seed: int) -> None:
    x, names = wine
    enc = wine_encoding(x, 64)
    agg = decode(summed_shares(partitions(x, seed), names, enc), 13, 64)
    res = pca_from_moments(agg, names, components=13, standardize=True)
    ref_w, ref_v = numpy_eig(np.corrcoef(x, rowvar=False))
    assert res.standardized
    np.testing.assert_allclose(res.eigenvalues, ref_w, rtol=1e-12, atol=0)
    np.testing.assert_allclose(sum(res.all_eigenvalues), 13.0, rtol=1e-12)  # trace of a corr
    cos = np.abs(np.sum(np.array(res.components).T * ref_v, axis=0))
    assert np.all(cos >= 1 - 1e-12), cos


def test_blinded_path_gives_same_totals(wine) -> None:
    """Shares packed and owner-masked, summed, unmasked and unpacked give the plain integer
    totals."""
    x, names = wine
    enc = wine_encoding(x, 32)
    layout = enc.layout(KEY_BITS)
    parts = partitions(x)
    shares = []
    for part in parts:
        shares.append(share_values(local_statistics(part), enc))
    count = n_values(13)
    n_plain = layout.n_ciphertexts(count)
    plain, mask_sums = [0] * n_plain, [0] * n_plain
    for share in shares:
        masks = masks_from_seed(new_mask_seed(), n_plain, layout)
        plain = [a + b + r for a, b, r in zip(plain, pack(share, layout), masks, strict=True)]
        mask_sums = [a + r for a, r in zip(mask_sums, masks, strict=True)]
    assert all(p < 2 ** (KEY_BITS - 1) for p in plain)
    slots = unpack(remove_masks(plain, mask_sums, layout), count, layout)
    totals = slot_totals(slots, len(shares), layout)
    assert totals == summed_shares(parts, names, enc)


# ------------------------------------------------------------------ shares and aggregates


def test_share_values_order_upper_triangle_then_v_then_q() -> None:
    # deliberately non-symmetric so that the lower triangle would show up if used
    r = np.array([[1.0, 2.0, 3.0], [20.0, 4.0, 5.0], [30.0, 50.0, 6.0]])
    stats = LocalStatistics(r=r, v=np.array([7.0, 8.0, -9.0]), q=10)
    enc = moments_encoding(scale_bits=0, value_bound=100.0, max_rows_per_owner=100)
    assert share_values(stats, enc) == [1, 2, 3, 4, 5, 6, 7, 8, -9, 10]
    enc2 = moments_encoding(scale_bits=2, value_bound=100.0, max_rows_per_owner=100)
    assert share_values(stats, enc2) == [4, 8, 12, 16, 20, 24, 28, 32, -36, 10]
    assert n_values(3) == 10


def test_share_values_refuses_too_many_rows() -> None:
    stats = LocalStatistics(r=np.eye(2), v=np.ones(2), q=6)
    with pytest.raises(EncodingError):
        share_values(stats, moments_encoding(scale_bits=0, value_bound=1.0, max_rows_per_owner=5))


def test_local_statistics_by_hand() -> None:
    x = np.array([[1.0, 2.0], [3.0, -4.0], [0.5, 0.0]])
    s = local_statistics(x)
    np.testing.assert_array_equal(s.r, [[10.25, -10.0], [-10.0, 20.0]])
    np.testing.assert_array_equal(s.v, [4.5, -2.0])
    assert s.q == 3


def test_decoded_totals_round_trip_and_refusals() -> None:
    d = 3
    totals = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    agg = decode(totals, d, 5)
    assert agg.r.tolist() == [[1, 2, 3], [2, 4, 5], [3, 5, 6]]
    assert agg.v[0][0].tolist() == [7, 8, 9] and agg.n == 10 and agg.scale_bits == 5 and agg.d == 3
    for wrong in (totals[:-1], [*totals, 0], []):
        with pytest.raises(ProtocolError, match="10"):
            decode(wrong, d, 5)
    for q in (1, 0):
        with pytest.raises(DataError):
            decode([*totals[:-1], q], d, 5)
    with pytest.raises(ProtocolError, match="negative count"):  # only corruption gives this
        decode([*totals[:-1], -3], d, 5)


def test_pca_from_scatter_refusals() -> None:
    agg = moments.IntegerMoments(
        np.array([[5, 0], [0, 0]], dtype=object), [np.array([[1, 0]], dtype=object)], [[3]], 0
    )
    s = moments.total_scatter(agg)
    with pytest.raises(DataError, match="components"):
        pca_from_scatter(s, np.zeros(2), 3, ["a", "b"], components=3)
    with pytest.raises(DataError, match="components"):
        pca_from_scatter(s, np.zeros(2), 3, ["a", "b"], components=0)
    with pytest.raises(DataError, match="b"):
        pca_from_scatter(s, np.zeros(2), 3, ["a", "b"], components=1, standardize=True)


# ------------------------------------------------------------------ validation


def test_validate_rows_refusals() -> None:
    enc = moments_encoding(value_bound=10.0, max_rows_per_owner=5)
    names = ["a", "b", "c"]
    validate_rows(np.zeros((5, 3)), names, enc)

    x = np.zeros((4, 3))
    x[1, 2] = np.nan
    with pytest.raises(DataError, match="'c'") as info:
        validate_rows(x, names, enc)
    assert info.value.field == "c"

    with pytest.raises(DataError, match="no rows"):
        validate_rows(np.zeros((0, 3)), names, enc)
    with pytest.raises(DataError, match="max_rows_per_owner"):
        validate_rows(np.zeros((6, 3)), names, enc)
    with pytest.raises(DataError, match="3-column"):
        validate_rows(np.zeros((4, 2)), names, enc)
    with pytest.raises(DataError, match="3-column"):
        validate_rows(np.zeros(3), names, enc)
    y = np.zeros((2, 3))
    y[0, 1] = 10.5
    with pytest.raises(DataError) as info:
        validate_rows(y, names, enc)
    assert info.value.field == "b"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"value_bound": -1.0},
        {"value_bound": 0.0},
        {"value_bound": float("nan")},
        {"value_bound": float("inf")},
        {"scale_bits": 100},
        {"scale_bits": 65},
        {"scale_bits": -1},
        {"max_rows_per_owner": 0},
        {"max_owners": 0},
    ],
)
def test_pca_encoding_refuses_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(EncodingError):
        moments_encoding(**kwargs)


def test_per_owner_bound_covers_worst_case_share() -> None:
    enc = moments_encoding(scale_bits=16, value_bound=2.5, max_rows_per_owner=7, max_owners=3)
    layout = enc.layout(KEY_BITS)
    names = ["a", "b", "c"]
    for sign in (1.0, -1.0):
        x = np.full((7, 3), sign * 2.5)
        validate_rows(x, names, enc)
        share = share_values(local_statistics(x), enc)
        assert max(abs(v) for v in share) <= enc.per_owner_bound() == layout.offset
        # worst-case R entry: 7 * 2.5^2 at scale 2^16
        assert share[0] == int(7 * 6.25 * 2**16)
        pack(share, layout)


def test_share_values_handles_large_declared_bound() -> None:
    enc = moments_encoding(value_bound=1e150, max_rows_per_owner=100, max_owners=4)
    layout = enc.layout(KEY_BITS)
    x = np.full((3, 2), 1e150)
    validate_rows(x, ["a", "b"], enc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        share = share_values(local_statistics(x), enc)
    pack(share, layout)
