"""Disclosure measures of synthetic releases: hand-computed values, then a copying generator
(everything flags it) against independent draws from the same distribution (nothing does)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import DataError
from leteo_fed.synth import disclosure as d

TINY = d.Schema({"x": (0.0, 10.0)}, {"c": ["a", "b"]})


def _tiny() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # encoded: train (0, a), (1, b); hold-out (0.5, a); synthetic (0, a), (0.4, b)
    train = d.encode({"x": [0, 10], "c": ["a", "b"]}, TINY)
    hold = d.encode({"x": [5], "c": ["a"]}, TINY)
    syn = d.encode({"x": [0, 4], "c": ["a", "b"]}, TINY)
    return syn, train, hold


def test_encoding_is_scaled_numeric_plus_half_weight_one_hot() -> None:
    x = d.encode({"x": [-3, 2.5, 12], "c": ["b", "a", "b"]}, TINY)
    h = 1 / math.sqrt(2)
    assert np.allclose(x, [[0.0, 0, h], [0.25, h, 0], [1.0, 0, h]])
    # a categorical mismatch adds exactly 1 to the squared distance
    assert d.nearest_distance(x[:1], x[2:3])[0] == pytest.approx(1.0)
    assert d.nearest_distance(x[:1], x[1:2])[0] == pytest.approx(math.sqrt(0.0625 + 1))


def test_dcr_hand_computed() -> None:
    syn, train, hold = _tiny()
    # synthetic (0, a): 0 to train, 0.5 to hold-out; (0.4, b): 0.6 to train (1, b),
    # sqrt(0.1^2 + 1) to hold-out
    r = d.dcr(syn, train, hold)
    far = math.sqrt(1.01)
    assert r.train_median == pytest.approx(0.3)
    assert r.train_p5 == pytest.approx(0.05 * 0.6)  # NumPy's linear interpolation
    assert r.holdout_median == pytest.approx((0.5 + far) / 2)
    assert r.holdout_p5 == pytest.approx(0.5 + 0.05 * (far - 0.5))
    assert r.exact_copy_share == 0.5
    assert r.dcr_share == 1.0


def test_dcr_share_counts_ties_half() -> None:
    train = d.encode({"x": [0, 10], "c": ["a", "a"]}, TINY)
    hold = d.encode({"x": [2, 10], "c": ["a", "b"]}, TINY)
    syn = d.encode({"x": [1, 10], "c": ["a", "a"]}, TINY)  # (0.1, a): 0.1 vs 0.1 -> tie
    assert d.dcr(syn, train, hold).dcr_share == pytest.approx(0.75)


def test_membership_hand_computed() -> None:
    syn, train, hold = _tiny()
    # members' distance to the closest synthetic row: 0 and 0.6; the non-member's: 0.5.
    # Of the 2 member/non-member pairs one is ordered right: AUC 1/2. The threshold 'distance
    # <= 0' catches one member and no non-member: balanced accuracy (1/2 + 1) / 2.
    m = d.membership_inference(syn, train, hold)
    assert m.auc == pytest.approx(0.5)
    assert m.balanced_accuracy == pytest.approx(0.75)
    assert (m.members, m.non_members) == (2, 1)


def test_auc_and_balanced_accuracy_hand_computed() -> None:
    assert d.roc_auc(np.array([1.0, 1.0]), np.array([1.0, 0.0])) == pytest.approx(0.75)
    assert d.roc_auc(np.array([3.0, 2.0]), np.array([1.0])) == 1.0
    assert d.roc_auc(np.array([0.0]), np.array([1.0, 2.0])) == 0.0
    assert d.best_balanced_accuracy(np.array([3.0, 2.0]), np.array([1.0])) == 1.0
    # no threshold beats the constant guess
    assert d.best_balanced_accuracy(np.array([0.0]), np.array([1.0])) == 0.5


def test_dp_attack_bound() -> None:
    assert d.dp_attack_bound(0.0) == 0.5
    assert d.dp_attack_bound(1.0) == pytest.approx(math.e / (1 + math.e))
    assert d.dp_attack_bound(1.0, 1e-5) == pytest.approx((math.e + 1e-5) / (1 + math.e))
    assert d.dp_attack_bound(5000.0) == 1.0  # no overflow
    with pytest.raises(DataError, match="epsilon"):
        d.dp_attack_bound(-1.0)


def test_blocked_distances_equal_the_full_matrix() -> None:
    rng = np.random.default_rng(3)
    q, r = rng.random((37, 5)), rng.random((53, 5))
    full = np.sqrt(((q[:, None, :] - r[None, :, :]) ** 2).sum(-1)).min(1)
    got = d.nearest_distance(q, r, block_rows=4, block_cols=7)
    assert got == pytest.approx(full, abs=1e-9)


def test_bad_input_is_named() -> None:
    with pytest.raises(DataError, match="'c'.*outside its public domain.*'z'"):
        d.encode({"x": [1], "c": ["z"]}, TINY)
    with pytest.raises(DataError, match="'x' is not in the table"):
        d.encode({"c": ["a"]}, TINY)
    with pytest.raises(DataError, match="'x' holds NaN"):
        d.encode({"x": [float("nan")], "c": ["a"]}, TINY)
    with pytest.raises(DataError, match="'c' has 2 values"):
        d.encode({"x": [1], "c": ["a", "b"]}, TINY)
    with pytest.raises(DataError, match="lo < hi"):
        d.Schema({"x": (1.0, 1.0)}, {})
    with pytest.raises(DataError, match="reference set is empty"):
        d.nearest_distance(np.zeros((1, 2)), np.zeros((0, 2)))


POP = d.Schema({"x": (0.0, 1.0), "y": (-5.0, 5.0)}, {"c": ["a", "b", "c"], "e": ["u", "v"]})
N = 1000  # training rows = hold-out rows = synthetic rows


def _draw(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "x": rng.beta(2, 3, n),
        "y": np.clip(rng.normal(0, 1.5, n), -4.9, 4.9),
        "c": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
        "e": rng.choice(["u", "v"], n),
    }


def test_a_generator_that_copies_its_training_rows_is_flagged() -> None:
    rng = np.random.default_rng(11)
    train, hold = _draw(rng, N), _draw(rng, N)
    perm = rng.permutation(N)  # the same row order for every column: whole rows copied
    copied = {k: v[perm] for k, v in train.items()}
    out = d.measure(copied, train, hold, POP, epsilon=1.0)
    assert out["dcr"]["exact_copy_share"] == 1.0
    assert out["dcr"]["train_median"] < 1e-6
    assert out["dcr"]["dcr_share"] == 1.0  # continuous columns: no hold-out row equals a copy
    assert out["membership"]["auc"] == 1.0  # every member at distance 0, no non-member
    assert out["membership"]["balanced_accuracy"] == 1.0
    assert out["membership"]["balanced_accuracy"] > out["membership"]["dp_accuracy_bound"]


def test_independent_draws_show_no_signal() -> None:
    """Synthetic rows drawn independently of the training rows, from the same distribution.

    Tolerances, 4 standard errors each (fixed seed 12):
    * DCR share: binomial SE sqrt(0.25 / N) = 0.0158. The synthetic rows share one pair of
      reference sets, which widens the spread a little: over 60 seeds the measured SD was 0.0173.
    * AUC: given the synthetic rows, the real rows' scores are i.i.d., so the Mann-Whitney null
      SE sqrt((n1 + n2 + 1) / (12 n1 n2)) = 0.0129 is exact.
    * Balanced accuracy at the best threshold (picked with the labels): mean
      0.5 + sqrt(pi / 8) / 2 * sqrt(2 / N) = 0.514 (one-sided Kolmogorov-Smirnov), below 0.55.
    """
    rng = np.random.default_rng(12)
    train, hold, syn = _draw(rng, N), _draw(rng, N), _draw(rng, N)
    out = d.measure(syn, train, hold, POP)
    assert abs(out["dcr"]["dcr_share"] - 0.5) < 4 * math.sqrt(0.25 / N)
    assert out["dcr"]["exact_copy_share"] == 0.0
    assert out["dcr"]["train_median"] == pytest.approx(out["dcr"]["holdout_median"], rel=0.15)
    se_auc = math.sqrt((2 * N + 1) / (12 * N * N))
    assert abs(out["membership"]["auc"] - 0.5) < 4 * se_auc
    assert 0.5 <= out["membership"]["balanced_accuracy"] < 0.55
    assert "dp_accuracy_bound" not in out["membership"]
