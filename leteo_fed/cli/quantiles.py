"""`leteo-fed quantiles`: percentiles of numeric columns over public bounds, from a hierarchical
histogram, against running services; writes OUT/result.json and OUT/quantiles.png (the [plots]
extra; or --no-plot)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from leteo_fed.cli.noise import (
    add_noise_flags,
    check_locally,
    print_preview,
    print_verdict,
)
from leteo_fed.cli.options import (
    DP_DELTA_DEFAULT,
    DP_GROUP_TITLE,
    SubParsers,
    add_aggregator_address,
    add_deadline,
    add_owner_filter,
    add_quorum,
    add_result_output,
    add_tls,
    analyst_client,
    bounds,
    csv_list,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write
from leteo_fed.defaults import DP_DEFAULT_SCALE_BITS
from leteo_fed.errors import ConfigError

DEFAULT_OUT = Path("out/quantiles")
RESULT_FILE = "result.json"
PLOT_FILE = "quantiles.png"
DEFAULT_PERCENTILES = "10,25,50,75,90"


def percentile_list(text: str) -> list[float]:
    try:
        return [float(v) for v in csv_list(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected numbers in [0, 100]: {exc}") from exc


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "quantiles",
        help="percentiles of numeric columns over public bounds across the owners",
        description="Start a quantiles round: every owner sends the Paillier-encrypted counts "
        "of a histogram of each column over the public bounds (with --dp-epsilon, every node "
        "of a dyadic tree over it, with noise); the aggregator learns only the pooled counts "
        "and reads the percentiles off them (without DP within one bin width of the exact "
        "ones). Writes OUT/result.json and the histogram with the percentiles OUT/quantiles.png.",
    )
    add_aggregator_address(p)
    p.add_argument("--features", type=csv_list, required=True, help="comma-separated columns")
    p.add_argument(
        "--bounds",
        type=bounds,
        required=True,
        metavar="LO,HI",
        help="public bounds of every column: a value outside refuses a non-DP round and is "
        "clamped to them in a DP one",
    )
    p.add_argument(
        "--percentiles",
        type=percentile_list,
        default=percentile_list(DEFAULT_PERCENTILES),
        help=f"comma-separated percentiles in [0, 100] (default: {DEFAULT_PERCENTILES})",
    )
    p.add_argument(
        "--bins",
        type=int,
        default=0,
        help="leaf bins, a power of two up to 4096 (default: 64); the percentiles' resolution "
        "is (HI - LO) / bins",
    )
    add_quorum(p, "owners needed for a result")
    add_deadline(p, "round deadline in seconds")
    p.add_argument(
        "--scale-bits",
        type=int,
        default=0,
        help="fixed-point fraction bits of the counts (default: 0, whole counts; with DP: "
        f"{DP_DEFAULT_SCALE_BITS}, the resolution of the noise)",
    )
    add_owner_filter(p)
    add_result_output(p, DEFAULT_OUT, RESULT_FILE, PLOT_FILE)
    g = p.add_argument_group(DP_GROUP_TITLE)
    g.add_argument(
        "--dp-epsilon", type=float, default=None, help="release the tree (epsilon, delta)-DP"
    )
    g.add_argument("--dp-delta", type=float, default=None, help=f"DP delta ({DP_DELTA_DEFAULT})")
    add_noise_flags(p, "the count below each percentile (its rank)")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def build_request(
    features: list[str], bounds_: tuple[float, float], percentiles: list[float], bins: int
) -> Any:
    from leteo_fed.protocols.quantiles import QuantilesRequest

    if bins < 0:
        raise ConfigError("--bins must be a positive power of two", field="bins")
    lo, hi = bounds_
    return QuantilesRequest(
        features=tuple(features),
        lower=lo,
        upper=hi,
        percentiles=tuple(percentiles),
        bins=bins,
    )


def run(args: argparse.Namespace) -> int:
    from leteo_fed import extras

    if not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the plot, before any round is started

    request = build_request(args.features, args.bounds, args.percentiles, args.bins)
    options = round_options(args)
    # planned locally first: bad bounds or bins are refused before anyone is contacted
    from leteo_fed.protocols.quantiles import noise_preview

    stop = check_locally(request, options, noise_preview, args, _dry_run, plan_without_dp=True)
    if stop is not None:
        return stop
    summary = ("round_id", "owners", "percentiles", "quantiles", "rank_error")
    run_and_write(args, request, options, analyst_client, summary, plot_quantiles)
    return 0


def _dry_run(plan: Any, rows: int | None) -> int:
    """Print what the round's noise does to the ranks; nothing is sent."""
    from leteo_fed.protocols.quantiles import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    print(
        f"each of the {doc['tree_levels']} levels' nodes carries noise of std "
        f"{doc['noise_std_per_node']:.4g} (epsilon {doc['epsilon']:g}, delta {doc['delta']:g}); "
        f"the count below a percentile at most {doc['rank_error_at_most']:.4g} (1 std); bins "
        f"{doc['bin_width']:.4g} wide",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N to check the noise against your row count", file=sys.stderr)
    print_verdict(doc)
    return 0


def plot_quantiles(result: dict, path: Path) -> None:
    """A panel per feature: the released histogram, a vertical marker per percentile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    features = result["features"]
    fig, axes = plt.subplots(
        len(features), 1, figsize=(7.0, 2.8 * len(features) + 0.6), dpi=110, squeeze=False
    )
    lo, width = result["lower"], result["bin_width"]
    dp = result.get("dp")
    for ax, name in zip(axes[:, 0], features, strict=True):
        counts = np.asarray(result["histogram"][name], dtype=np.float64)
        left = lo + width * np.arange(len(counts))
        ax.bar(left, counts, width, align="edge", color="0.75", edgecolor="0.5", linewidth=0.3)
        for p, q in zip(result["percentiles"], result["quantiles"][name], strict=True):
            ax.axvline(q, color="tab:red", linewidth=1)
            ax.annotate(
                f"p{p:g}",
                (q, 1),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize="small",
                color="tab:red",
            )
        ax.set_ylabel("count")
        ax.set_title(f"{name}: n = {result['n'][name]:.0f}", fontsize="medium")
    axes[-1, 0].set_xlabel("value")
    title = f"percentiles, {len(result['owners'])} owners, {result['bins']} bins"
    if dp:
        title += f", ε = {dp['epsilon']:g}"
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)
