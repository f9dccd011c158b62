"""The NVIDIA FLARE side of ``federated_stats_bench.py``: its federated statistics in its simulator.

Run by ``federated_stats_bench.py`` in a child process (the interpreter given by
``--flare-python``, default the benchmark's own), never imported by it, so FLARE's simulator, its
logging and its threads stay out of the benchmark's process. It reads the same per-site CSV files
the LETEO-Fed owners read (``DATA_DIR/site-N.csv``), runs the FLARE jobs named by ``--jobs``
(count + mean; histogram; quantiles; the benchmark runs one per process) with ``FedStatsRecipe``
and ``SimEnv`` (server and sites in one simulator run per job), times each job, and writes one
JSON document: per job the wall time, the task phase from the server's log, the statistics file
FLARE's server wrote (global and per-site values), and the facts of the t-digest each site sent
(recorded by ``SiteStatistics`` itself, see ``_sent``).

Needs ``nvflare`` (tested: 2.9.0), ``pandas`` and, for quantiles, ``fastdigest`` < 0.6 (FLARE's
``DFStatisticsCore.quantiles`` calls ``TDigest(values)`` and ``compress``, an API that
fastdigest 0.6 removed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import pandas as pd
from nvflare.apis.fl_context import FLContext
from nvflare.app_opt.statistics.df.df_core_statistics import DFStatisticsCore
from nvflare.recipe.fedstats import FedStatsRecipe
from nvflare.recipe.sim_env import SimEnv

DATASET = "adult"


class SiteStatistics(DFStatisticsCore):
    """A site's local statistics over its own CSV file (``DATA_DIR/<site name>.csv``).

    Loads only the benchmark's numeric columns, so FLARE's feature list is exactly those.
    """

    def __init__(self, data_dir: str, columns: list[str], record_dir: str):
        super().__init__()
        # FLARE rebuilds this object on each site from the attributes named like the arguments
        self.data_dir = data_dir
        self.columns = list(columns)
        self.record_dir = record_dir

    def initialize(self, fl_ctx: FLContext) -> None:
        site = fl_ctx.get_identity_name()
        self._site = site
        path = os.path.join(self.data_dir, f"{site}.csv")
        frame = pd.read_csv(path, usecols=self.columns)
        self.data = {DATASET: frame[self.columns].astype("float64")}

    def quantiles(self, dataset_name: str, feature_name: str, percents: list) -> dict:
        """FLARE's own local quantiles; also records what its digest tells the server."""
        result = super().quantiles(dataset_name, feature_name, percents)
        self._sent(dataset_name, feature_name, result)
        return result

    def _sent(self, dataset_name: str, feature_name: str, result: dict) -> None:
        """Write down the t-digest this site sends (no privacy filter touches it) next to the
        site's true local min and max, so the benchmark can say what the server learns."""
        digest = result.get("digest_coord") or {}
        centroids = digest.get("centroids", [])
        values = self.data[dataset_name][feature_name] if self.data else pd.Series(dtype=float)
        record = {
            "feature": feature_name,
            "local_count": int(values.count()),
            "local_min": float(values.min()),
            "local_max": float(values.max()),
            "centroids": len(centroids),
            "singleton_centroids": sum(1 for c in centroids if c.get("c") == 1.0),
            "first_centroid": centroids[0] if centroids else None,
            "last_centroid": centroids[-1] if centroids else None,
        }
        folder = Path(self.record_dir)
        folder.mkdir(parents=True, exist_ok=True)
        record["site"] = self._site
        (folder / f"{self._site}.{feature_name}.json").write_text(json.dumps(record))


def job_configs(args: argparse.Namespace) -> dict[str, dict]:
    """One FLARE statistics config per benchmark job (FLARE adds count to every job itself)."""
    histogram = {"*": {"bins": args.bins, "range": [args.lower, args.upper]}}
    return {
        "count_mean": {"count": {}, "sum": {}, "mean": {}},  # its global mean needs sum
        "histogram": {"histogram": histogram},
        "quantiles": {"quantile": {"*": [p / 100.0 for p in args.percentiles]}},
    }


