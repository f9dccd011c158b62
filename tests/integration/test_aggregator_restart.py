"""The aggregator killed with SIGKILL in the middle of a job and started again on its state dir.

Real processes (CSP, aggregator, three owner agents, mTLS, a 2048-bit key) plus one owner the
test drives by hand (site-x, inbound), which holds a round open so the kill lands inside it and
counts every result the aggregator publishes to it. After the restart:

- a k-means job resumes from its last completed iteration (the lost iteration again under a
  new round id) and ends with the centers of centralized Lloyd on the pooled rows;
- a PCA job whose round was open at the kill runs again under a new attempt id and the
  analyst's `leteo-fed pca` completes, having said once that the aggregator was unreachable;
  its owners are told once that the lost attempt failed (its DP charge comes back: the CSP
  never decrypted it) and are charged for the new attempt only;
- a SIGTERM with owners connected stops cleanly: no traceback in the log;
- no owner receives any round's result twice.
"""

from __future__ import annotations

import json
import math
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import numpy as np
import pytest
from integration_helpers import ManualOwner, write_parts
from sklearn.datasets import load_breast_cancer, load_iris

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import kmeans as km
from leteo_fed.protocols import kmeans_centers
from leteo_fed.protocols.kmeans_round import KmeansRequest

pytestmark = pytest.mark.slow

REAL = ("site-1", "site-2", "site-3")
ALL = (*REAL, "site-x")
IRIS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
LOW, HIGH = [4.3, 2.0, 1.0, 0.1], [7.9, 4.4, 6.9, 2.5]
RESTART = "the aggregator restarted while round {} was open; the shares sent to it were lost"
TIMEOUT = 60.0


