"""benchmarks/synthetic_bench.py's verdict arithmetic: the dp-groups check and the size of a gap
in the seeds' noise (the benchmark itself is run by hand: it needs smartnoise-synth's venv)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "synthetic_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("synthetic_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def cells(values: np.ndarray) -> dict[str, Any]:
    return {
        str(s): {"status": "ok", "measures": {"corr_err_mean": float(v), "accuracy": 0.8}}
        for s, v in enumerate(values)
    }


def test_median_gap_se_matches_the_normal_theory(bench) -> None:
    """Two samples of 30 normal draws (sd 1): the median's standard error is about
    1.2533 / sqrt(30) = 0.229 each, so the difference's about 0.32 (asymptotic theory; the
    bootstrap of one pair of samples lands within 40% of it)."""
    rng = np.random.default_rng(5)
    se = bench.median_gap_se(rng.normal(0, 1, 30), rng.normal(0, 1, 30))
    assert 0.19 < se < 0.45
    assert np.isnan(bench.median_gap_se(np.array([1.0]), np.array([1.0, 2.0])))


def test_dpgroups_verdict_names_the_worst_variant_and_the_gap_in_se(bench) -> None:
    """dp at 0.050 against fixed variants at 0.040 and 0.045 (spread 0.004): it fails against
    the worse one, by +0.005 and a positive number of standard errors; a dp at 0.030 passes."""
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.004, 10)
    variants = {
        "a": {"cells": {"ours": {"1": cells(0.040 + noise)}}},
        "b": {"cells": {"ours": {"1": cells(0.045 + noise[::-1])}}},
    }
    variants["a"]["cells"]["ours-dpgroups"] = {"1": cells(0.050 + noise)}
    variants["b"]["cells"]["ours-dpgroups"] = {"1": cells(0.030 + noise)}
    for v in variants.values():
        v["summary"] = {
            m: {e: bench.summarize(s) for e, s in by.items()} for m, by in v["cells"].items()
        }
    worse = bench.verdict_dpgroups(variants, "a", "1")["corr_err_mean"]
    assert worse["worst_variant"] == "b" and worse["pass"] is False
    assert worse["gap_se"] > 1.0
    assert bench.gap_note(worse).startswith(" (+0.005")
    better = bench.verdict_dpgroups(variants, "b", "1")["corr_err_mean"]
    assert better["pass"] is True and better["gap_se"] < 0 and bench.gap_note(better) == ""
