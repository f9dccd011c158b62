"""`leteo-fed linreg`: federated linear regression (OLS or ridge) against running services."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leteo_fed import extras
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
    add_result_output,
    add_tls,
    add_value_bound,
    analyst_client,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write

DEFAULT_OUT = Path("out/linreg")
RESULT_JSON = "result.json"
RESULT_PNG = "coefficients.png"

DESCRIPTION = """\
Linear regression of --label-column on --features, with an intercept, in one round: every owner
sends its Paillier-encrypted moments of [x, y] (sum z z^T, sum z, its row count); the aggregator
learns only the pooled moments and solves the normal equations: ordinary least squares, or
ridge with --ridge L (the penalty on the coefficients, not the intercept). Writes
OUT/result.json (coefficients, standard errors, t statistics, p-values, 95% confidence
intervals, R^2) and OUT/coefficients.png (each coefficient with its confidence interval).

With --dp-epsilon the release is (epsilon, delta)-DP: give public bounds per column in natural
units (--bounds age=17,90 for every feature and the label, or --codebook FILE); every owner
clips each value to them and adds its share of Skellam noise. --dry-run shows each figure's
expected error first; after the release each figure is printed with its noise, and a warning
names any figure the noise buries. Experts may instead clip rows to --row-norm-bound (L2) and
labels to +/- --label-bound.
See docs/linear-regression.md.
"""


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "linreg",
        help="linear regression (OLS or ridge) across the owners",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_aggregator_address(p)
    add_features(p)
    p.add_argument("--label-column", required=True, help="the column to predict (y)")
    p.add_argument(
        "--ridge",
        type=float,
        default=0.0,
        metavar="L",
        help="ridge penalty lambda >= 0 on the coefficients, not the intercept (default: 0, "
        "ordinary least squares)",
    )
    add_quorum(p, "owners needed for a result")
    add_deadline(p, "round deadline in seconds")
    add_value_bound(p)
    p.add_argument("--scale-bits", type=int, default=0, help="fixed-point fraction bits")
    add_owner_filter(p)
    add_result_output(p, DEFAULT_OUT, RESULT_JSON, RESULT_PNG)
    add_dp_flags(p, bounds=True)
    p.add_argument(
        "--label-bound",
        type=float,
        default=0.0,
        help="DP: labels are clipped to [-B, B] (default: --row-norm-bound)",
    )
    add_noise_flags(p, "each coefficient")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    if not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the coefficient plot, before any round is started
    from leteo_fed.protocols.linreg import LinregRequest

    request = LinregRequest(
        features=tuple(args.features),
        label_column=args.label_column,
        ridge=args.ridge,
        label_bound=args.label_bound,
    )
    options = round_options(args)
    from leteo_fed.protocols.linreg import noise_preview

    stop = check_locally(request, options, noise_preview, args, _dry_run)
    if stop is not None:
        return stop
    summary = ("round_id", "owners", "n_rows", "coefficients", "std_errors", "r_squared")
    run_and_write(
        args, request, options, analyst_client, summary, plot_coefficients, in_term_order, True
    )
    return 0


def in_term_order(result: dict) -> dict:
    """The result with every per-term map in the order of `terms` (the wire's maps have
    none): the intercept, then the features as the request named them."""
    terms = result["terms"]
    return {
        k: {t: v[t] for t in terms} if isinstance(v, dict) and set(v) == set(terms) else v
        for k, v in result.items()
    }


def plot_coefficients(result: dict, path: Path) -> None:
    """Each coefficient (effect on the label) with its confidence interval."""
    from leteo_fed.cli import coefficient_plot

    what = "ridge" if result["method"] == "ridge" else "OLS"
    coefficient_plot.plot_coefficients(
        result,
        path,
        f"coefficient (effect on {result['label_column']})",
        f"{what}: n={result['n_rows']}, R^2={result['r_squared']:.3f}",
    )


def _dry_run(plan, rows: int | None) -> int:
    """Print what the round's noise does to each coefficient; nothing is sent."""
    from leteo_fed.protocols.linreg import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    print(
        f"each released moment carries noise of std {doc['noise_std_per_value']:.4g} (epsilon "
        f"{doc['epsilon']:g}, delta {doc['delta']:g}, features clipped to "
        f"{doc['row_norm_bound']:g}, labels to +/-{doc['label_bound']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each coefficient", file=sys.stderr)
    else:
        for term, err in doc["std_error"].items():
            print(f"  {term}: +/- {err:.4g} (1 std, from the noise)", file=sys.stderr)
        print(
            "  (for features spread as far as the clipping allows, means and coefficients "
            "near 0: less spread is noisier)",
            file=sys.stderr,
        )
    print_verdict(doc)
    return 0
