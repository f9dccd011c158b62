"""The data steward's anonymization job: read, check, pseudonymize, anonymize, write, measure.

Everything that can be refused is refused before the algorithm runs (bad config, unknown column,
missing values, a value outside its hierarchy, a short or exposed HMAC key). The output is first
written to a temporary sibling of the target, measured there (:mod:`report`), and only moved into
place when the suppression limit and every configured privacy model hold on it, so a failed job
leaves no output behind. Rows never reach the driver: Spark does the per-row work and the driver
sees counts, histograms and per-class summaries only.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leteo_fed import __version__
from leteo_fed.anonymize.config import (
    AnonymizationConfig,
    QuasiIdentifier,
    SensitiveAttribute,
    load_config,
)
from leteo_fed.anonymize.hierarchy import Hierarchy
from leteo_fed.anonymize.spark_columns import label_expr
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.fileio import atomic_write_json

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

Progress = Callable[[str], None]
FORMATS = ("csv", "parquet")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")
# RFC 4180 quoting ("" inside quotes), as Python's csv module and spreadsheets write it; Spark's
# default escape is a backslash.
CSV_QUOTING = {"quote": '"', "escape": '"'}


class AnonymizationFailed(Exception):
    """The run produced a release that does not meet its own configuration (a bug, not bad input).

    Not a :class:`~leteo_fed.errors.LeteoError`: the CLI reports it as a run failure (exit 1).
    """


def stderr_progress(line: str) -> None:
    """Default progress sink: one plain line per step on stderr."""
    print(line, file=sys.stderr, flush=True)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


# ---------------------------------------------------------------------------- input


def input_format(path: str, explicit: str | None = None) -> str:
    """``csv`` or ``parquet``: the explicit choice, else the name, else a local folder's files."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise ConfigError(f"--format must be one of {list(FORMATS)}, got {explicit!r}")
        return explicit
    name = path.rstrip("/").lower()
    if name.endswith(".csv") or any(name.endswith(".csv" + ext) for ext in _COMPRESSED):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    local = Path(path)
    if local.is_dir():
        names = [p.name.lower() for p in local.iterdir()]
        if any(n.endswith((".parquet", ".pq")) for n in names):
            return "parquet"
        if any(".csv" in n for n in names):
            return "csv"
    raise ConfigError(
        f"cannot tell the format of {path!r} from its name; pass --format csv|parquet"
    )


def read_input(spark: SparkSession, path: str, fmt: str, config: AnonymizationConfig) -> DataFrame:
    """Spark DataFrame of the input.

    CSV: only numeric quasi-identifiers and sensitive columns without a hierarchy keep Spark's
    inferred type; every other column is read as text, so '04767' or '007' are released (or
    matched against a hierarchy, or pseudonymized) exactly as written in the file.
    """
    from pyspark.errors import AnalysisException
    from pyspark.sql import types as T

    try:
        if fmt == "parquet":
            return spark.read.parquet(path)
        inferred = spark.read.csv(path, header=True, inferSchema=True, **CSV_QUOTING).schema
        typed = {q.column for q in config.quasi_identifiers if q.type == "numeric"}
        typed |= {s.column for s in config.sensitive if s.hierarchy is None}
        schema = T.StructType(
            [
                f if f.name in typed else T.StructField(f.name, T.StringType(), True)
                for f in inferred.fields
            ]
        )
        return spark.read.csv(path, header=True, schema=schema, enforceSchema=False, **CSV_QUOTING)
    except AnalysisException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot read {path!r} as {fmt}: {first}") from exc


def check_columns(df: DataFrame, config: AnonymizationConfig) -> None:
    """Every configured column must exist: name the first missing one and list the available."""
    wanted = [
        *((q.column, "quasi-identifier") for q in config.quasi_identifiers),
        *((s.column, "sensitive") for s in config.sensitive),
        *((c, "identifiers.drop") for c in config.identifiers.drop),
        *((c, "identifiers.pseudonymize") for c in config.identifiers.pseudonymize),
    ]
    for name, role in wanted:
        if name not in df.columns:
            raise DataError(
                f"{role} column {name!r} is not in the input; available columns: "
                + ", ".join(repr(c) for c in df.columns),
                field=name,
            )


