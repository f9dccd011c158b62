"""`NoisyMax`: report noisy max with exponential noise, the selection `groups = "dp"` uses."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import NoisyMax


def test_calibration_and_privacy_map_agree() -> None:
    mech = NoisyMax.calibrate(Budget(0.5, 0.0), 4.0)
    assert mech.scale == pytest.approx(16.0)  # 2 D / epsilon
    assert mech.privacy_map(4.0).epsilon == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="scale"):
        NoisyMax(0.0)
    with pytest.raises(ValueError, match="finite"):
        mech.select(np.array([1.0, math.nan]))


def test_selection_matches_permute_and_flip_and_its_privacy_bound() -> None:
    """Two candidates at epsilon 1, D = 1. Permute-and-flip (whose privacy proof this relies on)
    picks the worse of u = (0, 1) with probability e^(-1/2) / 2 = 0.303, and candidate 0 of the
    neighbour u' = (1, 0) with 1 - 0.303 = 0.697: a ratio of 2.30, within e^1. 200,000 seeded
    draws each; the tolerance is 4 binomial standard deviations (0.004)."""
    mech = NoisyMax.calibrate(Budget(1.0, 0.0), 1.0)
    rng = np.random.default_rng(11)
    draws = 200_000
    noise = np.asarray(mech.sample((draws, 2), rng))
    p_u = float(np.mean(np.argmax(np.array([0.0, 1.0]) + noise, axis=1) == 0))
    noise = np.asarray(mech.sample((draws, 2), rng))
    p_v = float(np.mean(np.argmax(np.array([1.0, 0.0]) + noise, axis=1) == 0))
    exact = 0.5 * math.exp(-0.5)
    tol = 4.0 * math.sqrt(exact * (1 - exact) / draws)
    assert p_u == pytest.approx(exact, abs=tol)
    assert p_v == pytest.approx(1.0 - exact, abs=tol)
    assert p_v / p_u <= math.e


def test_a_clear_winner_is_selected_and_ties_are_fair() -> None:
    mech = NoisyMax(1.0)
    rng = np.random.default_rng(2)
    assert all(mech.select(np.array([0.0, 50.0, 1.0]), rng) == 1 for _ in range(100))
    wins = np.bincount([mech.select(np.zeros(4), rng) for _ in range(4000)], minlength=4)
    assert wins.min() > 850  # 1,000 each expected; 850 is 5.5 standard deviations below
