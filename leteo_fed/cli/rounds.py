"""Moment rounds: `pca` and `dca` (DCA, LDA, MDR) against running services, and their demos.

Owners send encrypted sums of x x^T, x and counts (per class for discriminant analysis); the
aggregator adds them, the CSP decrypts only the blinded total. `demo pca|dca` runs the same round
on a local deployment and compares it with the computation on the pooled rows.
"""

from __future__ import annotations

import argparse
import json
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
    add_demo_insecure,
    add_demo_key_flags,
    add_demo_owners,
    add_dp_flags,
    add_features,
    add_out_folder,
    add_round_flags,
    add_tls,
    add_value_bound,
    analyst_client,
    csv_list,
    set_handler,
)
from leteo_fed.cli.progress import ProgressPrinter
from leteo_fed.cli.round_output import (
    bounds_from_args,
    print_release_truth,
    quiet_noise_warnings,
    round_options,
)
from leteo_fed.defaults import DEMO_SEED, PCA_DEFAULT_SCALE_BITS
from leteo_fed.errors import ConfigError

PRIVACY_LABEL_HELP = "MDR: the label whose classes to hide"


def add_parsers(sub: SubParsers) -> None:
    """`pca` and `dca`, run against an aggregator."""
    p = sub.add_parser(
        "pca",
        help="run a federated PCA round against running services",
        description="Start a federated PCA round at the aggregator and wait for the result. "
        "Owners send encrypted sums of x x^T, x and counts; the result equals PCA on the pooled "
        "rows. Writes OUT/pca.json.",
    )
    _add_round_args(p, Path("out/pca"))
    _add_standardize(p)
    add_noise_flags(p, "each eigenvalue")
    set_handler(p, run)

    p = sub.add_parser(
        "dca",
        help="run a federated DCA / LDA / MDR round against running services",
        description="Start a federated discriminant analysis at the aggregator. Owners send "
        "encrypted sums of x x^T and per-class sums and counts for ALL declared classes "
        "(zero-filled), so no share reveals which classes a site holds. Writes OUT/dca.json.",
    )
    _add_round_args(p, Path("out/dca"))
    _add_discriminant_args(p)
    p.add_argument(
        "--classes", type=csv_list, required=True, help="the label's class names, e.g. 0,1,2"
    )
    p.add_argument("--privacy-label-column", default=None, help=PRIVACY_LABEL_HELP)
    p.add_argument(
        "--privacy-classes", type=csv_list, default=None, help="MDR: the privacy label's classes"
    )
    add_noise_flags(p, "each class mean")
    set_handler(p, run)


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
    _add_discriminant_args(p, with_label=False)
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


def _add_round_args(p: argparse.ArgumentParser, default_out: Path) -> None:
    add_aggregator_address(p)
    add_features(p)
    p.add_argument(
        "--components", type=int, default=0, help="number of components (default: the method's)"
    )
    add_round_flags(p, "quorum: minimum shares", scale_default=str(PCA_DEFAULT_SCALE_BITS))
    add_out_folder(p, default_out)
    _add_projection_flag(p)
    add_dp_flags(p, bounds=True)
    add_tls(p, "analyst", "analyst")


def _add_discriminant_args(p: argparse.ArgumentParser, with_label: bool = True) -> None:
    p.add_argument(
        "--method", choices=["dca", "lda", "mdr"], default="dca", help="analysis (default: dca)"
    )
    if with_label:
        p.add_argument("--label-column", required=True, help="the (utility) class label column")
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
    """A round against running services, or a demo on a local deployment."""
    if args.command == "demo":
        return _run_demo(args)
    return _run_round(args)


def _groupings(args: argparse.Namespace) -> tuple:
    """The declared (label, classes) pairs: none for PCA; MDR adds the label to hide."""
    if args.command != "dca":
        return ()
    groupings: tuple = ((args.label_column, tuple(args.classes)),)
    if args.method == "mdr":
        if not args.privacy_label_column or not args.privacy_classes:
            raise ConfigError("--method mdr needs --privacy-label-column and --privacy-classes")
        groupings += ((args.privacy_label_column, tuple(args.privacy_classes)),)
    return groupings


def _run_round(args: argparse.Namespace) -> int:
    from leteo_fed.client import output_file
    from leteo_fed.fileio import atomic_write_json
    from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest

    request = MomentsRequest(
        features=tuple(args.features),
        method=getattr(args, "method", "pca"),
        components=args.components,
        standardize=getattr(args, "standardize", False),
        groupings=tuple(LabelClasses(c, tuple(k)) for c, k in _groupings(args)),
        rho=getattr(args, "rho", None),
        rho_prime=getattr(args, "rho_prime", None),
        projection_only=args.projection_only,
    )
    options = round_options(args)
    from leteo_fed.protocols.moments_round import moments_noise_preview

    stop = check_locally(request, options, moments_noise_preview, args, _dry_run)
    if stop is not None:
        return stop
    progress = ProgressPrinter()
    with analyst_client(args) as client, quiet_noise_warnings():
        result = client.run(request, options, on_tick=progress.tick).to_dict()
    progress.done()
    out = Path(args.out) / output_file(request)
    atomic_write_json(out, result)
    print(json.dumps({k: result[k] for k in ("round_id", "owners", "n_samples", "eigenvalues")}))
    print_release_truth(result)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _dry_run(plan, rows: int | None) -> int:
    """Print what the round's noise does to each eigenvalue (PCA) or class mean (DCA, LDA,
    MDR); nothing is sent."""
    from leteo_fed.protocols.moments_round import moments_noise_preview

    doc = print_preview(plan, moments_noise_preview, rows)
    print(
        f"each released value carries noise of std {doc['noise_std_per_value']:.4g} (epsilon "
        f"{doc['epsilon']:g}, delta {doc['delta']:g}, rows clipped to {doc['row_norm_bound']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each result", file=sys.stderr)
    elif "eigenvalue_std_error" in doc:
        for i, err in enumerate(doc["eigenvalue_std_error"], start=1):
            print(
                f"  eigenvalue {i}: +/- {err:.4g} (1 std, for centered data and a small "
                "eigenvalue; larger ones and data far from 0 are noisier)",
                file=sys.stderr,
            )
    else:
        for label, errs in doc["class_mean_rms_error"].items():
            for c, err in errs.items():
                print(
                    f"  mean of class {label}={c}: moves by about {err:.4g} (RMS distance, "
                    "equal class sizes, a mean near 0)",
                    file=sys.stderr,
                )
    print_verdict(doc)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    extras.require("matplotlib")  # the scatter plot
    if args.data is None:
        extras.require("sklearn")  # the default data set
    from leteo_fed.demo.runner import DemoOptions, run_demo

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