@dataclass(frozen=True)
class InputSummary:
    """What one aggregation over the input tells: rows and each numeric QI's (min, max)."""

    rows: int
    spans: dict[str, float]


def validate_input(df: DataFrame, config: AnonymizationConfig) -> InputSummary:
    """Types, missing values and numeric spans of the QI / sensitive columns, in one pass."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in df.schema.fields}
    for q in config.quasi_identifiers:
        if q.type == "numeric" and not isinstance(types[q.column], T.NumericType):
            raise DataError(
                f"numeric quasi-identifier {q.column!r} is read as {types[q.column].simpleString()}"
                ", not a number; fix the data or declare it categorical with a hierarchy",
                field=q.column,
            )
    checked = [*config.qi_columns, *(s.column for s in config.sensitive)]
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i, name in enumerate(checked):
        c = _col(name)
        bad = c.isNull()
        if isinstance(types[name], (T.DoubleType, T.FloatType)):
            bad = bad | F.isnan(c)
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad{i}"))
    numeric = [q.column for q in config.quasi_identifiers if q.type == "numeric"]
    for i, name in enumerate(numeric):
        aggs += [F.min(_col(name)).alias(f"min{i}"), F.max(_col(name)).alias(f"max{i}")]
    res = df.agg(*aggs).first()
    rows = int(res["rows"]) if res is not None else 0
    if res is None or rows == 0:
        raise DataError("the input has no rows")
    for i, name in enumerate(checked):
        if res[f"bad{i}"]:
            raise DataError(
                f"column {name!r} has {res[f'bad{i}']} missing (null/NaN) value(s); "
                "quasi-identifiers and sensitive columns must be complete",
                field=name,
            )
    spans = {n: float(res[f"max{i}"]) - float(res[f"min{i}"]) for i, n in enumerate(numeric)}
    return InputSummary(rows, spans)


def check_hierarchies(
    df: DataFrame, config: AnonymizationConfig, hierarchies: dict[str, Hierarchy]
) -> None:
    """Every value of a column with a hierarchy must be one of its leaves (checked in Spark)."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    types = {f.name: f.dataType for f in df.schema.fields}
    specs: tuple[QuasiIdentifier | SensitiveAttribute, ...] = (
        *config.quasi_identifiers,
        *config.sensitive,
    )
    paths = {s.column: s.hierarchy for s in specs}
    for column, h in hierarchies.items():
        values = df.select(label_expr(_col(column), types[column]).alias("v")).distinct()
        leaves = spark.createDataFrame([(v,) for v in h.leaves], "v string")
        outside = values.join(F.broadcast(leaves), on="v", how="left_anti")
        missing = [r["v"] for r in outside.orderBy("v").limit(5).collect()]
        if missing:
            more = ", ".join(repr(v) for v in missing[1:])
            raise DataError(
                f"value {missing[0]!r} of column {column!r} is not in its hierarchy "
                f"({paths.get(column)})" + (f"; also missing: {more}" if more else ""),
                field=column,
            )


# ---------------------------------------------------------------------------- output


@dataclass(frozen=True)
class Output:
    """Where the release goes: a single CSV file, or a Parquet dataset folder."""

    path: Path
    fmt: str

    @classmethod
    def of(cls, target: str | Path) -> Output:
        text = str(target)
        if "://" in text and not text.startswith("file://"):
            raise ConfigError(f"--out must be a local path, got {text!r}")
        path = Path(text.removeprefix("file://")).absolute()
        fmt = "csv" if path.suffix.lower() == ".csv" else "parquet"
        if fmt == "csv" and path.is_dir():
            raise ConfigError(f"--out {path} is a folder; a .csv output is a single file")
        return cls(path, fmt)

    def staging(self) -> Path:
        """A sibling folder, so the final move stays on one file system.

        Not hidden: Spark skips paths starting with '.' or '_' when it lists a dataset.
        """
        return self.path.parent / f"{self.path.name}.tmp-{uuid.uuid4().hex[:12]}"


