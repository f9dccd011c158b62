"""Fifty real owner agents invited at once on a 2-core machine: every one answers well inside
the invitation timeout and the round equals pooled PCA (issue: owners that answered nothing
because each first imported its protocol modules while fifty others did the same)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer

from leteo_fed import defaults
from leteo_fed.protocols.pca import reference_pca

OWNERS = 50


@pytest.mark.slow
def test_fifty_owner_processes_answer_at_once(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "leteo_fed", "demo", "pca", "--owners", str(OWNERS)]
        + ["--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "pca.json").read_text())
    assert len(result["owners"]) == OWNERS and not result["declined"]
    evals, comps, _ = reference_pca(load_breast_cancer().data, 2)
    np.testing.assert_allclose(result["eigenvalues"], evals, rtol=1e-9)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    assert np.all(cos >= 1 - 1e-9)
    timings = result["timings"]["aggregator"]
    # every owner answered, and the slowest one in a fraction of the timeout (on a loaded
    # 2-core CI machine: the 1 s target is measured by benchmarks/scale_bench.py)
    assert timings["answer_p50_seconds"] <= timings["answer_p99_seconds"]
    assert timings["answer_max_seconds"] < defaults.INVITE_TIMEOUT_SECONDS / 3
