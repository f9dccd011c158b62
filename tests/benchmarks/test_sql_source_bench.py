"""benchmarks/sql_source_bench.py on a few thousand rows, with the session's PostgreSQL server:
every source gives back exactly the rows it was loaded with, and each read is timed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sql_source_bench.py"


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("adbc_driver_sqlite", reason="needs the [sql] extra")
    spec = importlib.util.spec_from_file_location("sql_source_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_source_reads_back_its_rows(bench, postgres, tmp_path):
    report = bench.run(3000, 4, 2, tmp_path, server=postgres)
    assert (report["rows"], report["cols"]) == (3000, 4)
    for source in ("csv", "sqlite", "postgresql"):
        assert len(report[source]["runs_s"]) == 2
        assert 0 < report[source]["min_s"] <= report[source]["median_s"]
