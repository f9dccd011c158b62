"""`leteo-fed bench pca`: share, aggregation, decryption and eigendecomposition timings.

The options come from :mod:`leteo_fed.bench` (argparse only); the measurements, which compare
with the `phe` library of the [bench] extra, are imported when the benchmark runs.
"""

from __future__ import annotations

import argparse

from leteo_fed import extras
from leteo_fed.cli.options import SubParsers, set_handler


def add_parser(sub: SubParsers) -> None:
    from leteo_fed.bench import DESCRIPTION, add_pca_arguments

    bench = sub.add_parser("bench", help="benchmarks (PCA and DCA share costs)")
    p = bench.add_subparsers(dest="action", required=True, metavar="BENCH").add_parser(
        "pca",
        help="owner, aggregator, CSP and eigendecomposition times per feature count vs phe",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_pca_arguments(p)
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    extras.require("phe")
    from leteo_fed.bench.share_bench import run_cli

    return run_cli(args)
