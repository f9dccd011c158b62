"""The owner's policy: safe defaults, each rule refuses with its name, the config checks every
key, and through real processes subset differencing without DP and an analyst the sites do not
list are refused."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.datasets import load_iris

from leteo_fed.config import DataSourceConfig, OwnerPolicy, load_policy
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.protocols import registry
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import invitation_from_proto, spec_to_proto
from owner_agent.policy import analyst_refusal, refusal, release_facts
from owner_agent.site_data import LocalSite

NAMES = ["sl", "sw", "pl", "pw"]
# every rule open: each test closes the one it is about
OPEN = OwnerPolicy(
    columns=("*",), min_other_owners=1, non_dp=("*",), non_dp_repeats=0, data_refusals=0
)
INVITED = ["a", "b", "c"]


def _invitation(min_owners: int = 3, dp: bool = False, method: str = "pca"):
    """A real round spec, planned like the aggregator plans it and decoded like an owner."""
    protocol = registry.get("moments")
    common = Common(
        n_invited=3, min_owners=min_owners, dp=DpRequest(1.0, 1e-6, 10.0) if dp else None
    )
    plan = protocol.plan(MomentsRequest(method=method, features=tuple(NAMES)), common)
    rnd = protocol.next_round(plan, protocol.start(plan, "r1", INVITED), 1)
    layout = rnd.share_encoding.layout(2048)
    root = membership.root(INVITED)
    msg = spec_to_proto("r1", protocol, rnd, "key", 0.0, layout, min_owners, "", None, root, 3)
    return invitation_from_proto(msg, 2048)


def _kmeans_iteration(index: int):
    """Iteration `index` of a non-DP k-means job of the three owners, quorum 3."""
    protocol = registry.get("kmeans")
    request = KmeansRequest(k=2, centers=(0.0,) * 4 + (1.0,) * 4, iterations=3, features=NAMES)
    plan = protocol.plan(request, Common(n_invited=3, min_owners=3))
    state = protocol.start(plan, "j", INVITED)
    rnd = protocol.next_round(plan, state, index)
    layout = rnd.share_encoding.layout(2048)
    root = membership.root(INVITED)
    msg = spec_to_proto(f"j-it{index}", protocol, rnd, "key", 0.0, layout, 3, "j", None, root, 3)
    return invitation_from_proto(msg, 2048)


def _sent(
    label: str,
    columns: list[str],
    days_ago: float,
    epsilon=None,
    round_id: str = "",
    owners: list[str] | None = INVITED,
    chosen: bool = False,
) -> dict:
    when = datetime.now(timezone.utc) - timedelta(days=days_ago)
    return {
        "time": when.isoformat(),
        "event": "sent",
        "round_id": round_id,
        "protocol": label,
        "columns": columns,
        "epsilon": epsilon,
        "owners": owners,
        "chosen_by_aggregator": chosen,
    }


def test_the_default_policy_is_what_a_data_protection_officer_signs():
    """Nothing is shared until the columns are listed; then only DP releases, with a quorum
    hiding the site among at least two others, and at least 10 rows, from any analyst."""
    default = OwnerPolicy()
    reason = refusal(default, _invitation(dp=True), lambda: [])
    assert reason.startswith("policy.columns: ") and "list the shareable columns" in reason
    listed = dataclasses.replace(default, columns=tuple(NAMES))
    assert refusal(listed, _invitation(dp=True), lambda: []) == ""
    assert refusal(listed, _invitation(), lambda: []).startswith("policy.non_dp: ")
    assert refusal(listed, _invitation(min_owners=2, dp=True), lambda: []).startswith(
        "policy.min_other_owners: "
    )
    assert (default.min_rows, default.non_dp_repeats, default.non_dp_window_days) == (10, 1, 30)
    assert default.analysts == ("*",) and default.protocols == ("*",)
    assert default.request_max_age_hours == 24


def test_the_audit_log_is_read_only_when_a_rule_counts_past_queries():
    def unread() -> list[dict]:
        raise AssertionError("the audit log is read only when a rule counts past queries")

    assert refusal(OPEN, _invitation(), unread) == ""
    closed = dataclasses.replace(OPEN, non_dp_repeats=1)
    assert refusal(closed, _invitation(dp=True), unread) == ""


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"protocols": ("kmeans",)}, "policy.protocols"),
        ({"columns": ("sl", "sw", "pl")}, "policy.columns: column 'pw'"),
        ({"columns": ()}, "policy.columns: this site has not said"),
        ({"min_other_owners": 3}, "policy.min_other_owners"),
        ({"non_dp": ("kmeans",)}, "policy.non_dp"),
    ],
)
def test_each_rule_refuses_naming_itself(change, rule):
    policy = dataclasses.replace(OPEN, **change)
    assert refusal(policy, _invitation(), lambda: []).startswith(rule)


def test_a_dp_round_passes_the_non_dp_rules():
    policy = dataclasses.replace(OPEN, non_dp=(), non_dp_repeats=1)
    assert refusal(policy, _invitation(dp=True), lambda: [_sent("pca", NAMES, 1)]) == ""


def test_only_the_listed_analysts_may_start_rounds():
    assert analyst_refusal(OPEN, "anyone") == ""
    assert analyst_refusal(OPEN, None) == ""  # without TLS, "*" admits the unknown analyst
    dpo = dataclasses.replace(OPEN, analysts=("ana", "bob"))
    assert analyst_refusal(dpo, "bob") == ""
    assert analyst_refusal(dpo, "mallory") == (
        "policy.analysts: analyst 'mallory' may not start rounds that include this site"
    )
    assert analyst_refusal(dpo, None).startswith("policy.analysts: the round request is not signed")


def test_min_rows_refuses_a_small_site_where_its_data_is_read(tmp_path):
    """Checked as the rows are read, before anything is computed or encrypted, by every
    protocol (LDP too); the decline does not tell how many rows the site has."""
    from leteo_fed.protocols.ldp_collection import LdpRequest

    path = tmp_path / "small.csv"
    pacsv.write_csv(pa.table({"sl": [1.0, 2.0, 3.0], "c": ["a", "b", "a"]}), path)
    small = LocalSite("site-1", DataSourceConfig(str(path), engine="numpy"), min_rows=4)
    with pytest.raises(DataError) as err:
        small.read(["sl"])
    assert str(err.value) == (
        "policy.min_rows: this site takes part only with at least 4 rows in the data a round reads"
    )
    assert "3" not in str(err.value)
    ldp = registry.get("ldp")
    plan = ldp.plan(
        LdpRequest(column="c", mechanism="grr", epsilon=1.0, domain=("a", "b")),
        Common(n_invited=1, min_owners=1),
    )
    spec = ldp.next_round(plan, None, 1).spec
    with pytest.raises(DataError, match="policy.min_rows"):
        ldp.reports(spec, small, np.random.default_rng(0), {})
    enough = LocalSite("site-1", DataSourceConfig(str(path), engine="numpy"), min_rows=3)
    assert ldp.reports(spec, enough, np.random.default_rng(0), {}).n_reports == 3


def test_differencing_is_counted_by_released_columns_and_owner_sets():
    """Any earlier non-DP release sharing a column, over another set of owners, counts:
    whatever its label, column set or job. The same known set of owners releases nothing new."""
    policy = dataclasses.replace(OPEN, non_dp_repeats=1, non_dp_window_days=30)
    inv = _invitation()  # owners a, b, c with a quorum of 3: the set summed is known
    assert refusal(policy, inv, lambda: [_sent("pca", NAMES, 1)]) == ""  # the same owners
    assert refusal(policy, inv, lambda: [_sent("lda", NAMES[:2], 1)]) == ""  # same owners again
    pair = ["a", "b"]
    for label, columns in [
        ("pca", list(reversed(NAMES))),
        ("lda", NAMES),  # another label
        ("weighted_stats", NAMES[:1]),  # another protocol, one shared column
        ("kmeans", [*NAMES, "age"]),  # a superset of the columns
    ]:
        past = [_sent(label, columns, 1, owners=pair)]
        assert refusal(policy, inv, lambda p=past: p).startswith("policy.non_dp_repeats: "), label
    unknown = [_sent("pca", NAMES, 1, owners=None)]  # its quorum was below its invited set
    assert refusal(policy, inv, lambda: unknown).startswith("policy.non_dp_repeats: ")
    assert refusal(policy, inv, lambda: [_sent("pca", ["age"], 1, owners=pair)]) == ""
    assert refusal(policy, inv, lambda: [_sent("pca", NAMES, 40, owners=pair)]) == ""  # too old
    dp_release = [_sent("pca", NAMES, 1, epsilon=1.0, owners=pair)]
    assert refusal(policy, inv, lambda: dp_release) == ""
    loose = _invitation(min_owners=2)  # quorum 2 of 3: which shares are summed is unknown
    assert refusal(policy, loose, lambda: [_sent("pca", NAMES, 1)]).startswith(
        "policy.non_dp_repeats: "
    )
    two = dataclasses.replace(policy, non_dp_repeats=2)
    assert refusal(two, inv, lambda: [_sent("pca", NAMES, 1, owners=pair)]) == ""


def test_the_owner_set_is_recorded_by_its_root_and_old_lists_still_count():
    """A `sent` event records the summed set as the invited set's root (the owner never sees
    the list); events written with the list compare by the list's root."""
    policy = dataclasses.replace(OPEN, non_dp_repeats=1, non_dp_window_days=30)
    inv = _invitation()
    facts = release_facts(inv)
    assert facts["owners_root"] == membership.root(INVITED).hex()
    assert "owners" not in facts
    same = {**_sent("pca", NAMES, 1, owners=None), **facts}
    assert refusal(policy, inv, lambda: [same]) == ""
    other = {**same, "owners_root": membership.root(["a", "b"]).hex()}
    assert refusal(policy, inv, lambda: [other]).startswith("policy.non_dp_repeats: ")
    assert release_facts(_invitation(min_owners=2))["owners_root"] is None  # quorum below n


