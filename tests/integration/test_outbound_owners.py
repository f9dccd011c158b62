"""Outbound-only owners (the default), through real processes: CSP, aggregator and owner agents
with mTLS and a 2048-bit key. An owner opens no port; it connects out to the aggregator, takes
invitations and results on that stream, and connects again after it or the link went away: an
invitation sent while it was away reaches it if it is back within the invitation timeout, and a
result it missed reaches it when it reconnects, recorded once. A second agent with a connected
site's identity is refused in one line; a killed agent's restart gets in at once.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed import defaults
from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.moments_round import MomentsRequest
from owner_agent.audit import read as audit_events

pytestmark = pytest.mark.slow
SITES = ["site-1", "site-2", "site-3"]


def listening_ports(pid: int) -> set[int]:
    """TCP ports the process listens on (its socket inodes matched in /proc/net/tcp{,6})."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
def deployment(tmp_path):
    bunch = load_breast_cancer()
    names = [f"f{i}" for i in range(6)]
    parts = write_parts(bunch.data[:, :6], names, len(SITES), tmp_path / "data")
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(SITES)]
    with LocalCluster(tmp_path / "run", owners) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        yield cluster, client, names, owners
        client.close()


def audit(cluster: LocalCluster, site: str) -> list[dict]:
    return audit_events(cluster.workdir / "config" / f"audit-{site}.jsonl")


def wait_connected(cluster: LocalCluster, site: str, connected: bool, within: float = 30) -> None:
    end = time.monotonic() + within
    while (site in cluster.connected_owners()) != connected:
        assert time.monotonic() < end, f"{site} connected={not connected} after {within} s"
        time.sleep(0.1)


def test_owners_open_no_port_and_a_round_runs_over_their_connections(deployment):
    cluster, client, names, _ = deployment
    for site in SITES:
        assert listening_ports(cluster.procs[site].pid) == set(), f"{site} listens"
    assert listening_ports(cluster.procs["aggregator"].pid)  # the aggregator does
    listing = {o.site_id: o for o in client.owner_listing()}
    assert all(listing[s].mode == "outbound" and listing[s].connected for s in SITES)
    result = client.run(MomentsRequest(features=tuple(names)), RoundOptions(min_owners=3)).to_dict()
    assert sorted(result["owners"]) == SITES
    # each owner gets the result over its stream (published after the analyst's answer), once
    end = time.monotonic() + 30
    for site in SITES:
        while not (results := [e for e in audit(cluster, site) if e["event"] == "result"]):
            assert time.monotonic() < end, f"{site} never received the result"
            time.sleep(0.1)
        assert [e["state"] for e in results] == ["COMPLETED"]


def test_a_restarted_owner_reconnects_and_gets_an_invitation_sent_while_it_was_away(deployment):
    cluster, client, names, owners = deployment
    cluster.kill("site-3")
    wait_connected(cluster, "site-3", False)
    status = client.start(
        MomentsRequest(features=tuple(names)), RoundOptions(owners=tuple(SITES), min_owners=3)
    )
    cluster.start_owner(owners[2])  # back within the invitation timeout
    final = client.wait(status.round_id, 60)
    assert final.state == "COMPLETED", final.message
    assert sorted(final.submitted) == SITES
    assert defaults.INVITE_RECONNECT_SECONDS >= 5  # what the restart above had to fit in


