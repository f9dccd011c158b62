"""Scale: one PCA round and one k-means iteration with 10, 50 and 100 owner processes.

A dev tool, not a test (a 100-owner run takes several minutes on 2 cores). For each owner count
n in ``--owners``:

1. **Data.** n CSV files of ``--rows`` synthetic rows (default 200) and ``--features`` columns
   (default 30), seeded: every row is one of 3 Gaussian cluster centers plus noise whose standard
   deviation grows from 0.5 to 3 across the features (so the PCA eigenvalues are well separated
   and the components comparable with NumPy's).
2. **Deployment.** ``LocalCluster`` on loopback: the CSP (a fresh ``--key-bits`` Paillier key),
   the aggregator and n owner agents, each its own Python process, mTLS, the demo ``[policy]``.
   Owners are spawned one after the other without waiting (as ``LocalCluster.start`` does) and
   then polled until healthy.
3. **Rounds.** One PCA round (all ``--features`` components, quorum = n, so every owner's share
   is in) and one k-means job (k = 3, ``iterations = 1``: one Lloyd iteration, quorum n),
   started by an analyst client once every owner has its encryption table ready.
4. **Checks.** The PCA result against ``pca.reference_pca`` on the pooled rows (eigenvalues,
   |cos| of each component, mean) and the k-means centers against one NumPy Lloyd step from the
   same initial centers. A run whose result is off (or that fails) is reported as such and the
   exit status is 1.

What is measured (wall clock ``time.perf_counter`` unless said otherwise):

- **start-up**: PKI for n owners (``certs``), CSP + aggregator up (``services``, includes the
  CSP's key generation), owner processes answering Health (``owners healthy``), every owner
  listed by the aggregator (``registered``), every owner's randomizer table built (``ready``,
  from its log); each owner phase counted from the first owner's spawn.
- **per round**: ``collect`` = the aggregator's ``timings.aggregator["collect_seconds"]``
  (invitations out -> round closed, i.e. all n shares in); the CSP's ``verify`` / ``sum`` /
  ``decrypt`` seconds (``timings.csp``); the aggregator's ``unmask`` and ``finish`` (PCA
  eigendecomposition, k-means center update); ``round`` = the client's StartRound -> result;
  ``published`` = StartRound -> every owner holds the result file; ``owners' CPU`` = the CPU
  all owner processes used over the round (``/proc/<pid>/stat``), which on 2 cores bounds
  ``collect`` from below (every owner computes and encrypts its share at the same time).
- **aggregator work per share**: the aggregator's ``intake_cpu_seconds_per_share`` (CPU of the
  receiving thread in ``SignedShares.receive``: statement signature and checks, ciphertext
  parsing and range/unit checks, digest, mask-seed check; mean over the round's shares) and its
  wall-clock twin ``intake_seconds_per_share`` (includes waiting for the stream and the GIL
  under contention), and the aggregator **process** CPU (user + system from
  ``/proc/<pid>/stat``, all threads, gRPC and TLS included) over the round from StartRound until
  the result is published to every owner, divided by n.
- **peak memory**: ``VmHWM`` from ``/proc/<pid>/status`` after both rounds, for the CSP, the
  aggregator and min / median / max over the owners (each process itself; a share this small
  starts no encryption pool).
- **bytes on the wire (payload estimate)**: per share, ``ciphertexts_per_share`` x
  ``paillier_bits / 4`` bytes (a ciphertext mod n^2) from the result's encoding facts, plus the
  owner's signed ``ShareStatement`` as the owner builds it (rebuilt here with the round's values
  and signed with that owner's certificate key: it lists every invited owner, so it grows with
  n). One hop; the aggregator relays the same bytes to the CSP. Protobuf/HTTP2/TLS framing, the
  32-byte mask seed and the invitations are not counted. Apart from it, ``published bytes /
  owner``: the serialized RoundStatus the aggregator publishes to every owner (``GetRound`` of
  the round: the result with every owner's timings, the invited and submitted lists).

``checks`` in the JSON: the ratio largest-n / smallest-n of each per-share figure, and the
log-log slope of the round totals against n (1 = linear, 2 = quadratic).

    .venv/bin/python benchmarks/scale_bench.py                          # 10, 50, 100 owners
    .venv/bin/python benchmarks/scale_bench.py --owners 10 --out /tmp/scale.json

Prints the tables; writes the JSON report to ``--out`` (default ``out/scale_bench.json``).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from leteo_fed.bench.scaling import loglog_slope
from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec, check_stop, stop_on_signals
from leteo_fed.errors import PeerUnavailable
from leteo_fed.fileio import atomic_write_json
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import kmeans as km
from leteo_fed.protocols import pca
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport import membership
from leteo_fed.transport.published import owner_status
from leteo_fed.transport.statements import sign_statement

OWNER_COUNTS = (10, 50, 100)
FEATURES = 30
ROWS = 200
KEY_BITS = 2048
K = 3
SEED = 12
DEADLINE_S = 300.0  # per round; a round closes as soon as all n shares are in
PUBLISH_TIMEOUT_S = 120.0  # after the result: until every owner holds it
READY_LINE = "randomizer table built"  # an owner's log line once its encryptor is ready
FLAT_RATIO = 2.0  # a per-share figure "stays flat" if largest-n / smallest-n is below this
LINEAR_SLOPE = 1.5  # a round total "is not quadratic" if its log-log slope is below this
CLK_TCK = os.sysconf("SC_CLK_TCK")

Progress = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# data


def feature_names(d: int) -> list[str]:
    return [f"x{j:02d}" for j in range(d)]


def make_data(owners: int, rows: int, d: int, seed: int) -> list[np.ndarray]:
    """One (rows x d) block per owner: 3 Gaussian clusters, noise scale 0.5 .. 3 per feature."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(K, d))
    scales = np.linspace(0.5, 3.0, d)
    blocks = []
    for _ in range(owners):
        labels = rng.integers(0, K, size=rows)
        blocks.append(centers[labels] + rng.normal(size=(rows, d)) * scales)
    return blocks