def write_staged(released: DataFrame, out: Output, staging: Path) -> Path:
    """Write the release under ``staging``; returns the file (CSV) or folder (Parquet) written."""
    out.path.parent.mkdir(parents=True, exist_ok=True)
    if out.fmt == "parquet":
        released.write.parquet(str(staging))
        return staging
    released.coalesce(1).write.csv(str(staging), header=True, **CSV_QUOTING)
    parts = sorted(staging.glob("part-*.csv"))
    if len(parts) != 1:
        raise AnonymizationFailed(f"expected one CSV part file in {staging}, found {len(parts)}")
    return parts[0]


def read_staged(spark: SparkSession, written: Path, out: Output, schema: Any) -> DataFrame:
    """Re-read what was written, with the schema it was written with (labels stay text)."""
    if out.fmt == "parquet":
        return spark.read.parquet(str(written))
    return spark.read.csv(
        str(written), header=True, schema=schema, enforceSchema=False, **CSV_QUOTING
    )


def publish(written: Path, staging: Path, out: Output) -> None:
    """Move the staged release into place; an existing output is replaced only after success."""
    old: Path | None = None
    if out.path.exists() or out.path.is_symlink():
        if out.fmt == "csv" and out.path.is_file():
            os.replace(written, out.path)  # atomic for a single file
            shutil.rmtree(staging, ignore_errors=True)
            return
        old = out.path.parent / f"{out.path.name}.old-{uuid.uuid4().hex[:12]}"
        os.replace(out.path, old)
    try:
        os.replace(written, out.path)
    except BaseException:
        if old is not None:
            os.replace(old, out.path)
        raise
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def default_report_path(out: Output) -> Path:
    """``released.csv`` -> ``released.report.json``; ``released/`` -> ``released.report.json``."""
    stem = out.path.stem if out.fmt == "csv" or out.path.suffix else out.path.name
    return out.path.with_name(f"{stem}.report.json")


# ---------------------------------------------------------------------------- the job


def _algorithm(name: str) -> Callable[..., tuple[DataFrame, Any]]:
    """The Spark algorithm's ``anonymize_dataframe``; imported lazily (TDS may be absent)."""
    if name == "mondrian":
        from leteo_fed.anonymize import spark_mondrian

        return spark_mondrian.anonymize_dataframe
    if name == "tds":
        try:
            from leteo_fed.anonymize import spark_tds
        except ImportError as exc:
            raise ConfigError(
                "algorithm 'tds' is not available in this build", field="anonymization.algorithm"
            ) from exc
        return spark_tds.anonymize_dataframe
    raise ConfigError(f"unknown algorithm {name!r}", field="anonymization.algorithm")


def prepare(df: DataFrame, config: AnonymizationConfig, key: bytes | None) -> DataFrame:
    """Drop direct identifiers and replace the pseudonymized ones by their keyed HMAC."""
    from leteo_fed.anonymize.pseudonymize import pseudonymize

    dropped = set(config.identifiers.drop)
    df = df.select(*[_col(c) for c in df.columns if c not in dropped])
    if config.identifiers.pseudonymize:
        assert key is not None
        df = pseudonymize(df, config.identifiers.pseudonymize, key)
    return df


def _check_release(measured: dict[str, Any], config: AnonymizationConfig) -> None:
    rows = measured["rows"]
    allowed = math.floor(config.suppression_limit * rows["in"] + 1e-9)
    if rows["suppressed"] > allowed:
        raise DataError(
            f"{rows['suppressed']} of {rows['in']} rows would be suppressed; "
            f"anonymization.suppression_limit = {config.suppression_limit} allows {allowed}",
            field="anonymization.suppression_limit",
        )


def _failed_models(measured: dict[str, Any]) -> list[str]:
    privacy = measured["privacy"]
    bad = [] if privacy["k_anonymity"]["holds"] else ["k-anonymity"]
    for model in ("l_diversity", "t_closeness"):
        bad += [f"{model}[{c}]" for c, e in privacy[model].items() if e["holds"] is False]
    return bad


