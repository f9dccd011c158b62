"""LDP collection through real processes: owners charge their ledgers, perturb every record and
stream reports; the aggregator's estimates agree with the truth within their standard errors."""

from __future__ import annotations

import json
import subprocess
import sys

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from integration_helpers import Z_UNSEEDED

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions, RpcRefused
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.ldp_collection import LdpRequest

pytestmark = pytest.mark.slow

BUDGET = 3.0
LEVELS = ("a", "b", "c", "d", "e")


def _population(n: int, seed: int):
    rng = np.random.default_rng(seed)
    level = rng.choice(LEVELS, size=n, p=[0.4, 0.25, 0.2, 0.1, 0.05])
    hours = np.clip(rng.normal(40, 10, size=n), 0, 100)
    return level, hours


@pytest.fixture(scope="module")
def ldp_cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("ldp")
    owners, truth = [], {"level": [], "hours": [], "score": []}
    for i, n in enumerate((9000, 7000, 8000), start=1):
        level, hours = _population(n, seed=i)
        path = work / f"site-{i}.csv"
        score = np.clip(np.random.default_rng(100 + i).normal(60, 15, size=n), 0, 100)
        pacsv.write_csv(pa.table({"level": level, "hours": hours, "score": score}), path)
        owners.append(OwnerSpec(f"site-{i}", path))
        truth["level"].extend(level)
        truth["hours"].extend(hours)
        truth["score"].extend(score)
    cluster = LocalCluster(work / "run", owners, privacy_budget=(BUDGET, 0.0))
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield cluster, client, truth


def _ledger(cluster, site):
    return json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())


def _spent(cluster, site) -> float:
    """Committed or reserved epsilon; a refused round leaves at most a 'released' audit entry."""
    return sum(s["epsilon"] for s in _ledger(cluster, site)["spends"] if s["state"] != "released")


def test_frequency_collection_matches_truth_within_standard_errors(ldp_cluster):
    cluster, client, truth = ldp_cluster
    result = client.run(
        LdpRequest(column="level", mechanism="oue", epsilon=1.0, domain=LEVELS),
        RoundOptions(min_owners=3),
    ).to_dict()
    assert result["n"] == len(truth["level"]) and result["owners"] == ["site-1", "site-2", "site-3"]
    true_counts = {v: truth["level"].count(v) for v in LEVELS}
    for v in LEVELS:
        # unbiased estimator, standard error from the mechanism's exact variance
        assert (
            abs(result["estimates"][v] - true_counts[v]) <= Z_UNSEEDED * result["std_errors"][v]
        ), v
    for site in ("site-1", "site-2", "site-3"):
        spend = [s for s in _ledger(cluster, site)["spends"] if s["round_id"] == result["round_id"]]
        assert len(spend) == 1 and spend[0]["epsilon"] == 1.0 and spend[0]["state"] == "committed"


def test_numeric_mean_collection(ldp_cluster):
    _, client, truth = ldp_cluster
    result = client.run(
        LdpRequest(column="hours", mechanism="pm", epsilon=1.0, lower=0.0, upper=100.0),
        RoundOptions(min_owners=3),
    ).to_dict()
    assert abs(result["mean"] - float(np.mean(truth["hours"]))) <= Z_UNSEEDED * result["std_error"]
    assert result["std_error"] > 0


def test_over_budget_and_bad_requests_spend_nothing(ldp_cluster):
    cluster, client, _ = ldp_cluster
    before = {s: _spent(cluster, s) for s in ("site-1", "site-2", "site-3")}
    with pytest.raises(RoundFailed) as err:  # 2 of the 3 units are spent by the tests above
        client.run(
            LdpRequest(column="level", mechanism="grr", epsilon=2.5, domain=LEVELS), RoundOptions()
        ).to_dict()
    assert "budget: this site's privacy budget does not cover the round" in str(err.value)
    with pytest.raises(RoundFailed) as err:  # a value outside the declared domain
        client.run(
            LdpRequest(column="level", mechanism="grr", epsilon=0.1, domain=LEVELS[:4]),
            RoundOptions(),
        ).to_dict()
    # the rule only: which value, and how many, stay in the site's audit log
    assert "classes: a value is outside the round's declared classes or domain" in str(err.value)
    assert "'e'" not in str(err.value)
    for bad, field in (
        (
            (
                LdpRequest(column="level", mechanism="nope", epsilon=1.0, domain=LEVELS),
                RoundOptions(),
            ),
            "mechanism",
        ),
        (
            (
                LdpRequest(column="level", mechanism="grr", epsilon=-1.0, domain=LEVELS),
                RoundOptions(),
            ),
            "epsilon",
        ),
        ((LdpRequest(column="hours", mechanism="pm", epsilon=1.0), RoundOptions()), "lower"),
    ):
        with pytest.raises(RpcRefused) as err:
            client.start(*bad)
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and field in str(err.value)
    after = {s: _spent(cluster, s) for s in ("site-1", "site-2", "site-3")}
    assert after == before


