"""The anonymization job's in-process engine: pyarrow for the files, NumPy for the work.

Step for step what :mod:`engines.spark.job` does, on an Arrow table in memory: the same reading
rules, the same checks (from :mod:`models.kinds` and :mod:`inputs`), the same pseudonyms, the same
planners, the same output bytes and the same report arithmetic, so a job releases the same table
on either engine. No step loops over rows in Python except the HMAC of each distinct identifier.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.anonymize.engines.base import JobInput, Staged, phase_timings
from leteo_fed.anonymize.engines.local import io as local_io
from leteo_fed.anonymize.engines.local.scan import scan_arrow
from leteo_fed.anonymize.engines.local.text import spark_text, supported
from leteo_fed.anonymize.inputs import check_columns, outside_hierarchy
from leteo_fed.anonymize.models import kinds as K
from leteo_fed.anonymize.models.config import (
    AnonymizationConfig,
    QuasiIdentifier,
    SensitiveAttribute,
)
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.planners.mondrian import MondrianStats
from leteo_fed.anonymize.planners.tds import TdsStats
from leteo_fed.errors import DataError


def read_input(path: str, fmt: str) -> pa.Table:
    """The input as the Spark engine reads it (every CSV column as text)."""
    where = path.removeprefix("file://")
    table = local_io.read_parquet(where) if fmt == "parquet" else local_io.read_csv_text(where)
    for field in table.schema:
        if not supported(field.type):
            raise DataError(
                f"column {field.name!r} has type {field.type}, which only the Spark engine "
                "writes; run with --engine spark",
                field=field.name,
            )
    return table


def typed_table(table: pa.Table, wanted: set[str], summary: K.InputSummary) -> pa.Table:
    """The ``wanted`` columns as numbers (as :func:`~engines.spark.job.typed_frame`)."""
    for name in sorted(wanted):
        i = table.column_names.index(name)
        table = table.set_column(i, name, local_io.typed(table.column(i), summary.kinds[name]))
    return table


def check_hierarchies(
    table: pa.Table, config: AnonymizationConfig, hierarchies: dict[str, Hierarchy]
) -> None:
    """Every value of a column with a hierarchy must be one of its leaves."""
    specs: tuple[QuasiIdentifier | SensitiveAttribute, ...] = (
        *config.quasi_identifiers,
        *config.sensitive,
    )
    paths = {s.column: s.hierarchy for s in specs}
    for column, h in hierarchies.items():
        values = pc.unique(spark_text(table.column(column), labels=True)).to_pylist()
        leaves = set(h.leaves)
        missing = sorted(v for v in values if v not in leaves)[:5]
        if missing:
            raise DataError(outside_hierarchy(column, paths.get(column), missing), field=column)


def output_table(
    read: pa.Table,
    qi_labels: dict[str, pa.Array],
    pseudonyms: dict[str, pa.ChunkedArray],
    kept: list[str],
    summary: K.InputSummary,
    fmt_in: str,
    fmt_out: str,
) -> pa.Table:
    """The published columns (as :func:`~engines.spark.job.output_frame`), all rows."""
    columns = []
    for name in kept:
        if name in qi_labels:
            columns.append(pa.chunked_array([qi_labels[name]]))
        elif name in pseudonyms:
            columns.append(pseudonyms[name])
        elif fmt_out == "parquet" and fmt_in == "csv":
            columns.append(local_io.typed(read.column(name), summary.kinds.get(name, K.TEXT)))
        else:
            columns.append(read.column(name))
    return pa.table(columns, names=kept)


def _anonymize(
    typed: pa.Table, job: JobInput, summary: K.InputSummary, say: Callable[[str], None]
) -> tuple[dict[str, pa.Array], np.ndarray, MondrianStats | TdsStats]:
    from leteo_fed.anonymize.engines.local import mondrian, tds
    from leteo_fed.anonymize.engines.local.table import sensitive

    config = job.config
    sens = sensitive(typed, config, summary.kinds)
    stats: MondrianStats | TdsStats
    if config.algorithm == "tds":
        labels, withheld, stats = tds.anonymize_table(
            typed, config, job.hierarchies, sens, progress=say
        )
    else:
        labels, stats = mondrian.anonymize_table(typed, config, job.hierarchies, sens, progress=say)
        withheld = np.zeros(typed.num_rows, dtype=bool)
    return dict(zip(config.qi_columns, labels, strict=True)), withheld, stats


def read_staged(
    written: Path, out_fmt: str, config: AnonymizationConfig, summary: K.InputSummary
) -> pa.Table:
    """Re-read what was written; numeric sensitive columns of a CSV out as numbers again."""
    if out_fmt == "parquet":
        return local_io.read_parquet(written)
    table = local_io.read_csv_text(written, multiline=True)
    return typed_table(table, K.numeric_sensitive(config, summary), summary)


def release(job: JobInput, staging: Path, say: Callable[[str], None]) -> Staged:
    """Run the job in process up to a measured release in ``staging``."""
    from leteo_fed.anonymize.audit.measure import measure_release
    from leteo_fed.anonymize.engines.local.pseudonymize import pseudonyms
    from leteo_fed.anonymize.engines.local.summary import ArrowSummary

    t0 = time.perf_counter()
    config, out = job.config, job.out
    read = read_input(job.path, job.fmt)
    check_columns(read.column_names, config)
    scans = scan_arrow(read, K.scanned_columns(config, read.column_names, job.fmt))
    stored = {f.name: local_io.stored_kind(f.type) for f in read.schema}
    kinds = K.resolve(config, job.fmt, read.column_names, read.num_rows, scans, stored)
    summary = K.check_input(config, read.num_rows, kinds, scans)
    typed = typed_table(read, K.typed_columns(config, summary), summary)
    check_hierarchies(typed, config, job.hierarchies)
    say(f"read {summary.rows} rows, {read.num_columns} columns from {job.path} ({job.fmt})")
    t_read = time.perf_counter()

    hashed = {}
    if config.identifiers.pseudonymize:
        assert job.key is not None
        hashed = {c: pseudonyms(read.column(c), job.key) for c in config.identifiers.pseudonymize}
    labels, withheld, stats = _anonymize(typed, job, summary, say)
    t_anon = time.perf_counter()

    kept = [c for c in read.column_names if c not in set(config.identifiers.drop)]
    table = output_table(read, labels, hashed, kept, summary, job.fmt, out.fmt)
    if withheld.any():
        table = table.filter(pa.array(~withheld))
    say(f"writing {out.fmt} to {out.path}")
    out.path.parent.mkdir(parents=True, exist_ok=True)
    if out.fmt == "parquet":
        local_io.write_parquet(table, staging)
        written = staging
    else:
        staging.mkdir(parents=True)
        written = staging / "part-00000.csv"
        local_io.write_csv(table, written)
    t_write = time.perf_counter()
    say("measuring the release")
    summary_out = ArrowSummary(read_staged(written, out.fmt, config, summary), config.qi_columns)
    measured = measure_release(
        summary_out, config, job.hierarchies, rows_in=summary.rows, spans=summary.spans
    )
    t_measure = time.perf_counter()
    timings = phase_timings(t0, t_read, t_anon, t_write, t_measure)
    return Staged(written, measured, stats, timings, "the written output, re-read with pyarrow")
