"""The demos of the moment rounds: `demo pca` and `demo dca` (DCA, LDA, MDR).

Owners send encrypted sums of x x^T, x and counts (per class for discriminant analysis); the
aggregator adds them, the CSP decrypts only the blinded total. `demo pca|dca` runs a round on a
local deployment and compares it with the computation on the pooled rows. The `pca` and `dca`
commands against running services are made from the moments statistic's declaration
(`cli.statistics`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leteo_fed import extras
from leteo_fed.cli.options import (
    SubParsers,
    add_demo_insecure,
    add_demo_key_flags,
    add_demo_owners,
    add_dp_flags,
    add_out_folder,
    add_value_bound,
    csv_list,
    set_handler,
)
from leteo_fed.cli.round_output import bounds_from_args, print_release_truth, quiet_noise_warnings
from leteo_fed.defaults import DEMO_SEED

PRIVACY_LABEL_HELP = "MDR: the label whose classes to hide"


def add_demo_parsers(demo: SubParsers) -> None:
    """`demo pca` and `demo dca`: the same rounds on a local deployment."""
    p = demo.add_parser(
        "pca",
        help="federated PCA demo with real processes, mTLS and 2048-bit Paillier",
        description="Start a CSP, an aggregator and N owner agents as separate local processes on "
        "loopback with fresh certificates; split a data set horizontally across the owners; run "
        "one PCA round; compare with centralized NumPy PCA; write OUT/pca.json and "
        "OUT/pca_scatter.png; stop every process.",
    )
    _add_demo_args(p, Path("out/demo-pca"), label_required=False)
    _add_standardize(p)
    set_handler(p, run)

    p = demo.add_parser(
        "dca",
        help="federated DCA / LDA / MDR demo with real processes, mTLS and 2048-bit Paillier",
        description="Like `demo pca`, for discriminant analysis: owners send per-class encrypted "
        "shares; the result is compared with the same computation on the pooled rows. Writes "
        "OUT/dca.json and OUT/dca_scatter.png.",
    )
    _add_demo_args(p, Path("out/demo-dca"), label_required=True)
    _add_discriminant_args(p)
    p.add_argument("--privacy-label-column", default=None, help=PRIVACY_LABEL_HELP)
    set_handler(p, run)


# ---------------------------------------------------------------- arguments


def _add_standardize(p: argparse.ArgumentParser) -> None:
    p.add_argument("--standardize", action="store_true", help="PCA of the correlation matrix")


def _add_projection_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--projection-only",
        action="store_true",
        help="the aggregator learns only the directions and eigenvalues (the CSP solves a secretly rotated problem)",
    )


def _add_discriminant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method", choices=["dca", "lda", "mdr"], default="dca", help="analysis (default: dca)"
    )
    p.add_argument(
        "--rho",
        type=float,
        default=None,
        help="ridge on the denominator matrix (default: DCA 0.02 lambda_max(S_W), LDA 1e-9 "
        "lambda_max(S_W), MDR 0.02 lambda_max(S_B privacy))",
    )
    p.add_argument(
        "--rho-prime", type=float, default=None, help="DCA ridge on S_B (default: 0.1 rho)"
    )


def _add_demo_args(p: argparse.ArgumentParser, default_out: Path, label_required: bool) -> None:
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="CSV file (default: scikit-learn's breast cancer set)",
    )
    p.add_argument(
        "--features",
        type=csv_list,
        default=None,
        help="columns (default: all numeric except labels)",
    )
    if label_required:
        p.add_argument(
            "--label-column", default=None, help="class label column (default data set: diagnosis)"
        )
    else:
        p.add_argument("--label-column", default=None, help="label column: only colours the plot")
    add_demo_owners(p)
    p.add_argument(
        "--components",
        type=int,
        default=0,
        help="number of components (default: PCA 2, else classes - 1)",
    )
    add_demo_key_flags(p)
    add_value_bound(p)
    add_out_folder(p, default_out)
    p.add_argument(
        "--seed",
        type=int,
        default=DEMO_SEED,
        help=f"seed of the horizontal split (default: {DEMO_SEED})",
    )
    add_demo_insecure(p)
    _add_projection_flag(p)
    add_dp_flags(p, bounds=True)


# ---------------------------------------------------------------- running


def run(args: argparse.Namespace) -> int:
    """A demo on a local deployment."""
    return _run_demo(args)


def _run_demo(args: argparse.Namespace) -> int:
    extras.require("matplotlib")  # the scatter plot
    if args.data is None:
        extras.require("sklearn")  # the default data set
    from leteo_fed.demo.runner import DemoOptions, demo_keyholders, run_demo

    discriminant = args.action == "dca"
    opts = DemoOptions(
        method=args.method if discriminant else "pca",
        privacy_label_column=getattr(args, "privacy_label_column", None),
        rho=getattr(args, "rho", None),
        rho_prime=getattr(args, "rho_prime", None),
        data=args.data,
        features=args.features,
        label_column=args.label_column,
        owners=args.owners,
        components=args.components,
        key_bits=args.key_bits,
        allow_small_key=args.insecure_small_key,
        keyholders=demo_keyholders(args.keyholders, args.threshold),
        standardize=getattr(args, "standardize", False),
        value_bound=args.value_bound,
        out=args.out,
        seed=args.seed,
        insecure=args.insecure,
        projection_only=args.projection_only,
        dp_epsilon=args.dp_epsilon,
        dp_delta=args.dp_delta,
        row_norm_bound=args.row_norm_bound,
        bounds=bounds_from_args(args),
    )
    with quiet_noise_warnings():
        result = run_demo(opts)
    print_release_truth(result)
    return 0