class CountingOwner(ManualOwner):
    """A test-driven owner that counts what is published to it and can answer k-means."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.publications: Counter[str] = Counter()
        self.states: dict[str, str] = {}

    def PublishResult(self, request, context):
        self.publications[request.round_id] += 1
        self.states[request.round_id] = request.state
        return super().PublishResult(request, context)

    def kmeans_share(self, spec: pb.RoundSpec) -> tuple[pb.ShareHeader, list[int]]:
        k, features = spec.kmeans.k, list(spec.kmeans.features)
        centers = np.array(spec.kmeans.centers).reshape(k, len(features))
        sums, counts = km.cluster_stats(self.x, km.assign(self.x, centers), k)
        enc_values = km.encode_cluster_stats(sums, counts, self._encoding(spec))
        return self.seal(spec, enc_values, len(features))

    def _encoding(self, spec: pb.RoundSpec):
        from leteo_fed.transport.messages import encoding_from_proto

        return encoding_from_proto(spec.encoding, self.encryptor.public.bits)[0]


def _cluster(tmp_path, x: np.ndarray, names: list[str], **kw):
    parts = write_parts(x, names, 4, tmp_path / "data", seed=5)
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(REAL)]
    cluster = LocalCluster(tmp_path / "run", owners, extra_owner_ids=["site-x"], **kw)
    data = {s: read_matrix(str(parts[i]), names) for i, s in enumerate(ALL)}
    return cluster, data


def _manual(cluster: LocalCluster, x: np.ndarray) -> CountingOwner:
    owner = CountingOwner(
        "site-x",
        cluster.tls("site-x", "owner"),
        cluster.addresses["aggregator"],
        cluster.addresses["csp"],
        x,
    )
    owner.register()
    return owner


def _restart_aggregator(cluster: LocalCluster) -> None:
    cluster.kill("aggregator")  # SIGKILL: nothing is written on the way out
    cluster.start_aggregator()  # same address, same state dir
    cluster.wait_healthy(names=["aggregator"])


def _wait_submitted(client: AnalystClient, round_id: str, count: int) -> None:
    end = time.monotonic() + TIMEOUT
    while len(client.wait(round_id, 0).submitted) < count:
        assert time.monotonic() < end, f"{round_id}: fewer than {count} shares arrived"
        time.sleep(0.05)


def _audit(cluster: LocalCluster, site: str) -> list[dict]:
    path = cluster.workdir / "config" / f"audit-{site}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _results(cluster: LocalCluster, site: str) -> Counter[str]:
    return Counter(e["round_id"] for e in _audit(cluster, site) if e.get("event") == "result")


def _wait_for(predicate, what: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_a_kmeans_job_resumes_after_the_aggregator_is_killed(tmp_path):
    x = load_iris().data
    cluster, data = _cluster(tmp_path, x, IRIS)
    with cluster:
        manual = _manual(cluster, data["site-x"])
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        try:
            client.wait_for_owners(4)
            held = threading.Event()
            errors: list[BaseException] = []

            def answer() -> None:
                """site-x answers every iteration but the first attempt at iteration 2,
                which it holds open: the aggregator is killed inside it."""
                try:
                    while True:
                        spec = manual.next_spec(timeout=TIMEOUT)
                        if spec.round_id.endswith("-it2"):
                            held.set()
                            continue
                        manual.submit(*manual.kmeans_share(spec))
                except queue.Empty:  # no further iteration: the job is over
                    pass
                except Exception as exc:
                    errors.append(exc)

            threading.Thread(target=answer, daemon=True).start()
            init = kmeans_centers.random_centers(3, LOW, HIGH, 4, 7)
            iterations = 4
            status = client.start(
                KmeansRequest(
                    features=tuple(IRIS),
                    k=3,
                    centers=tuple(float(v) for row in init.tolist() for v in row),
                    iterations=iterations,
                ),
                RoundOptions(min_owners=4, owners=ALL, deadline_seconds=30),
            )
            job = status.round_id
            first, lost = f"{job}-it1", f"{job}-it2"
            assert held.wait(TIMEOUT), "iteration 2 never opened"
            assert client.wait(first, 0).state == "COMPLETED"
            _wait_submitted(client, lost, 3)  # the three real owners' shares are in

            start = time.monotonic()
            _restart_aggregator(cluster)
            final = client.wait(job, TIMEOUT)
            assert final.state == "COMPLETED", final.message
            resumed_in = time.monotonic() - start
            assert not errors, errors

            from leteo_fed.transport.rounds import result_document

            result = result_document(final)
            ref = km.lloyd(np.vstack([data[s] for s in ALL]), init, iterations)
            assert result["iterations_run"] == ref.iterations
            ids = [it["round_id"] for it in result["iterations"]]
            assert ids[:2] == [first, f"{job}-it2-r2"]
            assert all(i.endswith("-r2") for i in ids[1:])
            for it, centers in zip(result["iterations"], ref.history, strict=True):
                np.testing.assert_allclose(it["centers"], centers, rtol=0, atol=1e-9)
            np.testing.assert_allclose(result["centers"], ref.centers, rtol=0, atol=1e-9)

            # GetRound answers for the rounds from before the restart
            gone = client.wait(lost, 0)
            assert (gone.state, gone.message) == ("FAILED", RESTART.format(lost))
            assert client.wait(first, 0).state == "COMPLETED"

            # every owner got each round's result at most once; the lost round's failure once
            # (the outbound owners ask for it when they reconnect)
            for site in REAL:
                _wait_for(lambda s=site: lost in _results(cluster, s), f"{site}'s result of {lost}")
                got = _results(cluster, site)
                assert max(got.values()) == 1, (site, got)
                failures = [
                    e
                    for e in _audit(cluster, site)
                    if e.get("event") == "result" and e["round_id"] == lost
                ]
                assert failures[0]["state"] == "FAILED"
            _wait_for(lambda: ids[-1] in manual.publications, "site-x's last result")
            assert max(manual.publications.values()) == 1, manual.publications
            assert manual.states[lost] == "FAILED" and manual.states[first] == "COMPLETED"
            assert set(manual.publications) == {first, lost, *ids[1:]}
            assert resumed_in < 25, resumed_in
        finally:
            client.close()
            manual.close()


def _ledger(cluster: LocalCluster, site: str) -> list[dict]:
    path = cluster.workdir / "config" / "ledgers" / f"{site}.json"
    return json.loads(path.read_text())["spends"]


def _pca_command(cluster: LocalCluster, names: list[str], out) -> list[str]:
    """The analyst's `leteo-fed pca`, DP (the owners charge their ledgers), every site invited,
    three enough (site-x, accepted but silent, holds the first attempt open)."""
    return [
        sys.executable, "-m", "leteo_fed", "pca",
        "--aggregator", cluster.addresses["aggregator"],
        "--tls-dir", str(cluster.certs),
        "--features", ",".join(names), "--components", "2",
        "--owners", ",".join(ALL), "--min-owners", "3", "--deadline", "60",
        "--dp-epsilon", "1", "--row-norm-bound", str(math.sqrt(len(names))),
        "--rows", "400", "--accept-noise",
        "--out", str(out),
    ]  # fmt: skip


def test_a_pca_job_open_at_the_kill_runs_again_and_the_analysts_command_completes(tmp_path):
    """The analyst's command waits through the restart (saying once that the aggregator is
    unreachable), the job runs again as `<job>-r2` and its result is the three sites' PCA;
    each owner's ledger keeps one charge (the lost attempt's is withdrawn, the CSP never
    decrypted it), and each owner is told the lost attempt failed, once."""
    x = load_breast_cancer().data[:, :10]
    x = x / x.max(axis=0)  # public per-feature bounds: values in [0, 1]
    names = [f"f{i}" for i in range(10)]
    cluster, data = _cluster(tmp_path, x, names, privacy_budget=(4.0, 1e-4))
    with cluster:
        manual = _manual(cluster, data["site-x"])
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        stderr = tmp_path / "pca.stderr"
        try:
            client.wait_for_owners(4)
            with stderr.open("w") as err:
                command = subprocess.Popen(
                    _pca_command(cluster, names, tmp_path / "out"),
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    cwd=tmp_path,
                )
            job = manual.next_spec(timeout=TIMEOUT).round_id  # site-x accepts, sends nothing
            _wait_submitted(client, job, 3)
            manual.refuse = "this test's site-x sits the second attempt out"

            cluster.kill("aggregator")
            time.sleep(5)  # the command polls an unreachable aggregator meanwhile
            cluster.start_aggregator()
            assert command.wait(timeout=120) == 0, stderr.read_text()
            said = stderr.read_text()
            assert said.count("aggregator unreachable (") == 1, said
            assert said.count("UNAVAILABLE") == 1, said
            assert "aggregator reachable again" in said

            final = client.wait(job, 0)
            assert final.state == "COMPLETED", final.message
            assert sorted(final.submitted) == list(REAL)
            assert manual.next_spec(timeout=5).round_id == f"{job}-r2"
            result = json.loads((tmp_path / "out" / "pca.json").read_text())
            pooled = np.vstack([data[s] for s in REAL])
            # the new attempt's release, of the three sites' rows: each mean within five of
            # its stated noise std of theirs
            assert result["round_id"] == f"{job}-r2"
            assert sorted(result["owners"]) == list(REAL)
            std = result["dp"]["figure_noise_std"]
            for i, (got, want) in enumerate(zip(result["mean"], pooled.mean(axis=0), strict=True)):
                assert abs(got - want) < 5 * std[f"mean of f{i}"], (i, got, want)

            for site in REAL:
                _wait_for(
                    lambda s=site: any(
                        e["round_id"] == job and e["state"] == "withdrawn"
                        for e in _ledger(cluster, s)
                    ),
                    f"{site}'s withdrawal of {job}",
                )
                charged = [e for e in _ledger(cluster, site) if e["state"] == "committed"]
                assert [e["round_id"] for e in charged] == [f"{job}-r2"], charged
                told = [(e["round_id"], e["state"]) for e in _audit(cluster, site)
                        if e.get("event") == "result"]  # fmt: skip
                assert told.count((job, "FAILED")) == 1, told
            assert manual.publications[job] == 1 and manual.states[job] == "FAILED"
        finally:
            if command.poll() is None:
                command.kill()
            client.close()
            manual.close()


def test_sigterm_with_owners_connected_logs_no_traceback(tmp_path):
    """A graceful stop while outbound owners hold their streams: the streams end before the
    state closes, so nothing writes to a closed database; a restart finds every owner."""
    x = load_iris().data
    cluster, _ = _cluster(tmp_path, x, IRIS)
    with cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        try:
            client.wait_for_owners(3)
            process = cluster.procs["aggregator"]
            cluster.kill("aggregator", signal.SIGTERM)
            assert process.returncode == 0
            log = (cluster.logs / "aggregator.log").read_text()
            assert "aggregator: stopped" in log
            assert "Traceback" not in log and "closed database" not in log, log
            assert "could not record" not in log
            cluster.start_aggregator()
            cluster.wait_healthy(names=["aggregator"])
            assert sorted(client.wait_for_owners(3)) == list(REAL)
        finally:
            client.close()


def test_a_logreg_job_resumes_after_the_aggregator_is_killed(tmp_path):
    """Newton iterations resume from the snapshot of the last completed one (its coefficients,
    the row counts, the iterations' summaries): the job ends with statsmodels' Logit on the
    pooled rows (to 1e-6), the lost iteration again under a new round id."""
    import statsmodels.api as sm

    from leteo_fed.protocols import logreg as lg
    from leteo_fed.protocols import logreg_math

    iris = load_iris()
    y = (iris.target == 1).astype(np.float64)  # versicolor against the rest
    names = [*IRIS[:2], "label"]
    cluster, data = _cluster(tmp_path, np.column_stack([iris.data[:, :2], y]), names)
    with cluster:
        manual = _manual(cluster, data["site-x"])
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        try:
            client.wait_for_owners(4)
            held = threading.Event()
            errors: list[BaseException] = []

            def answer() -> None:
                """site-x answers every iteration but the first attempt at iteration 2."""
                try:
                    while True:
                        spec = manual.next_spec(timeout=TIMEOUT)
                        if spec.round_id.endswith("-it2"):
                            held.set()
                            continue
                        beta = np.array(spec.logreg.coefficients)
                        x, label = manual.x[:, :2], manual.x[:, 2]
                        g, h = logreg_math.local_statistics(x, (label == 1.0).astype(float), beta)
                        values = logreg_math.encode_statistics(g, h, len(x), manual._encoding(spec))
                        manual.submit(*manual.seal(spec, values, 2))
                except queue.Empty:  # no further iteration: the job is over
                    pass
                except Exception as exc:
                    errors.append(exc)

            threading.Thread(target=answer, daemon=True).start()
            request = lg.LogregRequest(
                features=tuple(IRIS[:2]), label_column="label", positive_class="1"
            )
            status = client.start(
                request, RoundOptions(min_owners=4, owners=ALL, deadline_seconds=30)
            )
            job = status.round_id
            first, lost = f"{job}-it1", f"{job}-it2"
            assert held.wait(TIMEOUT), "iteration 2 never opened"
            assert client.wait(first, 0).state == "COMPLETED"
            _wait_submitted(client, lost, 3)
            _restart_aggregator(cluster)
            final = client.wait(job, TIMEOUT)
            assert final.state == "COMPLETED", final.message
            assert not errors, errors

            from leteo_fed.transport.rounds import result_document

            result = result_document(final)
            pooled = np.vstack([data[s] for s in ALL])
            ref = sm.Logit(pooled[:, 2], sm.add_constant(pooled[:, :2])).fit(disp=0)
            for name, want in (("coefficients", ref.params), ("std_errors", ref.bse)):
                got = [result[name][t] for t in result["terms"]]
                np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
            assert result["converged"] and result["n_rows"] == 150
            ids = [it["round_id"] for it in result["iterations"]]
            assert ids[:2] == [first, f"{job}-it2-r2"]
            assert [it["iteration"] for it in result["iterations"]] == list(range(1, len(ids) + 1))
            assert client.wait(lost, 0).state == "FAILED"
        finally:
            client.close()
            manual.close()
