"""Federated k-means the way a deployment runs it: CSP, aggregator and owners as separate
processes, real gRPC over mTLS, a real 2048-bit Paillier key, iris rows written to tmp_path;
checked iteration by iteration against centralized Lloyd on the pooled rows."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
from integration_helpers import ManualOwner, write_parts
from sklearn.datasets import load_iris

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions, RpcRefused
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import kmeans as km
from leteo_fed.protocols import kmeans_centers
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.transport.messages import encoding_from_proto

pytestmark = pytest.mark.slow

NAMES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
LOW, HIGH = [4.3, 2.0, 1.0, 0.1], [7.9, 4.4, 6.9, 2.5]  # published iris ranges
BUDGET = 3.0
REAL = ("site-1", "site-2", "site-3")


class KmeansManualOwner(ManualOwner):
    """A test-driven owner that answers k-means iterations by hand (or stays silent)."""

    def kmeans_share(self, spec: pb.RoundSpec) -> tuple[pb.ShareHeader, list[int]]:
        enc, layout = encoding_from_proto(spec.encoding, self.encryptor.public.bits)
        k = spec.kmeans.k
        centers = np.array(spec.kmeans.centers).reshape(k, len(spec.kmeans.features))
        sums, counts = km.cluster_stats(self.x, km.assign(self.x, centers), k)
        values = km.encode_cluster_stats(sums, counts, enc)
        return self.seal(spec, values, len(spec.kmeans.features))


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    """3 owner processes holding 3 parts of iris + one test-driven owner (site-x) with the 4th."""
    x = load_iris().data
    work = tmp_path_factory.mktemp("kmeans")
    parts = write_parts(x, NAMES, 4, work / "data", seed=5)
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(REAL)]
    cluster = LocalCluster(
        work / "run",
        owners,
        extra_owner_ids=["site-x"],
        csp_transcript=True,
        privacy_budget=(BUDGET, 1e-4),
    )
    with cluster:
        manual = KmeansManualOwner(
            "site-x",
            cluster.tls("site-x", "owner"),
            cluster.addresses["aggregator"],
            cluster.addresses["csp"],
            read_matrix(str(parts[3]), NAMES),
        )
        manual.register()
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(4)
        data = {s: read_matrix(str(parts[i]), NAMES) for i, s in enumerate([*REAL, "site-x"])}
        yield cluster, client, manual, data
        client.close()
        manual.close()


def _init(seed: int = 7) -> np.ndarray:
    return kmeans_centers.random_centers(3, LOW, HIGH, 4, seed)


def _pooled(data, sites) -> np.ndarray:
    return np.vstack([data[s] for s in sites])


def test_federated_kmeans_equals_centralized_lloyd(deployment):
    cluster, client, _, data = deployment
    init = _init()
    result = client.run(
        KmeansRequest(
            features=tuple(NAMES),
            k=3,
            centers=tuple(float(v) for row in init.tolist() for v in row),
            iterations=30,
        ),
        RoundOptions(min_owners=3, owners=REAL, deadline_seconds=60),
    ).to_dict()
    ref = km.lloyd(_pooled(data, REAL), init, 30)
    assert result["method"] == "federated-kmeans" and result["k"] == 3
    assert result["features"] == NAMES and result["epsilon"] is None and result["delta"] is None
    assert result["converged"] and ref.converged
    assert result["iterations_run"] == ref.iterations > 3
    assert result["owners"] == list(REAL)
    worst = 0.0
    for it, centers, counts in zip(result["iterations"], ref.history, ref.counts, strict=True):
        assert it["contributors"] == list(REAL) and it["missing"] == [] and it["declined"] == {}
        assert it["counts"] == counts
        worst = max(worst, float(np.max(np.abs(np.array(it["centers"]) - centers))))
        assert set(it["timings"]) >= {"round_seconds", "owners", "aggregator", "csp"}
    assert worst <= 1e-9, worst
    np.testing.assert_allclose(result["centers"], ref.centers, rtol=0, atol=1e-9)
    assert result["encoding"]["paillier_bits"] == 2048
    assert len(result["timings"]["iteration_seconds"]) == result["iterations_run"]
    # owners receive each iteration's centers, and nothing about the clusters' sizes
    last = result["iterations"][-1]["round_id"]
    published = cluster.workdir / "config" / "results" / "site-1" / f"{last}.json"
    deadline = time.time() + 10
    while not published.exists() and time.time() < deadline:
        time.sleep(0.1)
    doc = json.loads(published.read_text())["result"]
    assert doc["centers"] == result["centers"] and "counts" not in doc
    # the owners' share headers carry timings, not their row counts
    assert all("rows" not in t for t in result["iterations"][0]["timings"]["owners"].values())


def test_csp_sees_only_blinded_values(deployment):
    """Every k-means aggregate the CSP decrypted carries the owners' masks."""
    cluster, client, _, _ = deployment
    client.run(
        KmeansRequest(
            features=tuple(NAMES),
            k=3,
            centers=tuple(float(v) for row in _init(3).tolist() for v in row),
            iterations=2,
        ),
        RoundOptions(owners=REAL, min_owners=3),
    ).to_dict()
    layout = km.encoding().layout(2048)
    records = [
        json.loads(line)
        for line in (cluster.workdir / "csp-transcript.jsonl").read_text().splitlines()
    ]
    kmeans_records = [r for r in records if r["round_id"].startswith("kmeans-")]
    assert len(kmeans_records) >= 2
    for record in kmeans_records:
        plaintexts = [int(p, 16) for p in record["plaintexts"]]
        assert len(plaintexts) == layout.n_ciphertexts(km.n_values(3, 4))
        # an unmasked sum is below 2^(mask_bits - kappa); a masked one holds an owner mask
        # uniform below 2^mask_bits, so above the line below with probability 1 - 2^-40
        ceiling = layout.mask_bits - layout.statistical_security
        assert min(p.bit_length() for p in plaintexts) > ceiling + 24


