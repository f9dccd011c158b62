"""Geo-indistinguishable points and LDP naive Bayes through real processes: a CSP, an aggregator
and 3 owner agents over mTLS, the analyst's commands as subprocesses.

Geo: the mean report is within 4 of its theory standard errors, sqrt((m + 1) / (e^2 n)) per
coordinate, of the pooled true mean (the points lie 30 units inside the box, the noise radius
averages m / e = 4 or 6 units, so fitting into the box moves the mean by far less than one s.e.).
Naive Bayes: its accuracy on the analyst's hold-out rows is within 0.03 of scikit-learn's
CategoricalNB fitted on the pooled rows (the tolerance of tests/leteo_fed/protocols/
test_ldp_geo_nb_round.py: the largest gap over 60 seeded in-process runs was 0.016).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.naive_bayes import CategoricalNB

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols.ldp_collection import FeatureDomain, LdpRequest

pytestmark = pytest.mark.slow

# the naive Bayes model of tests/leteo_fed/protocols/test_ldp_geo_nb_round.py
VALUES = {
    "color": ("red", "green", "blue", "grey"),
    "size": ("s", "m", "l"),
    "shape": ("round", "square", "star"),
}
CLASSES = ("no", "yes")
P_GIVEN_CLASS = {
    "color": ([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]),
    "size": ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]),
    "shape": ([0.6, 0.3, 0.1], [0.3, 0.3, 0.4]),
}


def population(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(int)
    rows = {}
    for f, vals in VALUES.items():
        cdf = np.cumsum(np.array(P_GIVEN_CLASS[f]), axis=1)[y]
        rows[f] = np.array(vals)[(rng.random(n)[:, None] > cdf).sum(axis=1)]
    return rows, np.array(CLASSES)[y]


def _codes(rows: dict[str, np.ndarray]) -> np.ndarray:
    return np.column_stack([[VALUES[f].index(v) for v in rows[f]] for f in VALUES])


SITES = (("site-1", 9000, 1), ("site-2", 7000, 2), ("site-3", 8000, 3))


@pytest.fixture(scope="module")
def geo_nb_cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("ldp-geo-nb")
    owners, pooled = [], []
    for name, n, seed in SITES:
        rows, labels = population(n, seed)
        rng = np.random.default_rng(50 + seed)
        table = {
            **rows,
            "label": labels,
            "east": rng.uniform(30.0, 70.0, n),  # km
            "north": rng.normal(50.0, 5.0, n).clip(30.0, 70.0),
            "up": rng.uniform(35.0, 65.0, n),
        }
        path = work / f"{name}.csv"
        pacsv.write_csv(pa.table(table), path)
        owners.append(OwnerSpec(name, path))
        pooled.append(table)
    data = {k: np.concatenate([t[k] for t in pooled]) for k in pooled[0]}
    cluster = LocalCluster(work / "run", owners, privacy_budget=(20.0, 0.0))
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield cluster, client, data


def _cli(cluster, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", *args]
    cmd += ["--aggregator", cluster.addresses["aggregator"], "--tls-dir", str(cluster.certs)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240)


def _spends(cluster, site, round_id):
    ledger = json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())
    return [s for s in ledger["spends"] if s["round_id"] == round_id]


def test_geo_collect_command_estimates_the_mean_location(geo_nb_cluster, tmp_path):
    cluster, _, data = geo_nb_cluster
    out = tmp_path / "geo"
    proc = _cli(
        cluster,
        *("ldp", "collect", "--mechanism", "geo", "--columns", "east,north"),
        *("--box-lower", "0,0", "--box-upper", "100,100", "--epsilon", "0.5"),
        *("--min-owners", "3", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "ldp.json").read_text())
    assert (out / "ldp.png").stat().st_size > 0
    n = len(data["east"])
    assert result["n"] == n and result["owners"] == [s[0] for s in SITES]
    se = np.sqrt(3 / 0.5**2 / n)  # planar Laplace: (m + 1) / e^2 per coordinate
    assert result["std_errors"] == pytest.approx([se, se])
    truth = np.array([data["east"].mean(), data["north"].mean()])
    assert np.all(np.abs(np.array(result["mean"]) - truth) <= 4 * se), (result["mean"], truth)
    assert result["density_kind"] == "joint" and np.sum(result["density"]) == n
    assert result["box_fit"] == "remap"
    for site, _, _ in SITES:
        spend = _spends(cluster, site, result["round_id"])
        assert len(spend) == 1 and spend[0]["epsilon"] == 0.5 and spend[0]["state"] == "committed"
    # the job's result again, as `leteo-fed result` writes it
    again = tmp_path / "again"
    proc = _cli(cluster, "result", result["round_id"], "--out", str(again))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((again / "ldp.json").read_text())["mean"] == result["mean"]


def test_geo_three_dimensions_resampled_through_the_api(geo_nb_cluster):
    _, client, data = geo_nb_cluster
    columns = ("east", "north", "up")
    result = client.run(
        LdpRequest(
            column="east",
            columns=columns,
            mechanism="geo",
            epsilon=1.0,
            box_lower=(0.0, 0.0, 0.0),
            box_upper=(100.0, 100.0, 100.0),
            box_fit="resample",
        ),
        RoundOptions(min_owners=3),
    )
    n = len(data["east"])
    se = np.sqrt(4 / 0.5**2 / n)  # each draw at epsilon / 2 = 0.5; m + 1 = 4
    assert result.std_errors == pytest.approx([se] * 3)
    truth = np.array([data[c].mean() for c in columns])
    assert np.all(np.abs(np.array(result.mean) - truth) <= 4 * se)
    points = np.array(result.points)
    assert np.all((points > 0.0) & (points < 100.0))  # redrawn inside, never clipped to a face
    assert result.density_kind == "marginals" and len(result.density) == 3


def test_naive_bayes_command_against_the_non_private_classifier(geo_nb_cluster, tmp_path):
    cluster, _, data = geo_nb_cluster
    test_rows, test_labels = population(3000, 99)
    test_file = tmp_path / "holdout.csv"
    pacsv.write_csv(pa.table({**test_rows, "label": test_labels}), test_file)
    out = tmp_path / "nb"
    domains = [arg for f, v in VALUES.items() for arg in ("--domain", f"{f}={','.join(v)}")]
    proc = _cli(
        cluster,
        *("ldp", "naive-bayes", "--features", ",".join(VALUES), *domains),
        *("--label-column", "label", "--classes", ",".join(CLASSES), "--epsilon", "2"),
        *("--oracle", "oue", "--test", str(test_file), "--min-owners", "3", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "result.json").read_text())
    assert (out / "naive_bayes.png").stat().st_size > 0
    pooled = {f: data[f] for f in VALUES}
    reference = CategoricalNB(alpha=1.0).fit(_codes(pooled), data["label"] == "yes")
    ref_acc = np.mean(np.where(reference.predict(_codes(test_rows)), "yes", "no") == test_labels)
    n = len(data["label"])
    assert result["n"] == n and sum(result["report_counts"].values()) == n
    assert result["test"]["rows"] == 3000
    assert result["test"]["accuracy"] >= ref_acc - 0.03, (result["test"], ref_acc)
    for site, _, _ in SITES:
        spend = _spends(cluster, site, result["round_id"])
        assert len(spend) == 1 and spend[0]["epsilon"] == 2.0 and spend[0]["state"] == "committed"
    again = tmp_path / "again"
    proc = _cli(cluster, "result", result["round_id"], "--out", str(again))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((again / "result.json").read_text())["priors"] == result["priors"]
    # a bad request is refused before anyone is contacted: exit 2, one line
    proc = _cli(
        cluster,
        *("ldp", "naive-bayes", "--features", "color", "--domain", "size=s,m"),
        *("--label-column", "label", "--classes", "no,yes", "--epsilon", "1", "--out", str(out)),
    )
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and "domain" in proc.stderr


def test_a_value_outside_a_naive_bayes_domain_declines_with_the_rule_only(geo_nb_cluster):
    """Every site holds 'grey', which the request's color domain lacks: each declines with the
    classes rule (the value stays in its audit log) and its reservation is released."""
    cluster, client, _ = geo_nb_cluster
    features = tuple(FeatureDomain(f, v if f != "color" else v[:3]) for f, v in VALUES.items())
    request = LdpRequest(
        mechanism="grr", epsilon=1.0, label_column="label", classes=CLASSES, features=features
    )
    with pytest.raises(RoundFailed) as err:
        client.run(request, RoundOptions(min_owners=3))
    assert "classes: a value is outside the round's declared classes or domain" in str(err.value)
    assert "grey" not in str(err.value)
    for site, _, _ in SITES:
        ledger = json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())
        spends = [s for s in ledger["spends"] if s["mechanism"] == "ldp-grr"]  # this round's
        assert spends and all(s["state"] == "released" for s in spends), spends
