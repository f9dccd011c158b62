"""`leteo-fed kmeans` (against running services) and `leteo-fed demo kmeans` (a local deployment).

`add_parsers` adds both sub-commands to the main parser; `run` executes them. Errors are
LeteoError subclasses, which the main entry point turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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

With --epsilon the whole job is (epsilon, delta)-DP: rows are clipped to --row-norm-bound,
each iteration gets epsilon/T and delta/T (T = --rounds) and every owner charges its ledger
once per iteration it takes part in. See docs/federated-kmeans.md.
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


def _add_common(p: argparse.ArgumentParser, default_out: Path) -> None:
    from leteo_fed.cli.main import _bounds

    g = p.add_argument_group("k-means")
    g.add_argument(
        "--k", type=int, default=None, help="number of clusters (default: from --init, else 3)"
    )
    g.add_argument(
        "--rounds",
        "--iterations",
        dest="rounds",
        type=int,
        default=10,
        help="maximum number of iterations T (default: 10)",
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
        type=_bounds,
        default=None,
        metavar="LO,HI",
        help="initial centers uniform in the public box [LO, HI]^d (seeded)",
    )
    g.add_argument("--value-bound", type=float, default=0.0, help="declared max |x| (default: 1e6)")
    g.add_argument(
        "--deadline", type=float, default=120.0, help="deadline of each iteration, s (default: 120)"
    )
    d = p.add_argument_group("differential privacy (distributed Skellam noise added by the owners)")
    d.add_argument(
        "--epsilon",
        "--dp-epsilon",
        dest="epsilon",
        type=float,
        default=None,
        help="the whole job is (epsilon, delta)-DP; each iteration gets epsilon / T",
    )
    d.add_argument(
        "--delta", "--dp-delta", dest="delta", type=float, default=None, help="default: 1e-6"
    )
    d.add_argument(
        "--row-norm-bound",
        type=float,
        default=None,
        help="DP: every row is clipped to this L2 norm (required with --epsilon)",
    )
    p.add_argument(
        "--out", type=Path, default=default_out, help=f"output folder (default: {default_out})"
    )


def add_parsers(sub, demo) -> None:
    """`kmeans` under the main sub-commands, `kmeans` under `demo`."""
    from leteo_fed.cli.main import _add_tls, _csv_list

    p = sub.add_parser(
        "kmeans",
        help="run a federated k-means job against running services",
        description=KMEANS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--aggregator", default="127.0.0.1:50052", help="aggregator address")
    p.add_argument(
        "--features", type=_csv_list, required=True, help="comma-separated feature columns"
    )
    _add_common(p, Path("out/kmeans"))
    p.add_argument("--init-seed", type=int, default=0, help="seed of --init-bounds (default: 0)")
    p.add_argument(
        "--min-owners", type=int, default=2, help="quorum per iteration (>= 2; default: 2)"
    )
    p.add_argument(
        "--owners", type=_csv_list, default=[], help="invite only these sites (default: all)"
    )
    p.add_argument(
        "--scale-bits", type=int, default=0, help="fixed-point fraction bits (default: 48; DP 16)"
    )
    _add_tls(p, "analyst", "analyst")

    p = demo.add_parser(
        "kmeans",
        help="federated k-means demo with real processes, mTLS and 2048-bit Paillier",
        description=DEMO_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data", type=Path, default=None, help="CSV or Parquet file (default: scikit-learn iris)"
    )
    p.add_argument(
        "--features", type=_csv_list, default=None, help="columns (default: all numeric)"
    )
    p.add_argument("--label-column", default=None, help="a column to leave out of the features")
    p.add_argument("--owners", type=int, default=3, help="number of owner agents (default: 3)")
    _add_common(p, Path("out/demo-kmeans"))
    p.add_argument(
        "--seed", type=int, default=7, help="seed of the row split and the initial centers"
    )
    p.add_argument("--key-bits", type=int, default=2048, help="Paillier key size (default: 2048)")
    p.add_argument(
        "--insecure-small-key",
        action="store_true",
        help="allow --key-bits below 2048 (experiments only)",
    )
    p.add_argument(
        "--insecure", action="store_true", help="run the demo without TLS (not recommended)"
    )


def run(args) -> int:
    from leteo_fed.errors import ConfigError

    if args.k is not None and args.k < 1:
        raise ConfigError(f"--k must be at least 1, got {args.k}", field="k")
    if args.init is not None and args.init_bounds is not None:
        raise ConfigError("pass either --init or --init-bounds, not both", field="init")
    if args.command == "demo":
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
    return _run_against_services(args)


def _run_against_services(args) -> int:
    from leteo_fed.cli.main import _tls
    from leteo_fed.client import AnalystClient, KmeansParams
    from leteo_fed.errors import ConfigError
    from leteo_fed.fileio import atomic_write_json
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
        init = {"source": "file", "path": str(args.init)}
    elif args.init_bounds is not None:
        lo, hi = args.init_bounds
        centers = km.random_centers(args.k or 3, lo, hi, d, args.init_seed)
        init = {"source": "uniform in --init-bounds", "bounds": [lo, hi], "seed": args.init_seed}
    else:
        raise ConfigError(
            "pass --init FILE.json or --init-bounds LO,HI: the initial centers are chosen "
            "without looking at the data",
            field="init",
        )
    params = KmeansParams(
        features=args.features,
        k=centers.shape[0],
        centers=centers.tolist(),
        iterations=args.rounds,
        tolerance=args.tolerance,
        min_owners=args.min_owners,
        deadline_seconds=args.deadline,
        scale_bits=args.scale_bits,
        value_bound=args.value_bound,
        owners=tuple(args.owners),
        dp_epsilon=args.epsilon,
        dp_delta=args.delta,
        row_norm_bound=args.row_norm_bound,
    )
    with AnalystClient(args.aggregator, _tls(args)) as client:
        result = client.run_kmeans(params)
    result["init"] = init
    out = Path(args.out) / "kmeans.json"
    atomic_write_json(out, result)
    keys = ("job_id", "owners", "iterations_run", "converged", "centers")
    print(json.dumps({k: result[k] for k in keys}))
    print(f"wrote {out}", file=sys.stderr)
    return 0