def test_an_owner_away_longer_than_the_timeout_is_named_and_gets_the_result_when_back(
    deployment,
):
    cluster, client, names, owners = deployment
    cluster.kill("site-3")
    wait_connected(cluster, "site-3", False)
    status = client.start(
        MomentsRequest(features=tuple(names)), RoundOptions(owners=tuple(SITES), min_owners=2)
    )
    final = client.wait(status.round_id, 60)
    assert final.state == "COMPLETED", final.message
    assert sorted(final.submitted) == ["site-1", "site-2"]
    assert "site-3" in final.missing

    # site-1 misses the result of a round it sent its share to: it is killed after sending,
    # before the round closes. site-3, back but frozen (SIGSTOP: still connected, so not known
    # to be gone), holds the round open until its invitation times out
    cluster.start_owner(owners[2])
    wait_connected(cluster, "site-3", True)
    frozen = cluster.procs["site-3"]
    frozen.send_signal(signal.SIGSTOP)
    try:
        status = client.start(
            MomentsRequest(features=tuple(names)), RoundOptions(owners=tuple(SITES), min_owners=2)
        )
        end = time.monotonic() + 30
        while "site-1" not in client.wait(status.round_id, 0).submitted:
            assert time.monotonic() < end
            time.sleep(0.05)
        cluster.kill("site-1")
        final = client.wait(status.round_id, 60)
    finally:
        frozen.send_signal(signal.SIGCONT)
    assert final.state == "COMPLETED", final.message
    assert not any(
        e["event"] == "result" and e["round_id"] == status.round_id
        for e in audit(cluster, "site-1")
    )
    cluster.start_owner(owners[0])  # reconnects naming the round it awaits
    end = time.monotonic() + 30
    while True:
        results = [
            e
            for e in audit(cluster, "site-1")
            if e["event"] == "result" and e["round_id"] == status.round_id
        ]
        if results:
            break
        assert time.monotonic() < end, "the missed result never arrived"
        time.sleep(0.1)
    assert results[0]["state"] == "COMPLETED"
    result_file = cluster.workdir / "config" / "results" / "site-1" / f"{status.round_id}.json"
    assert result_file.exists()
    # a second reconnect asks nothing more: the result stays recorded once
    cluster.kill("site-1")
    cluster.start_owner(owners[0])
    wait_connected(cluster, "site-1", True)
    time.sleep(0.5)
    results = [
        e
        for e in audit(cluster, "site-1")
        if e["event"] == "result" and e["round_id"] == status.round_id
    ]
    assert len(results) == 1


def _count(cluster: LocalCluster, name: str, text: str) -> int:
    path = cluster.logs / f"{name}.log"
    return path.read_text(errors="replace").count(text) if path.exists() else 0


def test_a_second_agent_with_a_connected_sites_identity_is_refused_in_one_line(deployment):
    """The second agent is refused (ALREADY_EXISTS) and says so once, retrying quietly with
    backoff; the first keeps its stream. A crashed agent's restart gets in at once."""
    cluster, client, names, owners = deployment
    connected = "owner site-1 connected (outbound)"
    before = _count(cluster, "aggregator", connected)
    cluster.start_owner(owners[0], name="site-1-again")
    time.sleep(10)
    assert cluster.procs["site-1-again"].poll() is None  # it waits, in case the first goes
    said = (cluster.logs / "site-1-again.log").read_text().splitlines()
    refusals = [line for line in said if "refused by the aggregator" in line]
    assert len(refusals) == 1, said
    refused = "ALREADY_EXISTS: site site-1 is already connected from another agent since"
    assert refused in refusals[0]
    assert not any("Traceback" in line for line in said)
    assert _count(cluster, "aggregator", connected) == before  # the first was never dropped
    tries = _count(cluster, "aggregator", "Connect refused: site site-1 is already connected")
    assert 1 <= tries <= 12, tries  # backoff: not a loop
    result = client.run(MomentsRequest(features=tuple(names)), RoundOptions(min_owners=3))
    assert sorted(result.to_dict()["owners"]) == SITES  # the first agent still serves

    cluster.kill("site-1-again")
    cluster.kill("site-1")  # SIGKILL: the kernel closes its socket
    start = time.monotonic()
    cluster.start_owner(owners[0])
    while _count(cluster, "aggregator", connected) == before:
        assert time.monotonic() - start < 5, "the restarted agent did not get in"
        time.sleep(0.05)


def test_past_the_admission_limit_an_owner_is_refused_until_one_leaves(tmp_path):
    """`aggregator serve --max-owners 2`: the third agent is refused with the limit named, keeps
    retrying, and gets in once a connected one stops."""
    bunch = load_breast_cancer()
    names = [f"f{i}" for i in range(6)]
    parts = write_parts(bunch.data[:, :6], names, len(SITES), tmp_path / "data")
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(SITES)]
    cluster = LocalCluster(tmp_path / "run", owners, aggregator_args=["--max-owners", "2"])
    cluster.prepare()
    cluster.start_services()
    try:
        cluster.wait_healthy(90, names=["csp", "aggregator"])
        for owner in owners[:2]:
            cluster.start_owner(owner)
        cluster.wait_healthy(90, names=SITES[:2])
        cluster.start_owner(owners[2])
        log = cluster.logs / "site-3.log"
        deadline = time.monotonic() + 30
        while "RESOURCE_EXHAUSTED" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, cluster.log_tail("site-3")
            time.sleep(0.2)
        assert "at most 2 connected owners" in log.read_text()
        assert cluster.connected_owners() == set(SITES[:2])
        cluster.kill("site-1", signal.SIGTERM)
        cluster.wait_healthy(30, names=["site-3"])  # in at its next attempt (backoff <= 5 s)
        assert cluster.connected_owners() == {"site-2", "site-3"}
    finally:
        cluster.stop()
