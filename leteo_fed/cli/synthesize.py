"""`leteo-fed synthesize`: a DP synthetic copy of a table (docs/synthetic-data.md).

The job lives in :mod:`leteo_fed.synth.job`; this module maps flags to it, shows progress on
stderr and prints what was released.
"""

from __future__ import annotations

import argparse
import secrets
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

from leteo_fed import extras
from leteo_fed.cli.options import SubParsers, set_handler
from leteo_fed.errors import ConfigError

DEFAULT_OUT = "out/synthesize"

DESCRIPTION = """\
Release a synthetic table with epsilon-differential privacy (pure DP, Laplace noise), by the
micro-aggregation method with a clustering that no single record can move:

  1. encode the columns declared in the config (public bounds and domains): numerics clipped
     and scaled to [0, 1], categoricals one-hot; a missing value or a value outside a domain
     is refused by name;
  2. group the columns: the config's list, or groups = "dp" (DP class sizes, then up to 8
     noisy-max picks of the column pair farthest from independence, each merging two groups
     if it clears the noise and a strength floor; its epsilon is counted; on small tables or
     at a small epsilon it often picks none, and then says so: only merges that add no
     histogram noise join columns);
  3. per class (label) and group: a DP histogram over the group's public grid, cells walked in
     a fixed Z-order and cut into clusters of >= k noisy rows;
  4. per cluster: noisy sums of x and x x^T give a mean and a covariance (repaired to PSD);
  5. rows drawn from N(mean, covariance) per cluster, groups stitched at random within a class.

Or, with method = "marginals" in [synthesize] (the [synth] extra), a marginal-based method of
the MST family: noisy (label, column) marginals, a spanning tree of column pairs chosen by the
exponential mechanism, their noisy (label, column, column) marginals, a graphical model fitted
to them by Private-PGM, rows drawn from it. Stronger where the label matters (classifiers
trained on the rows); numeric values are uniform within their bins.

Writes, only once everything is computed: DIR/synthetic.csv (or DIR/synthetic.parquet with
--release-format parquet) and DIR/report.json (epsilon, the budget split, groups and clusters
or the tree, warnings such as a column that came out constant;
its `holder_only` section holds the seed, exact clipped counts, the engine and timings: keep it
private, the seed determines the noise).

  --engine auto   (default) in process for a local input of at most min(256 MiB, memory / 8)
  --engine local  in process (NumPy)
  --engine spark  on Spark (local[*] unless SPARK_MASTER is set); rows never reach the driver
  Both engines write the same table for the same --seed and config.

Minimal config (every key in docs/synthetic-data.md; Adult: examples/synth-adult.toml):

  [synthesize]
  epsilon = 1.0
  k = 50
  groups = [["age", "hours-per-week"], ["sex"]]   # or "dp"
  label = "income"
  classes = ["<=50K", ">50K"]
  [[column]]
  name = "age"
  type = "numeric"
  lo = 17
  hi = 90
  integer = true
  bins = 8
  [[column]]
  name = "hours-per-week"
  type = "numeric"
  lo = 1
  hi = 99
  integer = true
  [[column]]
  name = "sex"
  type = "categorical"
  categories = ["Female", "Male"]

Exit codes: 0 written; 2 refused (bad config or epsilon, unknown column, missing value, value
outside its domain, a grid over max_cells), nothing written; 1 the run failed.
"""


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "synthesize",
        help="DP synthetic data by insensitive micro-aggregation, in process or on Spark",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--input", required=True, metavar="PATH", help="CSV (with header) or Parquet")
    p.add_argument("--config", type=Path, required=True, metavar="FILE", help="synth.toml")
    p.add_argument(
        "--out",
        type=Path,
        default=Path(DEFAULT_OUT),
        metavar="DIR",
        help=f"output folder for synthetic.csv and report.json (default: {DEFAULT_OUT})",
    )
    p.add_argument(
        "--epsilon", type=float, default=None, help="total epsilon (default: the config's)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of every noise draw and sample (default: 63 random bits, recorded in the "
        "report's holder_only section); keep it secret: it determines the noise",
    )
    p.add_argument(
        "--engine",
        choices=["auto", "local", "spark"],
        default=None,
        help="where the job runs (default: the config's synthesize.engine, else auto)",
    )
    p.add_argument(
        "--rows",
        type=int,
        default=None,
        metavar="N",
        help="rows to generate in total (default: each class's noisy size)",
    )
    p.add_argument(
        "--holdout",
        type=float,
        default=None,
        metavar="FRACTION",
        help="in process only: keep this share of the input rows (drawn with the seed) out of "
        "the model, to measure the release's distance to closest record and a membership "
        "attack against them (report.html and report.json's holder_only.disclosure); e.g. 0.2",
    )
    p.add_argument(
        "--release-format",
        choices=["csv", "parquet"],
        default="csv",
        help="csv: DIR/synthetic.csv; parquet: DIR/synthetic.parquet, a folder (default: csv)",
    )
    p.add_argument(
        "--format",
        choices=["csv", "parquet"],
        default=None,
        help="input format (default: from the input's name)",
    )
    set_handler(p, run)


def _progress(start: float) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(f"[{time.monotonic() - start:6.1f}s] {message}", file=sys.stderr, flush=True)

    return say


def run(args: argparse.Namespace) -> int:
    if args.engine == "spark":
        extras.require("pyspark")  # before anything is read (auto asks once it has chosen)
    from leteo_fed.synth.job import REPORT_NAME, run_job

    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"--out {args.out} is a file; --out names a folder", field="out")
    seed = secrets.randbits(63) if args.seed is None else args.seed
    command = ["leteo-fed", "synthesize", "--input", args.input, "--config", str(args.config)]
    command += ["--out", str(args.out), "--seed", str(seed)]
    command += ["--release-format", args.release_format]
    for flag, value in (
        ("--epsilon", args.epsilon),
        ("--engine", args.engine),
        ("--rows", args.rows),
        ("--format", args.format),
        ("--holdout", args.holdout),
    ):
        if value is not None:
            command += [flag, str(value)]
    say = _progress(time.monotonic())
    report, _ = run_job(
        args.input,
        args.config,
        args.out,
        epsilon=args.epsilon,
        seed=seed,
        engine=args.engine,
        rows=args.rows,
        input_fmt=args.format,
        release_format=args.release_format,
        command=[shlex.quote(c) for c in command],
        progress=say,
        holdout=args.holdout,
        seed_source="command line" if args.seed is not None else "drawn at random (not given)",
    )
    private = report["holder_only"]
    privacy = f"delta {report['delta']:g}" if report["delta"] else "pure DP"
    if report["tree"] is not None:
        shape = f"a DP tree of {len(report['tree']['edges'])} 2-way marginals"
    else:
        clusters = sum(c["clusters"] for c in report["clusters"])
        groups = report["groups"]
        shape = (
            f"{len(groups['columns'])} groups ({groups['provenance']}), {clusters} clusters, "
            f"k = {report['k']}"
        )
    print(
        f"released {report['output']['rows']} synthetic rows at epsilon {report['epsilon']:g} "
        f"({privacy}, method {report['method']}), {shape}, in "
        f"{private['timings_seconds']['total']:.1f} s (engine {private['engine']['used']})"
    )
    for warning in report["warnings"]:
        print(f"warning: {warning}")
    print(f"wrote {report['output']['path']}")
    print(f"report: {args.out / REPORT_NAME} (keep its holder_only section private)")
    return 0
