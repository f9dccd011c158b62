"""The holder's utility measures of a synthetic table, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from leteo_fed.synth.config import parse
from leteo_fed.synth.evaluation import Graded, evaluate, tvd

CONFIG = {
    "synthesize": {"epsilon": 1.0, "k": 2, "bins": 2, "groups": [["a", "c"]]},
    "column": [
        {"name": "a", "type": "numeric", "lo": 0, "hi": 10},
        {"name": "c", "type": "categorical", "categories": ["x", "y"]},
    ],
}


def test_tvd_by_hand():
    assert tvd(np.array([0, 0, 1, 1]), np.array([0, 0, 0, 1]), 2) == pytest.approx(0.25)
    assert tvd(np.array([0, 1]), np.array([0, 1]), 2) == 0.0
    assert tvd(np.array([0, 0]), np.array([1, 1]), 3) == 1.0


def test_evaluate_by_hand():
    config = parse(CONFIG)
    real = pa.table({"a": [1.0, 2.0, 7.0, 9.0], "c": ["x", "x", "y", "y"]})
    same = evaluate(Graded.of(real, config), Graded.of(real, config), config)
    assert same["tvd_1way"] == {"a": 0.0, "c": 0.0} and same["tvd_2way_mean"] == 0.0
    # a: bins [0, 5) [5, 10]: real 2/2, synthetic 3/1 -> 0.25; c: 2/2 vs 1/3 -> 0.25
    synthetic = pa.table({"a": [1.0, 2.0, 3.0, 9.0], "c": ["x", "y", "y", "y"]})
    got = evaluate(Graded.of(real, config), Graded.of(synthetic, config), config)
    assert got["tvd_1way"] == {"a": 0.25, "c": 0.25}
    # (a, c) cells: real {(0,x): 2, (1,y): 2}; synthetic {(0,x): 1, (0,y): 2, (1,y): 1}
    assert got["tvd_2way_mean"] == pytest.approx(0.5 * (0.25 + 0.5 + 0.25))
    assert got["rows"] == {"real": 4, "synthetic": 4} and "correlation" not in got


def test_values_the_gaussian_cannot_place_are_not_stacked_on_the_bin_midpoint():
    """A cluster whose noisy variance was repaired to 0 (every draw at its mean): rows in the
    mean's bin stay at the mean; rows in another bin are uniform there (std of a uniform over a
    bin of width w: w / sqrt(12)). Before, all of them sat on the bin's midpoint."""
    from leteo_fed.synth.generation import _into_bins

    g = np.random.default_rng(5)
    n = 4000
    mu, sd = np.full((n, 1), 0.01), np.zeros(1)
    lo, hi = np.full((n, 1), 0.0), np.full((n, 1), 0.25)
    at = _into_bins(mu.copy(), mu[0], sd, lo, hi, g.random((n, 1)))
    assert np.all(at == 0.01)  # e.g. capital-gain 0 stays 0
    lo2, hi2 = np.full((n, 1), 0.5), np.full((n, 1), 0.75)
    away = _into_bins(mu.copy(), mu[0], sd, lo2, hi2, g.random((n, 1)))
    assert away.min() >= 0.5 and away.max() <= 0.75
    # the std of n uniform draws is within 5 standard errors (~ w / sqrt(12) * 0.5 / sqrt(n))
    w = 0.25
    assert abs(away.std() - w / np.sqrt(12)) < 5 * (w / np.sqrt(12)) * 0.5 / np.sqrt(n) * 2
    # a proper Gaussian is moved into the bin monotonically, the spare draws unused
    x = np.linspace(-1, 1, 9)[:, None]
    moved = _into_bins(
        x, np.zeros(1), np.ones(1), np.zeros((9, 1)), np.ones((9, 1)), np.zeros((9, 1))
    )
    assert np.all(np.diff(moved[:, 0]) > 0) and moved.min() >= 0 and moved.max() <= 1
