"""Jobs an analyst can trust (issue 20): no waiting for owners known to be gone.

Real processes (`LocalCluster`: CSP, aggregator, three outbound owner agents, mTLS, 2048-bit
keys). An owner stopped with SIGINT in the middle of a k-means job must not make the job wait for
it: the iteration it left closes as soon as the quorum is in, and later iterations do not wait
for it either.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_digits, load_iris

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols import kmeans_centers
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport.rounds import result_document

pytestmark = pytest.mark.slow

NAMES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
SITES = ("site-1", "site-2", "site-3")
DEADLINE = 60.0  # per iteration: the job must finish far sooner than one of these
ITERATIONS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("liveness")
    parts = write_parts(load_iris().data, NAMES, 3, work / "data", seed=20)
    owners = [OwnerSpec(site, part) for site, part in zip(SITES, parts, strict=True)]
    with LocalCluster(work / "run", owners) as running:
        yield running


def test_an_owner_stopped_mid_job_costs_no_deadline(cluster):
    client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
    client.wait_for_owners(3)
    centers = kmeans_centers.random_centers(3, np.full(4, 0.0), np.full(4, 8.0), 4, seed=3)
    params = (
        KmeansRequest(
            features=tuple(NAMES),
            k=3,
            centers=tuple(float(v) for row in centers.tolist() for v in row),
            iterations=ITERATIONS,
            tolerance=0.0,
        ),
        RoundOptions(
            min_owners=2,
            deadline_seconds=DEADLINE,
            # DP: the noisy centers keep moving, so every iteration runs
            dp_epsilon=5.0,
            dp_delta=1e-6,
            row_norm_bound=10.0,
        ),
    )
    start = client.start(*params)
    job_id = start.round_id
    while True:  # stop site-3 once iteration 3 or a later one is open
        status = client.wait(job_id, 0.02)
        at = re.search(r"iteration (\d+) of", status.message)
        if (at is not None and int(at.group(1)) >= 3) or status.state != "OPEN":
            break
    assert status.state == "OPEN", status.message
    assert at is not None and int(at.group(1)) < ITERATIONS - 2, status.message
    stopped = time.monotonic()
    cluster.kill("site-3", signal.SIGINT)
    final = client.wait(job_id, 3 * DEADLINE)
    elapsed = time.monotonic() - stopped
    client.close()
    assert final.state == "COMPLETED", final.message
    # before: the iteration waited its whole deadline, then 10 s per later iteration
    assert elapsed < DEADLINE / 2, f"the job took {elapsed:.1f} s after the owner stopped"
    doc = result_document(final)
    assert doc is not None
    its = doc["iterations"]
    assert len(its) == ITERATIONS, final.message
    assert all(it["contributors"] == list(SITES) for it in its[:2])
    assert "site-3" in its[-2]["declined"], its[-2]  # not waited for
    assert its[-2]["declined"]["site-3"].startswith("unreachable: disconnected")
    # from the first iteration that completed after the stop on, site-3 is not summed
    assert its[-1]["contributors"] == ["site-1", "site-2"]
    print(f"job finished {elapsed:.2f} s after site-3 stopped (deadline {DEADLINE:.0f} s)")


# ------------------------------------------------------------------ the analyst's command


def _cli(*args: str, env: dict[str, str], **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "leteo_fed", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_the_analysts_command_rides_through_an_aggregator_restart(tmp_path):
    """`leteo-fed kmeans` prints its job id first; the aggregator is killed (SIGKILL) in the
    middle of the job and started again on its state dir; the command still exits 0 with the
    result, and `leteo-fed result JOB_ID` writes the same file, `leteo-fed jobs` lists it.
    The aggregator address and certificates come from LETEO_AGGREGATOR and LETEO_TLS_DIR."""
    digits = load_digits()
    names = [f"px{i}" for i in range(digits.data.shape[1])]
    parts = write_parts(digits.data, names, 3, tmp_path / "data", seed=21)
    owners = [OwnerSpec(site, part) for site, part in zip(SITES, parts, strict=True)]
    with LocalCluster(tmp_path / "run", owners) as cluster:
        AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ).wait_for_owners(3)
        env = {
            **os.environ,
            "LETEO_AGGREGATOR": cluster.addresses["aggregator"],
            "LETEO_TLS_DIR": str(cluster.certs),
        }
        out = tmp_path / "out"
        proc = _cli(
            "kmeans",
            "--features",
            ",".join(names),
            "--k",
            "10",
            "--rounds",
            "60",
            "--init-bounds",
            "0,16",
            "--value-bound",
            "16",
            "--min-owners",
            "3",
            "--deadline",
            "60",
            "--out",
            str(out),
            env=env,
        )
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("job kmeans-"), first
        job_id = first.split()[1]
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        while True:  # a few iterations in
            status = client.wait(job_id, 0.05)
            at = re.search(r"iteration (\d+) of", status.message)
            if (at is not None and int(at.group(1)) >= 3) or status.state != "OPEN":
                break
        client.close()
        assert status.state == "OPEN", status.message
        cluster.kill("aggregator")
        time.sleep(1.0)
        cluster.start_aggregator()
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
        assert "aggregator unreachable" in stderr  # it waited, and said so
        # live progress, a line per change (stderr is not a terminal here)
        assert re.search(rf"{job_id} round \d+ of 60 (collecting|decrypting), owners", stderr)
        # shares against the quorum (which count a poll catches is timing: any of them)
        assert re.search(r"shares [0-3]/3 needed", stderr) and "max center shift" in stderr
        written = json.loads((out / "kmeans.json").read_text())
        assert all(it["round_id"].startswith(job_id) for it in written["iterations"])
        # the iteration the kill interrupted was run again under a new attempt id
        assert any(it["round_id"].endswith("-r2") for it in written["iterations"]), written

        again = _cli("result", job_id, "--out", str(tmp_path / "again"), env=env)
        stdout, stderr = again.communicate(timeout=60)
        assert again.returncode == 0, stderr
        fetched = json.loads((tmp_path / "again" / "kmeans.json").read_text())
        # all but the command's own note of how it drew the initial centers
        assert fetched == {k: v for k, v in written.items() if k != "init"}
        listing = _cli("jobs", "--json", env=env)
        stdout, stderr = listing.communicate(timeout=60)
        assert listing.returncode == 0, stderr
        jobs = {j["job_id"]: j for j in map(json.loads, stdout.splitlines())}
        assert jobs[job_id]["state"] == "COMPLETED" and jobs[job_id]["protocol"] == "kmeans"
        assert jobs[job_id]["analyst"] == "analyst"
        unknown = _cli("result", "kmeans-000000000000", "--out", str(tmp_path / "x"), env=env)
        _, stderr = unknown.communicate(timeout=60)
        assert unknown.returncode != 0 and "kmeans-000000000000" in stderr


def test_a_job_rides_through_a_csp_restart(tmp_path):
    """The CSP is killed (SIGKILL) in the middle of a k-means job and started again on its key
    folder: the round that could not be decrypted is run again under a new attempt once the
    CSP answers, and the job completes."""
    digits = load_digits()
    names = [f"px{i}" for i in range(digits.data.shape[1])]
    parts = write_parts(digits.data, names, 3, tmp_path / "data", seed=22)
    owners = [OwnerSpec(site, part) for site, part in zip(SITES, parts, strict=True)]
    with LocalCluster(tmp_path / "run", owners) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        centers = kmeans_centers.random_centers(10, np.zeros(64), np.full(64, 16.0), 64, seed=1)
        params = (
            KmeansRequest(
                features=tuple(names),
                k=10,
                centers=tuple(float(v) for row in centers.tolist() for v in row),
                iterations=60,
            ),
            RoundOptions(value_bound=16.0, deadline_seconds=60.0),
        )
        job_id = client.start(*params).round_id
        while True:
            status = client.wait(job_id, 0.05)
            at = re.search(r"iteration (\d+) of", status.message)
            if (at is not None and int(at.group(1)) >= 3) or status.state != "OPEN":
                break
        assert status.state == "OPEN", status.message
        cluster.kill("csp")
        time.sleep(2.0)
        cluster.start_csp()
        final = client.wait(job_id, 300)
        client.close()
        assert final.state == "COMPLETED", final.message
        doc = result_document(final)
        assert doc is not None
        rounds = [it["round_id"] for it in doc["iterations"]]
        assert any(r.endswith("-r2") for r in rounds), rounds
        assert all(it["contributors"] == list(SITES) for it in doc["iterations"])


# ------------------------------------------------------------------ ledger and audit agree


def _ledger(cluster: LocalCluster, site: str) -> dict[str, dict]:
    path = cluster.workdir / "config" / "ledgers" / f"{site}.json"
    if not path.exists():
        return {}
    return {s["round_id"]: s for s in json.loads(path.read_text())["spends"]}


def _audit(cluster: LocalCluster, site: str, round_id: str) -> list[dict]:
    path = cluster.workdir / "config" / f"audit-{site}.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in events if e["round_id"] == round_id]


def _agree(spend: dict | None, events: list[dict], summed: bool) -> str:
    """'' if the site's ledger entry for a round and its audit log tell the same story."""
    kinds = [e["event"] for e in events]
    if spend is None:
        return "" if "sent" not in kinds else "sent, but nothing charged"
    if spend["state"] == "reserved":
        return "a reservation outlived the agent"
    if spend["state"] == "released":
        ok = "sent" not in kinds and any(e.get("released") for e in events)
        return "" if ok else f"released, but the audit log says {kinds}"
    if spend["state"] == "withdrawn":
        return "" if "withdrawn" in kinds and not summed else f"withdrawn, audit {kinds}"
    # committed: the CSP decrypted the round with this site's share
    return "" if summed else f"committed, but the share was not summed (audit {kinds})"