def test_dropout_iteration_completes_with_quorum_and_names_contributors(deployment):
    """site-x answers iterations 1 and 3 and stays silent in iteration 2: that iteration closes
    at its deadline with the three others (quorum 3) and the result says who contributed."""
    _, client, manual, data = deployment
    while not manual.specs.empty():  # nothing left over from earlier tests
        manual.specs.get_nowait()
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            for _ in range(3):
                spec = manual.next_spec(timeout=60)
                if spec.kmeans.iteration != 2:
                    manual.submit(*manual.kmeans_share(spec))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    thread = threading.Thread(target=drive, daemon=True)
    thread.start()
    init = _init(11)
    start = time.monotonic()
    result = client.run(
        KmeansRequest(
            features=tuple(NAMES),
            k=3,
            centers=tuple(float(v) for row in init.tolist() for v in row),
            iterations=3,
        ),
        RoundOptions(min_owners=3, deadline_seconds=4),
    ).to_dict()
    thread.join(10)
    assert not errors, errors
    everyone = [*REAL, "site-x"]
    its = result["iterations"]
    assert [it["contributors"] for it in its] == [everyone, list(REAL), everyone]
    assert its[1]["missing"] == ["site-x"] and its[0]["missing"] == its[2]["missing"] == []
    assert its[1]["timings"]["round_seconds"] >= 3.5  # waited for the deadline
    assert time.monotonic() - start < 30
    assert result["owners"] == everyone
    # the same three Lloyd steps on exactly the rows that were aggregated in each iteration
    centers = init
    for it, sites in zip(its, (everyone, REAL, everyone), strict=True):
        centers, counts = km.lloyd_step(_pooled(data, sites), centers)
        assert it["counts"] == counts
        np.testing.assert_allclose(it["centers"], centers, rtol=0, atol=1e-9)


OPTION_FIELDS = {f.name for f in dataclasses.fields(RoundOptions)}


