"""The aggregator operator's commands through real processes: `aggregator owners` lists the
sites (mode, connected, last seen, idle), a site not heard from for longer than
--idle-owner-days is no longer invited by default, and `aggregator owners remove` forgets a
site for good (kept across an aggregator restart); only the aggregator's own certificate may
remove.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_iris

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.moments_round import MomentsRequest

pytestmark = pytest.mark.slow

NAMES = ["a", "b", "c", "d"]
SITES = ("site-1", "site-2", "site-3")
IDLE_SECONDS = 2.0


def _owners(cluster: LocalCluster, *extra: str, name: str = "aggregator"):
    """The command with `name`'s certificate (its role is its name here)."""
    cmd = [sys.executable, "-m", "leteo_fed", "aggregator", "owners", *extra, "--json"]
    cmd += ["--aggregator", cluster.addresses["aggregator"], "--tls-dir", str(cluster.certs)]
    cmd += ["--name", name, "--role", name]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def _listing(cluster: LocalCluster) -> dict[str, dict]:
    done = _owners(cluster)
    assert done.returncode == 0, done.stderr
    return {o["site_id"]: o for o in json.loads(done.stdout)}


def test_idle_sites_are_not_invited_and_removed_sites_are_forgotten(tmp_path):
    parts = write_parts(load_iris().data, NAMES, 3, tmp_path / "data", seed=4)
    owners = [OwnerSpec(s, p) for s, p in zip(SITES, parts, strict=True)]
    idle_days = IDLE_SECONDS / 86400
    with LocalCluster(
        tmp_path / "run", owners, aggregator_args=["--idle-owner-days", repr(idle_days)]
    ) as cluster:
        listing = _listing(cluster)
        assert sorted(listing) == list(SITES)
        assert all(
            o["connected"] and not o["idle"] and o["mode"] == "outbound" for o in listing.values()
        )

        cluster.kill("site-3")
        time.sleep(IDLE_SECONDS + 1.0)
        listing = _listing(cluster)
        assert not listing["site-3"]["connected"] and listing["site-3"]["idle"]
        assert not listing["site-1"]["idle"]  # connected owners never are

        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        status = client.run(
            MomentsRequest(features=tuple(NAMES)), RoundOptions(min_owners=2), on_tick=None
        ).to_dict()
        assert status["owners"] == ["site-1", "site-2"]  # site-3 was not invited, not waited for
        client.close()

        # analysts may list, only the operator (the aggregator's certificate) may remove
        refused = _owners(cluster, "remove", "site-3", name="analyst")
        assert refused.returncode == 2 and "PERMISSION_DENIED" in refused.stderr + refused.stdout
        done = _owners(cluster, "remove", "site-3")
        assert done.returncode == 0, done.stderr
        assert sorted(o["site_id"] for o in json.loads(done.stdout)) == ["site-1", "site-2"]
        assert _owners(cluster, "remove", "site-9").returncode == 2  # unknown: named

        cluster.kill("aggregator")  # the removal is kept in the aggregator's state
        cluster.start_aggregator()
        cluster.wait_healthy(names=["aggregator"])
        assert "site-3" not in _listing(cluster)
