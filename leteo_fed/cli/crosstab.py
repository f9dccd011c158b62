"""`leteo-fed crosstab`: counts of 1 to 3 columns over public domains and bins, against running
services; writes OUT/result.json and OUT/crosstab.png (the [plots] extra; or --no-plot)."""

from __future__ import annotations

import argparse
import math
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
    csv_list,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write
from leteo_fed.defaults import DP_DEFAULT_SCALE_BITS
from leteo_fed.errors import ConfigError

DEFAULT_OUT = Path("out/crosstab")
RESULT_FILE = "result.json"
PLOT_FILE = "crosstab.png"


def column_values(text: str) -> tuple[str, list[str]]:
    """`COL=v1,v2,...` split on the FIRST '=' (a value may contain '=' or '<'; a column name
    cannot contain '='); values are comma-separated and stripped."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    values = [v.strip() for v in rest.split(",")]
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected COL=v1,v2,... got {text!r}")
    if not rest.strip() or any(not v for v in values):
        raise argparse.ArgumentTypeError(f"column '{name}': empty value in {rest!r}")
    return name, values


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "crosstab",
        help="counts of 1 to 3 columns over public domains and bins across the owners",
        description="Start a cross-tabulation round: every owner sends the Paillier-encrypted "
        "count of its rows in every cell of the public grid (zeros included); the aggregator "
        "learns only the pooled counts (with --dp-epsilon, noisy, non-negative and consistent "
        "with their margins). Writes OUT/result.json and the bar chart OUT/crosstab.png.",
    )
    add_aggregator_address(p)
    p.add_argument(
        "--columns",
        type=csv_list,
        required=True,
        help="1 to 3 comma-separated columns; each needs one --domain or --edges",
    )
    p.add_argument(
        "--domain",
        type=column_values,
        action="append",
        default=[],
        metavar="COL=V1,V2,...",
        help="a categorical column and its public values (split on the first '=': a value may "
        "contain '=' or '<'); a value outside them refuses a non-DP round and is dropped in a "
        "DP one",
    )
    p.add_argument(
        "--edges",
        type=column_values,
        action="append",
        default=[],
        metavar="COL=E1,E2,...",
        help="a numeric column and its increasing bin edges: bins [E1, E2), [E2, E3), ...; "
        "a value outside [E1, Elast) refuses a non-DP round and is dropped in a DP one",
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
        "--dp-epsilon", type=float, default=None, help="release the counts (epsilon, delta)-DP"
    )
    g.add_argument("--dp-delta", type=float, default=None, help=f"DP delta ({DP_DELTA_DEFAULT})")
    add_noise_flags(p, "each cell count, margin and the row count")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def build_request(
    columns: list[str], domains: list[tuple[str, list[str]]], edges: list[tuple[str, list[str]]]
) -> Any:
    """The request of `--columns`, `--domain` and `--edges`: one of them per column."""
    from leteo_fed.protocols.crosstab import CrosstabColumn, CrosstabRequest

    given: dict[str, tuple[str, list[str]]] = {}
    for kind, items in (("domain", domains), ("edges", edges)):
        for name, values in items:
            if name in given:
                raise ConfigError(
                    f"column '{name}' has more than one --domain or --edges", field=kind
                )
            given[name] = (kind, values)
    out = []
    for name in columns:
        if "=" in name:
            raise ConfigError(f"a column name cannot contain '=': {name!r}", field="columns")
        if name not in given:
            raise ConfigError(f"column '{name}' needs a --domain or --edges", field="columns")
        kind, values = given.pop(name)
        if kind == "domain":
            out.append(CrosstabColumn(name, domain=tuple(values)))
            continue
        try:
            numbers = tuple(float(v) for v in values)
        except ValueError as exc:
            raise ConfigError(f"--edges of '{name}' must be numbers: {exc}", field="edges") from exc
        out.append(CrosstabColumn(name, edges=numbers))
    if given:
        raise ConfigError(
            f"--domain/--edges name column(s) not in --columns: {', '.join(sorted(given))}",
            field="columns",
        )
    return CrosstabRequest(columns=tuple(out))


def run(args: argparse.Namespace) -> int:
    from leteo_fed import extras

    if not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the bar chart, before any round is started

    request = build_request(args.columns, args.domain, args.edges)
    options = round_options(args)
    # planned locally first: a bad grid is refused before anyone is contacted
    from leteo_fed.protocols.crosstab import noise_preview

    stop = check_locally(request, options, noise_preview, args, _dry_run, plan_without_dp=True)
    if stop is not None:
        return stop
    summary = ("round_id", "owners", "columns", "n", "margins")
    run_and_write(args, request, options, analyst_client, summary, plot_counts)
    return 0


def _dry_run(plan: Any, rows: int | None) -> int:
    """Print what the round's noise does to the counts; nothing is sent."""
    from leteo_fed.protocols.crosstab import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    print(
        f"each of the {doc['cells']} cell counts carries noise of std "
        f"{doc['noise_std_per_cell']:.4g} (epsilon {doc['epsilon']:g}, delta {doc['delta']:g}); "
        f"the row count {doc['noise_std_of_row_count']:.4g}",
        file=sys.stderr,
    )
    for name, std in doc["noise_std_of_margins"].items():
        print(f"  each count of the margin of {name}: +/- {std:.4g} (1 std)", file=sys.stderr)
    if rows is None:
        print("give --rows N to check the noise against your row count", file=sys.stderr)
    print_verdict(doc)
    return 0


def plot_counts(result: dict, path: Path) -> None:
    """Bar chart: a bar per category of the first column, stacked by the other columns'
    categories; DP: error bars at 2 std of the bar's total (the margin's noise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    names = result["columns"]
    cats = result["categories"]
    counts = np.array(result["counts"], dtype=np.float64)
    x = np.arange(counts.shape[0])
    fig, ax = plt.subplots(figsize=(max(6.4, 0.35 * len(x) + 2), 4.8), dpi=110)
    stacks = [" / ".join(map(str, key)) for key in _product([cats[n] for n in names[1:]])]
    bottom = np.zeros(len(x))
    for j, label in enumerate(stacks):
        ax.bar(x, counts[:, j], 0.8, bottom=bottom, label=label or "count")
        bottom += counts[:, j]
    dp = result.get("dp")
    if dp:
        std = dp["noise_std_per_value"] * math.sqrt(len(stacks))
        ax.errorbar(x, bottom, yerr=2 * std, fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(x, cats[names[0]], rotation=45 if len(x) > 6 else 0, ha="right")
    ax.set_xlabel(names[0])
    ax.set_ylabel("count")
    title = f"{' x '.join(names)}: n = {result['n']}, {len(result['owners'])} owners"
    if dp:
        title += f", ε = {dp['epsilon']:g} (±2 std)"
    ax.set_title(title)
    if len(names) > 1 and len(stacks) <= 20:
        ax.legend(title=" / ".join(names[1:]), fontsize="small")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def _product(lists: list[list[str]]) -> list[tuple[str, ...]]:
    import itertools

    return list(itertools.product(*lists))
