"""Both engines of `leteo-fed synthesize` write the same synthetic table and the same model.

Each case runs the CLI with `--engine local` and `--engine spark` (a real local Spark session)
on the same input, config and seed, and compares the written bytes (CSV) or columns (Parquet)
and every DP section of the reports. Cases: public groups with a label on a CSV input, DP
groups on a Parquet input with a Parquet release, and the same refusal words on both engines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synth_cases import cli, rows, write_config, write_csv

pytestmark = pytest.mark.spark

DP_SECTIONS = (
    "method", "epsilon", "delta", "budget", "k", "groups", "clusters", "tree", "class_sizes",
    "output",
)  # fmt: skip


def _run(tmp_path: Path, data: Path, config: Path, *extra: str) -> dict[str, Any]:
    got = {}
    for engine in ("local", "spark"):
        out = tmp_path / engine
        rc, _, err = cli(
            "--input", str(data), "--config", str(config), "--out", str(out),
            "--engine", engine, "--seed", "17", *extra,
        )  # fmt: skip
        assert rc == 0, err
        report = json.loads((out / "report.json").read_text())
        assert report["holder_only"]["engine"]["used"] == engine
        got[engine] = (report, out)
    for section in DP_SECTIONS:
        if section == "output":
            assert got["local"][0][section]["rows"] == got["spark"][0][section]["rows"]
            continue
        assert got["local"][0][section] == got["spark"][0][section], section
    hl, hs = got["local"][0]["holder_only"], got["spark"][0]["holder_only"]
    assert hl["clipped"] == hs["clipped"] and hl["input_rows"] == hs["input_rows"]
    return got


def test_config_groups_with_label_csv(spark: Any, tmp_path: Path) -> None:
    raw = rows(600, seed=21)
    raw[7]["a"] = f" {raw[7]['a']} "  # spaces around a number: both engines read the number
    data = write_csv(tmp_path / "data.csv", raw)
    got = _run(tmp_path, data, write_config(tmp_path, k=15))
    local, spark_bytes = ((got[e][1] / "synthetic.csv").read_bytes() for e in ("local", "spark"))
    assert local == spark_bytes and local.count(b"\n") > 500
    clipped = got["local"][0]["holder_only"]["clipped"]
    assert clipped["b"]["below"] + clipped["b"]["above"] > 0  # rows() puts some out of bounds


def test_marginals_method_same_release_on_both_engines(spark: Any, tmp_path: Path) -> None:
    """The marginal-based method: Spark counts every pair of columns in one pass; the tree,
    the budget and the written bytes equal the in-process run's for the same seed."""
    data = write_csv(tmp_path / "data.csv", rows(800, seed=29))
    config = write_config(tmp_path)
    config.write_text(
        config.read_text().replace("[synthesize]\n", '[synthesize]\nmethod = "marginals"\n')
    )
    got = _run(tmp_path, data, config)
    local, spark_bytes = ((got[e][1] / "synthetic.csv").read_bytes() for e in ("local", "spark"))
    assert local == spark_bytes and local.count(b"\n") > 600
    assert len(got["spark"][0]["tree"]["edges"]) == 3


def test_public_edges_bin_alike_on_both_engines(spark: Any, tmp_path: Path) -> None:
    """Column a with public, unequal edges (a bin of its own for 0 <= a < 1): both engines put
    every value in the same bin, so the releases are identical, and the integer values of the
    release stay in their bins."""
    raw = rows(600, seed=23)
    for r in raw[::3]:
        r["a"] = "0"
    data = write_csv(tmp_path / "data.csv", raw)
    config = write_config(tmp_path, k=15)
    text = config.read_text().replace(
        "hi = 100\ninteger = true\n", "hi = 100\ninteger = true\nedges = [0, 1, 30, 50, 60, 100]\n"
    )
    assert "edges" in text
    config.write_text(text)
    got = _run(tmp_path, data, config)
    local, spark_bytes = ((got[e][1] / "synthetic.csv").read_bytes() for e in ("local", "spark"))
    assert local == spark_bytes
    a = np.array([int(line.split(b",")[0]) for line in local.splitlines()[1:]])
    assert 0.2 < (a == 0).mean() < 0.5  # a third of the input's a are 0, kept as 0
    assert got["local"][0]["columns"][0]["edges"] == [0, 1, 30, 50, 60, 100]


def test_dp_groups_parquet_in_and_out(spark: Any, tmp_path: Path) -> None:
    raw = rows(500, seed=22)
    table = pa.table(
        {
            "a": pa.array([int(r["a"]) for r in raw], pa.int64()),
            "b": pa.array([float(r["b"]) for r in raw], pa.float64()),
            "c": [r["c"] for r in raw],
            "d": pa.array([float(r["d"]) for r in raw], pa.float64()),
            "y": [r["y"] for r in raw],
        }
    )
    pq.write_table(table, tmp_path / "data.parquet")
    config = write_config(tmp_path, epsilon=4.0, k=20, groups='"dp"')
    got = _run(tmp_path, tmp_path / "data.parquet", config, "--release-format", "parquet")
    assert got["local"][0]["groups"]["provenance"] == "dp"
    budget = got["local"][0]["budget"]
    assert budget["grouping"]["planned_epsilon"] == pytest.approx(0.4)
    assert 0.04 <= budget["grouping"]["epsilon"] <= 0.4  # G1, and the picks it made
    spent = budget["grouping"]["epsilon"] + sum(g["epsilon"] for g in budget["groups"])
    assert spent == pytest.approx(4.0)
    local, other = (pq.read_table(got[e][1] / "synthetic.parquet") for e in ("local", "spark"))
    assert local.equals(other) and local.num_rows > 400


def test_same_refusal_on_both_engines(spark: Any, tmp_path: Path) -> None:
    data = rows(40, seed=1)
    data[5]["c"] = "w"
    src = write_csv(tmp_path / "data.csv", data)
    errors = []
    for engine in ("local", "spark"):
        rc, _, err = cli(
            "--input", str(src), "--config", str(write_config(tmp_path)),
            "--out", str(tmp_path / engine), "--engine", engine,
        )  # fmt: skip
        assert rc == 2
        errors.append(err.strip().splitlines()[-1])
    assert errors[0] == errors[1] and "column 'c'" in errors[0]