def test_ledger_survives_an_owner_restart(ldp_cluster):
    cluster, client, _ = ldp_cluster
    spent = _spent(cluster, "site-1")
    cluster.kill("site-1")
    cluster.start_owner(cluster.owners[0])  # same config, same ledger file
    cluster.wait_healthy(names=["site-1"])
    client.wait_for_owners(3)
    remaining = BUDGET - spent
    with pytest.raises(RoundFailed) as err:
        client.run(
            LdpRequest(column="level", mechanism="grr", epsilon=remaining + 0.1, domain=LEVELS),
            RoundOptions(owners=("site-1",)),
        ).to_dict()
    assert "site-1: budget: this site's privacy budget does not cover the round" in str(err.value)


def test_simulate_cli_on_external_csv(tmp_path):
    level, hours = _population(20000, seed=9)
    data = tmp_path / "survey.csv"
    pacsv.write_csv(pa.table({"level": level, "hours": hours}), data)
    out = tmp_path / "est.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "leteo_fed",
            "ldp",
            "simulate",
            "--data",
            str(data),
            "--column",
            "level",
            "--mechanism",
            "olh",
            "--epsilon",
            "2",
            "--seed",
            "5",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["mechanism"] == "olh" and doc["n"] == 20000
    for v in LEVELS:
        assert abs(doc["estimates"][v] - doc["true_counts"][v]) <= 4 * doc["std_errors"][v]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "leteo_fed",
            "ldp",
            "simulate",
            "--data",
            str(data),
            "--column",
            "hours",
            "--mechanism",
            "pm",
            "--epsilon",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "--bounds" in proc.stderr


def test_geo_points_for_clustering(ldp_cluster):
    """Owners release planar-Laplace-perturbed (hours, score) points inside the public box."""
    cluster, client, truth = ldp_cluster
    eps = 0.5  # per unit of distance
    result = client.run(
        LdpRequest(
            column="hours",
            mechanism="geo",
            epsilon=eps,
            columns=("hours", "score"),
            box_lower=tuple(((0.0, 0.0), (100.0, 100.0))[0]),
            box_upper=tuple(((0.0, 0.0), (100.0, 100.0))[1]),
        ),
        RoundOptions(min_owners=3),
    ).to_dict()
    points = np.array(result["points"])
    assert points.shape == (len(truth["hours"]), 2)
    assert np.all((points >= 0) & (points <= 100))
    # planar Laplace: radius ~ Gamma(2, 1/eps), so E[r^2] = 6/eps^2 and each coordinate has
    # variance 3/eps^2 around the truth; the mean of n points is off by 4 s.e. at most
    se = np.sqrt(3 / eps**2 / len(points))
    true_mean = np.array([np.mean(truth["hours"]), np.mean(truth["score"])])
    assert np.all(
        np.abs(points.mean(axis=0) - true_mean) <= 4 * se + 0.05
    )  # + remap bias at the edges
    assert np.all(
        np.abs(points.std(axis=0) - np.array([np.std(truth["hours"]), np.std(truth["score"])]))
        > 0.01
    )
    spend = [s for s in _ledger(cluster, "site-2")["spends"] if s["round_id"] == result["round_id"]]
    assert spend and spend[0]["epsilon"] == eps


@pytest.mark.parametrize("mechanism", ["pm", "duchi"])
def test_several_numeric_columns_in_one_report(ldp_cluster, mechanism):
    """One report per record covering hours and score: each record is epsilon-LDP as a whole."""
    _, client, truth = ldp_cluster
    result = client.run(
        LdpRequest(
            column="hours",
            mechanism=mechanism,
            epsilon=0.1,
            columns=("hours", "score"),
            box_lower=tuple(((0.0, 0.0), (100.0, 100.0))[0]),
            box_upper=tuple(((0.0, 0.0), (100.0, 100.0))[1]),
        ),
        RoundOptions(min_owners=3),
    ).to_dict()
    assert result["columns"] == ["hours", "score"] and result["n"] == len(truth["hours"])
    for column in ("hours", "score"):
        # unbiased column means; standard error from the reports' empirical variance
        assert (
            abs(result["means"][column] - np.mean(truth[column]))
            <= Z_UNSEEDED * result["std_errors"][column]
        )
