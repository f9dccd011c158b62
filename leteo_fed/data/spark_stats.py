"""Sufficient statistics of a Spark-readable source: R = sum x x^T and per-class sums and counts.

PCA needs R, V = sum x and Q = rows (`spark_local_statistics`); DCA, LDA and MDR need, for every
grouping, the per-class sums V_k and counts M_k (`spark_local_moments`). The owner agent uses this
path when its data does not fit in memory or lives on HDFS/S3. It must agree exactly with the
NumPy path (`pca.local_statistics` / `moments.local_moments` after `check_finite_and_bounded`,
`sources.label_strings` and `moments.class_indices`): same refusals with the same messages, same
sums up to float64 summation order. Rows never reach the driver; only d x d and K x d partial
sums do (and, when refusing, at most five distinct offending labels).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice

import numpy as np
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    FloatType,
    MapType,
    NumericType,
    StructType,
)

from leteo_fed.encoding.packing import raise_column_problem
from leteo_fed.errors import DataError
from leteo_fed.protocols import moments
from leteo_fed.protocols.moments import Grouping, LocalMoments
from leteo_fed.protocols.pca import LocalStatistics

BATCH_ROWS = 65536  # rows per NumPy block: bounds worker memory at 65536 * d * 8 bytes
SHUFFLE_PARTITIONS = 8  # the aggregations here are tiny; Spark's default 200 only adds latency
_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")

# (R, per grouping K x d class sums, per grouping K counts): one partition's or a merged total
Moments = tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]

_session: SparkSession | None = None
_session_lock = threading.Lock()


def get_spark(app_name: str = "leteo-fed") -> SparkSession:
    """One quiet, local-by-default session per process (JVM start-up costs seconds)."""
    global _session
    with _session_lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            return _session
        master = os.environ.get("SPARK_MASTER", "local[*]")
        if master.startswith("local"):
            # Local workers are forked with PYSPARK_PYTHON (default: whatever `python3` is on
            # PATH), which may lack NumPy or differ in version from the driver's interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Keep Spark's catalog state out of the caller's working directory.
        scratch = tempfile.mkdtemp(prefix="leteo-spark-")
        atexit.register(shutil.rmtree, scratch, ignore_errors=True)
        _session = (
            SparkSession.builder.appName(app_name)
            .master(master)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(SHUFFLE_PARTITIONS))
            .config("spark.sql.warehouse.dir", os.path.join(scratch, "warehouse"))
            .config("spark.sql.catalogImplementation", "in-memory")
            .getOrCreate()
        )
        _session.sparkContext.setLogLevel("WARN")
        return _session


def _infer_format(path: str) -> str:
    name = path.rstrip("/").lower()
    for ext in _COMPRESSED:
        if name.endswith(".csv" + ext):
            return "csv"
    for ext, fmt in _FORMATS.items():
        if name.endswith(ext):
            return fmt
    raise DataError(
        f"cannot tell the format of '{path}' from its name; pass fmt='csv' or 'parquet'"
    )


def _quote(name: str) -> Column:
    """Column by exact name: backticks stop Spark reading dots as struct-field access."""
    return F.col("`" + name.replace("`", "``") + "`")


def _read(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    try:
        if fmt == "csv":
            return spark.read.csv(path, header=True, inferSchema=True)
        if fmt == "parquet":
            return spark.read.parquet(path)
    except AnalysisException as exc:  # e.g. PATH_NOT_FOUND; keep only Spark's first line
        raise DataError(f"cannot read '{path}' as {fmt}: {str(exc).splitlines()[0]}") from exc
    raise DataError(f"unsupported format '{fmt}'; use 'csv' or 'parquet'")


def _label_string(c: Column, dtype: DataType) -> Column:
    """A label as `sources.label_strings` spells it (pyarrow's cast to string).

    Spark's cast agrees for integers, strings, booleans and decimals, but writes floats the Java
    way (1.0, 1.0E-4, 1.0E10, NaN, Infinity) where pyarrow writes the shortest digits, in plain
    notation for 1e-6 <= |x| < 1e10 (1, 0.0001, 12345678.5) and as 1e+10 / 1.5e-7 outside,
    and nan / inf. Both branches keep Java's digits, which are the shortest round-trip digits
    (bar rare non-shortest cases of Java < 19's Double.toString, JDK-4511638).
    """
    s = c.cast("string")
    if not isinstance(dtype, (FloatType, DoubleType)):
        return s
    # Java's digits, exactly, as a decimal (no float rounding); then drop trailing zeros.
    plain = F.regexp_replace(s.cast("decimal(38,24)").cast("string"), r"\.?0+$", "")
    sci = F.regexp_replace(
        F.regexp_replace(F.regexp_replace(s, r"\.0E", "E"), "E-", "e-"), "E", "e+"
    )
    a = F.abs(c)
    return (
        F.when(F.isnan(c), "nan")
        .when(c == float("inf"), "inf")
        .when(c == float("-inf"), "-inf")
        .when(c == 0, F.when(s.startswith("-"), "-0").otherwise("0"))
        .when((a >= F.lit(1e-6).cast(dtype)) & (a < F.lit(1e10).cast(dtype)), plain)
        .otherwise(sci)
    )


def _validate(
    df: DataFrame, columns: list[str], bound: float, groupings: Sequence[Grouping]
) -> None:
    """One aggregation pass; the verdicts and their wording are shared with the NumPy path.

    `df` holds the selected columns as doubles named c0, c1, ... (so repeats are harmless) and,
    for every grouping j with a label column, its label strings as l{j}. Refusals come in the
    NumPy path's order: features first, then per grouping missing labels, then unknown labels.
    """
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i in range(len(columns)):
        c = F.col(f"c{i}")
        bad = c.isNull() | F.isnan(c) | (F.abs(c) == float("inf"))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad{i}"))
        aggs.append(F.max(F.abs(c)).alias(f"max{i}"))
    labelled = [(j, g) for j, g in enumerate(groupings) if g.label_column is not None]
    for j, g in labelled:
        lab = F.col(f"l{j}")
        aggs.append(F.sum(F.when(lab.isNull(), 1).otherwise(0)).alias(f"missing{j}"))
        aggs.append(F.sum(F.when(~lab.isin(*g.classes), 1).otherwise(0)).alias(f"unknown{j}"))
    res = df.agg(*aggs).first()
    if res is None or res["rows"] == 0:
        raise DataError("the data source has no rows")
    raise_column_problem(
        columns,
        [res[f"bad{i}"] for i in range(len(columns))],
        [res[f"max{i}"] for i in range(len(columns))],
        bound,
    )
    for j, g in labelled:
        if res[f"missing{j}"]:
            raise DataError(
                f"label column '{g.label_column}' has {res[f'missing{j}']} missing value(s)",
                field=g.label_column,
            )
        if res[f"unknown{j}"]:
            # class_indices names the five smallest distinct outsiders: fetch just those.
            lab = F.col(f"l{j}")
            outside = df.select(lab).where(~lab.isin(*g.classes)).distinct().orderBy(lab).limit(5)
            moments.class_indices([r[0] for r in outside.collect()], g)  # raises
            raise AssertionError(
                f"label column '{g.label_column}': class_indices accepted outsiders"
            )


def _partition_moments_fn(
    d: int, groupings: Sequence[tuple[int, bool]]
) -> Callable[[Iterable[Sequence[float]]], Iterator[Moments]]:
    """Per-partition (X^T X, per-class sums, per-class counts), from NumPy blocks of BATCH_ROWS.

    Rows are d features followed by one class index per grouping given as (K, True); a grouping
    (K, False) puts every row in its first class. A closure, so cloudpickle ships it by value:
    executors need NumPy but not leteo_fed.
    """
    batch_rows = BATCH_ROWS
    width = d + sum(indexed for _, indexed in groupings)

    def partition(rows: Iterable[Sequence[float]]) -> Iterator[Moments]:
        r = np.zeros((d, d))
        vs = [np.zeros((k, d)) for k, _ in groupings]
        ms = [np.zeros(k, dtype=np.int64) for k, _ in groupings]
        it = iter(rows)
        while batch := list(islice(it, batch_rows)):
            block = np.array(batch, dtype=np.float64).reshape(len(batch), width)
            x = np.ascontiguousarray(block[:, :d])
            r += x.T @ x
            col = d
            for (k, indexed), v, m in zip(groupings, vs, ms, strict=True):
                if not indexed:
                    v[0] += x.sum(axis=0)
                    m[0] += x.shape[0]
                    continue
                idx = block[:, col].astype(np.int64)
                col += 1
                for j in range(d):  # one O(n) pass per feature: memory O(K d), not O(K n)
                    v[:, j] += np.bincount(idx, weights=x[:, j], minlength=k)
                m += np.bincount(idx, minlength=k)
        yield r, vs, ms  # always one element, so treeReduce never meets an empty partition

    return partition


def _add_moments_fn() -> Callable[[Moments, Moments], Moments]:
    """treeReduce's combiner, also a closure (it runs on executors too)."""

    def add(a: Moments, b: Moments) -> Moments:
        return (
            a[0] + b[0],
            [x + y for x, y in zip(a[1], b[1], strict=True)],
            [x + y for x, y in zip(a[2], b[2], strict=True)],
        )

    return add


def _moments(
    path: str, columns: list[str], groupings: Sequence[Grouping], fmt: str | None, bound: float
) -> LocalMoments:
    """The shared engine: read, check columns, validate in one pass, then one NumPy pass."""
    if not columns:
        raise DataError("no columns selected")
    spark = get_spark()
    fmt = (fmt or _infer_format(path)).lower()
    df = _read(spark, path, fmt)
    types = {f.name: f.dataType for f in df.schema.fields}
    for name in columns:
        if name not in types:
            raise DataError(f"column '{name}' is not in '{path}'", field=name)
        if not isinstance(types[name], NumericType):
            raise DataError(f"column '{name}' is not numeric", field=name)
    labels = []
    for j, g in enumerate(groupings):
        label = g.label_column
        if label is None:
            continue
        if label not in types:
            raise DataError(f"label column '{label}' is not in '{path}'", field=label)
        if isinstance(types[label], (ArrayType, MapType, StructType)):
            raise DataError(
                f"label column '{label}' has unsupported type {types[label].simpleString()}",
                field=label,
            )
        labels.append(_label_string(_quote(label), types[label]).alias(f"l{j}"))
    features = [_quote(c).cast("double").alias(f"c{i}") for i, c in enumerate(columns)]
    df = df.select(*features, *labels)
    _validate(df, columns, bound, groupings)
    # Validated: every label is one of its grouping's classes. Index = position in the class list.
    indexed = [g.label_column is not None and len(g.classes) > 1 for g in groupings]
    index = [
        (F.array_position(F.array(*[F.lit(c) for c in g.classes]), F.col(f"l{j}")) - 1)
        .cast("int")
        .alias(f"i{j}")
        for j, g in enumerate(groupings)
        if indexed[j]
    ]
    df = df.select(*[F.col(f"c{i}") for i in range(len(columns))], *index)
    shape = [(len(g.classes), ix) for g, ix in zip(groupings, indexed, strict=True)]
    r, vs, ms = df.rdd.mapPartitions(_partition_moments_fn(len(columns), shape)).treeReduce(
        _add_moments_fn()
    )
    return LocalMoments(r=r, v=vs, m=[m.astype(np.int64) for m in ms])


def spark_local_statistics(
    path: str, columns: list[str], fmt: str | None, value_bound: float
) -> LocalStatistics:
    """R, V, Q of `columns` at `path` (CSV with header, or Parquet; any Spark-readable URI).

    Refuses, with the NumPy path's messages, missing or non-numeric columns, empty data,
    null/NaN/inf values and |x| > value_bound, before any statistic is computed.
    """
    mom = _moments(path, columns, [moments.ALL_ROWS], fmt, value_bound)
    return LocalStatistics(r=mom.r, v=mom.v[0][0], q=int(mom.m[0][0]))


def spark_local_moments(
    path: str,
    columns: list[str],
    groupings: Sequence[Grouping],
    fmt: str | None,
    value_bound: float,
) -> LocalMoments:
    """R of `columns` and, per grouping, sums and counts for all K classes (zero where absent).

    Agrees with `moments.local_moments` on the NumPy path: labels are compared as
    `sources.label_strings` spells them (1 and 1.0 both read '1'), and the refusals are
    `spark_local_statistics`'s, then per grouping "label column 'c' has N missing value(s)",
    then `moments.class_indices`'s message for labels outside the round's classes.
    A grouping with label_column None puts every row in its first class.
    """
    return _moments(path, columns, groupings, fmt, value_bound)
