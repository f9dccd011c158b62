"""The anonymization job's Spark engine: read, check, pseudonymize, anonymize, write, summarize.

Rows never reach the driver: Spark does the per-row work and the driver sees counts, histograms
and per-class summaries only. A CSV input is read as text and typed by :mod:`models.kinds` in one
aggregation that also finds missing values and the numeric spans; the checks themselves are
shared with the in-process engine (:mod:`engines.local.job`), so both refuse the same inputs
with the same words. The policy around this (engine choice, suppression limit, publishing) is in
:mod:`job`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leteo_fed.anonymize.engines.base import AnonymizationFailed, JobInput, Staged, phase_timings
from leteo_fed.anonymize.engines.spark.columns import label_expr
from leteo_fed.anonymize.engines.spark.scan import scan_spark, spark_kind
from leteo_fed.anonymize.inputs import check_columns, outside_hierarchy
from leteo_fed.anonymize.models import kinds as K
from leteo_fed.anonymize.models.config import (
    AnonymizationConfig,
    QuasiIdentifier,
    SensitiveAttribute,
)
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.output import Output
from leteo_fed.errors import ConfigError, DataError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# RFC 4180 quoting ("" inside quotes), as Python's csv module and spreadsheets write it; Spark's
# default escape is a backslash. Written cells keep their spaces (Spark trims them by default).
CSV_QUOTING = {"quote": '"', "escape": '"'}
CSV_WRITE: dict[str, Any] = {
    **CSV_QUOTING,
    "ignoreLeadingWhiteSpace": False,
    "ignoreTrailingWhiteSpace": False,
}
_RAW = "_leteo_raw_"  # prefix of the text copies of typed sensitive columns (CSV in, CSV out)


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def read_input(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    """The input as Spark reads it: every CSV column as text, Parquet with its stored types."""
    from pyspark.errors import AnalysisException

    try:
        if fmt == "parquet":
            return spark.read.parquet(path)
        return spark.read.csv(path, header=True, **CSV_QUOTING)
    except AnalysisException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot read {path!r} as {fmt}: {first}") from exc


def _spark_type(kind: str) -> str:
    return "long" if kind == K.INTEGER else "double"


def typed_frame(df: DataFrame, config: AnonymizationConfig, summary: K.InputSummary) -> DataFrame:
    """Numeric QIs and numeric sensitive columns as numbers (text copies kept for a CSV out)."""
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in df.schema.fields}
    wanted = K.typed_columns(config, summary)
    keep_text = K.numeric_sensitive(config, summary)  # released as read when the output is CSV
    cols, raw = [], []
    for name in df.columns:
        if name in wanted and isinstance(types[name], T.StringType):
            cols.append(_col(name).cast(_spark_type(summary.kinds[name])).alias(name))
            if name in keep_text:
                raw.append(_col(name).alias(_RAW + name))
        else:
            cols.append(_col(name))
    return df.select(*cols, *raw)


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
            raise DataError(outside_hierarchy(column, paths.get(column), missing), field=column)


def prepare(df: DataFrame, config: AnonymizationConfig, key: bytes | None) -> DataFrame:
    """Drop direct identifiers and replace the pseudonymized ones by their keyed HMAC."""
    from leteo_fed.anonymize.engines.spark.pseudonymize import pseudonymize

    dropped = set(config.identifiers.drop)
    df = df.select(*[_col(c) for c in df.columns if c not in dropped])
    if config.identifiers.pseudonymize:
        assert key is not None
        df = pseudonymize(df, config.identifiers.pseudonymize, key)
    return df


def algorithm(name: str) -> Callable[..., tuple[DataFrame, Any]]:
    """The Spark algorithm's ``anonymize_dataframe``; imported lazily (TDS may be absent)."""
    if name == "mondrian":
        from leteo_fed.anonymize.engines.spark import mondrian

        return mondrian.anonymize_dataframe
    if name == "tds":
        try:
            from leteo_fed.anonymize.engines.spark import tds
        except ImportError as exc:
            raise ConfigError(
                "algorithm 'tds' is not available in this build", field="anonymization.algorithm"
            ) from exc
        return tds.anonymize_dataframe
    raise ConfigError(f"unknown algorithm {name!r}", field="anonymization.algorithm")


