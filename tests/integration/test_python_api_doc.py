"""docs/python-api.md runs as pasted against real services set up the way it says.

Through real processes: a CSP and an aggregator (`LocalCluster`, no owners of its own, its
working folder the page's folder, so `certs/` is where the page's `leteo-fed certs` puts it);
the page's first Python block splits UCI Adult over three site folders; the `owner init`,
`sed`, `owner check` and `owner serve` lines of its bash block run as written for each site
(only the aggregator's and the CSP's addresses are this test's: they listen on free ports);
then every other Python block of the page runs, pasted, in one namespace as in a notebook,
with `LETEO_AGGREGATOR` and `LETEO_TLS_DIR` set as the page says. The results are checked
against the pooled rows, the NoiseWarning the page catches is there, and each site's ledger was
charged what the page says it takes. Errors through the Python API name the parameter.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.client import AnalystClient, RoundOptions, RpcRefused
from leteo_fed.demo.cluster import LocalCluster
from leteo_fed.privacy.noise_gate import NoiseWarning
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.pca import reference_pca
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "python-api.md"
SITES = ("site-1", "site-2", "site-3")
PAGE_EPSILON = 3.0  # "the page's releases add up to 3 by basic composition"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(), re.M | re.S)


def _leteo(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _site_lines(bash: str) -> list[str]:
    """The body of the page's `for site in ...; do ... done` loop, without comments."""
    loop = bash[bash.index("for site in") :]
    assert loop.split(";")[0].split()[3:] == list(SITES), loop
    body = loop[loop.index("do\n") + 3 : loop.index("\ndone")]
    return [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _set_up_site(cluster: LocalCluster, work: Path, site: str, lines: list[str]) -> None:
    ran = []
    for line in lines:
        line = line.replace("$site", site)
        if line.startswith("sed "):
            done = subprocess.run(["bash", "-c", line], cwd=work, capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            ran.append("sed")
            continue
        argv = shlex.split(line.rstrip("&"))
        assert argv[0] == "leteo-fed", line
        command = argv[1:3]
        if command == ["owner", "init"]:
            # the page's defaults are 127.0.0.1:50052 and :50051; this test's ports are free ones
            argv += ["--aggregator", cluster.addresses["aggregator"]]
            argv += ["--csp", cluster.addresses["csp"]]
        if command == ["owner", "serve"]:
            assert line.endswith("&"), line
            cluster._spawn(site, argv[1:])
        else:
            done = _leteo(*argv[1:], cwd=work)
            assert done.returncode == 0, (line, done.stdout, done.stderr)
        ran.append(" ".join(command))
    assert ran == ["owner init", "sed", "owner check", "owner serve"], ran


@pytest.fixture(scope="module")
def page_sites(tmp_path_factory):
    """The page's folder: Adult split over three sites, the services and three owner agents
    set up by the page's own lines; yields (folder, cluster, pooled rows)."""
    work = tmp_path_factory.mktemp("python-api-doc")
    bash = _blocks("bash")
    assert len(bash) == 1
    assert "leteo-fed certs --out certs --owners site-1,site-2,site-3" in bash[0]
    assert "leteo-fed csp serve --key-dir csp-keys --tls-dir certs &" in bash[0]
    assert "leteo-fed aggregator serve --csp 127.0.0.1:50051 --tls-dir certs" in bash[0]
    prepare = _blocks("python")[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        exec(compile(prepare, f"{DOC}:data", "exec"), {"__name__": "__doc_data__"})
    pooled = np.vstack(
        [np.loadtxt(work / s / "data.csv", delimiter=",", skiprows=1) for s in SITES]
    )
    # the services of the page's first three lines: certificates in ./certs, CSP, aggregator
    with LocalCluster(work, [], extra_owner_ids=list(SITES)) as cluster:
        assert cluster.certs == work / "certs"
        for site in SITES:
            _set_up_site(cluster, work, site, _site_lines(bash[0]))
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3, timeout=120)
        yield work, cluster, pooled


def test_the_page_runs_as_pasted(page_sites, capsys):
    work, cluster, pooled = page_sites
    blocks = _blocks("python")[1:]
    assert len(blocks) >= 3
    namespace: dict = {"__name__": "__main__"}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(work)
        mp.setenv("LETEO_AGGREGATOR", cluster.addresses["aggregator"])
        mp.setenv("LETEO_TLS_DIR", str(cluster.certs))
        with warnings.catch_warnings():
            # a figure the noise buries outside the page's own catch would fail the page
            warnings.simplefilter("error", NoiseWarning)
            for i, block in enumerate(blocks, start=1):
                exec(compile(block, f"{DOC}:block-{i}", "exec"), namespace)
    out = capsys.readouterr().out

    pca = namespace["pca"]
    assert list(pca.owners) == list(SITES)
    expected, _, mean = reference_pca(pooled, 2)
    noise = pca.dp.figure_noise_std
    for k, (got, want) in enumerate(zip(pca.eigenvalues, expected, strict=True), start=1):
        # Adult lies within the page's bounds: nothing is clipped, only the stated noise
        assert abs(got - want) <= 5 * noise[f"eigenvalue {k}"] + 0.02 * want, (k, got, want)
    for j, column in enumerate(("age", "education", "hours")):
        assert abs(pca.mean[j] - mean[j]) <= 5 * noise[f"mean of {column}"]

    fit = namespace["fit"]
    design = np.column_stack([np.ones(len(pooled)), pooled[:, :2]])
    beta = np.linalg.lstsq(design, pooled[:, 2], rcond=None)[0]
    for term, b in zip(fit.terms, beta, strict=True):
        assert abs(fit.coefficients[term] - b) <= 5 * fit.noise_std_errors[term], (term, b)
    assert "+/- noise" in out

    caught = [str(w.message) for w in namespace["caught"]]
    assert any("clipped" in m and "widen the public bounds" in m for m in caught), caught
    stats = namespace["stats"]
    share = float(np.mean(pooled[:, 2] > 40))  # rows with hours beyond the page's 40
    assert abs(stats.dp.clipped_rows / len(pooled) - share) < 0.03
    assert "dp_epsilon must be" in out  # the refused request names the parameter
    assert namespace["status"].state == "COMPLETED"
    assert list(namespace["result"].owners) == list(SITES)

    for site in SITES:
        config = work / site / "site.toml"
        shown = _leteo("owner", "budget", "show", "--config", str(config), "--json", cwd=work)
        budget = json.loads(shown.stdout)
        # `owner init` ledgers compose by Renyi curves: less than the basic sum, more than the
        # largest release alone (1)
        assert budget["accountant"] == "rdp"
        assert 1.0 < budget["epsilon_spent"] < PAGE_EPSILON


PCA = MomentsRequest(method="pca", features=("age", "hours"), components=1)
BOUNDS = {"age": (17, 90), "education": (1, 16), "hours": (1, 99)}


@pytest.mark.parametrize(
    ("request_", "options", "named"),
    [
        (PCA, RoundOptions(dp_epsilon=-1.0, bounds=BOUNDS), "dp_epsilon"),
        (PCA, RoundOptions(dp_epsilon=float("nan"), bounds=BOUNDS), "dp_epsilon"),
        (PCA, RoundOptions(bounds=BOUNDS), "dp_epsilon"),  # bounds without DP
        (PCA, RoundOptions(dp_epsilon=1.0), "row_norm_bound"),  # neither bounds nor a norm
        (PCA, RoundOptions(dp_epsilon=1.0, row_norm_bound=-2.0), "row_norm_bound"),
        (PCA, RoundOptions(dp_epsilon=1.0, dp_delta=0.5, bounds=BOUNDS), "dp_delta"),
        (
            LinregRequest(features=("age",), label_column="hours"),
            RoundOptions(dp_epsilon=1.0, bounds={"age": (17, 90)}),
            "bounds",
        ),
        (  # k-means takes bounds too, for every feature it reads
            KmeansRequest(features=("age", "hours"), k=1, centers=(40.0, 40.0)),
            RoundOptions(dp_epsilon=1.0, bounds={"age": (17, 90)}),
            "bounds",
        ),
        (
            WeightedStatsRequest(features=("age",)),
            RoundOptions(dp_epsilon=60.0, bounds=BOUNDS),
            "dp_epsilon",
        ),
    ],
    ids=[
        "negative-epsilon",
        "nan-epsilon",
        "bounds-without-epsilon",
        "no-bounds-no-norm",
        "negative-norm",
        "delta",
        "linreg-label-unbounded",
        "kmeans-missing-bounds",
        "epsilon-cap",
    ],
)
def test_api_errors_name_the_parameter(page_sites, request_, options, named):
    """Refused before any site is invited (no budget is spent): the message names the
    parameter as the Python API spells it."""
    _, cluster, _ = page_sites
    with AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")) as c:
        with pytest.raises(RpcRefused) as refused:
            c.run(request_, options)
    assert refused.value.code is not None and refused.value.code.name == "INVALID_ARGUMENT"
    assert re.search(rf"(?<![\w-]){named}\b", str(refused.value)), str(refused.value)
