"""`leteo-fed stats`: federated weighted mean and variance per column, against running services."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leteo_fed.cli.noise import (
    add_noise_flags,
    check_locally,
    print_preview,
    print_verdict,
)
from leteo_fed.cli.options import (
    SubParsers,
    add_aggregator_address,
    add_deadline,
    add_dp_flags,
    add_features,
    add_owner_filter,
    add_quorum,
    add_tls,
    add_value_bound,
    analyst_client,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write

DEFAULT_OUT = Path("out/stats")


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "stats",
        help="weighted mean and variance per column across the owners",
        description="Start a weighted-statistics round: every owner sends its Paillier-encrypted "
        "total weight, weighted sums of x and x^2 and its row count; the aggregator learns only "
        "the pooled means, variances, total weight and row count (with --dp-epsilon, noisy).",
    )
    add_aggregator_address(p)
    add_features(p)
    p.add_argument(
        "--weight-column", default="", help="column of row weights (default: every row weighs 1)"
    )
    p.add_argument(
        "--weight-bound",
        type=float,
        default=0.0,
        help="public bound on every weight; larger weights are refused (clipped to it in DP "
        "rounds) (default: 1)",
    )
    add_quorum(p, "owners needed for a result")
    add_deadline(p, "round deadline in seconds")
    add_value_bound(p)
    p.add_argument("--scale-bits", type=int, default=0, help="fixed-point fraction bits")
    add_owner_filter(p)
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output folder: writes OUT/stats.json (default: {DEFAULT_OUT})",
    )
    add_dp_flags(p, bounds=True)
    add_noise_flags(p, "each mean and variance")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    from leteo_fed.protocols.weighted_stats import WeightedStatsRequest

    request = WeightedStatsRequest(
        features=tuple(args.features),
        weight_column=args.weight_column,
        weight_bound=args.weight_bound,
    )
    options = round_options(args)
    from leteo_fed.protocols.weighted_stats import noise_preview

    stop = check_locally(request, options, noise_preview, args, _dry_run)
    if stop is not None:
        return stop
    summary = ("round_id", "owners", "n_rows", "means", "variances")
    run_and_write(args, request, options, analyst_client, summary)
    return 0


def _dry_run(plan, rows: int | None) -> int:
    """Print what the round's noise does to each mean and variance; nothing is sent."""
    from leteo_fed.protocols.weighted_stats import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    sigma = doc["noise_std_per_sum"]
    print(
        f"each released sum carries noise of std {sigma:.4g} (epsilon {doc['epsilon']:g}, "
        f"delta {doc['delta']:g}, rows clipped to {doc['row_norm_bound']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each mean and variance", file=sys.stderr)
    else:
        for f in plan.features:
            print(
                f"  {f}: mean +/- {doc['mean_std_error'][f]:.4g}, variance +/- "
                f"{doc['variance_std_error'][f]:.4g} (1 std, for a column near 0)",
                file=sys.stderr,
            )
    print_verdict(doc)
    return 0
