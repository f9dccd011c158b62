"""A site set up the way docs/owner-config.md says, and the README's own analyst commands.

Through real processes: a CSP and an aggregator (`LocalCluster`, no owners of its own); three
sites each get a config from `leteo-fed owner init` (the default policy: DP required, quorum of
three), list their columns, pass `leteo-fed owner check` (peers contacted over mTLS), and run
`leteo-fed owner serve`. Then the `leteo-fed pca`, `dca` and `kmeans` lines of the README's
"Running the services yourself" block run as written (only the aggregator address, the
certificate folder and the output folder are this test's) and each exits 0 with every site in
its result; every site's ledger was charged the README's epsilons, composed by Renyi curves.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.client import AnalystClient
from leteo_fed.demo.cluster import LocalCluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SITES = ("site-1", "site-2", "site-3")
ROWS_PER_SITE = 1000


def _readme_commands() -> list[list[str]]:
    text = (REPO / "README.md").read_text()
    block = text[text.index("## Running the services yourself") :]
    lines = [ln for ln in block.splitlines() if re.match(r"leteo-fed (pca|dca|kmeans) ", ln)]
    assert len(lines) == 3, lines
    return [shlex.split(ln.split("#")[0])[1:] for ln in lines]


def _leteo(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _write_site(folder: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, ROWS_PER_SITE)
    x = rng.normal(0, 0.3, (ROWS_PER_SITE, 3)) + 0.3 * (y[:, None] - 1)
    x = np.clip(x, -1, 1)
    lines = ["a,b,c,y"] + [
        f"{r[0]:.5f},{r[1]:.5f},{r[2]:.5f},{c}" for r, c in zip(x, y, strict=True)
    ]
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "site.csv").write_text("\n".join(lines) + "\n")


def test_init_check_serve_and_the_readme_commands(tmp_path):
    with LocalCluster(tmp_path / "run", [], extra_owner_ids=list(SITES)) as cluster:
        certs = cluster.certs
        for i, site in enumerate(SITES):
            folder = tmp_path / site
            _write_site(folder, seed=10 + i)
            config = folder / "site.toml"
            init = ["owner", "init", "--site-id", site, "--data", "data/site.csv"]
            init += ["--aggregator", cluster.addresses["aggregator"]]
            init += [
                "--csp",
                cluster.addresses["csp"],
                "--tls-dir",
                str(certs),
                "--out",
                "site.toml",
            ]
            assert _leteo(*init, cwd=folder).returncode == 0
            check = _leteo("owner", "check", "--config", str(config), cwd=folder)
            assert check.returncode == 2 and "policy.columns: empty" in check.stderr
            text = config.read_text().replace("columns = []", 'columns = ["a", "b", "c", "y"]', 1)
            config.write_text(text)
            check = _leteo("owner", "check", "--config", str(config), cwd=folder)
            assert check.returncode == 0, check.stderr
            assert "peers.aggregator" in check.stdout and "SERVING" in check.stdout
            cluster._spawn(site, ["owner", "serve", "--config", str(config)])
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        client.close()

        work = tmp_path / "analyst"
        work.mkdir()
        centers = [[0, 0, 0], [0.4, 0.4, 0.4], [-0.4, -0.4, -0.4]]
        (work / "init.json").write_text(json.dumps({"centers": centers}))
        for argv in _readme_commands():
            argv[argv.index("--aggregator") + 1] = cluster.addresses["aggregator"]
            argv[argv.index("--tls-dir") + 1] = str(certs)
            argv += ["--name", "analyst"]
            done = _leteo(*argv, cwd=work)
            assert done.returncode == 0, (argv[0], done.stderr[-2000:])
            out = work / argv[argv.index("--out") + 1]
            doc = json.loads(next(out.glob("*.json")).read_text())
            assert doc["owners"] == list(SITES), argv[0]
        for site in SITES:
            config = tmp_path / site / "site.toml"
            shown = _leteo(
                "owner", "budget", "show", "--config", str(config), "--json", cwd=tmp_path
            )
            budget = json.loads(shown.stdout)
            # three releases of epsilon 1, 1 and 2 (each alone): `owner init` makes an RDP
            # ledger, which composes them to less than their basic sum 4, and more than the
            # largest alone
            assert budget["accountant"] == "rdp"
            assert 2 < budget["epsilon_spent"] < 1 + 1 + 2
            ledger = json.loads(next((tmp_path / site).glob("**/*ledger*.json")).read_text())
            charged = [e["epsilon"] for e in ledger["spends"] if e["state"] == "committed"]
            # what each round would cost alone under basic composition: the k-means job's
            # rounds carry its Renyi increments, which add up to its 2
            assert sum(charged) == pytest.approx(1 + 1 + 2)
