"""Which engine runs a central job: in process (pyarrow + NumPy) or on Spark.

Both engines release the same table for the same job; they differ in cost. Spark pays seconds of
JVM start-up and per-job scheduling, which dominate on tables of a few hundred thousand rows;
the in-process engine holds the table in memory. ``auto`` therefore runs in process when the
input is a local path whose data is at most ``min(256 MiB, available memory / 8)``: a CSV
file's (or folder's) bytes, or a Parquet dataset's uncompressed column bytes from its footers.
Everything else goes to Spark: inputs Spark reads remotely (``hdfs://``, ``s3a://``, ...),
compressed CSV (its size in memory is unknown), partitioned folders (sub-folders), larger data,
and Parquet columns whose types only the Spark engine prints (timestamps, decimals, binary,
nested). The choice and its reason
go into the job's report.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from leteo_fed.anonymize.engines.base import Release
from leteo_fed.anonymize.models.config import ENGINES
from leteo_fed.errors import ConfigError

LOCAL_MAX_BYTES = 256 * 2**20
MEMORY_SHARE = 8  # auto keeps in-process inputs below 1/8 of the available memory
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")


@dataclass(frozen=True)
class EngineChoice:
    """The engine a job runs on, what was asked for, and why."""

    requested: str
    used: str
    reason: str
    input_bytes: int | None = None
    local_limit_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def available_memory() -> int:
    """Bytes the kernel can give without swapping (MemAvailable), else the free pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 4 * 2**30


def local_limit() -> int:
    return min(LOCAL_MAX_BYTES, available_memory() // MEMORY_SHARE)


def local_path(path: str) -> Path | None:
    """The path on this machine, or None for a path only Spark can read (``hdfs://`` ...)."""
    if "://" in path and not path.startswith("file://"):
        return None
    return Path(path.removeprefix("file://"))


def _visible(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_")))


def _parquet_bytes(files: list[Path], types: bool) -> tuple[int, str | None]:
    """(uncompressed bytes, the first column type the in-process engine cannot handle)."""
    import pyarrow.parquet as pq

    from leteo_fed.anonymize.engines.local.text import supported

    total = 0
    for f in files:
        if not f.name.lower().endswith((".parquet", ".pq")):
            continue
        meta = pq.read_metadata(f)
        total += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        for field in meta.schema.to_arrow_schema() if types else []:
            if not supported(field.type):
                return total, f"column {field.name!r} has type {field.type}"
    return total, None


def choose(requested: str, path: str, fmt: str, *, types: bool = True) -> EngineChoice:
    """The engine for a job on ``path`` (format ``fmt``); ``requested`` is auto, local or spark.

    ``types``: whether every column's type matters (an anonymization rewrites every column; a
    clustering job reads only numeric features).
    """
    if requested not in ENGINES:
        raise ConfigError(
            f"--engine must be one of {list(ENGINES)}, got {requested!r}", field="engine"
        )
    if requested != "auto":
        return EngineChoice(requested, requested, f"--engine {requested} was asked for")
    where = local_path(path)
    if where is None:
        return EngineChoice(requested, "spark", "the input is not a local path")
    if where.is_dir() and any(
        p.is_dir() and not p.name.startswith((".", "_")) for p in where.iterdir()
    ):
        return EngineChoice(requested, "spark", "the input folder has sub-folders (partitions)")
    files = _visible(where)
    if not files:  # refused by the in-process reader, without starting a JVM
        return EngineChoice(requested, "local", "the input is not on this machine's disk")
    limit = local_limit()
    if fmt == "csv":
        if any(f.name.lower().endswith(_COMPRESSED) for f in files):
            return EngineChoice(requested, "spark", "compressed CSV: its size in memory is unknown")
        size = sum(f.stat().st_size for f in files)
    else:
        size, unsupported = _parquet_bytes(files, types)
        if unsupported is not None:
            return EngineChoice(
                requested,
                "spark",
                f"{unsupported}, which only the Spark engine writes",
                size,
                limit,
            )
    if size <= limit:
        reason = f"the input holds {size} bytes of data, at most the local limit {limit}"
        return EngineChoice(requested, "local", reason, size, limit)
    reason = f"the input holds {size} bytes of data, more than the local limit {limit}"
    return EngineChoice(requested, "spark", reason, size, limit)


def load_engine(used: str) -> Release:
    """The anonymization engine named by :attr:`EngineChoice.used` (imported only now: the
    other engine's modules, and Spark's, stay unloaded)."""
    if used == "spark":
        from leteo_fed.anonymize.engines.spark.job import release as spark_release

        return spark_release
    from leteo_fed.anonymize.engines.local.job import release as local_release

    return local_release