def test_ledger_and_audit_agree_whenever_an_owner_is_killed_in_a_dp_round(tmp_path):
    """site-3 (with enough rows that reading them takes a moment) is killed (SIGKILL) at
    several points of a DP round: right after accepting, while reading, after sending. Each
    time it is started again and, once it has heard how the round ended, its ledger entry and
    its audit log agree: nothing reserved is left, a charge stays only if the CSP summed its
    share, and everything else is back in the budget with the audit log saying why."""
    x = load_iris().data
    rng = np.random.default_rng(23)
    # enough rows at every site that a noisy row count stays far from 0 at epsilon 1
    small = x[rng.integers(0, len(x), 40_000)] + rng.normal(0, 0.01, (40_000, 4))
    parts = write_parts(small, NAMES, 2, tmp_path / "data", seed=23)
    big = tmp_path / "data" / "part-big.csv"
    rows = x[rng.integers(0, len(x), 400_000)] + rng.normal(0, 0.01, (400_000, 4))
    write_parts(rows, NAMES, 1, tmp_path / "big")[0].rename(big)
    owners = [
        OwnerSpec("site-1", parts[0]),
        OwnerSpec("site-2", parts[1]),
        OwnerSpec("site-3", big),
    ]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(100.0, 1e-2)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        stories = []
        for delay in (0.0, 0.2, 0.6, 3.0):
            params = (
                MomentsRequest(features=tuple(NAMES)),
                RoundOptions(
                    min_owners=2, deadline_seconds=60, dp_epsilon=1.0, row_norm_bound=10.0
                ),
            )
            round_id = client.start(*params).round_id
            end = time.monotonic() + 30
            while not any(e["event"] == "decision" for e in _audit(cluster, "site-3", round_id)):
                assert time.monotonic() < end, "site-3 never decided"
                time.sleep(0.01)
            time.sleep(delay)
            cluster.kill("site-3")
            final = client.wait(round_id, 90)
            assert final.state == "COMPLETED", final.message
            summed = "site-3" in final.submitted
            cluster.start_owner(owners[2])
            client.wait_for_owners(3)
            end = time.monotonic() + 60
            while True:  # the restarted agent hears the result and settles its ledger
                spend = _ledger(cluster, "site-3").get(round_id)
                events = _audit(cluster, "site-3", round_id)
                problem = _agree(spend, events, summed)
                heard = any(e["event"] == "result" for e in events)
                if not problem and (heard or spend is None or spend["state"] != "committed"):
                    break
                assert time.monotonic() < end, (delay, problem, spend, events)
                time.sleep(0.1)
            stories.append((delay, spend["state"] if spend else None, summed))
        client.close()
        ledger = _ledger(cluster, "site-3")
        assert not [s for s in ledger.values() if s["state"] == "reserved"]
        committed = sum(s["epsilon"] for s in ledger.values() if s["state"] == "committed")
        assert committed == sum(1.0 for _, st, summed in stories if st == "committed" and summed)
        print("kill delay, ledger state, share summed:", stories)
