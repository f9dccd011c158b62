"""Recovery of a federated DP k-means job: an owner stopped, the aggregator or the CSP restarted.

A dev tool, not a test. Everything runs as real processes (`LocalCluster`: CSP, aggregator and
three outbound owner agents, mTLS, 2048-bit Paillier), as in
`tests/integration/test_job_liveness.py`. It uses only interfaces that exist both before and
after the job-liveness work (commit 8cc01c0 and later), so the same script measures either
version of the code: run it with ``PYTHONPATH=<a worktree of the old commit>`` to measure that
one. The JSON report names the code it ran (``leteo_fed.__file__``, git commit) and what the
spawned service processes import (their PYTHONPATH and working directory, read from /proc, and
a probe process started exactly as `LocalCluster` starts its children).

Data: scikit-learn's iris set (150 x 4) split at random (seeded) into three CSV files, one per
owner. Job: DP k-means, k = 3, initial centers uniform in [0, 8]^4 (seeded),
``--iterations`` iterations T (default 10) with tolerance 0 (the noisy centers keep moving, so
every iteration runs), epsilon 2 per iteration (2T for the job: the newer `leteo-fed kmeans`
refuses a job whose noise check fails at the policy's fewest rows, and the old one has no
``--rows`` / ``--accept-noise`` to tell it more), delta 1e-6, rows clipped to norm 10, a
per-iteration deadline of ``--deadline`` seconds (default 60). Each owner's ledger allows
epsilon 1000, so the jobs of a scenario share one deployment.

Scenarios (each in its own fresh deployment: an untimed warm-up job, then a baseline job without
a fault, then the job with the fault):

- ``owner-stop``: quorum 2. Once iteration 3 (or a later one) is open, site-3 gets SIGINT (an
  operator's Ctrl-C); then, with site-3 started again, a second job where site-3 gets SIGINT
  as soon as its audit log records its decision on iteration 3 (it accepted and owes a share;
  whether the aggregator has its answer yet is a race). Measured: the job's wall time
  StartRound -> final status, with and without the stop, and the time from the stop to the
  end; site-3's audit events on iteration 3 and every iteration's contributors and declines.
  The wait is capped at ``iterations x (deadline + 10)`` seconds from the start; a job still
  open then is reported as "did not finish within X s". A process that is still running 15 s
  after its signal gets it again (up to 4 times, then SIGKILL); the report counts the signals.
- ``aggregator-restart``: quorum 3. The analyst's command ``python -m leteo_fed kmeans
  --aggregator ... --tls-dir ...`` runs as a subprocess; once iteration 3 is open the aggregator
  gets SIGKILL and is started again on its state dir 1 s later. Measured: the command's exit code,
  its last stderr lines, the time from launching it to its exit and whether it wrote the result;
  then the job's final state at the aggregator (GetRound on the restarted one) and when it was
  first seen ended. The job id comes from the aggregator's state database (read-only), because
  the old command does not print it.
- ``csp-restart``: quorum 3. Once iteration 3 is open the CSP gets SIGKILL and is started again
  on its key folder ``--csp-down`` seconds later (default 2). Measured: the job's final state,
  its wall time, the time from the kill to the end and which iterations ran under a new attempt
  id (``-r2`` ...).

All times are wall clock (``time.monotonic``), one run per cell, on whatever machine runs it;
the 1-minute load average before each run is recorded.

    .venv/bin/python benchmarks/recovery_bench.py                 # the working tree, all three
    .venv/bin/python benchmarks/recovery_bench.py --scenario csp-restart --iterations 20
    # committed code only, before and after (the script itself is run from this tree)
    git worktree add --detach /tmp/leteo-after HEAD
    git worktree add --detach /tmp/leteo-before 8cc01c0
    PYTHONPATH=/tmp/leteo-after .venv/bin/python benchmarks/recovery_bench.py --label after
    PYTHONPATH=/tmp/leteo-before .venv/bin/python benchmarks/recovery_bench.py --label before
    git worktree remove --force /tmp/leteo-after; git worktree remove --force /tmp/leteo-before

Writes ``--out``/recovery_<label>.json (default folder out/recovery) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from sklearn.datasets import load_iris

import leteo_fed
from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.errors import PeerUnavailable
from leteo_fed.protocols import kmeans_centers
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.transport.rounds import result_document

NAMES = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
SITES = ("site-1", "site-2", "site-3")
K = 3
EPSILON_PER_ITERATION, DELTA, ROW_NORM = 2.0, 1e-6, 10.0
CENTER_BOX = (0.0, 8.0)
CENTER_SEED = 3
STOP_AT_ITERATION = 3
SCENARIOS = ("owner-stop", "aggregator-restart", "csp-restart")


def note(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the code under test


def code_info() -> dict:
    """Which leteo_fed this process imported, and the git commit of its tree."""
    root = Path(leteo_fed.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = ""
    return {"leteo_fed": leteo_fed.__file__, "root": str(root), "commit": commit}


PROBE = (
    "import json, leteo_fed, aggregator, csp, owner_agent; "
    "print(json.dumps({m.__name__: m.__file__ for m in (leteo_fed, aggregator, csp, owner_agent)}))"
)


def child_imports(cluster: LocalCluster) -> dict:
    """What the spawned services import: their PYTHONPATH, cwd and interpreter from /proc, and
    a probe started as `LocalCluster._spawn` starts them (same interpreter, env, cwd)."""
    procs = {}
    for name, proc in cluster.procs.items():
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
            env = dict(e.decode().split("=", 1) for e in environ if b"=" in e)
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
            procs[name] = {
                "PYTHONPATH": env.get("PYTHONPATH", ""),
                "cwd": os.readlink(f"/proc/{proc.pid}/cwd"),
                "argv": [a.decode() for a in cmdline[:3]],
            }
        except OSError as exc:
            procs[name] = {"error": str(exc)}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cluster.workdir,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = json.loads(probe.stdout) if probe.returncode == 0 else {"error": probe.stderr}
    return {"processes": procs, "probe_modules": modules}


# ------------------------------------------------------------------ deployment and job


def write_parts(folder: Path, seed: int = 20) -> list[Path]:
    """iris split at random (seeded) into one CSV per site."""
    x = load_iris().data
    folder.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(seed).permutation(len(x))
    paths = []
    for i, idx in enumerate(np.array_split(order, len(SITES)), start=1):
        path = folder / f"part-{i}.csv"
        pacsv.write_csv(pa.table({n: x[np.sort(idx), j] for j, n in enumerate(NAMES)}), path)
        paths.append(path)
    return paths


def start_cluster(work: Path) -> tuple[LocalCluster, float]:
    parts = write_parts(work / "data")
    owners = [OwnerSpec(s, p) for s, p in zip(SITES, parts, strict=True)]
    cluster = LocalCluster(work / "run", owners, privacy_budget=(1000.0, 1e-2))
    t0 = time.monotonic()
    cluster.__enter__()
    client = analyst(cluster)
    client.wait_for_owners(len(SITES), timeout=120)
    client.close()
    return cluster, time.monotonic() - t0


def analyst(cluster: LocalCluster) -> AnalystClient:
    return AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))


Job = tuple[KmeansRequest, RoundOptions]  # what the analyst asks, and how


def params(iterations: int, deadline: float, min_owners: int) -> Job:
    lo, hi = CENTER_BOX
    centers = kmeans_centers.random_centers(K, np.full(4, lo), np.full(4, hi), 4, seed=CENTER_SEED)
    return (
        KmeansRequest(
            features=tuple(NAMES),
            k=K,
            centers=tuple(float(v) for row in centers.tolist() for v in row),
            iterations=iterations,
            tolerance=0.0,
        ),
        RoundOptions(
            min_owners=min_owners,
            deadline_seconds=deadline,
            dp_epsilon=EPSILON_PER_ITERATION * iterations,
            dp_delta=DELTA,
            row_norm_bound=ROW_NORM,
        ),
    )


def signal_party(
    cluster: LocalCluster, name: str, sig: int, patience: float = 15.0, tries: int = 4
) -> dict:
    """`LocalCluster.kill` with a chosen signal (the old `kill` sends SIGKILL only), except
    that a process still running `patience` s after the signal gets it again (as an operator
    presses Ctrl-C again), and SIGKILL after `tries` signals: an owner agent once ignored a
    SIGINT for 11 minutes, and `kill`'s untimed wait would have hung the benchmark."""
    proc = cluster.procs.pop(name)
    t0 = time.monotonic()
    sent, killed = 0, False
    while True:
        proc.send_signal(sig)
        sent += 1
        try:
            proc.wait(patience)
            break
        except subprocess.TimeoutExpired:
            if sent >= tries:
                proc.kill()
                proc.wait()
                killed = True
                break
    info = {"signals_sent": sent, "exited_after_seconds": round(time.monotonic() - t0, 3)}
    if killed:
        info["sigkilled"] = True
    if sent > 1:
        note(f"{name} needed {sent} signal(s) {sig} to exit ({info})")
    return info


