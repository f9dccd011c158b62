"""benchmarks/simulation_bench.py: its slopes and table on made-up reports (the runs themselves
are the simulation's, tested in tests/integration/test_simulation.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "simulation_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("simulation_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(owners: int, invited: int) -> dict:
    """Connect time linear in the owners, RSS per owner flat, round time quadratic in the
    invited, bytes per owner growing like log n (slope near 0)."""
    return {
        "options": {"owners": owners},
        "connect": {
            "seconds": 0.005 * owners,
            "aggregator_rss_kib_per_owner": 100.0,
            "aggregator": {"rss_mib": 0.1 * owners},
        },
        "round": {
            "invited": invited,
            "submitted": invited,
            "ok": True,
            "round_seconds": 1e-6 * invited**2,
            "bytes_per_owner": {"round_spec": 600 + 34 * (invited.bit_length())},
        },
    }


def test_slopes_tell_flat_linear_and_quadratic(bench):
    runs = [_report(100, 100), _report(1000, 1000), _report(10_000, 1000)]
    runs[-1]["round"]["invited"] = 1000
    s = bench.slopes(runs[:2])
    assert s["connect (s)"] == pytest.approx(1.0)
    assert s["agg RSS / connected owner (KiB)"] == pytest.approx(0.0)
    assert s["round (s)"] == pytest.approx(2.0)
    assert 0 < s["spec bytes / owner"] < 0.2
    assert s["answer p99 (s)"] is None  # not in these reports
    table = bench.markdown({"runs": runs, "slopes": bench.slopes(runs)})
    assert "| owners connected | 100 | 1,000 | 10,000 | log-log slope |" in table
    assert "| invited to the round | 100 | 1,000 | 1,000 | |" in table
