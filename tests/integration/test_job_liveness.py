"""Jobs an analyst can trust (issue 20): no waiting for owners known to be gone.

Real processes (`LocalCluster`: CSP, aggregator, three outbound owner agents, mTLS, 2048-bit
keys). An owner stopped with SIGINT in the middle of a k-means job must not make the job wait for
it: the iteration it left closes as soon as the quorum is in, and later iterations do not wait
for it either.
"""

from __future__ import annotations

import re
import signal
import time

import numpy as np
import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_iris

from leteo_fed.client import AnalystClient, KmeansParams
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols import kmeans as km
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
    centers = km.random_centers(3, np.full(4, 0.0), np.full(4, 8.0), 4, seed=3)
    params = KmeansParams(
        features=NAMES,
        k=3,
        centers=centers.tolist(),
        iterations=ITERATIONS,
        tolerance=0.0,
        min_owners=2,
        deadline_seconds=DEADLINE,
        # DP: the noisy centers keep moving, so every iteration runs
        dp_epsilon=5.0,
        dp_delta=1e-6,
        row_norm_bound=10.0,
    )
    start = client.start_kmeans(params)
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