def iteration_of(message: str) -> int | None:
    at = re.search(r"iteration (\d+) of", message)
    return int(at.group(1)) if at else None


def watch_until(client: AnalystClient, job_id: str, iteration: int, limit: float = 120.0):
    """Poll the job until iteration `iteration` or a later one is open (or the job ended)."""
    end = time.monotonic() + limit
    while True:
        status = client.wait(job_id, 0.02)
        at = iteration_of(status.message)
        if (at is not None and at >= iteration) or status.state != "OPEN":
            return status, at
        if time.monotonic() > end:
            return status, at


def summary(final) -> dict:
    """The job's end: state, message, and per iteration its round id and contributors."""
    out: dict = {"state": final.state, "message": final.message[:400]}
    doc = result_document(final) if final.state == "COMPLETED" else None
    if doc is not None:
        its = doc.get("iterations", [])
        out["iterations_run"] = len(its)
        out["rounds"] = [
            {
                "round_id": it.get("round_id", ""),
                "contributors": it.get("contributors", []),
                "declined": it.get("declined", {}),
            }
            for it in its
        ]
        retried = [
            i for i, it in enumerate(its, start=1) if re.search(r"-r\d+$", it.get("round_id", ""))
        ]
        # a new attempt id holds for the rest of the job: the first one is where it resumed
        out["resumed_at_iteration"] = retried[0] if retried else None
    return out


