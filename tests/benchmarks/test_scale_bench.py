"""benchmarks/scale_bench.py: its checks on made-up figures, and its core with 3 owner processes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.protocols import pca

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "scale_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("scale_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(owners: int, per_share: float, total_power: float) -> dict:
    """A made-up run: per-share figures `per_share`, round totals growing like n^total_power."""
    figures = {key: per_share for key in ("intake_cpu_s_per_share", "intake_s_per_share")}
    figures["aggregator_cpu_s_per_share"] = per_share
    figures.update({key: 0.01 * owners**total_power for key in ("collect_s", "round_s")})
    figures.update({key: 0.001 * owners**total_power for key in ("csp_verify_s", "csp_sum_s")})
    figures["aggregator_cpu_s"] = per_share * owners
    return {"owners": owners, "status": "ok", "rounds": {"pca": figures, "kmeans": figures}}


def test_checks_tell_flat_and_linear_from_growing_and_quadratic(bench):
    linear = bench.checks([_run(n, 0.002, 1.0) for n in (10, 50, 100)])
    assert linear["pca"]["aggregator_work_per_share_flat"]
    assert linear["pca"]["no_quadratic_total"]
    assert linear["pca"]["round_s_slope"] == pytest.approx(1.0)
    assert linear["pca"]["aggregator_cpu_s_per_added_owner"] == pytest.approx(0.002)

    runs = [_run(n, 0.002, 2.0) for n in (10, 50, 100)]
    runs[-1]["rounds"]["kmeans"] = dict(runs[-1]["rounds"]["kmeans"], intake_cpu_s_per_share=0.02)
    bad = bench.checks(runs)
    assert not bad["kmeans"]["aggregator_work_per_share_flat"]
    assert not bad["pca"]["no_quadratic_total"]
    assert bad["pca"]["round_s_slope"] == pytest.approx(2.0)

    assert "note" in bench.checks([_run(10, 0.002, 1.0), {"owners": 50, "status": "error"}])


@pytest.mark.slow
def test_three_owner_processes_report_every_figure_and_numpy_pca(bench, tmp_path):
    report = bench.run_benchmark([3], workdir=tmp_path, progress=None)
    report = json.loads(json.dumps(report))  # what --out holds
    (run,) = report["runs"]
    assert run["status"] == "ok", run.get("error")
    assert run["owners"] == 3 and run["rows"] == 3 * bench.ROWS
    for key in ("certs_s", "services_s", "owners_healthy_s", "registered_s", "ready_s"):
        assert run["startup"][key] >= 0
    memory = run["memory_mib"]
    assert memory["owner_min"] <= memory["owner_median"] <= memory["owner_max"]
    assert memory["csp"] > 0 and memory["aggregator"] > 0

    for protocol in ("pca", "kmeans"):
        r = run["rounds"][protocol]
        assert r["shares"] == 3
        for key in (
            "collect_s",
            "csp_verify_s",
            "csp_sum_s",
            "csp_decrypt_s",
            "unmask_s",
            "finish_s",
            "round_s",
            "published_s",
            "intake_s_per_share",
            "aggregator_cpu_s_per_share",
        ):
            assert r[key] >= 0, key
        assert 0 < r["intake_cpu_s_per_share"] <= r["intake_s_per_share"] + 1e-3
        assert r["paillier_bits"] == bench.KEY_BITS
        assert r["ciphertext_bytes_per_share"] == r["ciphertexts_per_share"] * bench.KEY_BITS // 4
        assert r["statement_bytes"] > 0 and r["published_bytes_per_owner"] > 0
        assert r["payload_bytes_total"] == 3 * (
            r["ciphertext_bytes_per_share"] + r["statement_bytes"]
        )

    # the federated PCA against NumPy on the same seeded rows
    pooled = np.vstack(bench.make_data(3, bench.ROWS, bench.FEATURES, bench.SEED))
    evals, _, _ = pca.reference_pca(pooled, bench.FEATURES)
    np.testing.assert_allclose(run["rounds"]["pca"]["eigenvalues"], evals, rtol=1e-9, atol=0)
    assert run["rounds"]["pca"]["accuracy"]["min_abs_cos"] > 1 - 1e-9
    assert run["rounds"]["kmeans"]["accuracy"]["counts_match"]
    assert run["rounds"]["kmeans"]["accuracy"]["max_center_error"] < 1e-9

    table = bench.markdown(report)
    assert "| 3 | pca |" in table and "| 3 | kmeans |" in table
