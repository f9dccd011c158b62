"""The README's "Running the services yourself", run as a person would paste it.

The section's fenced blocks are read from README.md at test time and run in order by one bash
(`bash -e -x`, so the first command that fails stops it and is named), in an empty folder, with
`leteo-fed` and `python` this test's interpreter: the certificates, a CSP and an aggregator in
the background with their log files, the health-probe wait, three sites' made-up data, their
configs from `leteo-fed owner init` with the columns listed, `leteo-fed owner check`, their
agents in the background, the wait for three connected sites, the analyst's `pca`, `dca` and
`kmeans` (DP, the owners' default policy) and `jobs`, and the stop line. Only the loopback
ports are this test's (each README port is replaced by a free one, so the README must name
every address it uses). Then: every result names the three sites, every server stopped on the
README's stop line without a traceback, and every site's ledger was charged the README's
epsilons, composed by Renyi curves.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Running the services yourself"
SITES = ("site-1", "site-2", "site-3")
SERVER_LOGS = ("csp.log", "aggregator.log", *(f"{s}.log" for s in SITES))


def _readme_blocks() -> list[str]:
    """The section's ```bash blocks, in order."""
    text = (REPO / "README.md").read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    blocks = re.findall(r"^```bash\n(.*?)^```$", text[start:end], re.S | re.M)
    assert len(blocks) >= 3, blocks
    return blocks


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _on_free_ports(script: str) -> str:
    """Every 127.0.0.1:PORT of the README moved to a free port, the same one each time."""
    ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", script)))
    assert len(ports) >= 4, ports  # CSP, aggregator and their two health ports
    free = dict(zip(ports, map(str, _free_ports(len(ports))), strict=True))
    return re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{free[m.group(1)]}", script)


def _leteo(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _shell_env(bin_dir: Path) -> dict[str, str]:
    """`leteo-fed` and `python` are this interpreter; no LETEO_* setting leaks in."""
    bin_dir.mkdir()
    for name, argv in (("leteo-fed", f"{sys.executable} -m leteo_fed"), ("python", sys.executable)):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETEO_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def _group_left(pgid: int, grace: float = 10.0) -> str:
    """The processes still in the group after `grace` seconds (`ps` lines), or ''."""
    end = time.monotonic() + grace
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return ""
        if time.monotonic() > end:
            ps = subprocess.run(
                ["ps", "-o", "pid,stat,args", "-g", str(pgid)], capture_output=True, text=True
            )
            return ps.stdout
        time.sleep(0.2)


def _tails(work: Path, stderr: str) -> str:
    parts = [f"--- bash stderr\n{stderr[-4000:]}"]
    for log in sorted(work.glob("*.log")):
        parts.append(f"--- {log.name}\n{log.read_text()[-1500:]}")
    return "\n".join(parts)


def test_the_readme_section_runs_as_pasted(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    script = tmp_path / "readme.sh"
    script.write_text(_on_free_ports("\n".join(_readme_blocks())))
    env = _shell_env(tmp_path / "bin")
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-e", "-x", str(script)],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # the servers it starts share its process group
        )
        try:
            rc = shell.wait(timeout=900)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            left_running = _group_left(shell.pid)
            if left_running:
                os.killpg(shell.pid, signal.SIGKILL)
    printed, trace = out.read_text(), err.read_text()
    assert rc == 0, f"exit {rc}\n{_tails(work, trace)}"
    # the stop line stopped every server: none left once the shell is done
    assert not left_running, left_running

    # the servers ran in the background with their logs, and stopped on the stop line
    for name in SERVER_LOGS:
        log = (work / name).read_text()
        assert "Traceback" not in log, (name, log[-3000:])
        assert re.search(r"received signal 15, shutting down", log), (name, log[-3000:])
        assert log.rstrip().endswith("stopped"), (name, log[-3000:])
    assert "SERVING" in printed  # the health probes' wait ended on an answer

    # the sites: configs listing their columns, checked, connected
    for site in SITES:
        assert (work / "data" / f"{site}.csv").read_text().startswith("a,b,c,y\n")
        assert 'columns = ["a", "b", "c", "y"]' in (work / f"{site}.toml").read_text()
    listing = [ln.split() for ln in printed.splitlines() if ln.startswith("site-")]
    assert [(row[0], row[2]) for row in listing if row[1] == "outbound"] == [
        (s, "yes") for s in SITES
    ], printed

    # the analyst's commands: a job id each, a result naming the three sites
    for protocol in ("pca", "dca", "kmeans"):
        assert re.search(rf"job {protocol}-[0-9a-f]+", trace), protocol
        doc = json.loads((work / "out" / protocol / f"{protocol}.json").read_text())
        assert doc["owners"] == list(SITES), protocol
    kmeans = json.loads((work / "out" / "kmeans" / "kmeans.json").read_text())
    assert 1 <= kmeans["iterations_run"] <= 10
    assert len(kmeans["centers"]) == 3
    # `leteo-fed jobs`: the three jobs, newest first, each completed with its three sites
    jobs = [ln.split()[:3] for ln in printed.splitlines() if re.match(r"(pca|dca|kmeans)-", ln)]
    assert [(j[0].split("-")[0], j[1]) for j in jobs] == [
        ("kmeans", "kmeans"),
        ("dca", "dca"),
        ("pca", "pca"),
    ], printed
    assert all(re.search(rf"^{j[0]} .*COMPLETED .* 3/3 ", printed, re.M) for j in jobs), printed

    # a config as `owner init` writes it lists no column, and `owner check` says so
    fresh = _leteo("owner", "init", "--site-id", "site-1", cwd=work)
    (tmp_path / "fresh.toml").write_text(fresh.stdout)
    check = _leteo("owner", "check", "--config", "fresh.toml", "--offline", cwd=tmp_path)
    assert check.returncode == 2 and "policy.columns: empty" in check.stderr, check.stderr

    for site in SITES:
        shown = _leteo("owner", "budget", "show", "--config", f"{site}.toml", "--json", cwd=work)
        budget = json.loads(shown.stdout)
        # three releases of epsilon 1, 1 and 2 (each alone): `owner init` makes an RDP
        # ledger, which composes them to less than their basic sum 4, and more than the
        # largest alone
        assert budget["accountant"] == "rdp"
        assert 2 < budget["epsilon_spent"] < 1 + 1 + 2
        ledger = json.loads((work / f"privacy-ledger-{site}.json").read_text())
        charged = [e["epsilon"] for e in ledger["spends"] if e["state"] == "committed"]
        # what each round would cost alone under basic composition: the k-means job's
        # rounds carry its Renyi increments, which add up to its 2
        assert sum(charged) == pytest.approx(1 + 1 + 2)
