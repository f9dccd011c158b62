"""The options of ``leteo-fed bench pca`` (PCA and DCA share cost), and what benchmarks share.

This module only declares the command-line options (argparse, nothing heavy), so building the
CLI parser stays cheap; the measurements are a benchmark of the source checkout,
``benchmarks/bench_pca_share.py`` (``make bench``), not part of the installed package.
"""

from __future__ import annotations

import argparse
from pathlib import Path

BENCH_METHODS = ("pca", "dca")
DEFAULT_FEATURES = (8, 10, 14, 24, 34, 50)  # feature counts of the published figures
DEFAULT_KEY_BITS = (1024, 2048)
DEFAULT_OWNERS = 10
DEFAULT_CLASSES = 2
DEFAULT_ROWS = 10_000
DEFAULT_REPEATS = 3
DEFAULT_PHE_SAMPLE = 40
QUICK_FEATURES = (8,)
QUICK_KEY_BITS = (1024,)
QUICK_ROWS = 1_000
QUICK_REPEATS = 1
QUICK_PHE_SAMPLE = 10

DESCRIPTION = """\
Measure the cost of a PCA or DCA share round through the owner agent's, the aggregator's and the
CSP's own code: owner time per share, aggregator time per share, the CSP's verification, sum and
decryption of the masked aggregate and the eigendecomposition, for every feature count and key
size, next to a per-element `phe` baseline measured in the same run, plus published reference
figures (1024-bit Paillier, 10 owners) for comparison. Every row is checked against NumPy on the
pooled synthetic data (max_rel_eig_error). Runs benchmarks/bench_pca_share.py of a source
checkout (`make bench`); needs the [bench] extra.

With --keyholders M --threshold T (both or neither; T must be a majority of M), the key is a
product of two safe primes, held whole by the CSP and dealt as a T-of-M threshold key of the same
modulus: after the single CSP, each of the M key holders is measured on the same round (the same
relayed stream: its own verify and sum, partial decryption on every core, its proof), then the
combiner (the aggregator's product of the shares, T proofs verified, Lagrange combination),
whose plaintexts must equal the CSP's exactly; one more table and the threshold targets (each
holder <= 1 s, combination <= 0.2 s at d = 50, 2048 bits).

Prints a table on stdout (progress on stderr) and writes a JSON list of rows to --out.
1024-bit keys are below the 2048-bit minimum of the services: used here only to compare with
the published 1024-bit figures. Timings are wall clock (the CSP decrypts on its worker
processes, as the service does); other load on the machine skews them.
"""


def int_list(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from exc
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def add_pca_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``leteo-fed bench pca`` (also used by ``benchmarks/bench_pca_share.py``)."""
    p.add_argument(
        "--method",
        choices=BENCH_METHODS,
        default="pca",
        help="pca: shares R, V, Q; dca: R and per-class V_k, M_k",
    )
    p.add_argument(
        "--features",
        type=int_list,
        default=None,
        help="comma-separated feature counts (default: 8,10,14,24,34,50; --quick: 8)",
    )
    p.add_argument(
        "--owners",
        type=int,
        default=DEFAULT_OWNERS,
        help=f"owners in the aggregate (default: {DEFAULT_OWNERS})",
    )
    p.add_argument(
        "--key-bits",
        type=int_list,
        default=None,
        help="comma-separated Paillier modulus sizes (default: 1024,2048; --quick: 1024)",
    )
    p.add_argument(
        "--classes",
        type=int,
        default=DEFAULT_CLASSES,
        help=f"DCA only: classes of the label (default: {DEFAULT_CLASSES}, like the binary "
        "data sets of the published figures)",
    )
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        help=f"rows per owner (default: {DEFAULT_ROWS:,}; --quick: {QUICK_ROWS:,})",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"runs per measurement, median reported (default: {DEFAULT_REPEATS}; "
        f"--quick: {QUICK_REPEATS})",
    )
    p.add_argument(
        "--phe-sample",
        type=int,
        default=None,
        help="per-element phe operations timed per row; the baseline is extrapolated from them "
        f"(default: {DEFAULT_PHE_SAMPLE}; --quick: {QUICK_PHE_SAMPLE})",
    )
    p.add_argument(
        "--keyholders",
        type=int,
        default=None,
        metavar="M",
        help="also measure a threshold key of the CSP's modulus dealt to M key holders: each "
        "holder's verify + sum + partial decryption + proof and the combination of T of them, "
        "on the same round as the single CSP (needs --threshold; default: no threshold "
        "measurement)",
    )
    p.add_argument(
        "--threshold",
        type=int,
        default=None,
        metavar="T",
        help="with --keyholders: how many holders decrypt (a majority: M/2 < T <= M)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (default: 0)")
    p.add_argument(
        "--randomizer",
        choices=("short-exponent", "fixed-base"),
        default="short-exponent",
        help="the owners' Paillier randomizer: short-exponent (the default, exponents of half "
        "the key's bits) or fixed-base (full-length exponents, statistically hiding); see "
        "docs/pca-protocol.md",
    )
    p.add_argument(
        "--out",
        "--json",
        dest="out",
        type=Path,
        default=None,
        help="JSON output (default: out/bench_METHOD_share.json; --quick: "
        "out/bench_METHOD_share_quick.json)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: d=8, 1024-bit key, 1,000 rows per owner, one repeat",
    )
