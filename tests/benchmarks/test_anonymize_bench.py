"""benchmarks/anonymize_bench.py: the anonypy adapter, and the core on a few hundred rows
(the local engine without Spark; both engines and a fresh CLI process with Spark)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "anonymize_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("anonymize_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def synthetic(bench, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Adult-shaped rows: ages 17..90, categorical values drawn from the hierarchy leaves."""
    rng = np.random.default_rng(seed)
    hierarchies = bench.load_hierarchies()
    data = {"age": rng.integers(17, 91, size=n).astype(np.int64)}
    for column in bench.CATEGORICAL_QIS:
        leaves = hierarchies[column].leaves
        # a skewed draw, like the real data (a few values dominate)
        p = 1.0 / np.arange(1, len(leaves) + 1)
        data[column] = rng.choice(np.array(leaves, dtype=object), size=n, p=p / p.sum())
    data[bench.SENSITIVE] = rng.choice(np.array(["<=50K", ">50K"], dtype=object), size=n)
    return data


def test_anonypy_adapter_charges_sets_like_hierarchy_labels(bench):
    """A set of s of D values costs (s - 1) / (D - 1); 'lo-hi' becomes an interval."""
    hierarchies = bench.load_hierarchies()
    race_d = len(hierarchies["race"].leaves)  # 5
    records = []
    for age, race, income, count in [
        (["17-27"], ["White,Black"], "<=50K", 3),
        (["17-27"], ["Black,White"], ">50K", 1),  # same set, other order: same class
        (["40"], ["Other"], "<=50K", 4),
    ]:
        rec = {c: [hierarchies[c].leaves[0]] for c in bench.CATEGORICAL_QIS}
        rec.update({"age": age, "race": race, bench.SENSITIVE: income, "count": count})
        records.append(rec)
    released = bench.anonypy_release(records)
    assert len(released["age"]) == 8
    assert released["age"].tolist() == ["[17, 27]"] * 4 + ["40"] * 4
    assert set(released["race"].tolist()) == {"Black,White", "Other"}

    original = {"age": np.array([17, 90] + [40] * 6, dtype=np.int64)}
    original.update({c: np.asarray(released[c]) for c in bench.CATEGORICAL_QIS})
    labels = {c: bench.SetLabels(h) for c, h in hierarchies.items()}
    loss = bench.verify.ncp(original, released, bench.QI_TYPES, labels)
    assert loss.per_column["race"] == pytest.approx(4 / 8 * (2 - 1) / (race_d - 1))
    assert loss.per_column["age"] == pytest.approx(4 / 8 * 10 / (90 - 17))
    assert loss.per_column["sex"] == 0.0
    direct = bench.set_ncp_direct(released, hierarchies)
    assert direct["race"] == pytest.approx(loss.per_column["race"])
    report = bench.verify.k_anonymity(released, bench.QI_COLUMNS, k=4)
    assert (report.k, report.n_classes) == (4, 2)
    # the same classes labelled by hierarchy LCA: {Black, White} -> '*', {Other} -> 'Other'
    as_lca = bench.lca_release(released, hierarchies)
    assert set(as_lca["race"].tolist()) == {"*", "Other"}
    lca_loss = bench.verify.ncp(original, as_lca, bench.QI_TYPES, hierarchies)
    assert lca_loss.per_column["race"] == pytest.approx(4 / 8)
    with pytest.raises(bench.DataError, match="outside the hierarchy"):
        labels["race"].leaves_under("White,Martian")


def test_scaling_reuses_x1_scales_k_and_caps_anonypy(bench, monkeypatch):
    """The run loop without Spark: a fake tool whose time grows with the rows."""
    calls = []

    class Fake:
        def run(self, data, k):
            rows = bench.n_rows(data)
            calls.append((rows, k))
            return {"time_s": rows / 100, "gcp": 0.5, "ncp": {}, "classes": 3, "min_class": k}

    def fake_tools(names, hierarchies, progress):
        return {n: Fake() for n in names}, {n: {"available": True} for n in names}

    monkeypatch.setattr(bench, "make_tools", fake_tools)
    data = synthetic(bench, 100)
    out = bench.run_benchmark(
        data,
        tools=["anonypy"],
        ks=[10],
        scales=[1, 2, 5, 10],
        scale_k=10,
        scale_k_proportional=True,
        anonypy_cap_s=1.5,  # x2 takes 2 s: x5 and x10 are skipped
        warmup_rows=0,
        hierarchies={},
        progress=None,
    )
    assert calls == [(100, 10), (200, 20)]  # x1 comes from the k sweep
    x1, x2, x5, x10 = out["scaling"]
    assert x1["from_k_sweep"] and x2["ratio_to_x1"] == 2.0 and x2["k"] == 20
    assert (x5["status"], x10["status"], x10["k"]) == ("skipped", "skipped", 100)


def test_core_runs_the_local_engine_on_synthetic_rows(bench, tmp_path):
    """The job tools without Spark: Mondrian and TDS in process, end to end, checked."""
    data = synthetic(bench, 300)
    results = bench.run_benchmark(
        data,
        tools=["mondrian/local", "tds/local"],
        ks=[20],
        scales=[1],
        scale_k=20,
        progress=None,
        process=True,
    )
    for row in results["k_sweep"]:
        assert row["status"] == "ok", row
        assert row["min_class"] >= 20 and row["suppressed"] == 0
        assert row["tool_stats"]["rows"] == 300 and 0 < row["anonymize_s"] <= row["time_s"]
    assert [p["status"] for p in results["process"]] == ["ok", "ok"]  # fresh CLI processes
    assert bench.failed_leteo_runs(results) == []
    report = {"data": {"rows": 300}, "config": {"scale_k": 20}, **results}
    assert "fresh CLI process" in bench.markdown(report)


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_core_runs_both_engines_on_synthetic_rows(bench, tmp_path):
    data = synthetic(bench, 300)
    messages: list[str] = []
    results = bench.run_benchmark(
        data,
        tools=["mondrian/local", "mondrian/spark"],
        ks=[50],
        scales=[1],
        warmup_rows=0,
        progress=messages.append,
    )
    assert results["tools"]["mondrian/spark"]["available"]
    local, spark = results["k_sweep"]
    for row in (local, spark):
        assert row["status"] == "ok", row
        assert row["min_class"] >= 50 and row["classes"] >= 2 and row["suppressed"] == 0
        assert 0.0 < row["gcp"] < 1.0 and set(row["ncp"]) == set(bench.QI_COLUMNS)
        assert row["tool_stats"]["rows"] == 300
    assert (local["gcp"], local["classes"]) == (spark["gcp"], spark["classes"])  # same release
    assert any("mondrian/spark k=50 x1" in m for m in messages)

    report = {"data": {"rows": 300}, "config": {"scale_k": 50}, **results}
    paths = bench.write_outputs(report, tmp_path, "bench")
    assert json.loads(paths["json"].read_text())["k_sweep"][1]["classes"] == spark["classes"]
    assert "| mondrian/spark | 50 | 300 |" in paths["md"].read_text()
    assert paths["png"].stat().st_size > 0
    assert bench.failed_leteo_runs(report) == []