def test_rounds_on_centers_the_aggregator_chose_count_as_releases():
    """k-means iterations after the first use centers no owner can verify: each is a release
    of its own, even over the same owners (centers around one outlier row isolate it)."""
    policy = dataclasses.replace(OPEN, non_dp_repeats=2)
    first, second = _kmeans_iteration(1), _kmeans_iteration(2)
    it1 = _sent("kmeans", NAMES, 0, round_id="j-it1")
    assert refusal(policy, first, lambda: []) == ""
    assert refusal(policy, second, lambda: [it1]) == ""  # one release counted, limit 2
    it2 = _sent("kmeans", NAMES, 0, round_id="j-it2", chosen=True)
    assert refusal(policy, _kmeans_iteration(3), lambda: [it1, it2]).startswith(
        "policy.non_dp_repeats: "
    )
    # a later PCA of the same owners counts the chosen-center round too
    assert refusal(dataclasses.replace(policy, non_dp_repeats=1), _invitation(), lambda: [it2])


def test_refusals_for_the_sites_data_are_limited_per_analyst():
    policy = dataclasses.replace(OPEN, data_refusals=2)
    now = datetime.now(timezone.utc)

    def refused(analyst: str | None, days_ago: float = 0) -> dict:
        when = (now - timedelta(days=days_ago)).isoformat()
        return {"time": when, "event": "failed", "data_dependent": True, "analyst": analyst}

    inv = _invitation()
    assert refusal(policy, inv, lambda: [refused("ana")], analyst="ana") == ""
    twice = [refused("ana"), refused("ana")]
    reason = refusal(policy, inv, lambda: twice, analyst="ana")
    assert reason.startswith("policy.data_refusals: ")
    assert refusal(policy, inv, lambda: twice, analyst="bob") == ""  # per analyst
    old = [refused("ana", 40), refused("ana", 40)]
    assert refusal(policy, inv, lambda: old, analyst="ana") == ""  # outside the window
    assert refusal(policy, _invitation(dp=True), lambda: twice, analyst="ana") == reason  # DP too


