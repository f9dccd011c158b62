"""`leteo-fed logreg`: federated logistic regression (Newton iterations) against running services."""

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
    add_dp_flags,
    add_features,
    add_result_output,
    add_round_flags,
    add_tls,
    analyst_client,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write

DEFAULT_OUT = Path("out/logreg")
RESULT_JSON = "result.json"
RESULT_PNG = "coefficients.png"

DESCRIPTION = """\
Logistic regression of (--label-column == --positive-class) on --features, with an intercept,
by Newton iterations: each iteration is one round in which every owner sends, at the published
coefficients, the Paillier-encrypted sums of the gradient (y - p) [1, x] and the Hessian
p (1 - p) [1, x][1, x]^T of its rows; the aggregator learns only the pooled sums and takes the
Newton step, until no coefficient moves more than --tolerance or after --max-iterations.
Writes OUT/result.json (coefficients, standard errors, z statistics, p-values, 95% confidence
intervals, the iterations) and OUT/coefficients.png (each coefficient with its interval).

With --dp-epsilon the job is (epsilon, delta)-DP: the budget is split evenly over
--max-iterations (every owner is charged once per iteration it takes part in); every owner clips
its rows' features to --row-norm-bound (L2) and adds its share of Skellam noise.
See docs/logistic-regression.md.
"""


# the protocol's defaults (leteo_fed.protocols.logreg), spelled here so that building the
# parser imports no numerical code; a test checks they agree
DEFAULT_MAX_ITERATIONS, MAX_ITERATIONS = 25, 100
DEFAULT_TOLERANCE, DEFAULT_COEFFICIENT_BOUND = 1e-8, 1000.0


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "logreg",
        help="logistic regression (Newton iterations) across the owners",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_aggregator_address(p)
    add_features(p)
    p.add_argument("--label-column", required=True, help="the class column")
    p.add_argument(
        "--positive-class",
        required=True,
        metavar="V",
        help="the label value that counts as 1 (every other value counts as 0)",
    )
    p.add_argument(
        "--max-iterations",
        type=int,
        default=0,
        metavar="N",
        help=f"the most Newton iterations (rounds), signed in the request; a DP budget is split "
        f"over them (default: {DEFAULT_MAX_ITERATIONS}, at most {MAX_ITERATIONS})",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help=f"stop once no coefficient moves more than this (default: {DEFAULT_TOLERANCE:g})",
    )
    p.add_argument(
        "--coefficient-bound",
        type=float,
        default=0.0,
        help="owners refuse coefficients beyond +/- this; without DP a step beyond it is "
        f"refused as separation (default: {DEFAULT_COEFFICIENT_BOUND:g})",
    )
    add_round_flags(p, "owners needed for each iteration", "deadline of each iteration in seconds")
    add_result_output(p, DEFAULT_OUT, RESULT_JSON, RESULT_PNG)
    add_dp_flags(p, bounds=True)
    add_noise_flags(p, "each coefficient")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    if not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the coefficient plot, before any round is started
    from leteo_fed.protocols.logreg import LogregRequest, noise_preview
    from leteo_fed.protocols.results import terms_in_order

    request = LogregRequest(
        features=tuple(args.features),
        label_column=args.label_column,
        positive_class=args.positive_class,
        max_iterations=args.max_iterations,
        tolerance=args.tolerance,
        coefficient_bound=args.coefficient_bound,
    )
    options = round_options(args)
    stop = check_locally(request, options, noise_preview, args, _dry_run, plan_without_dp=True)
    if stop is not None:
        return stop
    summary = ("job_id", "owners", "n_rows", "iterations_run", "converged", "coefficients")
    result = run_and_write(
        args,
        request,
        options,
        analyst_client,
        (*summary, "std_errors"),
        plot_coefficients,
        terms_in_order,
        True,
    )
    if not result["converged"]:
        print(
            f"warning: not converged after {result['iterations_run']} iteration(s) (the last "
            f"step moved a coefficient by {result['iterations'][-1]['max_step']:.3g}); raise "
            "--max-iterations" + (" or accept the noise floor" if result.get("dp") else ""),
            file=sys.stderr,
        )
    return 0


def plot_coefficients(result: dict, path: Path) -> None:
    """Each coefficient (log-odds per unit of its feature) with its confidence interval."""
    from leteo_fed.cli import coefficient_plot

    state = "converged" if result["converged"] else "NOT converged"
    coefficient_plot.plot_coefficients(
        result,
        path,
        f"coefficient (log-odds of {result['label_column']} = {result['positive_class']})",
        f"logistic: n={result['n_rows']}, {result['iterations_run']} iterations ({state})",
    )


def _dry_run(plan, rows: int | None) -> int:
    """Print what the job's noise does to each coefficient; nothing is sent."""
    from leteo_fed.protocols.logreg import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    print(
        f"each released sum carries noise of std {doc['noise_std_per_value']:.4g} per iteration "
        f"(epsilon {doc['epsilon']:g} for the {doc['iterations']} iterations together by Renyi "
        f"composition ({doc['accountant']} accountant), {doc['epsilon_per_iteration']:.4g} for "
        f"one alone; features clipped to {doc['row_norm_bound']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each coefficient", file=sys.stderr)
    else:
        for term, err in doc["std_error"].items():
            sampling = doc["sampling_std_error"][term]
            print(
                f"  {term}: +/- {err:.4g} (1 std, from the noise; sampling error {sampling:.4g})",
                file=sys.stderr,
            )
        print(
            "  (for features spread as far as the clipping allows, means near 0 and half the "
            "rows positive: less spread or a rarer class is noisier)",
            file=sys.stderr,
        )
    print_verdict(doc)
    return 0
