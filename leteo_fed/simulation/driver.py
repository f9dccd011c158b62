"""The simulation's driver: a real CSP (or the m holders of a threshold key) and aggregator,
virtual owners in worker processes, and the analyst's PCA round checked against the pooled rows.

Steps (`simulate`): certificates for every owner (`LocalCluster.prepare`, one CA set, one
certificate and signing key per site; with key holders also theirs and the key's dealing), each
owner's data file and config, the CSP (or the holders) and the aggregator as processes,
`processes` workers hosting the owners (`worker`), the wait until the aggregator counts them
all connected, an optional hold, the round (the real `AnalystClient`, quorum `quorum`, the
first `invite` sites), the comparison with `pca.reference_pca`, and the figures (`report`).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from leteo_fed import defaults
from leteo_fed.client import AnalystClient, RoundOptions, job_result
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec, check_stop
from leteo_fed.errors import ConfigError, PeerUnavailable
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import pca
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.simulation import data, measure
from leteo_fed.simulation.virtual_owner import TRAFFIC

Progress = Callable[[str], None]
WORKER = "leteo_fed.simulation.worker"
TOLERANCE = 1e-9  # the round's PCA against NumPy's on the pooled rows


@dataclass(frozen=True)
class SimOptions:
    owners: int = 100
    processes: int = 0  # 0: min(4, owners // 250 + 1)
    invite: int = -1  # -1: every owner; 0: no round
    quorum: int = 0  # 0: the invited owners less those stopped
    stop_fraction: float = 0.0
    hold: float = 0.0  # seconds all stay connected before the round
    features: int = 4
    rows_per_owner: int = 20
    key_bits: int = 2048
    keyholders: tuple[int, int] | None = None  # (m, t): a threshold key's holders, not one CSP
    seed: int = 1
    threads: int = 8  # per worker: the pool its owners' invitations and shares run on
    connect_timeout: float = 900.0
    deadline: float = 600.0  # the round's deadline

    def workers(self) -> int:
        return max(1, min(self.processes or min(4, self.owners // 250 + 1), self.owners))

    def invited(self) -> int:
        return self.owners if self.invite < 0 else min(self.invite, self.owners)

    def check(self) -> None:
        if self.owners < 1:
            raise ConfigError("--owners must be at least 1", field="owners")
        if not 0 <= self.stop_fraction < 1:
            raise ConfigError("--stop-fraction must be in [0, 1)", field="stop_fraction")
        if self.features < 2:
            raise ConfigError("--features must be at least 2", field="features")
        if self.invited() and self.rows_per_owner < 1:
            raise ConfigError("--rows-per-owner must be at least 1", field="rows_per_owner")
        if self.keyholders is not None:
            from leteo_fed.demo.runner import demo_keyholders

            demo_keyholders(*self.keyholders)  # the demos' rule: 2 <= t <= m, t > m / 2

    def key_service(self) -> str:
        """Who decrypts, in words."""
        if self.keyholders is None:
            return "CSP"
        m, t = self.keyholders
        return f"{m} key holders (any {t} decrypt)"


def stopping_sites(invited: list[str], fraction: float, seed: int) -> list[str]:
    """The invited sites that crash mid-round: round(fraction x invited), seeded."""
    count = round(fraction * len(invited))
    return sorted(random.Random(seed).sample(invited, count))


def split(items: list[str], parts: int) -> list[list[str]]:
    """`items` in `parts` interleaved slices (every worker gets invited sites)."""
    return [items[i::parts] for i in range(parts)]


def _say(msg: str) -> None:
    print(msg, flush=True)


def simulate(opts: SimOptions, out: Path, progress: Progress = _say) -> dict[str, Any]:
    """Run it; the report (also written to out/simulation.json). Raises PeerUnavailable if
    the owners do not all connect or a process dies; a round that fails is in the report."""
    opts.check()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"options": asdict(opts), "workers": opts.workers()}
    sites = data.site_ids(opts.owners)
    invited = sites[: opts.invited()]
    stopping = stopping_sites(invited, opts.stop_fraction, opts.seed)
    quorum = opts.quorum or len(invited) - len(stopping)
    t0 = time.perf_counter()
    paths, pooled_all = data.write_owner_data(
        out / "data", sites, opts.rows_per_owner, opts.features, opts.seed
    )
    report["data_seconds"] = time.perf_counter() - t0
    aggregator_args = ["--max-owners", str(max(opts.owners, defaults.MAX_CONNECTED_OWNERS))]
    cluster = LocalCluster(
        out / "deployment",
        [OwnerSpec(site, paths[site]) for site in sites],
        key_bits=opts.key_bits,
        keyholders=opts.keyholders,
        aggregator_args=aggregator_args,
        log_level="INFO",
    )
    try:
        t0 = time.perf_counter()
        cluster.prepare()
        report["certificates_seconds"] = time.perf_counter() - t0
        progress(
            f"certificates and keys for {opts.owners} owners: {report['certificates_seconds']:.1f} s"
        )
        t0 = time.perf_counter()
        cluster.start_services()
        cluster.wait_healthy(120, names=[*_key_services(cluster), "aggregator"])
        report["services_seconds"] = time.perf_counter() - t0
        progress(
            f"{opts.key_service()} ({opts.key_bits}-bit key) and aggregator up: "
            f"{report['services_seconds']:.1f} s"
        )
        configs = {s.site_id: cluster.owner_config(s) for s in cluster.owners}
        report["connect"] = _connect(cluster, opts, configs, stopping, out, progress)
        if opts.hold > 0:
            report["hold"] = _hold(cluster, opts, out, progress)
        if invited:
            report["round"] = _round(
                cluster, opts, invited, stopping, quorum, pooled_all, sites, out, progress
            )
        report["processes"] = _processes(cluster)
    finally:
        cluster.stop()
    atomic_json(out / "simulation.json", report)
    return report


def _key_services(cluster: LocalCluster) -> list[str]:
    """The processes that hold the key: the CSP, or keyholder-1..m."""
    return cluster.keyholder_names or ["csp"]


def _worker_names(cluster: LocalCluster) -> list[str]:
    return sorted(n for n in cluster.procs if n.startswith("worker-"))


def _connect(
    cluster: LocalCluster,
    opts: SimOptions,
    configs: dict[str, Path],
    stopping: list[str],
    out: Path,
    progress: Progress,
) -> dict[str, Any]:
    """Start the workers; wait until the aggregator counts every owner connected."""
    lists = out / "workers"
    lists.mkdir(parents=True, exist_ok=True)
    (lists / "stop-sites.txt").write_text("".join(f"{s}\n" for s in stopping))
    agg = cluster.procs["aggregator"].pid
    cpu = measure.CpuWatch({"aggregator": agg})
    start = time.perf_counter()
    for i, part in enumerate(split(list(configs), opts.workers())):
        listing = lists / f"worker-{i}.txt"
        listing.write_text("".join(f"{configs[s]}\n" for s in part))
        cluster.spawn(
            f"worker-{i}",
            WORKER,
            [
                "--configs",
                str(listing),
                "--stop-sites",
                str(lists / "stop-sites.txt"),
                "--threads",
                str(opts.threads),
                "--status",
                str(lists / f"worker-{i}.json"),
            ],
        )
    with AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")) as c:
        last = 0.0
        while True:
            check_stop()
            _check_alive(cluster)
            # the workers' own counts each second (cheap); the aggregator's listing (every
            # owner, sorted) once they say all are up: that is what counts
            status = list(worker_status(out).values())
            said = sum(s.get("connected", 0) for s in status)
            connected = _connected(c) if said >= opts.owners else 0
            now = time.perf_counter() - start
            if connected >= opts.owners:
                break
            if now > opts.connect_timeout:
                raise PeerUnavailable(f"{said} of {opts.owners} owners connected after {now:.0f} s")
            if now - last >= 5:
                built = sum(s.get("built", 0) for s in status)
                progress(
                    f"  connecting: {said}/{opts.owners} connected ({built} built), {now:.0f} s"
                )
                last = now
            time.sleep(1.0)
    seconds = time.perf_counter() - start
    used = cpu.used()["aggregator"]
    mem = measure.memory_mib(agg)
    progress(f"all {opts.owners} owners connected in {seconds:.1f} s")
    return {
        "owners": opts.owners,
        "seconds": seconds,
        "owners_per_second": opts.owners / seconds,
        "aggregator_cpu_seconds": used,
        "aggregator_cpu_ms_per_owner": 1000 * used / opts.owners,
        "aggregator": mem,
        "aggregator_rss_kib_per_owner": 1024 * mem["rss_mib"] / opts.owners,
    }


def _connected(client: AnalystClient) -> int:
    try:
        return sum(o.connected for o in client.owner_listing())
    except PeerUnavailable:
        return 0


def _check_alive(cluster: LocalCluster) -> None:
    for name, proc in cluster.procs.items():
        if proc.poll() is not None:
            raise PeerUnavailable(
                f"{name} exited with code {proc.returncode}:\n{cluster.log_tail(name)}"
            )


def worker_status(out: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted((out / "workers").glob("worker-*.json")):
        try:
            found[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):  # being replaced: next time
            continue
    return found


def _hold(cluster: LocalCluster, opts: SimOptions, out: Path, progress: Progress) -> dict:
    """Every owner stays connected for `hold` seconds, no round: the aggregator's idle cost."""
    agg = cluster.procs["aggregator"].pid
    cpu = measure.CpuWatch({"aggregator": agg})
    start = time.perf_counter()
    lowest = opts.owners
    with AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")) as c:
        last = start
        while time.perf_counter() - start < opts.hold:
            check_stop()
            _check_alive(cluster)
            time.sleep(min(15.0, max(0.0, opts.hold - (time.perf_counter() - start))))
            connected = _connected(c)
            lowest = min(lowest, connected)
            if time.perf_counter() - last >= 30:
                progress(
                    f"  holding: {connected}/{opts.owners} connected, "
                    f"{time.perf_counter() - start:.0f}/{opts.hold:.0f} s"
                )
                last = time.perf_counter()
    seconds = time.perf_counter() - start
    used = cpu.used()["aggregator"]
    progress(f"held {opts.owners} connections for {seconds:.0f} s (fewest connected: {lowest})")
    return {
        "seconds": seconds,
        "fewest_connected": lowest,
        "aggregator_cpu_seconds": used,
        "aggregator_cpu_share": used / seconds,
        "aggregator": measure.memory_mib(agg),
    }