def audit_until(cluster: LocalCluster, site: str, round_id: str, limit: float = 60.0) -> str:
    """Tail the site's audit log until it records its decision on `round_id`; '' if never."""
    path = cluster.workdir / "config" / f"audit-{site}.jsonl"
    end = time.monotonic() + limit
    offset, buf = 0, b""
    while time.monotonic() < end:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read()
        except OSError:
            chunk = b""
        offset += len(chunk)
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            e = json.loads(line) if line.strip() else {}
            if e.get("round_id") == round_id and e.get("event") in ("decision", "sent"):
                return e["event"] + ("" if e.get("accepted", True) else " (declined)")
        time.sleep(0.0005)
    return ""


def audit_events(cluster: LocalCluster, site: str, round_id: str) -> list[str]:
    """The site's audit events on one round, in order (what it did before it stopped)."""
    path = cluster.workdir / "config" / f"audit-{site}.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    events = [json.loads(x) for x in lines if x.strip()]
    return [e["event"] for e in events if e.get("round_id") == round_id]


def api_job(cluster: LocalCluster, p: Job, cap: float, fault=None, after_accept: str = "") -> dict:
    """Start a job through the analyst API; `fault(cluster)` runs once iteration 3 is open
    (with `after_accept` = a site: once that site's audit log records its decision on
    iteration 3). Wall times from StartRound; the wait is capped at `cap` s from the start."""
    load = os.getloadavg()[0]
    client = analyst(cluster)
    t0 = time.monotonic()
    job_id = client.start(*p).round_id
    run: dict = {"job_id": job_id, "load_1min": round(load, 2), "cap_seconds": cap}
    if fault is not None:
        if after_accept:  # no RPC between the decision and the signal
            seen = audit_until(cluster, after_accept, f"{job_id}-it{STOP_AT_ITERATION}")
            run["trigger"] = f"{after_accept}'s audit log on iteration 3: {seen or 'nothing'}"
            run["fault_at_iteration"] = STOP_AT_ITERATION if seen else None
            is_open = bool(seen)
        else:
            status, at = watch_until(client, job_id, STOP_AT_ITERATION)
            run["fault_at_iteration"] = at
            is_open = status.state == "OPEN"
            if not is_open:
                run["note"] = f"the job ended before the fault: {status.state}"
        run["fault_at_seconds"] = round(time.monotonic() - t0, 3)
        t_fault = time.monotonic()
        if is_open:
            info = fault(cluster)
            run["fault_seconds"] = round(time.monotonic() - t_fault, 3)  # incl. any downtime
            if info:
                run["signal"] = info
            client.close()
            client = analyst(cluster)
    final = None
    while True:  # the services are up again; a refused call is retried within the cap
        left = cap - (time.monotonic() - t0)
        try:
            final = client.wait(job_id, max(0.0, left))
        except PeerUnavailable as exc:
            run.setdefault("unreachable", str(exc)[:300])
            time.sleep(0.5)
            if time.monotonic() - t0 < cap:
                continue
        break
    elapsed = time.monotonic() - t0
    client.close()
    run["wall_seconds"] = round(elapsed, 3)
    if fault is not None:
        run["after_fault_seconds"] = round(time.monotonic() - t_fault, 3)
    if final is None or final.state == "OPEN":
        run["finished"] = False
        run["state"] = "OPEN" if final is not None else "unknown"
        run["message"] = final.message[:400] if final is not None else ""
        run["note"] = f"did not finish within {cap:.0f} s"
    else:
        run["finished"] = True
        run.update(summary(final))
    return run


# ------------------------------------------------------------------ the analyst's command


class Cli:
    """`python -m leteo_fed kmeans` as a subprocess; stderr lines kept with their times."""

    def __init__(self, cluster: LocalCluster, p: Job, out: Path) -> None:
        lo, hi = CENTER_BOX
        request, options = p
        args = [
            "kmeans",
            "--aggregator",
            cluster.addresses["aggregator"],
            "--tls-dir",
            str(cluster.certs),
            "--features",
            ",".join(request.features),
            "--k",
            str(request.k),
            "--rounds",
            str(request.iterations),
            "--init-bounds",
            f"{lo:g},{hi:g}",
            "--init-seed",
            str(CENTER_SEED),
            "--min-owners",
            str(options.min_owners),
            "--deadline",
            f"{options.deadline_seconds:g}",
            "--epsilon",
            f"{options.dp_epsilon:g}",
            "--delta",
            f"{DELTA:g}",
            "--row-norm-bound",
            f"{ROW_NORM:g}",
            "--out",
            str(out),
        ]
        self.out = out
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "leteo_fed", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=cluster.workdir,  # `-m` puts the cwd first on sys.path: not the repo's tree
        )
        self.stderr: list[tuple[float, str]] = []
        self.stdout: list[str] = []
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stderr, True), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, False), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _read(self, stream, is_err: bool) -> None:
        for line in stream:
            if is_err:
                self.stderr.append((round(time.monotonic() - self.t0, 3), line.rstrip()))
            else:
                self.stdout.append(line.rstrip())

    def finish(self, cap: float) -> dict:
        left = cap - (time.monotonic() - self.t0)
        try:
            code: int | None = self.proc.wait(max(0.0, left))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            code = None
        elapsed = time.monotonic() - self.t0
        for t in self._threads:
            t.join(5)
        result = self.out / "kmeans.json"
        doc = json.loads(result.read_text()) if result.exists() else None
        lines = [f"{t:.1f}s {line}" for t, line in self.stderr]
        return {
            "exit_code": code,
            "exited": code is not None,
            "note": "" if code is not None else f"still running after {cap:.0f} s (killed)",
            "wall_seconds": round(elapsed, 3),
            "wrote_result": doc is not None,
            "iterations_run": doc.get("iterations_run") if doc else None,
            "stderr_lines": len(lines),
            "stderr_tail": lines[-8:],
            "unreachable_lines": [x for x in lines if "unreachable" in x.lower()][:3],
        }