def test_the_policy_table_is_checked_key_by_key():
    assert load_policy({}) == OwnerPolicy()
    got = load_policy(
        {
            "protocols": ["pca"],
            "non_dp_repeats": 1,
            "non_dp_window_days": 7,
            "analysts": ["ana"],
            "min_rows": 50,
            "request_max_age_hours": 2,
        }
    )
    assert got.protocols == ("pca",) and got.non_dp_repeats == 1 and got.non_dp_window_days == 7
    assert got.analysts == ("ana",) and got.min_rows == 50 and got.request_max_age_hours == 2
    for bad, field in (
        ({"colums": ["a"]}, "policy.colums"),
        ({"columns": "a"}, "policy.columns"),
        ({"min_other_owners": 0}, "policy.min_other_owners"),
        ({"non_dp_repeats": -1}, "policy.non_dp_repeats"),
        ({"non_dp_repeats": True}, "policy.non_dp_repeats"),
        ({"non_dp_window_days": 0}, "policy.non_dp_window_days"),
        ({"analysts": "ana"}, "policy.analysts"),
        ({"analysts": [""]}, "policy.analysts"),
        ({"min_rows": 0}, "policy.min_rows"),
        ({"min_rows": 2.5}, "policy.min_rows"),
        ({"request_max_age_hours": -1}, "policy.request_max_age_hours"),
        ({"request_max_age_hours": float("inf")}, "policy.request_max_age_hours"),
    ):
        with pytest.raises(ConfigError) as err:
            load_policy(bad)
        assert err.value.field == field


