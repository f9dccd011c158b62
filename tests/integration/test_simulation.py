"""`leteo-fed simulate` as docs/simulation.md shows it, run as pasted (in a temporary folder),
and against key holders.

Real processes: a CSP with a fresh 2048-bit key, the aggregator, and 250 virtual owners in two
worker processes, each owner with its own certificate, signing key, data file, audit log, ledger
and mTLS connection. A tenth of them crash after accepting and before uploading; the round must
complete with the others and equal PCA of their pooled rows to 1e-9. Each owner's own audit log
must show the real agent at work: the surviving owners recorded their share as sent, the
crashed ones accepted and sent nothing. The second test puts three key holders of a threshold
key (any two decrypt) in the CSP's place, with 20 owners.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from owner_agent.audit import read as audit_events

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _doc_command() -> list[str]:
    text = (REPO / "docs" / "simulation.md").read_text()
    lines = [ln for ln in text.splitlines() if re.match(r"leteo-fed simulate ", ln)]
    assert lines, "docs/simulation.md shows no `leteo-fed simulate` command"
    return shlex.split(lines[0])[1:]


def test_simulate_as_documented(tmp_path: Path) -> None:
    argv = _doc_command()
    run = subprocess.run(
        [sys.executable, "-m", "leteo_fed", "--log-level", "WARNING", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = tmp_path / argv[argv.index("--out") + 1]
    report = json.loads((out / "simulation.json").read_text())
    owners = int(argv[argv.index("--owners") + 1])
    fraction = float(argv[argv.index("--stop-fraction") + 1])
    stopped = round(owners * fraction)
    assert report["connect"]["owners"] == owners
    rnd = report["round"]
    assert rnd["state"] == "COMPLETED", rnd
    assert rnd["stopped"] == stopped and stopped > 0
    assert rnd["submitted"] == owners - stopped
    acc = rnd["accuracy"]
    assert acc["within_tolerance"], acc
    assert acc["n_samples"] == (owners - stopped) * report["options"]["rows_per_owner"]
    assert acc["max_rel_eigenvalue_error"] < 1e-9 and acc["max_mean_error"] < 1e-9
    assert "within 1e-9" in run.stdout and "answer latency" in run.stdout
    for key in ("answer_p50_seconds", "answer_p99_seconds", "collect_seconds"):
        assert rnd["timings"][key] > 0, key

    # each owner's own audit log: the real agent's decisions and uploads
    stop_sites = set((out / "workers" / "stop-sites.txt").read_text().split())
    assert len(stop_sites) == stopped
    config = out / "deployment" / "config"
    sent = {}
    for i in range(1, owners + 1):
        site = f"site-{i:04d}"
        events = audit_events(config / f"audit-{site}.jsonl")
        accepted = [e for e in events if e["event"] == "decision" and e["accepted"]]
        assert len(accepted) == 1, (site, events)
        sent[site] = any(e["event"] == "sent" for e in events)
    assert {s for s, was_sent in sent.items() if not was_sent} == stop_sites
    # distinct certificates: one per site
    certs = {(out / "deployment" / "certs" / f"{s}.crt").read_bytes() for s in sent}
    assert len(certs) == owners


def test_simulate_against_key_holders(tmp_path: Path) -> None:
    """`--keyholders 3 --threshold 2`: a threshold key dealt to three holder processes instead
    of one CSP; every virtual owner takes the key at least two holders agree on (its worker's
    one fetch) and the round completes with all of them, equal to pooled PCA; the report shows
    the holders' phases and CPU instead of the CSP's."""
    owners = 20
    argv = ["simulate", "--owners", str(owners), "--keyholders", "3", "--threshold", "2"]
    run = subprocess.run(
        [sys.executable, "-m", "leteo_fed", "--log-level", "WARNING", *argv, "--out", "sim"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((tmp_path / "sim" / "simulation.json").read_text())
    assert report["options"]["keyholders"] == [3, 2]
    rnd = report["round"]
    assert rnd["state"] == "COMPLETED" and rnd["submitted"] == owners, rnd
    acc = rnd["accuracy"]
    assert acc["within_tolerance"], acc
    assert acc["n_samples"] == owners * report["options"]["rows_per_owner"]
    timings = rnd["timings"]
    assert timings["holders_valid"] >= 2 and not timings["holders_wrong"]
    for key in ("holder_round_trip_seconds", "verify_proofs_seconds", "holders_partial_seconds"):
        assert timings[key] > 0, key
    assert set(timings["holders"]) <= {"1", "2", "3"} and len(timings["holders"]) >= 2
    assert "csp_decrypt_seconds" not in timings and "csp_cpu_seconds" not in rnd
    assert sorted(rnd["keyholders_cpu_seconds"]) == ["keyholder-1", "keyholder-2", "keyholder-3"]
    assert "csp" not in report["processes"]
    for line in ("3 key holders, any 2 decrypt", "holders round trip", "holder 1 verify"):
        assert line in run.stdout, line
    assert "within 1e-9" in run.stdout and "CSP" not in run.stdout
    config = tmp_path / "sim" / "deployment" / "config"
    for i in range(1, owners + 1):
        events = audit_events(config / f"audit-site-{i:04d}.jsonl")
        assert any(e["event"] == "sent" for e in events), i