def write_owner_files(blocks: list[np.ndarray], folder: Path) -> list[OwnerSpec]:
    folder.mkdir(parents=True, exist_ok=True)
    names = feature_names(blocks[0].shape[1])
    width = len(str(len(blocks)))
    specs = []
    for i, x in enumerate(blocks, start=1):
        site = f"site-{i:0{width}d}"
        path = folder / f"{site}.csv"
        pacsv.write_csv(pa.table({n: x[:, j] for j, n in enumerate(names)}), path)
        specs.append(OwnerSpec(site, path))
    return specs


def initial_centers(pooled: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    return pooled[rng.choice(len(pooled), size=K, replace=False)]


# --------------------------------------------------------------------------------------------
# processes


def proc_cpu_seconds(pid: int) -> float:
    """user + system CPU of a process (all its threads) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def vm_hwm_mib(pid: int, field: str = "VmHWM") -> float:
    """Peak resident set size (VmHWM) of a process, MiB (or another /proc status field)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for pid {pid}")


def wait_until(
    what: str, done: Callable[[], int], total: int, timeout: float, cluster: LocalCluster
) -> None:
    """Poll `done()` (how many of `total` are there) until all are, failing on a dead child."""
    end = time.monotonic() + timeout
    while True:
        check_stop()
        count = done()
        if count >= total:
            return
        dead = [name for name, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            raise PeerUnavailable(
                f"{dead[0]} exited with code {cluster.procs[dead[0]].returncode}:\n"
                f"{cluster.log_tail(dead[0])}"
            )
        if time.monotonic() > end:
            raise PeerUnavailable(f"{what}: {count} of {total} after {timeout:.0f} s")
        time.sleep(0.25)


def owners_ready(cluster: LocalCluster, sites: list[str]) -> int:
    count = 0
    for site in sites:
        log = cluster.logs / f"{site}.log"
        if log.exists() and READY_LINE in log.read_text(errors="replace"):
            count += 1
    return count


def results_published(cluster: LocalCluster, sites: list[str], round_id: str) -> int:
    """How many owners wrote the round's result (`results_dir` is relative to their config)."""
    folder = cluster.workdir / "config" / "results"
    return sum((folder / s / f"{round_id}.json").exists() for s in sites)


def start_cluster(
    cluster: LocalCluster, timeout: float, progress: Progress | None
) -> dict[str, float]:
    """LocalCluster.start, phase by phase, plus registration and encryptor warm-up."""
    sites = [o.site_id for o in cluster.owners]
    n = len(sites)
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    cluster.prepare()
    out["certs_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    cluster.start_services()
    cluster.wait_healthy(timeout, names=["csp", "aggregator"])
    out["services_s"] = time.perf_counter() - t1
    if progress:
        progress(f"  [{n} owners] CSP and aggregator up in {out['services_s']:.1f} s")
    t2 = time.perf_counter()
    for owner in cluster.owners:
        cluster.start_owner(owner)
    out["spawn_s"] = time.perf_counter() - t2
    cluster.wait_healthy(timeout, names=sites)
    out["owners_healthy_s"] = time.perf_counter() - t2
    with AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")) as c:
        c.wait_for_owners(n, timeout=max(1.0, timeout - (time.perf_counter() - t2)))
    out["registered_s"] = time.perf_counter() - t2
    wait_until("owners ready", lambda: owners_ready(cluster, sites), n, timeout, cluster)
    out["ready_s"] = time.perf_counter() - t2
    out["startup_s"] = time.perf_counter() - t0
    if progress:
        progress(
            f"  [{n} owners] healthy {out['owners_healthy_s']:.1f} s, registered "
            f"{out['registered_s']:.1f} s, ready {out['ready_s']:.1f} s after spawn"
        )
    return out


# --------------------------------------------------------------------------------------------
# one round


def published_status_bytes(cluster: LocalCluster, round_id: str, site: str) -> tuple[int, int]:
    """Sizes of the RoundStatus of `round_id`: the slim copy the aggregator publishes to
    `site` (its result without per-owner fields, counts, its own inclusion) and the analyst's
    full one (every owner's timings, the invited and submitted lists)."""
    tls = cluster.tls("analyst", "analyst")
    channel = tls.channel(cluster.addresses["aggregator"], peer="aggregator")
    try:
        status = pb_grpc.AggregatorStub(channel).GetRound(
            pb.RoundQuery(round_id=round_id), timeout=10
        )
    finally:
        channel.close()
    return owner_status(status, site).ByteSize(), status.ByteSize()


def statement_bytes(
    cluster: LocalCluster, site: str, round_id: str, protocol: str, sites: list[str], facts: dict
) -> int:
    """Size of the signed ShareStatement `site` sends with its share, rebuilt as it builds it."""
    tls = cluster.tls("analyst", "analyst")
    channel = tls.channel(cluster.addresses["csp"], peer="csp")
    try:
        key = pb_grpc.CryptoServiceProviderStub(channel).GetPublicKey(
            pb.PublicKeyRequest(), timeout=10
        )
    finally:
        channel.close()
    statement = pb.ShareStatement(
        round_id=round_id,
        site_id=site,
        key_id=key.key_id,
        protocol=protocol,
        invited_root=membership.root(sorted(sites)),
        n_invited=len(sites),
        quorum=len(sites),
        n_ciphertexts=facts["ciphertexts_per_share"],
        ciphertext_digest=bytes(32),  # SHA-256
        masked=True,
        reveal="blinded",
        spec_digest=bytes(32),  # SHA-256
    )
    return sign_statement(statement, cluster.tls(site, "owner").signer()).ByteSize()


def round_figures(
    cluster: LocalCluster,
    sites: list[str],
    protocol: str,
    round_id: str,
    timings: dict,
    facts: dict,
    start: float,
    round_s: float,
    cpu_before: dict[str, float],
    timeout: float,
) -> dict[str, Any]:
    """The round's phases, per-share figures and payload, once every owner holds the result."""
    n = len(sites)
    wait_until(
        "results published",
        lambda: results_published(cluster, sites, round_id),
        n,
        timeout,
        cluster,
    )
    published_s = time.perf_counter() - start
    cpu = {
        name: proc_cpu_seconds(cluster.procs[name].pid) - cpu_before[name] for name in cpu_before
    }
    agg, csp = timings["aggregator"], timings["csp"]
    ct_bytes = facts["ciphertexts_per_share"] * facts["paillier_bits"] // 4
    stmt = statement_bytes(cluster, sites[0], round_id, protocol, sites, facts)
    published, analyst_status = published_status_bytes(cluster, round_id, sites[0])
    owner_compute = [sum(t.values()) for t in timings["owners"].values()]
    return {
        "round_id": round_id,
        "shares": len(timings["owners"]),
        "round_s": round_s,
        "published_s": published_s,
        "collect_s": agg["collect_seconds"],
        "answer_p50_s": agg.get("answer_p50_seconds"),
        "answer_p99_s": agg.get("answer_p99_seconds"),
        "answer_max_s": agg.get("answer_max_seconds"),
        "csp_verify_s": csp["verify_seconds"],
        "csp_sum_s": csp["sum_seconds"],
        "csp_decrypt_s": csp["decrypt_seconds"],
        "csp_round_trip_s": agg["csp_round_trip_seconds"],
        "unmask_s": agg["unmask_seconds"],
        "finish_s": agg.get("eigendecomposition_seconds", agg.get("update_seconds", 0.0)),
        "intake_s_per_share": agg["intake_seconds_per_share"],
        "intake_cpu_s_per_share": agg["intake_cpu_seconds_per_share"],
        "aggregator_cpu_s": cpu["aggregator"],
        "aggregator_cpu_s_per_share": cpu["aggregator"] / n,
        "csp_cpu_s": cpu["csp"],
        "owners_cpu_s": sum(cpu[s] for s in sites),
        "owner_compute_s_median": statistics.median(owner_compute),
        "owner_compute_s_max": max(owner_compute),
        "ciphertexts_per_share": facts["ciphertexts_per_share"],
        "paillier_bits": facts["paillier_bits"],
        "ciphertext_bytes_per_share": ct_bytes,
        "statement_bytes": stmt,
        "payload_bytes_per_share": ct_bytes + stmt,
        "payload_bytes_total": n * (ct_bytes + stmt),
        "published_bytes_per_owner": published,
        "published_bytes_total": n * published,
        "analyst_status_bytes": analyst_status,
    }


def pca_accuracy(result: dict, pooled: np.ndarray) -> dict[str, float]:
    d = pooled.shape[1]
    evals, comps, mean = pca.reference_pca(pooled, d)
    got = np.array(result["eigenvalues"])
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    return {
        "n_samples": int(result["n_samples"]),
        "max_rel_eigenvalue_error": float(np.max(np.abs(got - evals) / np.abs(evals))),
        "min_abs_cos": float(cos.min()),
        "max_mean_error": float(np.max(np.abs(np.array(result["mean"]) - mean))),
    }


def kmeans_accuracy(result: dict, pooled: np.ndarray, init: np.ndarray) -> dict[str, float]:
    labels = km.assign(pooled, init)
    sums, counts = km.cluster_stats(pooled, labels, K)
    want = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], init)
    return {
        "counts_match": bool(list(result["counts"]) == counts.tolist()),
        "max_center_error": float(np.max(np.abs(np.array(result["centers"]) - want))),
    }


PCA_TOLERANCE = {"max_rel_eigenvalue_error": 1e-9, "min_abs_cos": 1 - 1e-9, "max_mean_error": 1e-9}
KMEANS_TOLERANCE = 1e-9


def accurate(rounds: dict[str, Any], rows: int) -> list[str]:
    """Why the results do not match NumPy (empty: they do)."""
    bad = []
    p = rounds["pca"]["accuracy"]
    if p["n_samples"] != rows:
        bad.append(f"PCA counted {p['n_samples']} rows, not {rows}")
    if p["max_rel_eigenvalue_error"] > PCA_TOLERANCE["max_rel_eigenvalue_error"]:
        bad.append(f"PCA eigenvalues off by {p['max_rel_eigenvalue_error']:.2e} (relative)")
    if p["min_abs_cos"] < PCA_TOLERANCE["min_abs_cos"]:
        bad.append(f"PCA component |cos| {p['min_abs_cos']:.12f}")
    if p["max_mean_error"] > PCA_TOLERANCE["max_mean_error"]:
        bad.append(f"PCA mean off by {p['max_mean_error']:.2e}")
    k = rounds["kmeans"]["accuracy"]
    if not k["counts_match"] or k["max_center_error"] > KMEANS_TOLERANCE:
        bad.append(f"k-means centers off by {k['max_center_error']:.2e} / counts differ")
    return bad


# --------------------------------------------------------------------------------------------
# one owner count


def run_scale(
    n_owners: int,
    workdir: Path,
    *,
    features: int = FEATURES,
    rows: int = ROWS,
    key_bits: int = KEY_BITS,
    seed: int = SEED,
    startup_timeout: float = 900.0,
    deadline_s: float = DEADLINE_S,
    progress: Progress | None = _stderr,
) -> dict[str, Any]:
    """A deployment with `n_owners` owner processes, one PCA round and one k-means iteration."""
    blocks = make_data(n_owners, rows, features, seed)
    pooled = np.vstack(blocks)
    names = feature_names(features)
    specs = write_owner_files(blocks, workdir / "data")
    sites = [s.site_id for s in specs]
    init = initial_centers(pooled, seed)
    cluster = LocalCluster(workdir / "cluster", specs, key_bits=key_bits)
    out: dict[str, Any] = {"owners": n_owners, "rows": n_owners * rows, "status": "ok"}
    load = {"load_1m_before": os.getloadavg()[0]}
    try:
        out["startup"] = start_cluster(cluster, startup_timeout, progress)
        out.update(load)
        out["rounds"] = {}
        tls = cluster.tls("analyst", "analyst")
        with AnalystClient(cluster.addresses["aggregator"], tls) as client:
            pids = {name: cluster.procs[name].pid for name in ("aggregator", "csp", *sites)}
            idle = [vm_hwm_mib(pids[s], "VmRSS") for s in sites]  # ready, no round yet
            out["owner_idle_rss_mib"] = {
                "min": min(idle),
                "median": statistics.median(idle),
                "max": max(idle),
            }

            # PCA: every component, quorum n
            cpu = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}  # before the round
            start = time.perf_counter()
            doc = client.run(
                MomentsRequest(features=tuple(names), components=features),
                RoundOptions(min_owners=n_owners, deadline_seconds=deadline_s),
            ).to_dict()
            round_s = time.perf_counter() - start
            fig = round_figures(
                cluster,
                sites,
                "pca",
                doc["round_id"],
                doc["timings"],
                doc["encoding"],
                start,
                round_s,
                cpu,
                PUBLISH_TIMEOUT_S,
            )
            fig["accuracy"] = pca_accuracy(doc, pooled)
            fig["eigenvalues"] = list(doc["eigenvalues"])
            out["rounds"]["pca"] = fig
            if progress:
                progress(f"  [{n_owners} owners] PCA round {round_s:.2f} s")

            # k-means: one Lloyd iteration, k = 3, quorum n
            cpu = {name: proc_cpu_seconds(pid) for name, pid in pids.items()}  # before the round
            start = time.perf_counter()
            job = client.run(
                KmeansRequest(
                    features=tuple(names),
                    k=K,
                    centers=tuple(float(v) for row in init.tolist() for v in row),
                    iterations=1,
                ),
                RoundOptions(min_owners=n_owners, deadline_seconds=deadline_s),
            ).to_dict()
            round_s = time.perf_counter() - start
            it = job["iterations"][0]
            fig = round_figures(
                cluster,
                sites,
                "kmeans",
                it["round_id"],
                it["timings"],
                job["encoding"],
                start,
                round_s,
                cpu,
                PUBLISH_TIMEOUT_S,
            )
            fig["accuracy"] = kmeans_accuracy(job, pooled, init)
            out["rounds"]["kmeans"] = fig
            if progress:
                progress(f"  [{n_owners} owners] k-means iteration {round_s:.2f} s")

        out["load_1m_after_rounds"] = os.getloadavg()[0]  # the host may be shared
        owners_hwm = [vm_hwm_mib(cluster.procs[s].pid) for s in sites]
        out["memory_mib"] = {
            "csp": vm_hwm_mib(pids["csp"]),
            "aggregator": vm_hwm_mib(pids["aggregator"]),
            "owner_min": min(owners_hwm),
            "owner_median": statistics.median(owners_hwm),
            "owner_max": max(owners_hwm),
            "owners_total": sum(owners_hwm),
        }
        problems = accurate(out["rounds"], n_owners * rows)
        if problems:
            out["status"] = "invalid"
            out["error"] = "; ".join(problems)
    except Exception as exc:  # one failing owner count must not lose the others
        out["status"] = "error"
        out["error"] = f"{type(exc).__name__}: {exc}"
        if progress:
            progress(f"  [{n_owners} owners] FAILED: {out['error']}")
            for name in ("aggregator", "csp"):
                tail = cluster.log_tail(name, 5)
                if tail:
                    progress(f"  --- {name} log tail ---\n{tail}")
    finally:
        t = time.perf_counter()
        cluster.stop()
        out["stop_s"] = time.perf_counter() - t
    return out