def test_bad_jobs_are_refused_naming_the_field(deployment):
    _, client, _, _ = deployment
    good = dict(features=NAMES, k=3, centers=_init().tolist(), owners=REAL)
    cases = [
        ({"centers": _init()[:, :3].tolist()}, "kmeans.centers"),  # wrong dimension
        ({"centers": [[float("nan")] * 4] * 3}, "kmeans.centers"),
        ({"k": 0, "centers": []}, "kmeans.k"),
        ({"centers": (_init() * 1e7).tolist()}, "value bound"),
        ({"iterations": 10_000}, "kmeans.iterations"),
        ({"min_owners": 1}, "min_owners"),
        ({"dp_epsilon": 1.0}, "row_norm_bound"),
    ]

    def job(fields: dict) -> tuple[KmeansRequest, RoundOptions]:
        """The k-means request and the round options the fields name."""
        request = {k: v for k, v in fields.items() if k not in OPTION_FIELDS}
        centers = request.pop("centers")
        request["features"] = tuple(request["features"])
        request["centers"] = tuple(float(v) for row in centers for v in row)
        options = {k: v for k, v in fields.items() if k in OPTION_FIELDS}
        return KmeansRequest(**request), RoundOptions(**options)

    for change, word in cases:
        with pytest.raises(RpcRefused) as err:
            client.start(*job({**good, **change}))
        assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT, (change, err.value)
        assert word in str(err.value), (change, err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(*job({**good, "owners": ("site-404",)}))
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    # a feature no owner has: every owner declines naming it, the job fails at once
    start = time.monotonic()
    with pytest.raises(RoundFailed) as err:
        client.run(
            KmeansRequest(
                features=tuple([*NAMES[:3], "no_such_column"]),
                k=3,
                centers=tuple(float(v) for row in _init().tolist() for v in row),
            ),
            RoundOptions(owners=REAL, deadline_seconds=30),
        ).to_dict()
    assert "iteration 1" in str(
        err.value
    ) and "columns: a column the round reads is not in this site's data" in str(err.value)
    assert time.monotonic() - start < 15


def _ledger(cluster, site) -> dict:
    return json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())


def test_dp_job_charges_each_ledger_once_per_iteration_with_the_planned_noise(deployment):
    cluster, client, _, data = deployment
    eps, delta, c, t = 2.0, 1e-6, 8.0, 4
    init = np.clip(_init(5), -c, c)
    result = client.run(
        KmeansRequest(
            features=tuple(NAMES),
            k=3,
            centers=tuple(float(v) for row in init.tolist() for v in row),
            iterations=t,
        ),
        RoundOptions(owners=REAL, min_owners=3, dp_epsilon=eps, dp_delta=delta, row_norm_bound=c),
    ).to_dict()
    assert result["epsilon"] == eps and result["delta"] == delta
    dp = result["dp"]
    # the t iterations together meet (eps, delta) by Renyi composition: one alone costs more
    # than an even share, all of them (what ran) at most eps
    assert eps / t < dp["epsilon_per_iteration"] < eps and dp["row_norm_bound"] == c
    assert dp["accountant"] == "rdp" and dp["epsilon_spent"] <= eps * (1 + 1e-9)
    assert result["iterations_run"] == t  # noisy centers never stand exactly still
    rounds = [it["round_id"] for it in result["iterations"]]
    for site in REAL:
        mine = [s for s in _ledger(cluster, site)["spends"] if s["round_id"] in rounds]
        assert len(mine) == t
        assert all(s["state"] == "committed" and s["event"]["kind"] == "skellam" for s in mine)
        assert all(s["job"] == f"kmeans:{result['job_id']}" for s in mine)
        # each entry's epsilon is its increment of the job's RDP bound: they add up to it
        assert math.fsum(s["epsilon"] for s in mine) == pytest.approx(eps, rel=1e-6)
    # the released totals minus the exact totals of the clipped rows = the aggregate noise
    enc = km.encoding(
        scale_bits=result["encoding"]["scale_bits"],
        value_bound=c,
        count_scale_bits=result["encoding"]["count_scale_bits"],
    )
    clipped = noise.clip_rows(_pooled(data, REAL), c)
    released = {
        r["round_id"]: [int(v) for v in r["aggregate_totals"]]
        for r in map(
            json.loads,
            (cluster.workdir / "aggregator-transcript.jsonl").read_text().splitlines(),
        )
        if r["round_id"] in rounds
    }
    z, centers = [], init
    for it in result["iterations"]:
        sums, counts = km.cluster_stats(clipped, km.assign(clipped, centers), 3)
        exact = km.encode_cluster_stats(sums, counts, enc)  # one owner holding every row
        z += [r - e for r, e in zip(released[it["round_id"]], exact, strict=True)]
        centers = np.array(it["centers"])
    z = np.array(z, dtype=float)
    sigma = math.sqrt(2 * dp["skellam_mu_per_iteration"])  # 3 shares, quorum 3: Skellam(mu)
    n = len(z)  # 60 values; rounding the three owners' sums separately adds < 2 units
    # mean within 4 standard errors; the sample std of n draws has relative s.e. 1/sqrt(2n)
    # (9% for n = 60), so 30% is 3.3 standard errors
    assert abs(z.mean()) < 4 * sigma / math.sqrt(n)
    assert abs(z.std() / sigma - 1) < 0.30, (z.std(), sigma)
    assert np.all(z != 0)


