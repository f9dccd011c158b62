"""`leteo-fed naive-bayes`: Gaussian and categorical naive Bayes against running services; writes
OUT/result.json and OUT/naive_bayes.png (the [plots] extra; or --no-plot)."""

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
    add_features,
    add_result_output,
    add_round_flags,
    add_tls,
    analyst_client,
    csv_list,
    set_handler,
)
from leteo_fed.cli.round_output import round_options, run_and_write
from leteo_fed.errors import ConfigError
from leteo_fed.protocols.crosstab_grid import column_values

DEFAULT_OUT = Path("out/naive-bayes")
RESULT_FILE = "result.json"
PLOT_FILE = "naive_bayes.png"

DESCRIPTION = """\
Naive Bayes of --label-column on --features in one round: every owner sends, for every class
of --classes (zeros included), its Paillier-encrypted row count, the sums and sums of squares
of the numeric features and the counts of each categorical feature's values (--domain
COL=v1,v2,...; a feature without a --domain is numeric). The aggregator learns only the pooled
statistics and fits Gaussian naive Bayes on the numeric features and categorical naive Bayes
on the categorical ones (scikit-learn's GaussianNB and CategoricalNB on the pooled rows).
Writes OUT/result.json and OUT/naive_bayes.png (per class: each numeric feature's mean +/- one
standard deviation, each categorical feature's value probabilities).

With --dp-epsilon the release is (epsilon, delta)-DP: numeric values are clipped to their
--bounds, and every owner adds its share of Skellam noise. See docs/naive-bayes.md.
"""


def feature_bounds(text: str) -> tuple[str | None, tuple[float, float]]:
    """`COL=LO,HI` (one numeric feature) or `LO,HI` (every numeric feature without its own)."""
    name, sep, rest = text.rpartition("=")
    try:
        lo, hi = (float(v) for v in rest.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected COL=LO,HI or LO,HI, got {text!r}") from exc
    if sep and not name.strip():
        raise argparse.ArgumentTypeError(f"expected COL=LO,HI, got {text!r}")
    return (name.strip() if sep else None), (lo, hi)


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "naive-bayes",
        help="Gaussian and categorical naive Bayes across the owners",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_aggregator_address(p)
    add_features(p)
    p.add_argument("--label-column", required=True, help="the class column (y)")
    p.add_argument(
        "--classes",
        type=csv_list,
        default=None,
        help="the label's public classes, comma-separated (or --domain LABEL=a,b,...); "
        "required: the share of every site holds every class",
    )
    p.add_argument(
        "--domain",
        type=column_values,
        action="append",
        default=[],
        metavar="COL=V1,V2,...",
        help="a categorical feature and its public values (split on the first '=': a value may "
        "contain '='); a value outside them refuses a non-DP round and drops the row in a DP one",
    )
    p.add_argument(
        "--var-smoothing",
        type=float,
        default=None,
        help="Gaussian: the variances get var_smoothing x the largest pooled variance "
        "(default: 1e-9, scikit-learn's)",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="categorical: additive smoothing of the value counts (default: 1)",
    )
    add_round_flags(p)
    add_result_output(p, DEFAULT_OUT, RESULT_FILE, PLOT_FILE)
    g = p.add_argument_group(DP_GROUP_TITLE)
    g.add_argument(
        "--dp-epsilon", type=float, default=None, help="release the model (epsilon, delta)-DP"
    )
    g.add_argument("--dp-delta", type=float, default=None, help=f"DP delta ({DP_DELTA_DEFAULT})")
    g.add_argument(
        "--bounds",
        type=feature_bounds,
        action="append",
        default=[],
        metavar="[COL=]LO,HI",
        help="DP: numeric values are clipped to [LO, HI]; COL=LO,HI for one feature, LO,HI for "
        "every numeric feature without its own (required for each numeric feature with DP)",
    )
    add_noise_flags(p, "each class's means, variances and category probabilities")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)