def _round(
    cluster: LocalCluster,
    opts: SimOptions,
    invited: list[str],
    stopping: list[str],
    quorum: int,
    pooled_all: np.ndarray,
    sites: list[str],
    out: Path,
    progress: Progress,
) -> dict[str, Any]:
    names = data.feature_names(opts.features)
    pids = {name: p.pid for name, p in cluster.procs.items()}
    cpu = measure.CpuWatch(pids)
    before = _traffic(out)
    request = MomentsRequest(features=tuple(names), components=opts.features)
    options = RoundOptions(min_owners=quorum, owners=tuple(invited), deadline_seconds=opts.deadline)
    tls = cluster.tls("analyst", "analyst")
    progress(
        f"round: PCA of {opts.features} features over {len(invited)} owners, quorum {quorum}"
        + (f", {len(stopping)} stop before uploading" if stopping else "")
    )
    with AnalystClient(cluster.addresses["aggregator"], tls) as client:
        start = time.perf_counter()
        status = client.start(request, options)
        last = [start]

        def tick(s: pb.RoundStatus) -> None:
            now = time.perf_counter()
            if now - last[0] >= 5:
                progress(
                    f"  round {s.round_id}: {len(s.submitted)}/{len(invited)} shares in, "
                    f"{now - start:.0f} s"
                )
                last[0] = now

        final = client.wait(status.round_id, opts.deadline + 120, tick)
        seconds = time.perf_counter() - start
    used = cpu.used()
    result: dict[str, Any] = {
        "round_id": final.round_id,
        "state": final.state,
        "message": final.message,
        "invited": len(invited),
        "quorum": quorum,
        "stopped": len(stopping),
        "submitted": len(final.submitted),
        "round_seconds": seconds,
    }
    progress(f"round {final.state.lower()} in {seconds:.1f} s: {final.message}")
    if final.state != "COMPLETED":
        result["ok"] = False
        return result
    doc = job_result(final).to_dict()
    index = {s: i for i, s in enumerate(sites)}
    rows = opts.rows_per_owner
    summed = sorted(final.submitted, key=index.__getitem__)
    pooled = np.vstack([pooled_all[index[s] * rows : (index[s] + 1) * rows] for s in summed])
    result["accuracy"] = accuracy(doc, pooled)
    result["ok"] = result["accuracy"]["within_tolerance"] and not (set(summed) & set(stopping))
    agg, csp = doc["timings"]["aggregator"], doc["timings"].get("csp", {})
    result["timings"] = {
        "collect_seconds": agg.get("collect_seconds"),
        "answer_p50_seconds": agg.get("answer_p50_seconds"),
        "answer_p99_seconds": agg.get("answer_p99_seconds"),
        "answer_max_seconds": agg.get("answer_max_seconds"),
    }
    if opts.keyholders is None:
        result["timings"] |= {
            "csp_verify_seconds": csp.get("verify_seconds"),
            "csp_sum_seconds": csp.get("sum_seconds"),
            "csp_decrypt_seconds": csp.get("decrypt_seconds"),
            "csp_round_trip_seconds": agg.get("csp_round_trip_seconds"),
        }
        result["csp_cpu_seconds"] = used["csp"]
    else:
        result["timings"] |= holder_timings(agg, csp)
        holders_cpu = {name: used[name] for name in cluster.keyholder_names if name in used}
        result["keyholders_cpu_seconds"] = holders_cpu
        result["keyholders_cpu_total_seconds"] = sum(holders_cpu.values())
    result["aggregator_cpu_seconds"] = used["aggregator"]
    result["aggregator_cpu_ms_per_owner"] = 1000 * used["aggregator"] / len(invited)
    workers = [n for n in used if n.startswith("worker-")]
    result["workers_cpu_seconds"] = sum(used[n] for n in workers)
    time.sleep(2.0)  # the workers' counts are rewritten every second
    traffic = _traffic(out)
    moved = {k: traffic[k] - before[k] for k in TRAFFIC}
    shares = max(1, moved["shares"])
    result["bytes_per_owner"] = {
        "round_spec": moved["invite_bytes"] / max(1, moved["invites"]),
        "share_statement": moved["statement_bytes"] / shares,
        "ciphertexts": moved["ciphertext_bytes"] / shares,
        "published_status": moved["result_bytes"] / max(1, moved["results"]),
    }
    result["owners_heard"] = {k: moved[k] for k in ("invites", "shares", "results")}
    return result


