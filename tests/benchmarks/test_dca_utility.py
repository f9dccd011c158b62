"""benchmarks/dca_utility.py: its helpers, and a small end-to-end run through real processes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_wine

from leteo_fed.protocols import pca

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "dca_utility.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("dca_utility", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("loader", [load_wine, load_digits])
def test_moments_from_a_full_rank_pca_result(bench, loader):
    """The standardization the owners apply: mean and scale recovered from a PCA round."""
    x = loader().data.astype(float)
    evals, comps, mean = pca.reference_pca(x, x.shape[1])
    result = {"eigenvalues": evals.tolist(), "components": comps.T.tolist(), "mean": mean.tolist()}
    got_mean, got_scale = bench.federated_moments(result)
    want = bench.scale_from_variance(x.var(axis=0, ddof=1))
    np.testing.assert_allclose(got_mean, x.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_scale, want, rtol=1e-8)
    assert np.all(got_scale[x.std(axis=0) == 0] == 1.0)  # blank pixels are left as they are


def test_direction_metrics_ignore_sign(bench):
    w = np.linalg.qr(np.random.default_rng(0).normal(size=(6, 3)))[0]
    flipped = w * np.array([1.0, -1.0, 1.0])
    assert bench.direction_gap(w, flipped) == 0.0 and bench.cos_deviation(w, flipped) < 1e-15
    nudged = w.copy()
    nudged[0, 1] += 1e-6
    assert 5e-7 < bench.direction_gap(nudged, w) < 2e-6


@pytest.mark.slow
def test_quick_run_writes_the_table_json(bench, tmp_path, capsys):
    out = tmp_path / "utility.json"
    argv = ["--quick", "--methods", "dca,pca", "--owners", "3", "--out", str(out)]
    assert bench.main(argv) == 0
    report = json.loads(out.read_text())
    wine = report["datasets"]["wine"]
    assert report["config"]["key_bits"] == 2048 and len(wine["folds"]) == 2
    for inputs in ("raw", "standardized"):
        for method in ("dca", "pca"):
            row = wine["results"][inputs][method]
            assert row["components"] == 2
            assert row["max_component_gap"] < 1e-6
            assert abs(row["difference_mean"]) < 1.0
            assert 50.0 < row["federated_f1_mean"] <= 100.0
    assert wine["results"]["standardized"]["dca"]["federated_f1_mean"] > 90.0
    assert "federated" in capsys.readouterr().out