def build_request(args: argparse.Namespace) -> tuple[Any, float | None]:
    """The request of the flags, and the row_norm_bound a DP request carries (the largest
    |bound|: every numeric feature gets explicit bounds here)."""
    from leteo_fed.protocols.naive_bayes import (
        NaiveBayesBound,
        NaiveBayesDomain,
        NaiveBayesRequest,
    )

    label = args.label_column
    domains: dict[str, list[str]] = {}
    classes = list(args.classes) if args.classes else None
    for name, values in args.domain:
        if name == label:
            if classes is not None:
                raise ConfigError(
                    f"the classes are given twice (--classes and --domain {label}=...)",
                    field="classes",
                )
            classes = values
            continue
        if name in domains:
            raise ConfigError(f"feature '{name}' has more than one --domain", field="domain")
        if name not in args.features:
            raise ConfigError(
                f"--domain names '{name}', which is not in --features", field="domain"
            )
        domains[name] = values
    if classes is None:
        raise ConfigError(
            f"the classes of '{label}' are a public list fixed before the round: give "
            f"--classes a,b,... or --domain {label}=a,b,...",
            field="classes",
        )
    numeric = [f for f in args.features if f not in domains]
    dp = args.dp_epsilon is not None
    default: tuple[float, float] | None = None
    given: dict[str, tuple[float, float]] = {}
    for name, pair in args.bounds:
        if name is None:
            if default is not None:
                raise ConfigError("more than one --bounds LO,HI", field="bounds")
            default = pair
        elif name in given:
            raise ConfigError(f"feature '{name}' has more than one --bounds", field="bounds")
        else:
            given[name] = pair
    if args.bounds and not dp:
        raise ConfigError("--bounds applies to DP rounds (give --dp-epsilon)", field="bounds")
    bounds = []
    if dp:
        missing = [f for f in numeric if f not in given and default is None]
        if missing:
            raise ConfigError(
                f"a DP round clips every numeric feature to public bounds: give --bounds "
                f"COL=LO,HI for {', '.join(missing)} (or --bounds LO,HI for all)",
                field="bounds",
            )
        for f in numeric:
            lo, hi = given.pop(f, None) or default  # type: ignore[misc]
            bounds.append(NaiveBayesBound(f, lo, hi))
        if given:
            raise ConfigError(
                f"--bounds names non-numeric feature(s): {', '.join(sorted(given))}",
                field="bounds",
            )
    request = NaiveBayesRequest(
        features=tuple(args.features),
        domains=tuple(NaiveBayesDomain(n, tuple(v)) for n, v in domains.items()),
        label_column=label,
        classes=tuple(classes),
        var_smoothing=args.var_smoothing,
        alpha=args.alpha,
        bounds=tuple(bounds),
    )
    if not dp:
        return request, None
    return request, max((max(abs(b.lower), abs(b.upper)) for b in bounds), default=1.0)


def run(args: argparse.Namespace) -> int:
    from leteo_fed import extras

    if not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the plot, before any round is started
    from leteo_fed.protocols.naive_bayes import noise_preview

    request, row_norm_bound = build_request(args)
    options = round_options(args, row_norm_bound=row_norm_bound)
    # planned locally first: a bad request is refused before anyone is contacted
    stop = check_locally(request, options, noise_preview, args, _dry_run, plan_without_dp=True)
    if stop is not None:
        return stop
    summary = ("round_id", "owners", "classes", "class_count", "theta")
    run_and_write(args, request, options, analyst_client, summary, plot_model)
    return 0


def _dry_run(plan: Any, rows: int | None) -> int:
    """Print what the round's noise does to the model; nothing is sent."""
    from leteo_fed.protocols.naive_bayes import noise_preview

    doc = print_preview(plan, noise_preview, rows)
    print(
        f"each of the {doc['values_per_share']} released counts and sums carries noise of std "
        f"{doc['noise_std_per_value']:.4g} (epsilon {doc['epsilon']:g}, delta {doc['delta']:g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N to see the error of each class's means and variances", file=sys.stderr)
    else:
        for name, std in doc["noise_std_of_means"].items():
            var_std = doc["noise_std_of_variances"][name]
            print(
                f"  {name}: each class's mean +/- {std:.4g}, variance +/- {var_std:.4g} (1 std)",
                file=sys.stderr,
            )
        for name, std in doc["noise_std_of_category_probabilities"].items():
            print(f"  {name}: each P(value | class) +/- {std:.4g} (1 std)", file=sys.stderr)
    print_verdict(doc)
    return 0


def plot_model(result: dict, path: Path) -> None:
    """One panel per feature: a numeric feature's mean +/- one standard deviation per class,
    a categorical feature's P(value | class) as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    classes = result["classes"]
    numeric = result["numeric_features"]
    categorical = result["categorical"]
    panels = len(numeric) + len(categorical)
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), dpi=110, squeeze=False)
    x = np.arange(len(classes))
    flat = list(axes.ravel())
    for ax, name in zip(flat, numeric, strict=False):
        mean = np.array(result["theta"][name])
        std = np.sqrt(np.array(result["var"][name]))
        ax.errorbar(x, mean, yerr=std, fmt="o", capsize=4)
        ax.set_xticks(x, classes, rotation=45 if len(classes) > 4 else 0)
        ax.set_title(f"{name}: mean ± 1 std")
        ax.set_xlabel(result["label_column"])
    for ax, table in zip(flat[len(numeric) :], categorical, strict=False):
        prob = np.exp(np.array(table["log_prob"]))  # a row per class
        width = 0.8 / max(len(table["categories"]), 1)
        for v, cat in enumerate(table["categories"]):
            ax.bar(
                x + (v - (len(table["categories"]) - 1) / 2) * width, prob[:, v], width, label=cat
            )
        ax.set_xticks(x, classes, rotation=45 if len(classes) > 4 else 0)
        ax.set_ylim(0, 1)
        ax.set_title(f"P({table['feature']} | class)")
        ax.set_xlabel(result["label_column"])
        if len(table["categories"]) <= 12:
            ax.legend(fontsize="small")
    for ax in flat[panels:]:
        ax.axis("off")
    title = f"naive Bayes of {result['label_column']}: n = {result['n']:.0f}"
    title += f", {len(result['owners'])} owners"
    if result.get("dp"):
        title += f", ε = {result['dp']['epsilon']:g}"
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)
