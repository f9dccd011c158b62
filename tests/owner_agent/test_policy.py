"""The owner's policy: each rule refuses with its name, the config checks every key, and
subset differencing without DP is refused through real processes."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.datasets import load_iris

from leteo_fed.config import OwnerPolicy, load_policy
from leteo_fed.errors import ConfigError
from leteo_fed.protocols import registry
from leteo_fed.protocols.base import Common, DpRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport.rounds import invitation_from_proto, spec_to_proto
from owner_agent.policy import refusal

NAMES = ["sl", "sw", "pl", "pw"]


def _invitation(min_owners: int = 3, dp: bool = False, method: str = "pca"):
    """A real round spec, planned like the aggregator plans it and decoded like an owner."""
    protocol = registry.get("moments")
    common = Common(
        n_invited=3, min_owners=min_owners, dp=DpRequest(1.0, 1e-6, 10.0) if dp else None
    )
    plan = protocol.plan(MomentsRequest(method=method, features=tuple(NAMES)), common)
    rnd = protocol.next_round(plan, protocol.start(plan, "r1", ["a", "b", "c"]), 1)
    layout = rnd.share_encoding.layout(2048)
    msg = spec_to_proto("r1", protocol, rnd, "key", 0.0, layout, min_owners)
    return invitation_from_proto(msg, 2048)


def _sent(label: str, columns: list[str], days_ago: float, epsilon=None) -> dict:
    when = datetime.now(timezone.utc) - timedelta(days=days_ago)
    return {
        "time": when.isoformat(),
        "event": "sent",
        "protocol": label,
        "columns": columns,
        "epsilon": epsilon,
    }


def test_the_default_policy_admits_an_ordinary_round():
    assert refusal(OwnerPolicy(), _invitation(), lambda: []) == ""

    def unread() -> list[dict]:
        raise AssertionError("the audit log is read only when a rule counts past queries")

    assert refusal(OwnerPolicy(non_dp_repeats=0), _invitation(), unread) == ""
    assert refusal(OwnerPolicy(non_dp_repeats=1), _invitation(dp=True), unread) == ""


@pytest.mark.parametrize(
    ("policy", "rule"),
    [
        (OwnerPolicy(protocols=("kmeans",)), "policy.protocols"),
        (OwnerPolicy(columns=("sl", "sw", "pl")), "policy.columns: column 'pw'"),
        (OwnerPolicy(min_other_owners=3), "policy.min_other_owners"),
        (OwnerPolicy(non_dp=("kmeans",)), "policy.non_dp"),
    ],
)
def test_each_rule_refuses_naming_itself(policy, rule):
    assert refusal(policy, _invitation(), lambda: []).startswith(rule)


def test_a_dp_round_passes_the_non_dp_rules():
    policy = OwnerPolicy(non_dp=(), non_dp_repeats=1)
    assert refusal(policy, _invitation(dp=True), lambda: [_sent("pca", NAMES, 1)]) == ""


def test_repeated_non_dp_queries_are_counted_in_the_window():
    policy = OwnerPolicy(non_dp_repeats=1, non_dp_window_days=30)
    inv = _invitation()
    shuffled = list(reversed(NAMES))  # the same query, whatever the column order
    assert refusal(policy, inv, lambda: [_sent("pca", shuffled, 40)]) == ""  # outside the window
    assert refusal(policy, inv, lambda: [_sent("pca", NAMES, 1, epsilon=1.0)]) == ""  # a DP release
    assert refusal(policy, inv, lambda: [_sent("lda", NAMES, 1)]) == ""  # another query
    assert refusal(policy, inv, lambda: [_sent("pca", shuffled, 1)]).startswith(
        "policy.non_dp_repeats"
    )
    two = OwnerPolicy(non_dp_repeats=2)
    assert refusal(two, inv, lambda: [_sent("pca", NAMES, 1)]) == ""


def test_the_policy_table_is_checked_key_by_key():
    assert load_policy({}) == OwnerPolicy()
    got = load_policy({"protocols": ["pca"], "non_dp_repeats": 1, "non_dp_window_days": 7})
    assert got.protocols == ("pca",) and got.non_dp_repeats == 1 and got.non_dp_window_days == 7
    for bad, field in (
        ({"colums": ["a"]}, "policy.colums"),
        ({"columns": "a"}, "policy.columns"),
        ({"min_other_owners": 0}, "policy.min_other_owners"),
        ({"non_dp_repeats": -1}, "policy.non_dp_repeats"),
        ({"non_dp_repeats": True}, "policy.non_dp_repeats"),
        ({"non_dp_window_days": 0}, "policy.non_dp_window_days"),
    ):
        with pytest.raises(ConfigError) as err:
            load_policy(bad)
        assert err.value.field == field


@pytest.mark.slow
def test_subset_differencing_without_dp_is_refused_by_the_owner(tmp_path):
    """Real processes: the same non-DP PCA on {1, 2, 3}, then on {1, 2}. Site 1 allows one such
    query per window, so it declines the second; the round misses its quorum, naming the rule."""
    from leteo_fed.client import AnalystClient, RoundFailed, RoundParams
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
    from owner_agent import audit

    x = load_iris().data
    owners = []
    for i, idx in enumerate(np.array_split(np.arange(len(x)), 3), start=1):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({n: x[idx, j] for j, n in enumerate(NAMES)}), path)
        policy = 'non_dp_repeats = 1\nprotocols = ["pca"]' if i == 1 else ""
        owners.append(OwnerSpec(f"site-{i}", path, policy=policy))
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            first = client.run_round(RoundParams(features=NAMES, min_owners=3))
            assert first["owners"] == ["site-1", "site-2", "site-3"]
            with pytest.raises(RoundFailed) as err:
                client.run_round(
                    RoundParams(features=NAMES, min_owners=2, owners=("site-1", "site-2"))
                )
            assert "site-1: policy.non_dp_repeats" in str(err.value)
            with pytest.raises(RoundFailed) as err:  # a protocol site 1 does not take part in
                client.run_round(
                    RoundParams(
                        features=NAMES[:3],
                        method="lda",
                        min_owners=2,
                        owners=("site-1", "site-2"),
                        groupings=(("pw", ("0.2", "1.3")),),
                    )
                )
            assert "site-1: policy.protocols" in str(err.value)
        events = audit.read(cluster.workdir / "config" / "audit-site-1.jsonl")
        decisions = [e for e in events if e["event"] == "decision"]
        assert [d["accepted"] for d in decisions] == [True, False, False]
        assert decisions[1]["reason"].startswith("policy.non_dp_repeats")
        sent = [e for e in events if e["event"] == "sent"]
        assert len(sent) == 1 and json.dumps(sent[0]["columns"]) == json.dumps(NAMES)


def test_ldp_rounds_are_not_subject_to_min_other_owners():
    """Every LDP report is private on its own: a quorum of one is fine for an LDP round."""
    from leteo_fed.protocols.ldp_collection import LdpRequest

    protocol = registry.get("ldp")
    request = LdpRequest(column="c", mechanism="grr", epsilon=1.0, domain=("a", "b"))
    plan = protocol.plan(request, Common(n_invited=1, min_owners=1))
    rnd = protocol.next_round(plan, None, 1)
    inv = invitation_from_proto(spec_to_proto("r2", protocol, rnd, "", 0.0, None, 1), 0)
    assert refusal(OwnerPolicy(min_other_owners=2), inv, lambda: []) == ""