@pytest.mark.slow
def test_subset_differencing_without_dp_is_refused_by_the_owner(tmp_path):
    """Real processes: the same non-DP PCA on {1, 2, 3}, then on {1, 2}. Site 1 allows one such
    query per window, so it declines the second; the round misses its quorum, naming the rule."""
    from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
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
            first = client.run(
                MomentsRequest(features=tuple(NAMES)), RoundOptions(min_owners=3)
            ).to_dict()
            assert first["owners"] == ["site-1", "site-2", "site-3"]
            with pytest.raises(RoundFailed) as err:
                client.run(
                    MomentsRequest(features=tuple(NAMES)),
                    RoundOptions(min_owners=2, owners=("site-1", "site-2")),
                ).to_dict()
            assert "site-1: policy.non_dp_repeats" in str(err.value)
            with pytest.raises(RoundFailed) as err:  # a protocol site 1 does not take part in
                client.run(
                    MomentsRequest(
                        features=tuple(NAMES[:3]),
                        method="lda",
                        groupings=tuple(
                            LabelClasses(c, tuple(k)) for c, k in (("pw", ("0.2", "1.3")),)
                        ),
                    ),
                    RoundOptions(min_owners=2, owners=("site-1", "site-2")),
                ).to_dict()
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
    assert refusal(dataclasses.replace(OPEN, min_other_owners=2), inv, lambda: []) == ""


@pytest.mark.slow
def test_an_analyst_the_sites_do_not_list_is_refused_and_nothing_is_charged(tmp_path):
    """Real processes over TLS: every site admits only analyst 'dpo-approved'; the deployment's
    analyst (certified as 'analyst') asks for a DP round. Each owner verifies the signed request
    relayed by the aggregator, declines naming policy.analysts, and its ledger stays empty."""
    from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
    from owner_agent import audit

    x = load_iris().data
    owners = []
    for i, idx in enumerate(np.array_split(np.arange(len(x)), 3), start=1):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({n: x[idx, j] for j, n in enumerate(NAMES)}), path)
        owners.append(OwnerSpec(f"site-{i}", path, policy='analysts = ["dpo-approved"]'))
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            with pytest.raises(RoundFailed) as err:
                client.run(
                    MomentsRequest(features=tuple(NAMES)),
                    RoundOptions(min_owners=3, dp_epsilon=1.0, row_norm_bound=10.0),
                ).to_dict()
    for site in ("site-1", "site-2", "site-3"):
        assert f"{site}: policy.analysts: analyst 'analyst' may not start rounds" in str(err.value)
        ledger = json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())
        assert ledger["spends"] == []
        events = audit.read(cluster.workdir / "config" / f"audit-{site}.jsonl")
        invitation = next(e for e in events if e["event"] == "invitation")
        assert invitation["analyst"] == "analyst" and len(invitation["request_digest"]) == 64
        decision = next(e for e in events if e["event"] == "decision")
        assert decision["analyst"] == "analyst" and not decision["accepted"]
        assert decision["reason"].startswith("policy.analysts: ")
        assert not [e for e in events if e["event"] in ("sent", "failed")]