HOLDER_PHASES = ("verify", "sum", "partial", "prove", "check", "round_trip")


def holder_timings(agg: dict[str, float], csp: dict[str, float]) -> dict[str, Any]:
    """A threshold round's key-service figures, from the result's timings: how many holders
    answered validly (and wrongly, or failed), the aggregator's round trip to them, its proof
    checks and combination, the slowest combined holder's phases, and each holder's own
    (`holder_<i>_<phase>_seconds`, by index)."""
    out: dict[str, Any] = {
        name: csp.get(name) for name in ("holders_valid", "holders_wrong", "holders_failed")
    }
    for name in ("holder_round_trip_seconds", "verify_proofs_seconds", "combine_seconds"):
        out[name] = agg.get(name)
    for phase in ("verify", "sum", "partial", "prove"):
        out[f"holders_{phase}_seconds"] = csp.get(f"{phase}_seconds")  # the slowest combined
    each: dict[str, dict[str, float]] = {}
    for key, value in csp.items():
        for phase in HOLDER_PHASES:
            suffix = f"_{phase}_seconds"
            if key.startswith("holder_") and key.endswith(suffix):
                each.setdefault(key[len("holder_") : -len(suffix)], {})[phase] = value
                break
    # by index (a holder that answered as none is labelled at_ADDRESS: last)
    out["holders"] = {
        label: {phase: each[label][phase] for phase in HOLDER_PHASES if phase in each[label]}
        for label in sorted(each, key=lambda label: (len(label), label))
    }
    return out