def new_job_id(cluster: LocalCluster, known: set[str], cli: Cli, limit: float = 60.0) -> str:
    """The id of a job started after `known` was taken, from the aggregator's state database."""
    db = cluster.aggregator_state / "aggregator.sqlite3"
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if cli.proc.poll() is not None:
            time.sleep(0.5)  # its last lines
            tail = " | ".join(line for _, line in cli.stderr[-5:])
            raise RuntimeError(f"the command exited ({cli.proc.returncode}) with no job: {tail}")
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
                rows = con.execute("SELECT job_id FROM jobs ORDER BY created_unix").fetchall()
            fresh = [r[0] for r in rows if r[0] not in known]
            if fresh:
                return fresh[-1]
        except sqlite3.Error:
            pass
        time.sleep(0.02)
    raise RuntimeError("no new job appeared in the aggregator's state database")


def known_jobs(cluster: LocalCluster) -> set[str]:
    db = cluster.aggregator_state / "aggregator.sqlite3"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
        return {r[0] for r in con.execute("SELECT job_id FROM jobs")}


def job_end_at_aggregator(cluster: LocalCluster, job_id: str, t0: float, cap: float) -> dict:
    """The job's final state as the (restarted) aggregator reports it, and when it was seen."""
    final = None
    while time.monotonic() - t0 < cap:
        client = analyst(cluster)
        try:
            final = client.wait(job_id, max(0.0, cap - (time.monotonic() - t0)))
            if final.state != "OPEN":
                break
        except PeerUnavailable:
            time.sleep(0.5)
        finally:
            client.close()
    seen = time.monotonic() - t0
    if final is None or final.state == "OPEN":
        return {"state": "OPEN" if final else "unknown", "note": f"not ended within {cap:.0f} s"}
    out = summary(final)
    out["seen_ended_at_seconds"] = round(seen, 3)
    return out


def cli_job(cluster: LocalCluster, p: Job, out: Path, cap: float, restart: bool) -> dict:
    load = os.getloadavg()[0]
    known = known_jobs(cluster)
    cli = Cli(cluster, p, out)
    run: dict = {"load_1min": round(load, 2), "cap_seconds": cap}
    job_id = new_job_id(cluster, known, cli)
    run["job_id"] = job_id
    if restart:
        client = analyst(cluster)
        status, at = watch_until(client, job_id, STOP_AT_ITERATION)
        client.close()
        run["fault_at_iteration"] = at
        run["fault_at_seconds"] = round(time.monotonic() - cli.t0, 3)
        if status.state != "OPEN":
            run["note"] = f"the job ended before the kill: {status.state}"
        else:
            run["signal"] = signal_party(cluster, "aggregator", signal.SIGKILL)
            time.sleep(1.0)
            cluster.start_aggregator()
    run["command"] = cli.finish(cap)
    run["job_at_aggregator"] = job_end_at_aggregator(cluster, job_id, cli.t0, cap)
    return run


# ------------------------------------------------------------------ scenarios


def warm_up(cluster: LocalCluster, p: Job, cap: float) -> dict:
    """One untimed job first: the first job of a fresh deployment pays one-off costs."""
    note("warm-up job")
    run = api_job(cluster, p, cap)
    return {k: run.get(k) for k in ("wall_seconds", "state", "iterations_run")}


def owner_stop(work: Path, a: argparse.Namespace) -> dict:
    cluster, startup = start_cluster(work)
    try:
        res: dict = {"startup_seconds": round(startup, 2), "quorum": 2}
        res["child_imports"] = child_imports(cluster)
        cap = a.iterations * (a.deadline + 10)
        p = params(a.iterations, a.deadline, 2)
        res["warm_up"] = warm_up(cluster, p, cap)
        note("owner-stop: baseline job")
        res["baseline"] = api_job(cluster, p, cap)
        note("owner-stop: job with site-3 stopped (SIGINT) once iteration 3 is open")
        res["fault"] = api_job(
            cluster, p, cap, fault=lambda c: signal_party(c, "site-3", signal.SIGINT)
        )
        it3 = f"{res['fault']['job_id']}-it{STOP_AT_ITERATION}"
        res["fault"]["site3_audit_iteration3"] = audit_events(cluster, "site-3", it3)
        # the same once site-3 has accepted iteration 3 (its share is owed)
        cluster.start_owner(cluster.owners[2])
        client = analyst(cluster)
        client.wait_for_owners(len(SITES), timeout=120)
        client.close()
        note("owner-stop: job with site-3 stopped (SIGINT) right after it accepted iteration 3")
        res["fault_after_accept"] = api_job(
            cluster,
            p,
            cap,
            fault=lambda c: signal_party(c, "site-3", signal.SIGINT),
            after_accept="site-3",
        )
        it3 = f"{res['fault_after_accept']['job_id']}-it{STOP_AT_ITERATION}"
        res["fault_after_accept"]["site3_audit_iteration3"] = audit_events(cluster, "site-3", it3)
        return res
    finally:
        cluster.stop()


