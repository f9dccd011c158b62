"""Processes killed with SIGKILL in the middle of a round, and how the rest carries on.

Real processes (CSP, aggregator, owners, mTLS, 2048-bit key). A round completes with its quorum
or fails with a message naming who is missing; nothing is left half-written (ledgers and the
CSP's round log parse whole); a restarted CSP keeps its key and its record of used rounds; the
whole deployment stops within 2 s even with a round open.
"""

from __future__ import annotations

import json
import time

import pytest
from integration_helpers import ManualOwner, write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.moments_round import MomentsRequest

pytestmark = pytest.mark.slow
REAL = ["site-1", "site-2", "site-3"]


@pytest.fixture
def deployment(tmp_path):
    """Three owner processes and one silent test-driven owner (site-x) that keeps rounds open
    until their deadline; every owner has a privacy ledger."""
    bunch = load_breast_cancer()
    names = [f"f{i}" for i in range(10)]
    parts = write_parts(bunch.data[:, :10], names, 4, tmp_path / "data")
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(REAL)]
    cluster = LocalCluster(
        tmp_path / "run", owners, extra_owner_ids=["site-x"], privacy_budget=(4.0, 1e-4)
    )
    with cluster:
        silent = ManualOwner(
            "site-x",
            cluster.tls("site-x", "owner"),
            cluster.addresses["aggregator"],
            cluster.addresses["csp"],
            read_matrix(str(parts[3]), names),
        )
        silent.register()
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(4)
        yield cluster, client, names
        client.close()
        silent.close()


def ledgers_parse(cluster: LocalCluster) -> None:
    for path in (cluster.workdir / "config" / "ledgers").glob("*.json"):
        json.loads(path.read_text())  # whole: written atomically


def test_an_owner_killed_before_it_is_invited_is_named_and_the_quorum_completes(deployment):
    cluster, client, names = deployment
    cluster.kill("site-3")
    result = client.run(
        MomentsRequest(features=tuple(names)),
        RoundOptions(owners=("site-1", "site-2", "site-3"), min_owners=2),
    ).to_dict()
    assert sorted(result["owners"]) == ["site-1", "site-2"]
    assert "site-3" in result["declined"] and "unreachable" in result["declined"]["site-3"]
    ledgers_parse(cluster)


def test_an_owner_killed_mid_round_fails_the_round_naming_it(deployment):
    cluster, client, names = deployment
    status = client.start(
        MomentsRequest(features=tuple(names)),
        RoundOptions(owners=tuple(REAL), min_owners=3, deadline_seconds=6),
    )
    cluster.kill("site-3")  # whether or not its share left before the kill
    final = client.wait(status.round_id, 60)
    if final.state == "COMPLETED":  # its share was already in: the round needs nothing more
        assert sorted(final.submitted) == REAL
    else:
        assert final.state == "FAILED"
        assert "site-3" in final.message and "quorum not met" in final.message
    ledgers_parse(cluster)


def test_a_csp_killed_mid_round_fails_the_round_and_comes_back_intact(deployment):
    cluster, client, names = deployment
    # the three real owners answer at once; silent site-x keeps the round open to its deadline
    status = client.start(
        MomentsRequest(features=tuple(names)),
        RoundOptions(owners=(*REAL, "site-x"), min_owners=3, deadline_seconds=5),
    )
    end = time.monotonic() + 30
    while len(client.wait(status.round_id, 0).submitted) < 3:
        assert time.monotonic() < end
        time.sleep(0.1)
    cluster.kill("csp")
    final = client.wait(status.round_id, 60)
    assert final.state == "FAILED"
    assert "CSP decryption failed: the CSP at" in final.message and "unreachable" in final.message

    cluster.start_csp()  # same key folder: same key, same record of used rounds
    cluster.wait_healthy(names=["csp"])
    log = cluster.workdir / "csp-keys" / "decrypted-rounds.jsonl"
    if log.exists():
        for line in log.read_text().splitlines():
            json.loads(line)  # every line whole
    result = client.run(
        MomentsRequest(features=tuple(names)), RoundOptions(owners=tuple(REAL), min_owners=3)
    ).to_dict()
    assert sorted(result["owners"]) == REAL
    ledgers_parse(cluster)


def test_the_deployment_stops_within_two_seconds_with_a_round_open(deployment):
    cluster, client, names = deployment
    status = client.start(
        MomentsRequest(features=tuple(names)),
        RoundOptions(owners=(*REAL, "site-x"), min_owners=4, deadline_seconds=120),
    )
    assert client.wait(status.round_id, 1).state == "OPEN"
    procs = dict(cluster.procs)
    start = time.monotonic()
    cluster.stop()
    took = time.monotonic() - start
    assert took < 2.0, f"stopping took {took:.2f} s"
    # 0: each process stopped itself (not killed after the grace, -9, nor aborted at exit by a
    # thread still inside a library, -6: an owner computing its share when the signal came)
    assert {name: proc.returncode for name, proc in procs.items()} == dict.fromkeys(procs, 0)
    for log in cluster.logs.glob("*.log"):
        assert "Fatal Python error" not in log.read_text(), log.name