def accuracy(doc: dict, pooled: np.ndarray) -> dict[str, Any]:
    """The round's PCA against NumPy's on the pooled rows of the owners summed."""
    d = pooled.shape[1]
    evals, comps, mean = pca.reference_pca(pooled, d)
    got = np.array(doc["eigenvalues"])
    cos = np.abs(np.sum(np.array(doc["components"]).T * comps, axis=0))
    out = {
        "n_samples": int(doc["n_samples"]),
        "pooled_rows": int(pooled.shape[0]),
        "max_rel_eigenvalue_error": float(np.max(np.abs(got - evals) / np.abs(evals))),
        "min_abs_cos": float(cos.min()),
        "max_mean_error": float(np.max(np.abs(np.array(doc["mean"]) - mean))),
    }
    out["within_tolerance"] = bool(
        out["n_samples"] == out["pooled_rows"]
        and out["max_rel_eigenvalue_error"] <= TOLERANCE
        and out["min_abs_cos"] >= 1 - TOLERANCE
        and out["max_mean_error"] <= TOLERANCE
    )
    return out


def _traffic(out: Path) -> dict[str, int]:
    totals = dict.fromkeys(TRAFFIC, 0)
    for status in worker_status(out).values():
        for k in TRAFFIC:
            totals[k] += status.get("traffic", {}).get(k, 0)
    return totals


def _processes(cluster: LocalCluster) -> dict[str, Any]:
    """CPU used since start and memory, per service; the workers' summed."""
    out: dict[str, Any] = {}
    workers = {"cpu_seconds": 0.0, "rss_mib": 0.0, "peak_rss_mib": 0.0}
    for name, proc in cluster.procs.items():
        if proc.poll() is not None:
            continue
        figures = {"cpu_seconds": measure.cpu_seconds(proc.pid), **measure.memory_mib(proc.pid)}
        if name.startswith("worker-"):
            for k in workers:
                workers[k] += figures[k]
        else:
            out[name] = figures
    out["workers"] = workers
    return out


def atomic_json(path: Path, doc: Any) -> None:
    from leteo_fed.fileio import atomic_write_json

    atomic_write_json(path, _finite(doc))


def _finite(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _finite(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_finite(v) for v in doc]
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc
