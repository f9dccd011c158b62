"""`leteo-fed kmeans` (against running services) and `leteo-fed demo kmeans` (a local deployment).

`add_parsers` adds both sub-commands to the main parser; `run` executes them. Errors are
LeteoError subclasses, which the main entry point turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leteo_fed import extras
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
    add_bounds_flags,
    add_deadline,
    add_demo_insecure,
    add_demo_key_flags,
    add_demo_owners,
    add_features,
    add_out_folder,
    add_round_flags,
    add_row_norm_bound,
    add_tls,
    add_value_bound,
    analyst_client,
    bounds,
    csv_list,
    set_handler,
)
from leteo_fed.cli.progress import ProgressPrinter
from leteo_fed.cli.round_output import print_release_truth, quiet_noise_warnings, round_options
from leteo_fed.defaults import (
    DEMO_SEED,
    KMEANS_DEFAULT_ITERATIONS,
    KMEANS_DEFAULT_SCALE_BITS,
    KMEANS_DP_DEFAULT_SCALE_BITS,
)
from leteo_fed.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

KMEANS_DESCRIPTION = """\
Federated k-means (Lloyd's algorithm) through the aggregator. For every iteration the
aggregator opens a round carrying the current centers; each owner assigns its rows to the
nearest center and sends Paillier-encrypted per-cluster sums and counts for all k clusters;
the aggregator adds the shares, blinds them, has the CSP decrypt only the blinded totals,
unblinds and moves every center to the mean of its cluster (an empty cluster keeps its
center). It stops after --rounds iterations or once no center moved more than --tolerance.
Without DP the result equals centralized Lloyd on the pooled rows from the same initial centers.

Initial centers: --init FILE.json with {"centers": [[...], ...]} (k rows of d values, in the
order of --features), or uniform in the public box --init-bounds LO,HI drawn with --init-seed.
They never depend on the data.

With --epsilon the whole job is (epsilon, delta)-DP: give public bounds per column in natural
units (--bounds age=17,90, repeated, or --codebook FILE; --init centers in the same units):
every owner clips each value to them and the job runs on the scaled columns (experts: rows
clipped to --row-norm-bound instead). Each iteration's noise is calibrated so that the T =
--rounds iterations together meet (epsilon, delta) by Renyi composition, and every owner's
ledger composes them the same way. After the job, each center and cluster size is printed
with its noise, and a warning names a cluster the noise may have emptied. See
docs/federated-kmeans.md.
"""

DEMO_DESCRIPTION = """\
Start a CSP, an aggregator and N owner agents as separate local processes (mTLS, fresh
certificates, 2048-bit Paillier), split a data set horizontally across the owners, run a
federated k-means job, then run centralized Lloyd on the pooled rows from the same initial
centers and print the largest difference. Writes OUT/kmeans.json and OUT/kmeans_clusters.png
(a PCA projection of the rows coloured by cluster, with the centers' paths); stops every process.

Default data: scikit-learn's iris set (150 x 4, k = 3), initial centers uniform in the
published ranges of its features.
"""

DEFAULT_K = 3  # without --init; the demo's iris set has three species


def add_parsers(sub: SubParsers, demo: SubParsers) -> None:
    """`kmeans` under the main sub-commands, `kmeans` under `demo`."""
    p = sub.add_parser(
        "kmeans",
        help="run a federated k-means job against running services",
        description=KMEANS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_aggregator_address(p)
    add_features(p)
    _add_common(p, Path("out/kmeans"), column_bounds=True)
    p.add_argument("--init-seed", type=int, default=0, help="seed of --init-bounds (default: 0)")
    add_round_flags(
        p,
        "quorum per iteration",
        deadline=None,
        scale_default=f"{KMEANS_DEFAULT_SCALE_BITS}; DP {KMEANS_DP_DEFAULT_SCALE_BITS}",
        value_bound=False,
    )
    add_noise_flags(p, "each new center per iteration")
    add_tls(p, "analyst", "analyst")
    set_handler(p, run)

    p = demo.add_parser(
        "kmeans",
        help="federated k-means demo with real processes, mTLS and 2048-bit Paillier",
        description=DEMO_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data", type=Path, default=None, help="CSV or Parquet file (default: scikit-learn iris)"
    )
    p.add_argument("--features", type=csv_list, default=None, help="columns (default: all numeric)")
    p.add_argument("--label-column", default=None, help="a column to leave out of the features")
    add_demo_owners(p)
    _add_common(p, Path("out/demo-kmeans"))
    p.add_argument(
        "--seed", type=int, default=DEMO_SEED, help="seed of the row split and the initial centers"
    )
    add_demo_key_flags(p)
    add_demo_insecure(p)
    set_handler(p, run)


def _add_common(p: argparse.ArgumentParser, default_out: Path, column_bounds: bool = False) -> None:
    g = p.add_argument_group("k-means")
    g.add_argument(
        "--k",
        type=int,
        default=None,
        help=f"number of clusters (default: from --init, else {DEFAULT_K})",
    )
    g.add_argument(
        "--rounds",
        "--iterations",
        dest="rounds",
        type=int,
        default=KMEANS_DEFAULT_ITERATIONS,
        help=f"maximum number of iterations T (default: {KMEANS_DEFAULT_ITERATIONS})",
    )
    g.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="stop once no center moves more than this (L2; default 0: when nothing moves)",
    )
    g.add_argument(
        "--init",
        type=Path,
        default=None,
        metavar="FILE.json",
        help='initial centers: {"centers": [[...], ...]}, k rows of d values',
    )
    g.add_argument(
        "--init-bounds",
        type=bounds,
        default=None,
        metavar="LO,HI",
        help="initial centers uniform in the public box [LO, HI]^d (seeded)",
    )
    add_value_bound(g)
    add_deadline(g, "deadline of each iteration, s")
    d = p.add_argument_group(DP_GROUP_TITLE)
    d.add_argument(
        "--epsilon",
        "--dp-epsilon",
        dest="epsilon",
        type=float,
        default=None,
        help="the whole job is (epsilon, delta)-DP: each iteration's noise is calibrated so "
        "that the T iterations together meet it (Renyi composition)",
    )
    d.add_argument(
        "--delta", "--dp-delta", dest="delta", type=float, default=None, help=DP_DELTA_DEFAULT
    )
    if column_bounds:  # against services: public bounds per column, natural units
        add_bounds_flags(d)
    else:
        add_row_norm_bound(d, "--epsilon")
    add_out_folder(p, default_out)


def run(args: argparse.Namespace) -> int:
    """Check the centers' source, then run the demo or the job against running services."""
    if args.k is not None and args.k < 1:
        raise ConfigError(f"--k must be at least 1, got {args.k}", field="k")
    if args.init is not None and args.init_bounds is not None:
        raise ConfigError("pass either --init or --init-bounds, not both", field="init")
    if args.command == "demo":
        return _run_demo(args)
    return _run_against_services(args)


def _run_demo(args: argparse.Namespace) -> int:
    extras.require("matplotlib")  # the clusters plot
    if args.data is None:
        extras.require("sklearn")  # the default data set
    from leteo_fed.demo.kmeans_runner import KmeansDemoOptions, run_kmeans_demo

    run_kmeans_demo(
        KmeansDemoOptions(
            data=args.data,
            features=args.features,
            label_column=args.label_column,
            owners=args.owners,
            k=args.k or 0,
            rounds=args.rounds,
            tolerance=args.tolerance,
            init=args.init,
            init_bounds=args.init_bounds,
            seed=args.seed,
            key_bits=args.key_bits,
            allow_small_key=args.insecure_small_key,
            value_bound=args.value_bound,
            deadline=args.deadline,
            out=args.out,
            insecure=args.insecure,
            epsilon=args.epsilon,
            delta=args.delta,
            row_norm_bound=args.row_norm_bound,
        )
    )
    return 0


def _initial_centers(args: argparse.Namespace) -> tuple[np.ndarray, dict[str, Any]]:
    """The job's initial centers and how they were chosen; never from the data."""
    from leteo_fed.protocols import kmeans as km

    d = len(args.features)
    if args.init is not None:
        centers = km.load_centers(args.init)
        if args.k is not None and args.k != centers.shape[0]:
            raise ConfigError(
                f"--k {args.k} but {args.init} holds {centers.shape[0]} centers", field="k"
            )
        if centers.shape[1] != d:
            raise ConfigError(
                f"{args.init} has centers of dimension {centers.shape[1]}; --features names {d}",
                field="init",
            )
        return centers, {"source": "file", "path": str(args.init)}
    if args.init_bounds is not None:
        lo, hi = args.init_bounds
        centers = km.random_centers(args.k or DEFAULT_K, lo, hi, d, args.init_seed)
        return centers, {
            "source": "uniform in --init-bounds",
            "bounds": [lo, hi],
            "seed": args.init_seed,
        }
    raise ConfigError(
        "pass --init FILE.json or --init-bounds LO,HI: the initial centers are chosen "
        "without looking at the data",
        field="init",
    )


def _run_against_services(args: argparse.Namespace) -> int:
    from leteo_fed.client import output_file
    from leteo_fed.fileio import atomic_write_json
    from leteo_fed.protocols.kmeans_round import KmeansRequest

    centers, init = _initial_centers(args)
    request = KmeansRequest(
        features=tuple(args.features),
        k=centers.shape[0],
        centers=tuple(float(v) for row in centers.tolist() for v in row),
        iterations=args.rounds,
        tolerance=args.tolerance,
    )
    options = round_options(args, dp_epsilon=args.epsilon, dp_delta=args.delta)  # the whole job's
    from leteo_fed.protocols.kmeans_round import kmeans_noise_preview

    stop = check_locally(request, options, kmeans_noise_preview, args, _dry_run, "--epsilon")
    if stop is not None:
        return stop
    progress = ProgressPrinter()
    with analyst_client(args) as client, quiet_noise_warnings():
        result = client.run(request, options, on_tick=progress.tick).to_dict()
    progress.done()
    result["init"] = init
    out = Path(args.out) / output_file(request)
    atomic_write_json(out, result)
    keys = ("job_id", "owners", "iterations_run", "converged", "centers")
    print(json.dumps({k: result[k] for k in keys}))
    print_release_truth(result)
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _dry_run(plan, rows: int | None) -> int:
    """Print what the noise of each iteration does to the centers; nothing is sent."""
    from leteo_fed.protocols.kmeans_round import kmeans_noise_preview

    doc = print_preview(plan, kmeans_noise_preview, rows)
    print(
        f"each iteration adds noise of std {doc['noise_std_per_sum']:.4g} to every cluster sum "
        f"and {doc['noise_std_per_count_rows']:.4g} rows to every count; the "
        f"{doc['iterations']} iterations together are (epsilon {doc['epsilon']:g}, delta "
        f"{doc['delta']:g})-DP by Renyi composition ({doc['accountant']} accountant; one "
        f"iteration alone: epsilon {doc['epsilon_per_iteration']:.4g})",
        file=sys.stderr,
    )
    if rows is None:
        print("give --rows N for the expected error of each center", file=sys.stderr)
    else:
        err = doc["center_rms_error"][0]
        print(
            f"  each center moves by about {err:.4g} per iteration (RMS, for clusters of "
            f"{rows / plan.spec.k:.0f} rows near 0; smaller clusters and centers far from 0 are "
            "noisier)",
            file=sys.stderr,
        )
    print_verdict(doc)
    return 0