def aggregator_restart(work: Path, a: argparse.Namespace) -> dict:
    cluster, startup = start_cluster(work)
    try:
        res: dict = {"startup_seconds": round(startup, 2), "quorum": 3}
        res["child_imports"] = child_imports(cluster)
        cap = a.iterations * (a.deadline + 10)
        p = params(a.iterations, a.deadline, 3)
        res["warm_up"] = warm_up(cluster, p, cap)
        note("aggregator-restart: baseline command")
        res["baseline"] = cli_job(cluster, p, work / "out-baseline", cap, restart=False)
        client = analyst(cluster)
        client.wait_for_owners(len(SITES), timeout=120)
        client.close()
        note("aggregator-restart: command with the aggregator killed and restarted")
        res["fault"] = cli_job(cluster, p, work / "out-fault", cap, restart=True)
        return res
    finally:
        cluster.stop()


def csp_restart(work: Path, a: argparse.Namespace) -> dict:
    cluster, startup = start_cluster(work)
    try:
        res: dict = {"startup_seconds": round(startup, 2), "quorum": 3}
        res["child_imports"] = child_imports(cluster)
        cap = a.iterations * (a.deadline + 10)
        p = params(a.iterations, a.deadline, 3)
        res["warm_up"] = warm_up(cluster, p, cap)
        note("csp-restart: baseline job")
        res["baseline"] = api_job(cluster, p, cap)

        def restart(c: LocalCluster) -> dict:
            info = signal_party(c, "csp", signal.SIGKILL)
            time.sleep(a.csp_down)
            c.start_csp()
            return info

        note(f"csp-restart: job with the CSP killed and restarted {a.csp_down:g} s later")
        res["fault"] = api_job(cluster, p, cap, fault=restart)
        return res
    finally:
        cluster.stop()


RUNNERS = {
    "owner-stop": owner_stop,
    "aggregator-restart": aggregator_restart,
    "csp-restart": csp_restart,
}


# ------------------------------------------------------------------ report


def _end(run: dict) -> str:
    if not run.get("finished", True):
        return run.get("note", "did not finish")
    return run.get("state", "?")