def output_frame(
    released: DataFrame,
    columns: list[str],
    config: AnonymizationConfig,
    summary: K.InputSummary,
    fmt_in: str,
    out: Output,
) -> DataFrame:
    """The published columns: text as read for a CSV out, typed by kind for a Parquet out;
    QIs are labels and pseudonyms hex text either way."""
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in released.schema.fields}
    as_text = {*config.qi_columns, *config.identifiers.pseudonymize}
    cols = []
    for name in columns:
        kind = summary.kinds.get(name, K.TEXT)
        if name in as_text:
            cols.append(_col(name))
        elif out.fmt == "csv" and _RAW + name in types:
            cols.append(_col(_RAW + name).alias(name))
        elif (
            out.fmt == "parquet"
            and fmt_in == "csv"
            and kind in K.NUMERIC
            and isinstance(types[name], T.StringType)
        ):
            cols.append(_col(name).cast(_spark_type(kind)).alias(name))
        else:
            cols.append(_col(name))
    return released.select(*cols)


def write_staged(published: DataFrame, out: Output, staging: Path) -> Path:
    """Write the release under ``staging``; returns the file (CSV) or folder (Parquet) written."""
    out.path.parent.mkdir(parents=True, exist_ok=True)
    if out.fmt == "parquet":
        published.write.parquet(str(staging))
        return staging
    published.coalesce(1).write.csv(str(staging), header=True, **CSV_WRITE)
    parts = sorted(staging.glob("part-*.csv"))
    if len(parts) != 1:
        raise AnonymizationFailed(f"expected one CSV part file in {staging}, found {len(parts)}")
    return parts[0]


def read_staged(
    spark: SparkSession,
    written: Path,
    out: Output,
    config: AnonymizationConfig,
    summary: K.InputSummary,
) -> DataFrame:
    """Re-read what was written; numeric sensitive columns of a CSV out as numbers again."""
    if out.fmt == "parquet":
        return spark.read.parquet(str(written))
    df = spark.read.csv(str(written), header=True, multiLine=True, **CSV_QUOTING)
    numeric = K.numeric_sensitive(config, summary)
    cols = [
        _col(c).cast(_spark_type(summary.kinds[c])).alias(c) if c in numeric else _col(c)
        for c in df.columns
    ]
    return df.select(*cols)


def release(job: JobInput, staging: Path, say: Callable[[str], None]) -> Staged:
    """Run the job on Spark up to a measured release in ``staging``."""
    from pyspark.sql import functions as F

    from leteo_fed.anonymize.engines.spark.mondrian import SUPPRESSED
    from leteo_fed.anonymize.engines.spark.summary import measure_spark_release
    from leteo_fed.data.spark_stats import get_spark

    t0 = time.perf_counter()
    config, out = job.config, job.out
    spark = get_spark()
    df = read_input(spark, job.path, job.fmt)
    check_columns(df.columns, config)
    rows, scans = scan_spark(df, K.scanned_columns(config, df.columns, job.fmt))
    stored = {f.name: spark_kind(f.dataType) for f in df.schema.fields}
    kinds = K.resolve(config, job.fmt, df.columns, rows, scans, stored)
    summary = K.check_input(config, rows, kinds, scans)
    typed = typed_frame(df, config, summary)
    check_hierarchies(typed, config, job.hierarchies)
    say(f"read {summary.rows} rows, {len(df.columns)} columns from {job.path} ({job.fmt})")
    t_read = time.perf_counter()

    anonymize = algorithm(config.algorithm)
    released, stats = anonymize(
        prepare(typed, config, job.key), config, job.hierarchies, progress=say
    )
    t_anon = time.perf_counter()

    kept = [c for c in df.columns if c not in set(config.identifiers.drop)]
    published = output_frame(
        released.filter(~F.col(SUPPRESSED)), kept, config, summary, job.fmt, out
    )
    say(f"writing {out.fmt} to {out.path}")
    written = write_staged(published, out, staging)
    t_write = time.perf_counter()
    say("measuring the release")
    measured = measure_spark_release(
        read_staged(spark, written, out, config, summary),
        config,
        job.hierarchies,
        rows_in=summary.rows,
        spans=summary.spans,
    )
    t_measure = time.perf_counter()
    timings = phase_timings(t0, t_read, t_anon, t_write, t_measure)
    return Staged(written, measured, stats, timings, "the written output, re-read with Spark")