def test_dp_job_beyond_the_budget_is_refused_and_spends_nothing(deployment):
    cluster, client, _, _ = deployment
    before = {s: _ledger(cluster, s) for s in REAL}
    with pytest.raises(RoundFailed) as err:
        client.run(
            KmeansRequest(
                features=tuple(NAMES),
                k=3,
                centers=tuple(float(v) for row in np.clip(_init(), -8, 8).tolist() for v in row),
                iterations=5,
            ),
            RoundOptions(owners=REAL, dp_epsilon=BUDGET + 0.5, row_norm_bound=8.0),
        ).to_dict()
    assert "iteration 1" in str(err.value) and "budget" in str(err.value)
    assert {s: _ledger(cluster, s) for s in REAL} == before


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "leteo_fed", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_kmeans_command_against_running_services(deployment, tmp_path):
    cluster, _, _, data = deployment
    init = _init(13)
    path = tmp_path / "init.json"
    path.write_text(json.dumps({"centers": init.tolist()}))
    common = [
        "kmeans",
        "--aggregator",
        cluster.addresses["aggregator"],
        "--features",
        ",".join(NAMES),
        "--owners",
        ",".join(REAL),
        "--min-owners",
        "3",
        "--tls-dir",
        str(cluster.certs),
    ]
    proc = _cli(*common, "--init", str(path), "--rounds", "20", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out" / "kmeans.json").read_text())
    assert json.loads(proc.stdout)["job_id"] == result["job_id"]
    ref = km.lloyd(_pooled(data, REAL), init, 20)
    np.testing.assert_allclose(result["centers"], ref.centers, rtol=0, atol=1e-9)
    # refusals: one line, exit code 2, nothing written
    path.write_text(json.dumps({"centers": init[:, :2].tolist()}))
    for extra in (["--init", str(path)], ["--k", "0", "--init-bounds", "0,1"], []):
        proc = _cli(*common, *extra, "--out", str(tmp_path / "bad"))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error:") and "Traceback" not in proc.stderr
        assert not (tmp_path / "bad").exists()


def test_demo_kmeans_end_to_end(tmp_path):
    """The demo on a CSV outside the repository, with user-given initial centers."""
    x = load_iris().data
    csv = tmp_path / "flowers.csv"
    write_parts(x, NAMES, 1, tmp_path / "src")[0].rename(csv)
    init = tmp_path / "init.json"
    init.write_text(json.dumps({"centers": _init(21).tolist()}))
    out = tmp_path / "demo"
    proc = _cli(
        "demo",
        "kmeans",
        "--data",
        str(csv),
        "--owners",
        "3",
        "--k",
        "3",
        "--rounds",
        "15",
        "--init",
        str(init),
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "max |federated - centralized|" in proc.stdout
    result = json.loads((out / "kmeans.json").read_text())
    assert (out / "kmeans_clusters.png").stat().st_size > 10_000
    assert result["comparison_with_centralized_lloyd"]["max_abs_difference"] <= 1e-9
    ref = km.lloyd(x, _init(21), 15)
    np.testing.assert_allclose(result["centers"], ref.centers, rtol=0, atol=1e-9)
    assert result["init"]["source"] == "file" and len(result["owners"]) == 3
