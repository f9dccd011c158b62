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
import re

import pytest
from doc_shell import REPO, leteo, run_blocks, section_blocks

pytestmark = pytest.mark.slow

SECTION = "## Running the services yourself"
SITES = ("site-1", "site-2", "site-3")
SERVER_LOGS = ("csp.log", "aggregator.log", *(f"{s}.log" for s in SITES))


def test_the_readme_section_runs_as_pasted(tmp_path):
    # CSP, aggregator and their two health ports at least
    run = run_blocks(section_blocks(REPO / "README.md", SECTION, 3), tmp_path, ports=4)
    work, printed, trace = run.work, run.printed, run.trace
    assert run.rc == 0, f"exit {run.rc}\n{run.tails()}"
    # the stop line stopped every server: none left once the shell is done
    assert not run.left_running, run.left_running

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
    fresh = leteo("owner", "init", "--site-id", "site-1", cwd=work)
    (tmp_path / "fresh.toml").write_text(fresh.stdout)
    check = leteo("owner", "check", "--config", "fresh.toml", "--offline", cwd=tmp_path)
    assert check.returncode == 2 and "policy.columns: empty" in check.stderr, check.stderr

    for site in SITES:
        shown = leteo("owner", "budget", "show", "--config", f"{site}.toml", "--json", cwd=work)
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
