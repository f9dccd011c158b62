"""LDP estimation with Spark for rounds with many reports: support counts or sums from spill files.

Above a report-volume threshold the aggregator's report intake validates each chunk as usual but,
instead of folding it in memory, writes it to a chunk file (`write_chunk`). At the end of the
round `spark_support` computes, per partition with NumPy, what the accumulator's `partial`
would have returned for every chunk, and adds the partitions up with `treeReduce`; no report
reaches the driver, only one support vector (or two sums) per partition.

Chunk file: one Parquet file per chunk, one row: `dtype` (NumPy dtype string, e.g. "<i4"),
`shape` (list of int64) and `data` (the C-order bytes of the array). The round trip is exact,
so integer supports (GRR, SUE, OUE, THE, OLH) equal the NumPy path's bit for bit; SHE supports
and numeric sums are float64 sums in another order (equal to ~1e-15 relative).

Executors call the frequency oracle's own `support`, so with a non-local SPARK_MASTER they need
`leteo_fed` importable and the spill directory on storage they can read.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.types import ArrayType, BinaryType, LongType, StringType, StructField, StructType

from leteo_fed.data.spark_stats import get_spark
from leteo_fed.errors import ProtocolError
from leteo_fed.protocols import ldp_collection

CHUNK_SCHEMA = StructType(
    [
        StructField("dtype", StringType(), False),
        StructField("shape", ArrayType(LongType(), False), False),
        StructField("data", BinaryType(), False),
    ]
)
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("dtype", pa.string(), nullable=False),
        pa.field("shape", pa.list_(pa.field("element", pa.int64(), nullable=False)), False),
        pa.field("data", pa.binary(), nullable=False),
    ]
)

# (reports, support or None, total, total of squares): one partition's or a merged contribution
Contribution = tuple[int, np.ndarray | None, float, float]


def write_chunk(reports: np.ndarray, directory: Path) -> Path:
    """Write one validated chunk as its own Parquet file, atomically (temp name, then rename).

    The temporary name starts with a dot, which Spark's file listing skips as hidden.
    """
    arr = np.ascontiguousarray(reports)
    if arr.dtype.str not in ldp_collection.REPORT_DTYPES:
        raise ProtocolError(f"report dtype {arr.dtype.str!r} is not accepted")
    table = pa.Table.from_pydict(
        {"dtype": [arr.dtype.str], "shape": [list(arr.shape)], "data": [arr.tobytes()]},
        schema=_ARROW_SCHEMA,
    )
    name = f"chunk-{uuid.uuid4().hex}.parquet"
    tmp = directory / f".{name}.tmp"
    try:
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return directory / name


def read_chunk(path: str | Path) -> np.ndarray:
    """The array a chunk file holds (for tests and inspection; Spark reads them in bulk)."""
    row = pq.read_table(path, schema=_ARROW_SCHEMA).to_pylist()[0]
    return _decode(row["dtype"], row["shape"], row["data"])


def _decode(dtype: str, shape: Sequence[int], data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(tuple(int(s) for s in shape))


def _partition_fn(oracle, d: int) -> Callable[[Iterable], Iterator[Contribution]]:
    """Per partition: the sum of the accumulator's `partial` over its chunks (oracle None:
    numeric).

    A closure shipped by cloudpickle; the oracle (a FrequencyOracle) is pickled by reference,
    so executors import leteo_fed.ldp.frequency and run the very same `support`.
    """

    def partition(rows: Iterable) -> Iterator[Contribution]:
        n, total, total_sq = 0, 0.0, 0.0
        support = np.zeros(d) if oracle is not None else None
        for row in rows:
            reports = _decode(row["dtype"], row["shape"], row["data"])
            n += len(reports)
            if oracle is not None and support is not None:
                support += np.asarray(oracle.support(reports), dtype=np.float64)
            else:
                r = np.asarray(reports, dtype=np.float64)
                total += float(r.sum())
                total_sq += float(np.square(r).sum())
        yield n, support, total, total_sq  # always one element per partition

    return partition


def _add(a: Contribution, b: Contribution) -> Contribution:
    support = None if a[1] is None else a[1] + b[1]
    return a[0] + b[0], support, a[2] + b[2], a[3] + b[3]


def spark_support(
    paths: Sequence[str | Path], spec: ldp_collection.LdpSpec
) -> tuple[int, np.ndarray | tuple[float, float]]:
    """(n, support) for a frequency round, (n, (total, total_sq)) for a numeric one.

    Equals the accumulator's `partial` summed over the chunks in `paths` (files from
    `write_chunk`).
    Geo rounds keep their points and never spill.
    """
    if spec.mechanism == ldp_collection.GEO:
        raise ValueError("geo rounds keep their points; there is no support to compute")
    frequency = ldp_collection.is_frequency(spec.mechanism)
    oracle = ldp_collection.mechanism_for(spec) if frequency else None
    d = len(spec.domain)
    if not paths:
        result: Contribution = (0, np.zeros(d) if frequency else None, 0.0, 0.0)
    else:
        spark = get_spark()
        df = spark.read.schema(CHUNK_SCHEMA).parquet(*[str(p) for p in paths])
        result = df.rdd.mapPartitions(_partition_fn(oracle, d)).treeReduce(_add)
    n, support, total, total_sq = result
    if frequency:
        if support is None:
            raise ProtocolError("a frequency round's partitions returned no support")
        return n, support
    return n, (total, total_sq)


def warm() -> None:
    """Start the Spark session ahead of the first estimate (the JVM takes seconds)."""
    get_spark()
