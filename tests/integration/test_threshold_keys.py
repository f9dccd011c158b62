"""A threshold key in a real deployment: five key holder processes (`keyholder serve`, a 3-of-5
key dealt by `keys deal`), the aggregator with `--keyholders`, owners with `[keyholders]`.

A round decrypts exactly what one CSP would; it still does with two holders killed; the
holders' timings reach the result; projection-only rounds are refused when they are started; a
DP round that fails gives its charge back once the m - t + 1 holders still up attest it.
"""

from __future__ import annotations

import json
import time

import pytest
from integration_helpers import assert_matches_numpy, write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.errors import LeteoError
from leteo_fed.protocols.moments_round import MomentsRequest

pytestmark = pytest.mark.slow
SITES = ["site-1", "site-2", "site-3"]
ONLY = RoundOptions(owners=tuple(SITES))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("threshold")
    x = load_breast_cancer().data[:, :6]
    names = [f"f{i}" for i in range(x.shape[1])]
    parts = write_parts(x, names, len(SITES), tmp / "data")
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(SITES)]
    # a site that shares none of these columns: it declines every round here
    owners.append(OwnerSpec("site-4", parts[0], policy='columns = ["none"]'))
    cluster = LocalCluster(tmp / "run", owners, key_bits=1024, keyholders=(5, 3))
    with cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(len(owners))
        yield cluster, client, x, names
        client.close()


def test_projection_only_rounds_are_refused_when_started(deployment):
    _, client, _, names = deployment
    with pytest.raises(LeteoError, match="reveal=blinded"):
        client.start(MomentsRequest(features=tuple(names), components=2, projection_only=True))


def test_rounds_decrypt_exactly_and_go_on_with_two_of_five_holders_down(deployment):
    cluster, client, x, names = deployment
    result = client.run(MomentsRequest(features=tuple(names), components=3), ONLY).to_dict()
    assert_matches_numpy(result, x, 3)
    holders = result["timings"]["csp"]
    assert holders["holders_valid"] >= 3 and holders["holders_wrong"] == 0
    assert holders["holder_1_partial_seconds"] > 0 or holders["holder_5_partial_seconds"] > 0

    cluster.kill("keyholder-2")
    cluster.kill("keyholder-4")
    result = client.run(MomentsRequest(features=tuple(names), components=3), ONLY).to_dict()
    assert_matches_numpy(result, x, 3)
    holders = result["timings"]["csp"]
    assert holders["holders_valid"] == 3
    assert "holder_2_partial_seconds" not in holders and "holder_4_partial_seconds" not in holders


def _ledger(cluster: LocalCluster, site: str, round_id: str) -> list[str]:
    path = cluster.workdir / "config" / "ledgers" / f"{site}.json"
    spends = json.loads(path.read_text())["spends"] if path.exists() else []
    return [s["state"] for s in spends if s["round_id"] == round_id]


def test_a_failed_dp_rounds_charge_comes_back_on_the_holders_word(deployment):
    """site-4 declines, so a quorum of 3 fails after site-1 and site-2 sent charged shares. No
    holder decrypted the round; the three still up (m - t + 1 = 3 of 5) attest it."""
    cluster, client, _, names = deployment
    status = client.start(
        MomentsRequest(features=tuple(names), components=2),
        RoundOptions(
            owners=("site-1", "site-2", "site-4"), min_owners=3, dp_epsilon=1.0, row_norm_bound=10.0
        ),
    )
    final = client.wait(status.round_id, 60)
    assert final.state == "FAILED"
    round_id = status.round_id
    end = time.monotonic() + 30
    while {_ledger(cluster, s, round_id)[-1:] == ["withdrawn"] for s in ("site-1", "site-2")} != {
        True
    }:
        assert time.monotonic() < end, [_ledger(cluster, s, round_id) for s in SITES]
        time.sleep(0.2)
    audit = cluster.workdir / "config" / "audit-site-1.jsonl"
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    withdrawn = [e for e in events if e["event"] == "withdrawn" and e["round_id"] == round_id]
    assert len(withdrawn) == 1 and "the key holders attest" in withdrawn[0]["reason"]
    assert "3 of 5 will not decrypt it" in withdrawn[0]["reason"]