def run_job(
    input_path: str | Path,
    config_path: str | Path,
    out_path: str | Path,
    report_path: str | Path | None = None,
    progress: Progress | None = stderr_progress,
    input_fmt: str | None = None,
) -> dict[str, Any]:
    """Anonymize ``input_path`` per the TOML at ``config_path``; returns the report (also written).

    Raises ConfigError / DataError / KeyStoreError (bad input, nothing written) or
    :class:`AnonymizationFailed` (the release missed its own privacy models; the report is
    written with ``published: false`` but the output is not).
    """
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    config = load_config(config_path)
    hierarchies = config.load_hierarchies()
    out = Output.of(out_path)
    if Path(str(input_path)).absolute() == out.path:
        raise ConfigError(f"--out {out.path} is the input; write the release somewhere else")
    report_file = Path(report_path) if report_path is not None else default_report_path(out)
    fmt = input_format(str(input_path), input_fmt)
    key = None
    if config.identifiers.pseudonymize:
        from leteo_fed.anonymize.pseudonymize import load_key

        key = load_key(config.identifiers)

    from leteo_fed.data.spark_stats import get_spark

    spark = get_spark()
    df = read_input(spark, str(input_path), fmt, config)
    check_columns(df, config)
    summary = validate_input(df, config)
    check_hierarchies(df, config, hierarchies)
    say(f"read {summary.rows} rows, {len(df.columns)} columns from {input_path} ({fmt})")
    t_read = time.perf_counter()

    anonymize = _algorithm(config.algorithm)
    released, stats = anonymize(prepare(df, config, key), config, hierarchies, progress=say)
    t_anon = time.perf_counter()

    from pyspark.sql import functions as F

    from leteo_fed.anonymize.report import measure_release
    from leteo_fed.anonymize.spark_mondrian import SUPPRESSED

    published = released.filter(~F.col(SUPPRESSED)).drop(SUPPRESSED)
    staging = out.staging()
    try:
        say(f"writing {out.fmt} to {out.path}")
        written = write_staged(published, out, staging)
        t_write = time.perf_counter()
        say("measuring the release")
        measured = measure_release(
            read_staged(spark, written, out, published.schema),
            config,
            hierarchies,
            rows_in=summary.rows,
            spans=summary.spans,
        )
        t_measure = time.perf_counter()
        _check_release(measured, config)
        failed = _failed_models(measured)
        report = _report(
            measured,
            config,
            stats,
            source=(str(input_path), fmt),
            out=out,
            report_file=report_file,
            published=not failed,
            timings={
                "read": t_read - t0,
                "anonymize": t_anon - t_read,
                "write": t_write - t_anon,
                "measure": t_measure - t_write,
            },
        )
        if failed:
            atomic_write_json(report_file, report)
            raise AnonymizationFailed(
                f"the release does not meet {', '.join(failed)}; nothing published "
                f"(report: {report_file})"
            )
        publish(written, staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report["timings_s"]["total"] = time.perf_counter() - t0
    try:
        atomic_write_json(report_file, report)
    except BaseException:
        _remove(out.path)
        raise
    return report


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _report(
    measured: dict[str, Any],
    config: AnonymizationConfig,
    stats: Any,
    *,
    source: tuple[str, str],
    out: Output,
    report_file: Path,
    published: bool,
    timings: dict[str, float],
) -> dict[str, Any]:
    rows = dict(measured["rows"])
    rows["suppression_limit"] = config.suppression_limit
    ids = config.identifiers
    return {
        "leteo_fed_version": __version__,
        "job": {
            "algorithm": config.algorithm,
            "config": str(config.source) if config.source else None,
            "input": source[0],
            "input_format": source[1],
            "output": str(out.path),
            "output_format": out.fmt,
            "published": published,
            "report": str(report_file),
        },
        "measured_on": "the written output, re-read with Spark (not taken from the algorithm)",
        "rows": rows,
        "classes": measured["classes"],
        "privacy": measured["privacy"],
        "information_loss": measured["information_loss"],
        "identifiers": {
            "dropped": list(ids.drop),
            "pseudonymized": list(ids.pseudonymize),
            "pseudonym": "HMAC-SHA256, lowercase hex" if ids.pseudonymize else None,
        },
        "algorithm_stats": {
            "rounds": int(stats.rounds),
            "partitions": int(stats.n_partitions),
            "rows": int(stats.n_rows),
            "suppressed": int(stats.n_suppressed),
        },
        "timings_s": dict(timings),
    }
