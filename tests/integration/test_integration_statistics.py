"""Declared statistics through real processes (CSP, aggregator, three owner agents, mTLS, a
2048-bit key): the federated correlation matrix from its generated command equals
numpy.corrcoef of the pooled rows, and under DP its intervals hold the noise; the example
plugin statistic (examples/plugin-skewness, installed as its own package by `make test`) runs
from its generated command and the Python API where the sites' policies name it, and a site
whose policy does not is refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from integration_helpers import write_parts
from scipy import stats

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

pytestmark = pytest.mark.slow

COLUMNS = ["age", "education-num", "hours-per-week"]
BOUNDS = ["age=17,90", "education-num=1,16", "hours-per-week=1,99"]
LISTS_PLUGIN = 'protocols = ["*", "skewness"]\nnon_dp = ["correlation", "skewness"]'


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    import leteo_skewness  # noqa: F401  (make test installs it; its absence is a failure)

    data = read_adult(locate_wheel())
    x = np.column_stack([data[c].astype(float) for c in COLUMNS])
    x = x[np.random.default_rng(0).permutation(len(x))[:9000]]
    work = tmp_path_factory.mktemp("statistics")
    parts = write_parts(x, COLUMNS, 3, work / "data")
    owners = [
        OwnerSpec("site-1", parts[0], policy=LISTS_PLUGIN),
        OwnerSpec("site-2", parts[1], policy=LISTS_PLUGIN),
        OwnerSpec("site-3", parts[2]),  # protocols = ["*"]: no plugin runs here
    ]
    with LocalCluster(work / "run", owners, privacy_budget=(20.0, 1e-4)) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield cluster, client, x, parts


def _cli(cluster, *args: str) -> subprocess.CompletedProcess:
    tls = ("--aggregator", cluster.addresses["aggregator"], "--tls-dir", str(cluster.certs))
    return subprocess.run(
        [sys.executable, "-m", "leteo_fed", *args, *tls],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_correlation_command_equals_numpy_corrcoef(deployment, tmp_path):
    cluster, _, x, _ = deployment
    out = tmp_path / "corr"
    proc = _cli(cluster, "correlation", "--features", ",".join(COLUMNS), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "correlation.json").read_text())
    np.testing.assert_allclose(result["correlation"], np.corrcoef(x.T), rtol=1e-9, atol=1e-12)
    assert (out / "correlation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the heatmap
    assert result["n_rows"] == len(x) and sorted(result["owners"]) == ["site-1", "site-2", "site-3"]
    # Fisher-z interval of r(age, hours): recomputed here from r and n
    r = np.corrcoef(x.T)[0, 2]
    half = stats.norm.ppf(0.975) / np.sqrt(len(x) - 3)
    assert result["ci_lower"][0][2] == pytest.approx(np.tanh(np.arctanh(r) - half), rel=1e-9)
    assert result["ci_upper"][0][2] == pytest.approx(np.tanh(np.arctanh(r) + half), rel=1e-9)


def test_dp_correlation_states_its_noise_and_widens_its_intervals(deployment, tmp_path):
    cluster, _, x, _ = deployment
    out = tmp_path / "dp"
    bounds = [a for b in BOUNDS for a in ("--bounds", b)]
    proc = _cli(
        cluster,
        "correlation",
        "--features",
        ",".join(COLUMNS),
        "--dp-epsilon",
        "1",
        *bounds,
        "--rows",
        "9000",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "released figures (value +/- the DP noise's std)" in proc.stderr
    result = json.loads((out / "correlation.json").read_text())
    assert (out / "correlation.png").stat().st_size > 0  # with each coefficient's noise
    noise = result["dp"]["figure_noise_std"]
    ref = np.corrcoef(x.T)
    for (i, j), name in {(0, 1): "r(age, education-num)", (0, 2): "r(age, hours-per-week)"}.items():
        e = noise[name]
        # the owners' noise is not seeded: 5 stated std of the release's own noise, plus the
        # clipping bias (Adult's values lie within these bounds: none)
        assert e > 0 and abs(result["correlation"][i][j] - ref[i, j]) <= 5 * e, (name, e)
        # the interval holds sampling and noise: wider than the sampling-only one
        width = result["ci_upper"][i][j] - result["ci_lower"][i][j]
        sampling = 2 * 1.96 * (1 - ref[i, j] ** 2) / np.sqrt(len(x) - 3)
        assert width > sampling
    assert "DP noise" in result["interval"]


def test_the_plugin_runs_where_sites_list_it_and_is_refused_by_name_elsewhere(deployment, tmp_path):
    from leteo_skewness import SkewnessRequest

    cluster, client, x, parts = deployment
    listed = np.vstack([np.loadtxt(p, delimiter=",", skiprows=1) for p in parts[:2]])
    out = tmp_path / "skew"
    proc = _cli(
        cluster,
        "skewness",
        "--features",
        ",".join(COLUMNS),
        "--owners",
        "site-1,site-2",
        "--min-owners",
        "2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "skewness.json").read_text())
    assert result["protocol"] == "skewness" and result["version"] == "1.0.0"
    for j, c in enumerate(COLUMNS):
        assert result["skewness"][c] == pytest.approx(stats.skew(listed[:, j]), rel=1e-9)
        assert result["excess_kurtosis"][c] == pytest.approx(stats.kurtosis(listed[:, j]), rel=1e-7)
    # the Python API runs the plugin's own request; site-3 never listed it
    with pytest.raises(RoundFailed) as failed:
        client.run(
            SkewnessRequest(features=tuple(COLUMNS)),
            RoundOptions(min_owners=3, deadline_seconds=30),
        )
    said = str(failed.value)
    assert "site-3" in said and "plugin statistic" in said and "policy.protocols" in said
