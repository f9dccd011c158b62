"""Prometheus metrics through real processes: each service's `--metrics` endpoint, scraped over
HTTP before and after one round, shows the documented metrics change.

A CSP (`--metrics`), an aggregator (`--metrics`) and three outbound owners (LETEO_METRICS_LISTEN)
run as separate processes with mTLS. One PCA round: the aggregator counts it started and
completed (protocol "pca"), three shares received and one duration; the CSP one decryption and
its times; each owner one accepted invitation and one share sent. A DP round then moves each
owner's budget gauges (epsilon spent up, left down, by the round's epsilon). A port in use is
one line naming --metrics and exit 2.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request

import pytest
from integration_helpers import write_parts
from prometheus_client.parser import text_string_to_metric_families
from sklearn.datasets import load_iris

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.demo.ports import free_port
from leteo_fed.protocols.moments_round import MomentsRequest

pytestmark = pytest.mark.slow

NAMES = ["sl", "sw", "pl", "pw"]
SITES = ["site-1", "site-2", "site-3"]
BUDGET, EPSILON = 10.0, 1.5


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    """Every sample at http://ADDRESS/metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: dict, name: str) -> float:
    """A counter summed over its labels."""
    return sum(v for (n, _), v in samples.items() if n == name)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("metrics")
    parts = write_parts(load_iris().data, NAMES, 3, work / "data", seed=5)
    endpoints = {name: f"127.0.0.1:{free_port()}" for name in ["csp", "aggregator", *SITES]}
    owners = [
        OwnerSpec(site, part, env={"LETEO_METRICS_LISTEN": endpoints[site]})
        for site, part in zip(SITES, parts, strict=True)
    ]
    with LocalCluster(
        work / "run",
        owners,
        privacy_budget=(BUDGET, 1e-4),
        aggregator_args=["--metrics", endpoints["aggregator"]],
        csp_args=["--metrics", endpoints["csp"]],
    ) as running:
        with AnalystClient(
            running.addresses["aggregator"], running.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield running, client, endpoints


def test_one_round_moves_the_documented_metrics(cluster):
    running, client, endpoints = cluster
    before = {name: scrape(address) for name, address in endpoints.items()}
    agg = before["aggregator"]
    assert value(agg, "leteo_connected_owners") == 3
    assert value(agg, "leteo_rounds_started_total", protocol="pca") == 0

    result = client.run(
        MomentsRequest(features=tuple(NAMES), components=2), RoundOptions(min_owners=3)
    ).to_dict()
    assert len(result["components"]) == 2

    after = {name: scrape(address) for name, address in endpoints.items()}
    a0, a1 = before["aggregator"], after["aggregator"]
    for name in ("leteo_rounds_started_total", "leteo_rounds_completed_total"):
        assert value(a1, name, protocol="pca") == value(a0, name, protocol="pca") + 1, name
    assert value(a1, "leteo_rounds_failed_total", protocol="pca") == 0
    assert value(a1, "leteo_shares_received_total", protocol="pca") == 3
    assert value(a1, "leteo_round_duration_seconds_count", protocol="pca") == 1
    assert value(a1, "leteo_round_duration_seconds_sum", protocol="pca") > 0
    assert total(a1, "leteo_shares_refused_total") == 0
    assert total(a1, "leteo_declines_total") == 0
    assert value(a1, "leteo_connected_owners") == 3

    c0, c1 = before["csp"], after["csp"]
    assert total(c1, "leteo_csp_decryptions_total") == total(c0, "leteo_csp_decryptions_total") + 1
    assert total(c1, "leteo_csp_rounds_opened_total") == 1
    assert total(c1, "leteo_csp_decryption_seconds_count") == 1
    assert total(c1, "leteo_csp_verification_seconds_count") == 1
    assert total(c1, "leteo_csp_verification_seconds_sum") > 0
    assert "process_cpu_seconds_total" in {n for n, _ in c1}

    for site in SITES:
        o0, o1 = before[site], after[site]
        accepted = value(o1, "leteo_owner_rounds_total", decision="accepted")
        assert accepted == value(o0, "leteo_owner_rounds_total", decision="accepted") + 1, site
        assert value(o1, "leteo_owner_uploads_total", kind="share") == 1, site
        # no DP in this round: the budget did not move
        assert value(o1, "leteo_owner_budget_epsilon_spent") == 0.0, site
        assert value(o1, "leteo_owner_budget_epsilon_left") == BUDGET, site


def test_a_dp_round_moves_each_owners_budget(cluster):
    running, client, endpoints = cluster
    before = {site: scrape(endpoints[site]) for site in SITES}
    # rows clipped to norm 1: the count's noise (std ~5) leaves the 150 rows' noisy count far
    # above the 2 a release needs (at norm 16 its std was ~800 and the round failed ~40% of runs)
    client.run(
        MomentsRequest(features=tuple(NAMES), components=2),
        RoundOptions(min_owners=3, dp_epsilon=EPSILON, row_norm_bound=1.0),
    ).to_dict()
    for site in SITES:
        o0, o1 = before[site], scrape(endpoints[site])
        spent = value(o1, "leteo_owner_budget_epsilon_spent")
        left = value(o1, "leteo_owner_budget_epsilon_left")
        # RDP ledgers: the round's Skellam curve composed with the (no) earlier ones, converted
        # at the site's delta_total: more than nothing, at most the round's signed epsilon
        assert value(o1, "leteo_owner_budget_accountant_rdp") == 1.0
        assert 0 < spent - value(o0, "leteo_owner_budget_epsilon_spent") <= EPSILON * (1 + 1e-6)
        assert left == pytest.approx(BUDGET - spent)
        assert value(o1, "leteo_owner_budget_epsilon_total") == BUDGET
        assert value(o1, "leteo_owner_budget_epsilon_reserved") == 0.0


def test_a_metrics_port_in_use_is_one_line_and_exit_2(cluster, tmp_path):
    running, _, _ = cluster
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = f"127.0.0.1:{held.getsockname()[1]}"
        cmd = [sys.executable, "-m", "leteo_fed", "aggregator", "serve"]
        cmd += ["--listen", f"127.0.0.1:{free_port()}", "--metrics", busy]
        cmd += ["--tls-dir", str(running.certs), "--name", "aggregator"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on {busy} (--metrics)" in done.stderr
    assert "Traceback" not in done.stderr
