"""PCA sufficient statistics (R = sum x x^T, V = sum x, Q = rows) of a Spark-readable source.

The owner agent uses this path when its data does not fit in memory or lives on HDFS/S3. It
must agree exactly with the NumPy path (`pca.local_statistics` after `check_finite_and_bounded`):
same refusals with the same messages, same sums up to float64 summation order. Rows never reach
the driver; only d x d partial sums do.
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
from pyspark.sql.types import NumericType

from leteo_fed.encoding.packing import raise_column_problem
from leteo_fed.errors import DataError
from leteo_fed.protocols.pca import LocalStatistics

BATCH_ROWS = 65536  # rows per NumPy block: bounds worker memory at 65536 * d * 8 bytes
SHUFFLE_PARTITIONS = 8  # the aggregations here are tiny; Spark's default 200 only adds latency
_FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")

Stats = tuple[np.ndarray, np.ndarray, int]

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


def _validate(df: DataFrame, columns: list[str], bound: float) -> None:
    """One aggregation pass; the verdict and its wording are shared with the NumPy path.

    `df` holds the selected columns as doubles named c0, c1, ... (so repeats are harmless).
    """
    aggs = [F.count(F.lit(1)).alias("rows")]
    for i in range(len(columns)):
        c = F.col(f"c{i}")
        bad = c.isNull() | F.isnan(c) | (F.abs(c) == float("inf"))
        aggs.append(F.sum(F.when(bad, 1).otherwise(0)).alias(f"bad{i}"))
        aggs.append(F.max(F.abs(c)).alias(f"max{i}"))
    res = df.agg(*aggs).first()
    if res is None or res["rows"] == 0:
        raise DataError("the data source has no rows")
    raise_column_problem(
        columns,
        [res[f"bad{i}"] for i in range(len(columns))],
        [res[f"max{i}"] for i in range(len(columns))],
        bound,
    )


def _partition_stats_fn(d: int) -> Callable[[Iterable[Sequence[float]]], Iterator[Stats]]:
    """Per-partition (X^T X, sum x, count), built from NumPy blocks of BATCH_ROWS rows.

    A closure, so cloudpickle ships it by value: executors need NumPy but not leteo_fed.
    """
    batch_rows = BATCH_ROWS

    def stats(rows: Iterable[Sequence[float]]) -> Iterator[Stats]:
        r, v, q = np.zeros((d, d)), np.zeros(d), 0
        it = iter(rows)
        while batch := list(islice(it, batch_rows)):
            x = np.array(batch, dtype=np.float64).reshape(len(batch), d)
            r += x.T @ x
            v += x.sum(axis=0)
            q += x.shape[0]
        yield r, v, q  # always one element, so treeReduce never meets an empty partition

    return stats


def spark_local_statistics(
    path: str, columns: list[str], fmt: str | None, value_bound: float
) -> LocalStatistics:
    """R, V, Q of `columns` at `path` (CSV with header, or Parquet; any Spark-readable URI).

    Refuses, with the NumPy path's messages, missing or non-numeric columns, empty data,
    null/NaN/inf values and |x| > value_bound, before any statistic is computed.
    """
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
    df = df.select(*[_quote(c).cast("double").alias(f"c{i}") for i, c in enumerate(columns)])
    _validate(df, columns, value_bound)
    r, v, q = df.rdd.mapPartitions(_partition_stats_fn(len(columns))).treeReduce(
        lambda a, b: (a[0] + b[0], a[1] + b[1], a[2] + b[2])
    )
    return LocalStatistics(r=r, v=v, q=int(q))
