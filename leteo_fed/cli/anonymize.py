"""`leteo-fed anonymize`: a generalized release of a dataset, checked on what was written.

The job itself lives in :mod:`leteo_fed.anonymize.job`; it runs in process or on Spark (the
[spark] extra), as --engine or the config say. This module maps the output folder --out DIR to
the job's two paths: the release DIR/release.csv (or DIR/release.parquet, a Parquet folder, with
--release-format parquet) and the report DIR/report.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leteo_fed import extras
from leteo_fed.cli.options import SubParsers, set_handler
from leteo_fed.errors import ConfigError

DEFAULT_OUT = "out/anonymize"
RELEASE_NAME = "release"  # DIR/release.csv or DIR/release.parquet
REPORT_NAME = "report.json"

DESCRIPTION = """\
Release a generalized copy of a dataset, in process or on Spark (same release either way):

  --engine auto   (default) in process when the input is a local file of at most
                  min(256 MiB, available memory / 8) of data, else Spark
  --engine local  in process: pyarrow reads and writes, NumPy anonymizes
  --engine spark  on Spark: local[*] unless SPARK_MASTER is set (e.g. spark://host:7077);
                  rows never reach the driver

Steps:

  1. drop direct identifiers, replace others by keyed HMAC-SHA256 pseudonyms;
  2. generalize the quasi-identifiers (Mondrian or TDS) until every equivalence class has
     >= k rows and meets the configured l-diversity / t-closeness on the sensitive columns;
  3. write the release atomically into the folder --out DIR: DIR/release.csv (one CSV file,
     the default) or, with --release-format parquet, DIR/release.parquet (a Parquet folder);
  4. measure k, l, t, NCP/GCP, discernibility and average class size ON THE WRITTEN OUTPUT
     into the JSON report DIR/report.json; publish only if every configured model holds (an
     existing release is replaced only then).

Minimal config (paths relative to the TOML file; every key in docs/anonymization.md):

  [anonymization]
  algorithm = "mondrian"          # or "tds"
  k = 10
  engine = "auto"                 # or "local" / "spark"; --engine overrides it
  [[quasi_identifier]]
  column = "age"
  type = "numeric"
  [[quasi_identifier]]
  column = "education"
  type = "categorical"
  hierarchy = "hierarchies/education.csv"   # ARX format: value;level1;...;*
  [[sensitive]]
  column = "disease"
  l_diversity = { variant = "distinct", l = 3 }
  t_closeness = { t = 0.2 }
  [identifiers]
  drop = ["ssn"]
  pseudonymize = ["patient_id"]
  key_env = "LETEO_HMAC_KEY"      # or key_file = "hmac.key" (mode 600), >= 16 bytes

Exit codes: 0 released; 2 refused (bad config, unknown column, missing value, value outside
its hierarchy, k or l/t that no output can reach), nothing written; 1 the run failed.
"""


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "anonymize",
        help="k-anonymize / l-diversify / t-close a dataset (Mondrian or TDS), in process or on Spark",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--input",
        required=True,
        metavar="PATH",
        help="CSV (with header) or Parquet: a file or folder; any Spark-readable path with "
        "--engine spark",
    )
    p.add_argument(
        "--config", type=Path, required=True, metavar="FILE", help="anonymization TOML file"
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder: writes DIR/{RELEASE_NAME}.csv (or .parquet) and DIR/{REPORT_NAME}; "
        f"an existing release is replaced only when the job succeeds (default: {DEFAULT_OUT})",
    )
    p.add_argument(
        "--release-format",
        choices=["csv", "parquet"],
        default="csv",
        help=f"csv: DIR/{RELEASE_NAME}.csv, one CSV file; parquet: DIR/{RELEASE_NAME}.parquet, "
        "a Parquet folder (default: csv)",
    )
    p.add_argument(
        "--format",
        choices=["csv", "parquet"],
        default=None,
        help="input format (default: from the input's name)",
    )
    p.add_argument(
        "--engine",
        choices=["auto", "local", "spark"],
        default=None,
        help="where the job runs (default: the config's anonymization.engine, else auto)",
    )
    set_handler(p, run)


def _score(value: float | None) -> str:
    return "inf" if value is None else f"{value:.4g}"


def output_paths(out: str, release_format: str, input_path: str) -> tuple[Path, Path]:
    """The release and report paths in the folder ``out``; refuses (ConfigError) an ``out`` that
    is not a local folder or whose files would land on or inside the input."""
    if "://" in out and not out.startswith("file://"):
        raise ConfigError(f"--out must be a local folder, got {out!r}", field="out")
    folder = Path(out.removeprefix("file://"))
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder} is a file; --out names a folder", field="out")
    release = folder / f"{RELEASE_NAME}.{release_format}"
    report = folder / REPORT_NAME
    if "://" not in input_path or input_path.startswith("file://"):
        data = Path(input_path.removeprefix("file://")).resolve()
        where = folder.resolve()
        target = where / release.name  # a Parquet release is a folder: nothing inside it either
        if data in (target, where / REPORT_NAME) or target in data.parents:
            raise ConfigError(
                f"--out {folder} would overwrite the input {input_path}; write the release "
                "somewhere else",
                field="out",
            )
        if data == where or data in where.parents:
            raise ConfigError(
                f"--out {folder} is the input {input_path} or inside it; write the release "
                "somewhere else",
                field="out",
            )
    return release, report


def run(args: argparse.Namespace) -> int:
    """Run the job; print what was released and which privacy models hold on it."""
    if args.engine == "spark":
        extras.require("pyspark")  # before anything is read (auto asks once it has chosen)
    from leteo_fed.anonymize.job import AnonymizationFailed, run_job

    release, report_file = output_paths(args.out, args.release_format, args.input)
    try:
        report = run_job(
            args.input,
            args.config,
            release,
            report_file,
            input_fmt=args.format,
            engine=args.engine,
            command=getattr(args, "command_line", None),
        )
    except AnonymizationFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows, privacy = report["rows"], report["privacy"]
    models = [f"k={privacy['k_anonymity']['achieved']}"]
    for c, e in privacy["l_diversity"].items():
        if e["variant"] == "recursive":  # achieved is r1 / (r_l + ... + r_m), must stay < c
            models.append(f"r1/tail[{c}]={_score(e['achieved'])} (< c={e['c']:g})")
        else:
            models.append(f"l[{c}]={_score(e['achieved'])}")
    models += [f"t[{c}]={_score(e['achieved'])}" for c, e in privacy["t_closeness"].items()]
    print(
        f"released {rows['out']} of {rows['in']} rows ({rows['suppressed']} suppressed) in "
        f"{report['classes']['count']} classes; {', '.join(models)}; "
        f"GCP {report['information_loss']['gcp']:.3f}; all models hold: {privacy['all_hold']}"
    )
    risk = report["risk"]["prosecutor"]
    print(
        f"re-identification risk (prosecutor): highest {risk['highest']:.3g}, average "
        f"{risk['average']:.3g}, {risk['records_at_risk']:.1%} of rows above {risk['threshold']:g}"
    )
    print(f"wrote {report['job']['output']} (engine {report['job']['engine']['used']})")
    print(f"report: {report['job']['report']}")
    return 0
