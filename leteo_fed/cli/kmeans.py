"""`leteo-fed demo kmeans`: a federated k-means job on a local deployment.

`leteo-fed kmeans` (against running services) is generated from the statistic's declaration
(`cli.statistics`, `protocols.kmeans_round.Kmeans`). `add_parsers` adds the demo to the `demo`
group; `run` executes it. Errors are
LeteoError subclasses, which the main entry point turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from leteo_fed import extras
from leteo_fed.cli.options import (
    DP_DELTA_DEFAULT,
    DP_GROUP_TITLE,
    SubParsers,
    add_deadline,
    add_demo_insecure,
    add_demo_key_flags,
    add_demo_owners,
    add_out_folder,
    add_row_norm_bound,
    add_value_bound,
    bounds,
    csv_list,
    set_handler,
)
from leteo_fed.defaults import (
    DEMO_SEED,
    KMEANS_DEFAULT_ITERATIONS,
)
from leteo_fed.errors import ConfigError

if TYPE_CHECKING:
    pass

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


def add_parsers(demo: SubParsers) -> None:
    """`kmeans` under `demo` (`leteo-fed kmeans` is generated from its declaration:
    `cli.statistics`, `protocols.kmeans_round.Kmeans`)."""
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


def _add_common(p: argparse.ArgumentParser, default_out: Path) -> None:
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
    add_row_norm_bound(d, "--epsilon")
    add_out_folder(p, default_out)


def run(args: argparse.Namespace) -> int:
    """Check the centers' source, then run the demo."""
    if args.k is not None and args.k < 1:
        raise ConfigError(f"--k must be at least 1, got {args.k}", field="k")
    if args.init is not None and args.init_bounds is not None:
        raise ConfigError("pass either --init or --init-bounds, not both", field="init")
    return _run_demo(args)


def _run_demo(args: argparse.Namespace) -> int:
    extras.require("matplotlib")  # the clusters plot
    if args.data is None:
        extras.require("sklearn")  # the default data set
    from leteo_fed.demo.kmeans_runner import KmeansDemoOptions, run_kmeans_demo
    from leteo_fed.demo.runner import demo_keyholders

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
            keyholders=demo_keyholders(args.keyholders, args.threshold),
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
