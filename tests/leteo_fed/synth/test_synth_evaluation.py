"""The holder's utility measures of a synthetic table, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from leteo_fed.synth.config import parse
from leteo_fed.synth.evaluation import evaluate, tvd

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
    same = evaluate(real, real, config)
    assert same["tvd_1way"] == {"a": 0.0, "c": 0.0} and same["tvd_2way_mean"] == 0.0
    # a: bins [0, 5) [5, 10]: real 2/2, synthetic 3/1 -> 0.25; c: 2/2 vs 1/3 -> 0.25
    synthetic = pa.table({"a": [1.0, 2.0, 3.0, 9.0], "c": ["x", "y", "y", "y"]})
    got = evaluate(real, synthetic, config)
    assert got["tvd_1way"] == {"a": 0.25, "c": 0.25}
    # (a, c) cells: real {(0,x): 2, (1,y): 2}; synthetic {(0,x): 1, (0,y): 2, (1,y): 1}
    assert got["tvd_2way_mean"] == pytest.approx(0.5 * (0.25 + 0.5 + 0.25))
    assert got["rows"] == {"real": 4, "synthetic": 4} and "correlation" not in got
