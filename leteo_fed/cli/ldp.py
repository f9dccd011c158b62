"""Local differential privacy: `ldp simulate`, `ldp collect` and `demo ldp`.

Every record is perturbed where it lives; the aggregator (or, when planning, this process) only
estimates frequencies or a mean from the reports, with a standard error for each estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from leteo_fed import extras
from leteo_fed.cli.noise import add_noise_flags, print_preview, print_verdict, refuse_drowned_round
from leteo_fed.cli.options import (
    SubParsers,
    add_aggregator_address,
    add_demo_insecure,
    add_demo_owners,
    add_out_folder,
    add_tls,
    analyst_client,
    bounds,
    csv_list,
    set_handler,
)
from leteo_fed.cli.progress import ProgressPrinter
from leteo_fed.defaults import MIN_QUORUM_LDP

LDP_MECHANISMS = ["grr", "sue", "oue", "she", "the", "olh", "laplace", "duchi", "pm", "hm"]


def add_parsers(sub: SubParsers, demo: SubParsers) -> None:
    """`demo ldp`, then `ldp simulate` and `ldp collect`."""
    p = demo.add_parser(
        "ldp",
        help="local-DP collection demo: N owners perturb every record, the aggregator estimates",
        description="Start a CSP, an aggregator and N owner agents (each with a persistent privacy "
        "ledger), split a CSV across them, collect one column under a local-DP mechanism, and "
        "write OUT/ldp.json plus OUT/ldp_estimates.png (true vs estimated, +-2 standard errors).",
    )
    _add_ldp_args(p, Path("out/demo-ldp"))
    add_demo_owners(p)
    add_demo_insecure(p, "run")
    set_handler(p, run)

    ldp = sub.add_parser("ldp", help="local differential privacy").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    p = ldp.add_parser(
        "simulate",
        help="perturb and estimate one column in this process, to plan epsilon",
        description="Perturb every record of one column with a local-DP mechanism and estimate "
        "frequencies (grr, sue, oue, she, the, olh) or the mean (laplace, duchi, pm, hm; needs "
        "--bounds), with standard errors from each mechanism's variance formula. Writes JSON.",
    )
    _add_ldp_args(p, Path("out/ldp/est.json"))
    p.add_argument("--seed", type=int, default=None, help="seed, for reproducible planning runs")
    set_handler(p, run)

    p = ldp.add_parser(
        "collect",
        help="collect one column from running owner agents",
        description="Ask the aggregator for an LDP collection: every owner checks and charges its "
        "privacy ledger, perturbs every record and streams the reports. Writes OUT/ldp.json.",
    )
    add_aggregator_address(p)
    _add_column_and_mechanism(p)
    p.add_argument(
        "--domain", type=csv_list, default=None, help="frequency oracles: the public values"
    )
    _add_bounds(p)
    _add_consistency(p)
    p.add_argument(
        "--min-owners",
        type=int,
        default=MIN_QUORUM_LDP,
        help=f"minimum number of owners (default: {MIN_QUORUM_LDP})",
    )
    add_out_folder(p, Path("out/ldp"))
    add_noise_flags(p, "each frequency or the mean")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def _add_column_and_mechanism(p: argparse.ArgumentParser) -> None:
    p.add_argument("--column", required=True, help="column to collect")
    p.add_argument("--mechanism", required=True, choices=LDP_MECHANISMS, help="LDP mechanism")
    p.add_argument("--epsilon", type=float, required=True, help="per-record epsilon")


def _add_bounds(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bounds",
        type=bounds,
        default=None,
        metavar="LO,HI",
        help="numeric mechanisms: the public range, e.g. --bounds -1,1",
    )


def _add_consistency(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--consistency", action="store_true", help="also report non-negative counts summing to n"
    )


def _add_ldp_args(p: argparse.ArgumentParser, default_out: Path) -> None:
    """A column of a local file: `ldp simulate` and `demo ldp`."""
    p.add_argument("--data", type=Path, required=True, help="CSV or Parquet file")
    _add_column_and_mechanism(p)
    _add_bounds(p)
    p.add_argument(
        "--domain",
        type=csv_list,
        default=None,
        help="frequency oracles: the public values (default: the values found in the data)",
    )
    _add_consistency(p)
    p.add_argument("--out", type=Path, default=default_out, help=f"output (default: {default_out})")


def run(args: argparse.Namespace) -> int:
    """Collect from running owners, run the demo, or simulate in this process."""
    if args.command == "ldp" and args.action == "collect":
        return _collect(args)
    if args.command == "demo":
        extras.require("matplotlib")  # the estimates plot
    from leteo_fed.demo import ldp_runner

    opts = ldp_runner.LdpOptions(
        data=args.data,
        column=args.column,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        bounds=args.bounds,
        domain=args.domain,
        seed=getattr(args, "seed", None),
        out=args.out,
        owners=getattr(args, "owners", ldp_runner.LdpOptions.owners),
        consistency=args.consistency,
        insecure=getattr(args, "insecure", False),
    )
    if args.command == "demo":
        ldp_runner.run_demo(opts)
        return 0
    doc = ldp_runner.simulate(opts)
    keys = ("estimates", "std_errors") if "estimates" in doc else ("mean", "std_error")
    print(
        json.dumps(
            {
                "mechanism": doc["mechanism"],
                "epsilon": doc["epsilon"],
                "n": doc["n"],
                **{k: doc[k] for k in keys},
            }
        )
    )
    return 0


def _collect(args: argparse.Namespace) -> int:
    from leteo_fed.client import RoundOptions, output_file
    from leteo_fed.fileio import atomic_write_json
    from leteo_fed.protocols.ldp_collection import LdpRequest

    request = LdpRequest(
        column=args.column,
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        domain=tuple(args.domain or ()),
        lower=args.bounds[0] if args.bounds else None,
        upper=args.bounds[1] if args.bounds else None,
        consistency=args.consistency,
    )
    options = RoundOptions(min_owners=args.min_owners)
    preview = _noise_preview(request, options)
    if args.dry_run:
        return _dry_run(preview, args.rows)
    refuse_drowned_round(None, preview, args)
    progress = ProgressPrinter()
    with analyst_client(args) as client:
        result = client.run(request, options, on_tick=progress.tick).to_dict()
    progress.done()
    atomic_write_json(Path(args.out) / output_file(request), result)
    print(json.dumps({k: result[k] for k in ("round_id", "owners", "n")}))
    return 0


def _noise_preview(request, options):
    """The collection's noise preview as a (plan, rows) -> document function: the public
    parameters are checked exactly as the aggregator will check them."""
    from leteo_fed.protocols.ldp_collection import noise_preview, spec_from_request

    spec = spec_from_request(request)
    quorum = max(options.min_owners, MIN_QUORUM_LDP)
    return lambda _plan, rows: noise_preview(spec, rows, quorum)


def _dry_run(preview, rows: int | None) -> int:
    """Print the standard error of each estimate; nothing is sent."""
    doc = print_preview(None, preview, rows)
    print(
        f"each report carries variance {doc['variance_per_report']:.4g} (epsilon "
        f"{doc['epsilon']:g}, {doc['mechanism']})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N (the records collected) for each estimate's error", file=sys.stderr)
    elif "frequency_std_error" in doc:
        print(
            f"  each frequency +/- {doc['frequency_std_error']:.4g} (1 std; "
            f"+/- {doc['count_std_error']:.4g} records)",
            file=sys.stderr,
        )
    else:
        print(f"  the mean +/- {doc['mean_std_error']:.4g} (1 std, at most)", file=sys.stderr)
    print_verdict(doc)
    return 0
