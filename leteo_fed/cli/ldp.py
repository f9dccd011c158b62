"""Local differential privacy: `ldp simulate`, `ldp collect`, `ldp naive-bayes` and `demo ldp`.

Every record is perturbed where it lives; the aggregator (or, when planning, this process) only
estimates frequencies, a mean or a mean location (geo) from the reports, with a standard error
for each estimate, or fits a naive Bayes classifier from one report per record.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from leteo_fed import extras
from leteo_fed.cli.flags import say
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
COLLECT_MECHANISMS = [*LDP_MECHANISMS, "geo"]
GEO_PLOT = "ldp.png"
NB_RESULT = "result.json"
NB_PLOT = "naive_bayes.png"
NB_ORACLES = ["grr", "oue", "olh"]


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
        help="collect one column (or, with geo, points) from running owner agents",
        description="Ask the aggregator for an LDP collection: every owner checks and charges its "
        "privacy ledger, perturbs every record and streams the reports. Writes OUT/ldp.json; "
        f"geo (geo-indistinguishability: --columns, --box-lower, --box-upper) also OUT/{GEO_PLOT}, "
        "the reports' density over the box with the estimated mean.",
    )
    add_aggregator_address(p)
    p.add_argument("--column", default="", help="column to collect (geo: or --columns)")
    p.add_argument("--mechanism", required=True, choices=COLLECT_MECHANISMS, help="LDP mechanism")
    p.add_argument(
        "--epsilon",
        type=float,
        required=True,
        help="per-record epsilon; geo: per unit of Euclidean distance in the columns' own unit "
        "(0.5 on columns in km: a report is 0.5-indistinguishable from points 1 km away)",
    )
    p.add_argument(
        "--domain", type=csv_list, default=None, help="frequency oracles: the public values"
    )
    _add_bounds(p)
    _add_consistency(p)
    g = p.add_argument_group("geo (n-dimensional Laplace; planar for 2 columns)")
    g.add_argument(
        "--columns", type=csv_list, default=None, help="the coordinates of each point, e.g. x,y"
    )
    g.add_argument(
        "--box-lower", type=float_list, default=None, help="public box: a lower bound per column"
    )
    g.add_argument(
        "--box-upper", type=float_list, default=None, help="public box: an upper bound per column"
    )
    g.add_argument(
        "--box-fit",
        choices=["remap", "resample"],
        default=None,
        help="remap: clip each report into the box (default); resample: redraw until inside, "
        "each draw at epsilon/2 (the same guarantee, twice the noise, no pile-up on the faces)",
    )
    g.add_argument("--bins", type=int, default=0, help="density grid bins per axis (default: 20)")
    g.add_argument("--no-plot", action="store_true", help=f"write no {GEO_PLOT}")
    p.add_argument(
        "--min-owners",
        type=int,
        default=MIN_QUORUM_LDP,
        help=f"minimum number of owners (default: {MIN_QUORUM_LDP})",
    )
    add_out_folder(p, Path("out/ldp"))
    add_noise_flags(p, "each frequency, the mean or the mean location")
    _add_expect_flags(p)
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)

    p = ldp.add_parser(
        "naive-bayes",
        help="train a naive Bayes classifier from one LDP report per record",
        description="Ask the aggregator for an LDP naive Bayes round: every owner checks and "
        "charges its privacy ledger, assigns each record one report type at random (the class "
        "prior, or one feature with the class), perturbs it with the frequency oracle at the "
        "full epsilon (epsilon-LDP for the whole record) and streams the reports; the aggregator "
        f"fits the model. Writes OUT/{NB_RESULT} (priors, conditionals, reports per type; with "
        f"--test, the accuracy on your hold-out rows) and OUT/{NB_PLOT}.",
    )
    add_aggregator_address(p)
    p.add_argument("--features", type=csv_list, required=True, help="categorical columns")
    p.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="FEATURE=V1,V2,...",
        help="a feature's public values; one --domain per feature",
    )
    p.add_argument("--label-column", required=True, help="the class column")
    p.add_argument("--classes", type=csv_list, required=True, help="the public class list")
    p.add_argument("--epsilon", type=float, required=True, help="per-record epsilon")
    p.add_argument(
        "--oracle",
        choices=NB_ORACLES,
        default="oue",
        help="frequency oracle of every report (default: oue; grr for small domains, olh for "
        "large ones)",
    )
    p.add_argument(
        "--test",
        type=Path,
        default=None,
        help="your own labelled hold-out rows (CSV or Parquet): the model's accuracy on them",
    )
    p.add_argument(
        "--min-owners",
        type=int,
        default=MIN_QUORUM_LDP,
        help=f"minimum number of owners (default: {MIN_QUORUM_LDP})",
    )
    add_out_folder(p, Path("out/ldp-naive-bayes"))
    p.add_argument("--no-plot", action="store_true", help=f"write no {NB_PLOT}")
    add_noise_flags(p, "each prior and conditional")
    p.add_argument(
        "--expect-priors",
        type=share_list,
        default=None,
        metavar="CLASS=SHARE,...",
        help="--dry-run: the class shares you expect (default: the worst share for the priors, "
        "and a class holding 1/(2k) of the records for the conditionals)",
    )
    add_tls(p, "analyst", "analyst")
    set_handler(p, run_naive_bayes)


def share_list(text: str) -> dict[str, float]:
    """V1=F1,V2=F2,...: expected shares of values or classes."""
    out: dict[str, float] = {}
    for item in csv_list(text):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError(item)
            out[name.strip()] = float(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected VALUE=SHARE,...: {exc}") from exc
    return out


def _add_expect_flags(p: argparse.ArgumentParser) -> None:
    """What the analyst expects of the data: replaces the preview's worst case."""
    g = p.add_argument_group(
        "what you expect of the data (for --dry-run's errors; default: the worst case)"
    )
    g.add_argument(
        "--expect-mean",
        type=float_list,
        default=None,
        metavar="MU",
        help="numeric mechanisms: the column's expected mean, in its units (several columns: "
        "one value, or one per column)",
    )
    g.add_argument(
        "--expect-std",
        type=float_list,
        default=None,
        metavar="SIGMA",
        help="numeric mechanisms: the column's expected standard deviation, in its units",
    )
    g.add_argument(
        "--expect-frequencies",
        type=share_list,
        default=None,
        metavar="V=SHARE,...",
        help="frequency oracles: the shares you expect, e.g. a=0.5,b=0.3 (values not named: "
        "their worst share)",
    )


