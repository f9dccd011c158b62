"""`leteo-fed jobs` and `leteo-fed result`: an analyst's jobs survive its own command.

Every analyst command prints its job id first; if the command is interrupted, or the
aggregator restarts for longer than the command waits, the job goes on at the aggregator and
`leteo-fed result JOB_ID` writes the same file the command would have written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from leteo_fed.cli.options import SubParsers, add_aggregator_address, add_tls, analyst_client

# the file each command writes into its --out folder, by the job's label
DEFAULT_RESULTS = Path("out")


def add_parsers(sub: SubParsers) -> None:
    p = sub.add_parser(
        "jobs",
        help="list your jobs at the aggregator (id, protocol, state, progress, owners)",
        description="Your most recent jobs at the aggregator, newest first: running ones with "
        "their progress, ended ones with how they ended (kept across aggregator restarts).",
    )
    add_aggregator_address(p)
    add_tls(p, "analyst", "analyst")
    p.add_argument("--limit", type=int, default=20, help="how many jobs (default: 20)")
    p.add_argument("--json", action="store_true", help="one JSON object per job")
    p.set_defaults(handler=list_jobs)

    p = sub.add_parser(
        "result",
        help="write a job's result, as the command that started it would have",
        description="Fetch the result of a job by its id (printed first by every analyst "
        "command) and write it into --out as that command would: pca.json, dca.json, "
        "kmeans.json, stats.json, ldp.json or result.json (crosstab, linreg, logreg, "
        "quantiles, naive-bayes, LDP naive Bayes), with the plot the command draws "
        "(crosstab.png, coefficients.png, quantiles.png, naive_bayes.png). Exit 1 if the job "
        "failed or still runs.",
    )
    p.add_argument("job_id", help="the job id, e.g. pca-0123456789ab")
    add_aggregator_address(p)
    add_tls(p, "analyst", "analyst")
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_RESULTS,
        help=f"output folder (default: {DEFAULT_RESULTS})",
    )
    p.add_argument(
        "--no-plot",
        action="store_true",
        help="write no plot (a plot needs the [plots] extra; without it the result alone is "
        "written, with a note)",
    )
    p.set_defaults(handler=fetch_result)


def list_jobs(args: argparse.Namespace) -> int:
    with analyst_client(args) as client:
        jobs = client.jobs(args.limit)
    if args.json:
        for j in jobs:
            print(
                json.dumps(
                    {
                        "job_id": j.job_id,
                        "protocol": j.protocol,
                        "analyst": j.analyst,
                        "state": j.state,
                        "progress": j.message,
                        "started_unix": j.started_unix,
                        "invited": list(j.invited),
                        "owners": list(j.submitted),
                    }
                )
            )
        return 0
    if not jobs:
        print("no jobs", file=sys.stderr)
        return 0
    rows = [("job", "protocol", "analyst", "state", "started", "owners", "progress")]
    for j in jobs:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j.started_unix))
        owners = f"{len(j.submitted)}/{len(j.invited)}"
        rows.append((j.job_id, j.protocol, j.analyst, j.state, started, owners, j.message))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        print("  ".join([*cells, r[-1]]).rstrip())
    return 0


def fetch_result(args: argparse.Namespace) -> int:
    from leteo_fed.client import job_result
    from leteo_fed.fileio import atomic_write_json

    with analyst_client(args) as client:
        status = client.job(args.job_id)
    typed = job_result(status)
    result = typed.to_dict()
    name = result_file(status.protocol)
    out = Path(args.out) / name
    atomic_write_json(out, result)
    print(json.dumps({"job_id": args.job_id, "state": status.state, "file": str(out)}))
    from leteo_fed.cli.round_output import print_release_truth

    print_release_truth(result)
    print(f"wrote {out}", file=sys.stderr)
    if not args.no_plot:
        _write_plot(
            status.protocol, getattr(typed, "wire", status.protocol), result, Path(args.out)
        )
    return 0


# The commands' own plot functions, by the wire name of the result they draw (`Result.wire`):
# `leteo-fed result` draws what the command would have drawn, and a command made from a
# statistic's declaration (`cli.statistics`) finds its figure here. A protocol with a
# `plot_file` has an entry here (tests/test_architecture.py).
PLOTTERS: dict[str, tuple[str, str]] = {
    "correlation": ("leteo_fed.cli.plots", "plot_correlation"),
    "crosstab": ("leteo_fed.cli.plots", "plot_counts"),
    "ldp_naive_bayes": ("leteo_fed.cli.plots", "plot_ldp_naive_bayes"),
    "ldp_points": ("leteo_fed.cli.plots", "plot_ldp_points"),
    "linreg": ("leteo_fed.cli.plots", "plot_regression"),
    "logreg": ("leteo_fed.cli.plots", "plot_logistic"),
    "naive_bayes": ("leteo_fed.cli.plots", "plot_naive_bayes"),
    "quantiles": ("leteo_fed.cli.plots", "plot_quantiles"),
}


def _write_plot(label: str, wire: str, result: dict, out: Path) -> None:
    import importlib

    from leteo_fed import extras
    from leteo_fed.protocols import registry

    protocol = next((p for p in registry.all_protocols() if p.result_file(label)), None)
    if protocol is None or protocol.plot_file is None or wire not in PLOTTERS:
        return
    if not extras.installed("matplotlib"):
        print(f"no {protocol.plot_file}: the plot needs the [plots] extra", file=sys.stderr)
        return
    module, name = PLOTTERS[wire]
    getattr(importlib.import_module(module), name)(result, out / protocol.plot_file)
    print(f"wrote {out / protocol.plot_file}", file=sys.stderr)


def result_file(label: str) -> str:
    """The file a job's result goes to, as its protocol names it (pca.json, kmeans.json, ...)."""
    from leteo_fed.protocols import registry

    for protocol in registry.all_protocols():
        name = protocol.result_file(label)
        if name is not None:
            return name
    return f"{label or 'result'}.json"