def table(report: dict) -> str:
    rows = [f"code: {report['code']['root']} @ {report['code']['commit'][:7]} ({report['label']})"]
    sc = report["scenarios"]
    seen = {
        Path(v["child_imports"]["probe_modules"].get("leteo_fed", "?")).parent.parent.as_posix()
        for v in sc.values()
        if "child_imports" in v
    }
    rows.append(f"spawned services import leteo_fed from: {', '.join(sorted(seen))}")
    if "owner-stop" in sc:
        s = sc["owner-stop"]
        b = s["baseline"]
        rows.append(f"owner-stop     baseline {b['wall_seconds']:.1f} s ({_end(b)})")
        for key, when in (("fault", "iteration 3 open"), ("fault_after_accept", "accepted it3")):
            if key not in s:
                continue
            f = s[key]
            declined = [r["declined"].get("site-3", "") for r in f.get("rounds", [])]
            sig = f.get("signal", {})
            if sig.get("signals_sent", 1) > 1:
                rows.append(
                    f"               ! site-3 did not exit on the first SIGINT: "
                    f"{sig['signals_sent']} signals, exited after "
                    f"{sig['exited_after_seconds']:.1f} s"
                )
            rows.append(
                f"               site-3 SIGINT ({when}; its it3 audit: "
                f"{','.join(f.get('site3_audit_iteration3', []))}): {f['wall_seconds']:.1f} s "
                f"({_end(f)}), {f.get('after_fault_seconds', 0):.1f} s after the stop"
            )
            rows += [f"                 it{i}: {d[:110]}" for i, d in enumerate(declined, 1) if d][
                :2
            ]
    if "aggregator-restart" in sc:
        s = sc["aggregator-restart"]
        b, f = s["baseline"], s["fault"]
        cmd, agg = f["command"], f["job_at_aggregator"]
        last = cmd["stderr_tail"][-1] if cmd["stderr_tail"] else ""
        rows.append(
            f"aggregator     baseline command exit {b['command']['exit_code']} in "
            f"{b['command']['wall_seconds']:.1f} s; killed in iteration "
            f"{f.get('fault_at_iteration')}: command exit {cmd['exit_code']} after "
            f"{cmd['wall_seconds']:.1f} s, result written: {cmd['wrote_result']}; "
            f"job at the aggregator: {agg.get('state')}"
            + (
                f" (seen at {agg['seen_ended_at_seconds']:.1f} s)"
                if "seen_ended_at_seconds" in agg
                else ""
            )
        )
        rows.append(f"               last stderr line: {last[:160]}")
    if "csp-restart" in sc:
        s = sc["csp-restart"]
        b, f = s["baseline"], s["fault"]
        rows.append(
            f"csp-restart    baseline {b['wall_seconds']:.1f} s ({_end(b)}); CSP killed in "
            f"iteration {f.get('fault_at_iteration')}: {_end(f)} after {f['wall_seconds']:.1f} s "
            f"({f.get('after_fault_seconds', 0):.1f} s after the kill), resumed under a new "
            f"attempt at iteration {f.get('resumed_at_iteration')}"
        )
        if f.get("state") != "COMPLETED":
            rows.append(f"               message: {f.get('message', '')[:160]}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", choices=("all", *SCENARIOS), default="all")
    ap.add_argument("--iterations", type=int, default=10, help="k-means iterations (default 10)")
    ap.add_argument(
        "--deadline", type=float, default=60.0, help="per-iteration deadline, s (default 60)"
    )
    ap.add_argument(
        "--csp-down", type=float, default=2.0, help="seconds the CSP stays down (default 2)"
    )
    ap.add_argument("--out", type=Path, default=Path("out/recovery"), help="output folder")
    ap.add_argument(
        "--label", default="", help="name of this run in the file name (default: git commit)"
    )
    a = ap.parse_args(argv)
    code = code_info()
    label = a.label or code["commit"][:7] or "unknown"
    scenarios = SCENARIOS if a.scenario == "all" else (a.scenario,)
    report: dict = {
        "label": label,
        "code": code,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "args": {
            "iterations": a.iterations,
            "deadline": a.deadline,
            "csp_down": a.csp_down,
            "epsilon_per_iteration": EPSILON_PER_ITERATION,
            "delta": DELTA,
            "row_norm_bound": ROW_NORM,
            "k": K,
            "fault_at_iteration": STOP_AT_ITERATION,
        },
        "scenarios": {},
    }
    note(f"code under test: {code['leteo_fed']} ({code['commit'][:7]})")
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"recovery_{label}.json"
    for name in scenarios:
        with tempfile.TemporaryDirectory(prefix=f"recovery-{name}-") as tmp:
            t0 = time.monotonic()
            try:
                report["scenarios"][name] = RUNNERS[name](Path(tmp), a)
            except Exception as exc:  # a broken run is reported, the others still run
                report["scenarios"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                note(f"{name} failed: {exc}")
            report["scenarios"][name]["scenario_seconds"] = round(time.monotonic() - t0, 1)
        tmp_path = path.with_suffix(".json.tmp")
        tmp_path.write_text(json.dumps(report, indent=2))
        os.replace(tmp_path, path)
    ok = {k: v for k, v in report["scenarios"].items() if "error" not in v}
    print(table({**report, "scenarios": ok}))
    for name, v in report["scenarios"].items():
        if "error" in v:
            print(f"{name}: ERROR {v['error']}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