def run_job(
    name: str, config: dict, sites: list[str], args: argparse.Namespace, workspace: Path
) -> dict:
    """Run one FLARE statistics job in the simulator; its wall time and the server's output."""
    record_dir = workspace / f"sent_{name}"
    recipe = FedStatsRecipe(
        name=f"bench_{name}",
        stats_output_path="statistics/stats.json",
        sites=sites,
        statistic_configs=config,
        stats_generator=SiteStatistics(
            str(args.data_dir.resolve()), args.features, str(record_dir.resolve())
        ),
        min_count=args.min_count,
    )
    env = SimEnv(clients=sites, num_threads=len(sites), workspace_root=str(workspace))
    start = time.perf_counter()
    recipe.execute(env=env)
    seconds = time.perf_counter() - start
    found = sorted((workspace / f"bench_{name}").rglob("stats.json"))
    if not found:
        raise SystemExit(f"FLARE job {name}: no statistics file under {workspace}")
    with open(found[0]) as fh:
        output = json.load(fh)
    sent = [json.loads(p.read_text()) for p in sorted(record_dir.glob("*.json"))]
    return {
        "seconds": seconds,
        "task_phase_seconds": task_phase(workspace / f"bench_{name}" / "server" / "log.txt"),
        "output": output,
        "output_file": str(found[0]),
        "sent": sent,
    }


def task_phase(server_log: Path) -> float | None:
    """Seconds from the server's first task assignment to its last processed site result: the
    job without the simulator's start and stop (it includes FLARE's client polling interval)."""
    if not server_log.is_file():
        return None
    first = last = None
    for line in server_log.read_text(errors="replace").splitlines():
        if "assigned task to client" in line or "finished processing client result" in line:
            try:
                stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            except ValueError:
                continue
            if first is None and "assigned task" in line:
                first = stamp
            if "finished processing" in line:
                last = stamp
    if first is None or last is None:
        return None
    return (last - first).total_seconds()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="holds site-1.csv, ...")
    parser.add_argument("--sites", type=int, required=True)
    parser.add_argument("--features", required=True, help="comma-separated numeric columns")
    parser.add_argument("--bins", type=int, required=True)
    parser.add_argument("--lower", type=float, required=True)
    parser.add_argument("--upper", type=float, required=True)
    parser.add_argument("--percentiles", required=True, help="comma-separated, in [0, 100]")
    parser.add_argument("--min-count", type=int, default=10, help="FLARE's MinCountCleanser")
    parser.add_argument(
        "--jobs", default="count_mean,histogram,quantiles", help="which of the jobs to run"
    )
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.features = [f for f in args.features.split(",") if f]
    args.percentiles = [float(p) for p in args.percentiles.split(",") if p]
    sites = [f"site-{i}" for i in range(1, args.sites + 1)]
    missing = [s for s in sites if not (args.data_dir / f"{s}.csv").is_file()]
    if missing:
        raise SystemExit(f"--data-dir {args.data_dir}: no {', '.join(missing)} CSV file")
    configs = job_configs(args)
    wanted = [j for j in args.jobs.split(",") if j]
    unknown = sorted(set(wanted) - set(configs))
    if unknown:
        raise SystemExit(f"--jobs: unknown {', '.join(unknown)}; known: {', '.join(configs)}")
    jobs = {}
    for name in wanted:
        jobs[name] = run_job(name, configs[name], sites, args, args.workspace)
        print(f"FLARE {name}: {jobs[name]['seconds']:.1f} s", file=sys.stderr, flush=True)
    import nvflare

    doc = {"nvflare_version": nvflare.__version__, "sites": sites, "jobs": jobs}
    args.out.write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
