"""The CSP's sum of a very large round on Spark: shares spilled to Parquet as the stream is read,
then checked and multiplied per partition (`checked_product`, the in-process check), partitions
multiplied together with `treeReduce`. No share reaches the driver, only one product vector per
partition; the sum equals the in-process one exactly (a product mod n^2 in another order).

Spill file: one Parquet file per share, one row: `index` (its place in the stream), `site`,
`digest` (what its owner signed) and `ciphertexts` (every ciphertext, `width` big-endian bytes
each, in order). The files hold ciphertexts only, what the aggregator relayed: no key, no
plaintext. With a non-local SPARK_MASTER, executors need `csp` importable and the spill directory
on storage they can read.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from gmpy2 import mpz
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from csp.share_check import ShareCiphertexts, checked_product
from leteo_fed.data.spark_stats import get_spark
from leteo_fed.errors import LeteoError, ProtocolError

SHARE_SCHEMA = StructType(
    [
        StructField("index", LongType(), False),
        StructField("site", StringType(), False),
        StructField("digest", BinaryType(), False),
        StructField("ciphertexts", BinaryType(), False),
    ]
)
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("digest", pa.binary(), nullable=False),
        pa.field("ciphertexts", pa.binary(), nullable=False),
    ]
)

# one partition's outcome: (product or None, the first refusal as (stream index, message))
Partial = tuple[list[int] | None, tuple[int, str] | None]


def write_share(index: int, share: ShareCiphertexts, width: int, directory: Path) -> Path:
    """One share as its own Parquet file, atomically (a dot-named temp file, which Spark's
    listing skips, then a rename)."""
    blob = b"".join(int(c).to_bytes(width, "big") for c in share.ciphertexts)
    table = pa.Table.from_pydict(
        {"index": [index], "site": [share.site], "digest": [share.digest], "ciphertexts": [blob]},
        schema=_ARROW_SCHEMA,
    )
    name = f"share-{index:08d}-{uuid.uuid4().hex[:8]}.parquet"
    tmp = directory / f".{name}.tmp"
    try:
        pq.write_table(table, tmp, compression="none")  # ciphertexts do not compress
        os.replace(tmp, directory / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return directory / name


def _ciphertexts(blob: bytes, width: int) -> list[int]:
    return [int.from_bytes(blob[i : i + width], "big") for i in range(0, len(blob), width)]


def _partition(n: int, width: int, rows: Iterable) -> Iterator[Partial]:
    """The checked product of a partition's shares, or the first of them that is refused (by
    stream order, as the in-process sum would have refused it)."""
    product: list[int] | None = None
    refusal: tuple[int, str] | None = None
    for row in rows:  # one share in memory at a time
        share = ShareCiphertexts(
            row["site"], row["digest"], _ciphertexts(row["ciphertexts"], width)
        )
        try:
            part = checked_product(n, width, [share])
        except LeteoError as exc:
            refusal = min(refusal or (row["index"], str(exc)), (row["index"], str(exc)))
            continue
        if refusal is None:
            product = part if product is None else _multiply_vectors(n, product, part)
    yield (None, refusal) if refusal is not None else (product, None)


def _multiply_vectors(n: int, a: list[int], b: list[int]) -> list[int]:
    n2 = mpz(n) * mpz(n)
    if len(a) != len(b):
        raise ProtocolError(f"shares of {len(a)} and {len(b)} ciphertexts in one round")
    return [int(mpz(x) * y % n2) for x, y in zip(a, b, strict=True)]


def _combine(n: int, a: Partial, b: Partial) -> Partial:
    refusals = [r for r in (a[1], b[1]) if r is not None]
    if refusals:
        return None, min(refusals)
    if a[0] is None:
        return b
    if b[0] is None:
        return a
    return _multiply_vectors(n, a[0], b[0]), None


def spark_product(paths: Sequence[str | Path], n: int, width: int) -> list[int]:
    """The coordinate-wise product mod n^2 of the spilled shares' ciphertexts, each share
    checked as in-process; ProtocolError naming the first refused share in stream order."""
    if not paths:
        return []
    spark = get_spark()
    df = spark.read.schema(SHARE_SCHEMA).parquet(*[str(p) for p in paths])
    product, refusal = df.rdd.mapPartitions(functools.partial(_partition, n, width)).treeReduce(
        functools.partial(_combine, n)
    )
    if refusal is not None:
        raise ProtocolError(refusal[1])
    return product or []