# --------------------------------------------------------------------------------------------
# checks and output


PER_SHARE = ("intake_cpu_s_per_share", "intake_s_per_share", "aggregator_cpu_s_per_share")
TOTALS = ("collect_s", "csp_verify_s", "csp_sum_s", "aggregator_cpu_s", "round_s")


def checks(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-share figures: largest-n / smallest-n ratio. Round totals: log-log slope in n."""
    ok = sorted((r for r in runs if r["status"] == "ok"), key=lambda r: r["owners"])
    out: dict[str, Any] = {"owner_counts": [r["owners"] for r in ok]}
    if len(ok) < 2:
        out["note"] = "fewer than two owner counts ran: nothing to compare"
        return out
    lo, hi = ok[0], ok[-1]
    for protocol in ("pca", "kmeans"):
        per: dict[str, Any] = {}
        for key in PER_SHARE:
            a, b = lo["rounds"][protocol][key], hi["rounds"][protocol][key]
            per[f"{key}_ratio"] = b / a if a > 0 else None
        # the aggregator's CPU per additional owner (fixed costs of a round cancel out)
        cpu_lo, cpu_hi = (
            lo["rounds"][protocol]["aggregator_cpu_s"],
            hi["rounds"][protocol]["aggregator_cpu_s"],
        )
        per["aggregator_cpu_s_per_added_owner"] = (cpu_hi - cpu_lo) / (hi["owners"] - lo["owners"])
        for key in TOTALS:
            per[f"{key}_slope"] = loglog_slope(
                [r["owners"] for r in ok], [r["rounds"][protocol][key] for r in ok]
            )
        cpu_ratio = per["intake_cpu_s_per_share_ratio"]
        proc_ratio = per["aggregator_cpu_s_per_share_ratio"]
        per["aggregator_work_per_share_flat"] = bool(
            cpu_ratio is not None
            and cpu_ratio < FLAT_RATIO
            and proc_ratio is not None
            and proc_ratio < FLAT_RATIO
        )
        slopes = [per[f"{k}_slope"] for k in TOTALS if per[f"{k}_slope"] is not None]
        per["max_total_slope"] = max(slopes) if slopes else None
        per["no_quadratic_total"] = bool(slopes and max(slopes) < LINEAR_SLOPE)
        out[protocol] = per
    out["criteria"] = (
        f"flat: largest-n / smallest-n < {FLAT_RATIO} for the intake CPU per share and the "
        f"aggregator process CPU per share; not quadratic: every round total's log-log slope "
        f"in n < {LINEAR_SLOPE}"
    )
    return out


def _f(value: Any, spec: str) -> str:
    return "" if value is None else format(value, spec)


def markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    ok = [r for r in runs if r.get("rounds")]  # invalid runs too: their numbers say why
    lines = [
        "Start-up and peak memory (VmHWM, MiB):",
        "",
        "| owners | certs (s) | CSP + aggregator up (s) | owners healthy (s) | registered (s) | "
        "ready (s) | CSP | aggregator | owner min / median / max | idle owner RSS median / max "
        "| status |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in runs:
        s, m = r.get("startup", {}), r.get("memory_mib", {})
        mem = f"{m['owner_min']:.0f} / {m['owner_median']:.0f} / {m['owner_max']:.0f}" if m else ""
        idle = r.get("owner_idle_rss_mib")
        idle_rss = f"{idle['median']:.0f} / {idle['max']:.0f}" if idle else ""
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error', '')}"
        lines.append(
            f"| {r['owners']} | {_f(s.get('certs_s'), '.1f')} | {_f(s.get('services_s'), '.1f')} | "
            f"{_f(s.get('owners_healthy_s'), '.1f')} | {_f(s.get('registered_s'), '.1f')} | "
            f"{_f(s.get('ready_s'), '.1f')} | {_f(m.get('csp'), '.0f')} | "
            f"{_f(m.get('aggregator'), '.0f')} | {mem} | {idle_rss} | "
            f"{status[:100].replace('|', '/')} |"
        )
    lines += [
        "",
        "Per round (seconds; collect = invitations out -> all shares in; round = the analyst's "
        "StartRound -> result; published = until every owner holds the result):",
        "",
        "| owners | round | answer p50 / p99 / max | collect | owners' CPU | CSP verify | CSP sum | "
        "CSP decrypt | unmask | EVD / update | round | published |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ok:
        for protocol, x in r["rounds"].items():
            answers = " / ".join(_f(x.get(f"answer_{q}_s"), ".2f") for q in ("p50", "p99", "max"))
            lines.append(
                f"| {r['owners']} | {protocol} | {answers} | {x['collect_s']:.2f} | "
                f"{x['owners_cpu_s']:.1f} | "
                f"{x['csp_verify_s']:.3f} | "
                f"{x['csp_sum_s']:.4f} | {x['csp_decrypt_s']:.3f} | {x['unmask_s']:.4f} | "
                f"{x['finish_s']:.4f} | {x['round_s']:.2f} | {x['published_s']:.2f} |"
            )
    lines += [
        "",
        "Aggregator work per share (ms) and payload (ciphertexts + signed statement, one hop):",
        "",
        "| owners | round | intake CPU / share | intake wall / share | aggregator process CPU / "
        "share | ciphertexts / share | bytes / share (ct + statement) | total KiB | "
        "published bytes / owner |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ok:
        for protocol, x in r["rounds"].items():
            lines.append(
                f"| {r['owners']} | {protocol} | {1e3 * x['intake_cpu_s_per_share']:.2f} | "
                f"{1e3 * x['intake_s_per_share']:.2f} | "
                f"{1e3 * x['aggregator_cpu_s_per_share']:.1f} | {x['ciphertexts_per_share']} | "
                f"{x['payload_bytes_per_share']} ({x['ciphertext_bytes_per_share']} + "
                f"{x['statement_bytes']}) | {x['payload_bytes_total'] / 1024:.0f} | "
                f"{x['published_bytes_per_owner']} |"
            )
    c = report.get("checks", {})
    for protocol in ("pca", "kmeans"):
        per = c.get(protocol)
        if not per:
            continue
        lines += [
            "",
            f"{protocol}: intake CPU per share x{_f(per['intake_cpu_s_per_share_ratio'], '.2f')}, "
            f"aggregator process CPU per share x{_f(per['aggregator_cpu_s_per_share_ratio'], '.2f')}"
            f" from {c['owner_counts'][0]} to {c['owner_counts'][-1]} owners (flat: "
            f"{per['aggregator_work_per_share_flat']}); aggregator CPU per added owner "
            f"{1e3 * per['aggregator_cpu_s_per_added_owner']:.1f} ms; log-log slopes in n: "
            + ", ".join(f"{k} {_f(per[f'{k}_slope'], '.2f')}" for k in TOTALS)
            + f" (no quadratic total: {per['no_quadratic_total']})",
        ]
    return "\n".join(lines) + "\n"


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def run_benchmark(
    owner_counts: list[int],
    *,
    features: int = FEATURES,
    rows: int = ROWS,
    key_bits: int = KEY_BITS,
    seed: int = SEED,
    workdir: Path | None = None,
    startup_timeout: float = 900.0,
    progress: Progress | None = _stderr,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "scale_bench",
        "config": {
            "owner_counts": owner_counts,
            "features": features,
            "rows_per_owner": rows,
            "key_bits": key_bits,
            "seed": seed,
            "kmeans": {"k": K, "iterations": 1},
            "pca_components": features,
        },
        "machine": machine(),
        "runs": [],
    }
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        for n in owner_counts:
            if progress:
                progress(f"{n} owners ...")
            folder = root / f"owners-{n}"
            if folder.exists():
                shutil.rmtree(folder)
            t0 = time.perf_counter()
            row = run_scale(
                n,
                folder,
                features=features,
                rows=rows,
                key_bits=key_bits,
                seed=seed,
                startup_timeout=startup_timeout,
                progress=progress,
            )
            row["total_s"] = time.perf_counter() - t0
            report["runs"].append(row)
    report["checks"] = checks(report["runs"])
    return report


# --------------------------------------------------------------------------------------------
# CLI


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--owners", default="10,50,100", help="comma-separated owner counts")
    p.add_argument("--features", type=int, default=FEATURES)
    p.add_argument("--rows", type=int, default=ROWS, help="rows per owner")
    p.add_argument("--key-bits", type=int, default=KEY_BITS)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--startup-timeout", type=float, default=900.0, help="seconds per phase")
    p.add_argument("--workdir", type=Path, default=None, help="keep the deployments here")
    p.add_argument("--out", type=Path, default=Path("out/scale_bench.json"))
    args = p.parse_args(argv)
    try:
        args.owners = sorted({int(v) for v in args.owners.split(",") if v.strip()})
    except ValueError:
        p.error(f"--owners: comma-separated integers, got {args.owners!r}")
    if not args.owners or min(args.owners) < 2:
        p.error("--owners: every count must be >= 2 (the minimum quorum)")
    if args.features < 2 or args.rows < 2:
        p.error("--features and --rows must be >= 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_on_signals()  # SIGTERM too ends in the clusters' stop()
    start = time.perf_counter()
    report = run_benchmark(
        args.owners,
        features=args.features,
        rows=args.rows,
        key_bits=args.key_bits,
        seed=args.seed,
        workdir=args.workdir,
        startup_timeout=args.startup_timeout,
    )
    report["runtime_s"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out, report)
    print(markdown(report))
    print(f"runtime {report['runtime_s']:.0f} s; wrote {args.out}")
    return 0 if all(r["status"] == "ok" for r in report["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