def expectation(args: argparse.Namespace):
    """The `ldp_noise.Expectation` of the --expect-* flags."""
    from leteo_fed.protocols.ldp_noise import Expectation

    return Expectation(
        frequencies=getattr(args, "expect_frequencies", None) or {},
        mean=tuple(getattr(args, "expect_mean", None) or ()),
        std=tuple(getattr(args, "expect_std", None) or ()),
        priors=getattr(args, "expect_priors", None) or {},
    )


def float_list(text: str) -> list[float]:
    try:
        return [float(v) for v in csv_list(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers: {exc}") from exc


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


def collect_request(args: argparse.Namespace):
    """The LdpRequest of `ldp collect`'s flags."""
    from leteo_fed.protocols.ldp_collection import LdpRequest

    columns = tuple(args.columns or ())
    geo_only = {"--columns": columns, "--box-lower": args.box_lower, "--box-upper": args.box_upper}
    misplaced = [flag for flag, value in geo_only.items() if value and args.mechanism != "geo"]
    if misplaced or ((args.box_fit or args.bins) and args.mechanism != "geo"):
        from leteo_fed.errors import ConfigError

        flags = ", ".join(misplaced) or "--box-fit, --bins"
        raise ConfigError(f"{flags}: only for --mechanism geo", field="columns")
    return LdpRequest(
        column=args.column or (columns[0] if columns else ""),
        mechanism=args.mechanism,
        epsilon=args.epsilon,
        domain=tuple(args.domain or ()),
        lower=args.bounds[0] if args.bounds else None,
        upper=args.bounds[1] if args.bounds else None,
        consistency=args.consistency,
        columns=columns,
        box_lower=tuple(args.box_lower or ()),
        box_upper=tuple(args.box_upper or ()),
        box_fit=args.box_fit or "",
        bins=args.bins,
    )


def _collect(args: argparse.Namespace) -> int:
    from leteo_fed.client import RoundOptions, output_file
    from leteo_fed.fileio import atomic_write_json

    request = collect_request(args)
    geo = request.mechanism == "geo"
    if geo and not args.no_plot and not args.dry_run:
        extras.require("matplotlib")  # the plot, before any round is started
    options = RoundOptions(min_owners=args.min_owners)
    preview = _noise_preview(request, options, expectation(args))
    if args.dry_run:
        return _dry_run(preview, args.rows)
    refuse_drowned_round(None, preview, args)
    progress = ProgressPrinter()
    with analyst_client(args) as client:
        typed = _quietly(client.run, request, options, on_tick=progress.tick)
    progress.done()
    result = released(typed)
    out = Path(args.out)
    atomic_write_json(out / output_file(request), result)
    keys = ("round_id", "owners", "n", *(("mean", "std_errors") if geo else ()))
    print(json.dumps({k: result[k] for k in keys}))
    if geo and not args.no_plot:
        from leteo_fed.cli.plots import plot_ldp_points

        plot_ldp_points(result, out / GEO_PLOT)
        print(f"wrote {out / GEO_PLOT}", file=sys.stderr)
    return 0


def naive_bayes_request(
    features: list[str],
    domains: list[str],
    label: str,
    classes: list[str],
    epsilon: float,
    oracle: str,
):
    """The LdpRequest of `ldp naive-bayes`: every feature needs its --domain."""
    from leteo_fed.errors import ConfigError
    from leteo_fed.protocols.ldp_collection import FeatureDomain, LdpRequest

    values: dict[str, list[str]] = {}
    for item in domains:
        name, sep, rest = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--domain {item!r}: expected FEATURE=V1,V2,...", field="domain")
        if name.strip() in values:
            raise ConfigError(f"--domain names {name.strip()!r} twice", field="domain")
        values[name.strip()] = [v.strip() for v in rest.split(",") if v.strip()]
    missing = [f for f in features if f not in values]
    extra = [f for f in values if f not in features]
    if missing or extra:
        what = f"no --domain for {', '.join(missing)}" if missing else ""
        what += ("; " if missing and extra else "") + (
            f"--domain for {', '.join(extra)}, not in --features" if extra else ""
        )
        raise ConfigError(what, field="domain")
    return LdpRequest(
        mechanism=oracle,
        epsilon=epsilon,
        label_column=label,
        classes=tuple(classes),
        features=tuple(FeatureDomain(f, tuple(values[f])) for f in features),
    )


def run_naive_bayes(args: argparse.Namespace) -> int:
    """`ldp naive-bayes`: the round, the model's accuracy on --test, the plot."""
    from leteo_fed.client import RoundOptions
    from leteo_fed.fileio import atomic_write_json
    from leteo_fed.protocols.ldp_collection import spec_from_request

    request = naive_bayes_request(
        args.features, args.domain, args.label_column, args.classes, args.epsilon, args.oracle
    )
    spec_from_request(request)  # refused here, before anyone is contacted
    options = RoundOptions(min_owners=args.min_owners)
    preview = _noise_preview(request, options, expectation(args))
    if args.dry_run:
        return _dry_run(preview, args.rows)
    if not args.no_plot:
        extras.require("matplotlib")
    test = _read_test_rows(args.test, args.features, args.label_column) if args.test else None
    progress = ProgressPrinter()
    with analyst_client(args) as client:
        typed = _quietly(client.run, request, options, on_tick=progress.tick)
    progress.done()
    result = released(typed)
    if test is not None:
        result["test"] = holdout_accuracy(result, test[0], test[1], str(args.test))
    out = Path(args.out)
    atomic_write_json(out / NB_RESULT, result)
    keys = ("round_id", "owners", "n", "priors", "report_counts")
    print(json.dumps({k: result[k] for k in keys} | ({"test": result["test"]} if test else {})))
    print(f"wrote {out / NB_RESULT}", file=sys.stderr)
    if not args.no_plot:
        from leteo_fed.cli.plots import plot_ldp_naive_bayes

        plot_ldp_naive_bayes(result, out / NB_PLOT)
        print(f"wrote {out / NB_PLOT}", file=sys.stderr)
    return 0


def _read_test_rows(path: Path, features: list[str], label: str):
    from leteo_fed.data import sources

    table = sources.read_table(str(path))
    missing = [c for c in [*features, label] if c not in table.column_names]
    if missing:
        from leteo_fed.errors import DataError

        raise DataError(f"--test {path}: no column {', '.join(missing)}", field=missing[0])
    rows = {f: sources.label_strings(table, f) for f in features}
    return rows, sources.label_strings(table, label)


def holdout_accuracy(result: dict, rows: dict, labels: list[str], source: str) -> dict:
    """The fitted model's accuracy on labelled rows (rows with an unknown value are refused)."""
    import numpy as np

    from leteo_fed.protocols.ldp_collection import nb_predict

    predicted = np.array(nb_predict(result, rows))
    return {
        "file": source,
        "rows": len(labels),
        "accuracy": float(np.mean(predicted == np.asarray(labels))) if labels else 0.0,
    }


def _noise_preview(request, options, expect=None):
    """The collection's noise preview as a (plan, rows) -> document function: the public
    parameters are checked exactly as the aggregator will check them."""
    from leteo_fed.protocols.ldp_collection import spec_from_request
    from leteo_fed.protocols.ldp_noise import noise_preview

    spec = spec_from_request(request)
    quorum = max(options.min_owners, MIN_QUORUM_LDP)
    return lambda _plan, rows: noise_preview(spec, rows, quorum, expect)


def _dry_run(preview, rows: int | None) -> int:
    """Print the expected error of every released figure and what it assumes; nothing is
    sent."""
    doc = print_preview(None, preview, rows)
    if "variance_per_report" in doc:
        print(
            f"each report carries variance {doc['variance_per_report']:.4g} at most (epsilon "
            f"{doc['epsilon']:g}, {doc['mechanism']})",
            file=sys.stderr,
        )
    if rows is None:
        print("give --rows N (the records collected) for each figure's error", file=sys.stderr)
    else:
        print(f"assuming {doc['assumption']}:", file=sys.stderr)
        if "mean_noise_distance" in doc:
            print(
                f"  each report lies {doc['mean_noise_distance']:.4g} from its point on average "
                f"(draws at epsilon {doc['draw_epsilon']:g}, box fit {doc['box_fit']}); the "
                f"mean location +/- {doc['mean_std_error']:.4g} per column (1 std)",
                file=sys.stderr,
            )
        for f in doc["figures"]:
            extra = f" ({f['count_std']:.4g} records)" if "count_std" in f else ""
            print(f"  {f['figure']} +/- {f['expected_std']:.4g}{extra} (1 std)", file=sys.stderr)
    print_verdict(doc)
    return 0


def _quietly(run, *args, **kwargs):
    """`client.run` without its NoiseWarnings: the command prints them as `warning:` lines."""
    import warnings

    from leteo_fed.privacy.noise_gate import NoiseWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoiseWarning)
        return run(*args, **kwargs)


def released(result) -> dict:
    """The result document with its "warnings" (and a naive Bayes model's "std_errors"),
    after printing each released figure with its std error and a `warning:` line per figure
    the noise buries, on stderr."""
    doc = result.to_dict()
    if hasattr(result, "std_errors") and callable(result.std_errors):
        doc["std_errors"] = result.std_errors()
    found = result.release_warnings()
    doc["warnings"] = [w.to_dict() for w in found]
    print_release(doc)
    return doc


MAX_LINES = 40  # figures and warnings shown on the terminal (all are in the result file)


def print_release(doc: dict) -> None:
    """Each released figure beside its std error, then one `warning:` line per buried figure."""
    lines: list[str] = []
    if "estimates" in doc:
        n = doc["n"]
        for v, est in doc["estimates"].items():
            se = doc["std_errors"][v]
            lines.append(
                f"  {v}: {est:.6g} +/- {se:.3g} records (share {est / n:.4g} +/- {se / n:.3g})"
            )
    elif "priors" in doc:
        se = doc["std_errors"]
        for c, p in doc["priors"].items():
            lines.append(f"  prior {c}: {p:.4g} +/- {se['priors'][c]:.3g}")
        for name in doc["features"]:
            cond = doc["conditionals"][name]
            for i, value in enumerate(cond["values"]):
                cells = ", ".join(
                    f"{c} {cond['by_class'][c][i]:.3g} +/- {se['conditionals'][name][c][i]:.2g}"
                    for c in doc["classes"]
                )
                lines.append(f"  P({name} = {value} | class): {cells}")
    elif "means" in doc:
        for c in doc["columns"]:
            lines.append(f"  mean of {c}: {doc['means'][c]:.6g} +/- {doc['std_errors'][c]:.3g}")
    elif "mean" in doc and "points" in doc:
        for c, m, se in zip(doc["columns"], doc["mean"], doc["std_errors"], strict=True):
            lines.append(f"  mean of {c}: {m:.6g} +/- {se:.3g}")
    elif "mean" in doc:
        lines.append(f"  mean of {doc['column']}: {doc['mean']:.6g} +/- {doc['std_error']:.3g}")
    if lines:
        print("released (estimate +/- 1 std error):", file=sys.stderr)
    _print_capped(lines)
    _print_capped([f"warning: {say(w['message'])}" for w in doc["warnings"]])


def _print_capped(lines: list[str]) -> None:
    for line in lines[:MAX_LINES]:
        print(line, file=sys.stderr)
    if len(lines) > MAX_LINES:
        print(f"  ... and {len(lines) - MAX_LINES} more (all in the result file)", file=sys.stderr)
