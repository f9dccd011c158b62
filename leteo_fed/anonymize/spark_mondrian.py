"""Mondrian on a Spark DataFrame, in rounds over a global partition tree (Zakerzadeh et al. 2015).

Each round, for all still-splittable partitions at once, ONE Spark aggregation computes the
per-partition histograms of (QI value, sensitive tuple) -> count (map/combine on the executors);
the driver (reduce) decides the cuts with the same :class:`~leteo_fed.anonymize.mondrian.Planner`
as the NumPy reference, so both release the same table; the new partition ids are assigned with
broadcast joins against the (small) cut tables. Partitions without an allowed cut are final and
never re-aggregated. The driver only ever holds histograms and cut tables, never rows. The release
labels come from each final partition's last histogram and are joined back by partition id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.anonymize.config import AnonymizationConfig
from leteo_fed.anonymize.hierarchy import Hierarchy
from leteo_fed.anonymize.mondrian import Planner, QIHistogram, Split
from leteo_fed.anonymize.privacy_models import Combo
from leteo_fed.anonymize.spark_columns import column_types, qi_expr, sensitive_exprs
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

SUPPRESSED = "_leteo_suppressed"  # released boolean column: row withheld from the release
_PID = "_mondrian_pid"
_ROW = "_mondrian_row"


@dataclass(frozen=True)
class SparkMondrianStats:
    """What the Spark run did: rows, final partitions (equivalence classes), rounds."""

    n_rows: int
    n_partitions: int
    rounds: int
    n_suppressed: int = 0  # strict Mondrian never needs to suppress


def _qi_col(j: int) -> str:
    return f"_mondrian_q{j}"


def _sens_col(i: int) -> str:
    return f"_mondrian_s{i}"


def anonymize_dataframe(
    df: DataFrame,
    config: AnonymizationConfig,
    hierarchies: dict[str, Hierarchy],
    progress: Callable[[str], None] | None = None,
) -> tuple[DataFrame, SparkMondrianStats]:
    """Mondrian over ``df``; returns (released DataFrame in input row order, stats).

    QI columns are released as strings (intervals / hierarchy labels); other columns unchanged;
    a last boolean column :data:`SUPPRESSED` (always false here) marks withheld rows.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = df.sparkSession
    fields = column_types(df, config)
    qis = config.quasi_identifiers
    work_cols = [F.col(c) for c in df.columns]
    work_cols += [qi_expr(q, fields[q.column]).alias(_qi_col(j)) for j, q in enumerate(qis)]
    sens, numeric_sens = sensitive_exprs(config, fields)
    work_cols += [e.alias(_sens_col(i)) for i, e in enumerate(sens)]
    work_cols += [F.lit(0).cast("long").alias(_PID), F.monotonically_increasing_id().alias(_ROW)]
    work = df.select(*work_cols).localCheckpoint()

    scols = [_sens_col(i) for i in range(len(config.sensitive))]
    planner = Planner(config, hierarchies, numeric_sens)
    pid_schema = T.StructType([T.StructField(_PID, T.LongType(), False)])
    active: list[int] = [0]
    n_rows = 0
    while active:
        rows = work
        if planner.rounds > 0:
            keep = spark.createDataFrame([(p,) for p in active], pid_schema)
            rows = work.join(F.broadcast(keep), on=_PID, how="left_semi")
        structs = [
            F.struct(
                F.lit(j).alias("a"),
                (F.col(_qi_col(j)) if q.type == "numeric" else F.lit(None).cast("double")).alias(
                    "n"
                ),
                (F.col(_qi_col(j)) if q.type != "numeric" else F.lit(None).cast("string")).alias(
                    "c"
                ),
            )
            for j, q in enumerate(qis)
        ]
        hist = (
            rows.select(_PID, *scols, F.explode(F.array(*structs)).alias("_h"))
            .select(_PID, "_h.a", "_h.n", "_h.c", *scols)
            .groupBy(_PID, "a", "n", "c", *scols)
            .count()
            .toArrow()
        )
        parts = _parts(hist, planner, qis_numeric=[q.type == "numeric" for q in qis], scols=scols)
        if planner.rounds == 0:
            a, count = hist.column("a").to_numpy(), hist.column("count").to_numpy()
            n_rows = int(count[a == 0].sum())
        splits = planner.plan(parts)
        if splits:
            work = _reassign(work, splits, qis_numeric=[q.type == "numeric" for q in qis])
        active = sorted(c for s in splits for c in s.children)
        if progress is not None:
            progress(f"spark mondrian round {planner.rounds}: {len(splits)} cuts")

    leaves = sorted(planner.labels)
    label_schema = T.StructType(
        [T.StructField(_PID, T.LongType(), False)]
        + [T.StructField(_qi_col(j), T.StringType(), False) for j in range(len(qis))]
    )
    labels = spark.createDataFrame([(p, *planner.labels[p]) for p in leaves], label_schema)
    joined = work.select(_PID, _ROW, *df.columns).join(F.broadcast(labels), on=_PID, how="inner")
    qi_index = {q.column: j for j, q in enumerate(qis)}
    out_cols = [
        F.col(_qi_col(qi_index[c])).alias(c) if c in qi_index else F.col(c) for c in df.columns
    ]
    released = joined.orderBy(_ROW).select(*out_cols, F.lit(False).alias(SUPPRESSED))
    return released, SparkMondrianStats(n_rows, len(leaves), planner.rounds)


def _parts(
    hist: pa.Table,
    planner: Planner,
    *,
    qis_numeric: list[bool],
    scols: list[str],
) -> dict[int, list[QIHistogram]]:
    """Histogram rows (Arrow) -> per-partition per-QI :class:`QIHistogram` (driver side)."""
    n_q = len(qis_numeric)
    pid = hist.column(_PID).to_numpy().astype(np.int64)
    attr = hist.column("a").to_numpy().astype(np.int64)
    counts = hist.column("count").to_numpy().astype(np.int64)
    sens = [hist.column(c).to_pylist() for c in scols]
    combos: list[Combo] = list(zip(*sens, strict=True)) if sens else [()] * len(pid)
    if any(v is None for col in sens for v in col):
        raise DataError("sensitive column has a missing value")
    numeric_rows = np.array(qis_numeric, dtype=bool)[attr] if n_q else np.zeros(0, dtype=bool)
    n_col = hist.column("n")
    c_col = hist.column("c")
    missing = (numeric_rows & n_col.is_null().to_numpy(zero_copy_only=False)) | (
        ~numeric_rows & c_col.is_null().to_numpy(zero_copy_only=False)
    )
    if missing.any():
        raise DataError(f"quasi-identifier #{int(attr[np.argmax(missing)])} has a missing value")
    if planner.rounds == 0:
        root = np.flatnonzero(attr == 0)
        planner.start([combos[i] for i in root], counts[root])
    codes = planner.combo_codes(combos)
    num_values = n_col.to_numpy(zero_copy_only=False).astype(float)
    cat_values = np.array(c_col.to_pylist(), dtype=object)
    order = np.lexsort((attr, pid))
    keys = pid[order] * n_q + attr[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    groups = dict(
        zip(
            keys[np.concatenate([[0], bounds])].tolist() if len(keys) else [],
            np.split(order, bounds) if len(keys) else [],
            strict=True,
        )
    )
    empty = np.zeros(0, dtype=np.int64)
    parts: dict[int, list[QIHistogram]] = {}
    for p in np.unique(pid).tolist():
        hists = []
        for j in range(n_q):
            idx = groups.get(p * n_q + j, empty)
            values = num_values[idx] if qis_numeric[j] else cat_values[idx]
            # canonical order so float sums match the NumPy path bit for bit
            canon = np.lexsort((codes[idx], values))
            hists.append(QIHistogram(values[canon], codes[idx][canon], counts[idx][canon]))
        parts[p] = hists
    return parts


def _reassign(work: DataFrame, splits: list[Split], *, qis_numeric: list[bool]) -> DataFrame:
    """New partition ids for the rows of cut partitions (two broadcast joins), lineage cut."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    spark = work.sparkSession
    num_schema = T.StructType(
        [
            T.StructField(_PID, T.LongType(), False),
            T.StructField("_cut_attr", T.IntegerType(), False),
            T.StructField("_cut_thr", T.DoubleType(), True),
            T.StructField("_cut_left", T.LongType(), True),
            T.StructField("_cut_right", T.LongType(), True),
        ]
    )
    cat_schema = T.StructType(
        [
            T.StructField(_PID, T.LongType(), False),
            T.StructField("_cut_key", T.StringType(), False),
            T.StructField("_cut_child", T.LongType(), False),
        ]
    )
    spec = [
        (
            s.pid,
            s.attr,
            s.threshold,
            s.children[0] if s.threshold is not None else None,
            s.children[1] if s.threshold is not None else None,
        )
        for s in splits
    ]
    cat = [
        (s.pid, str(v), c) for s in splits if s.threshold is None for v, c in s.value_child.items()
    ]
    spec_df = spark.createDataFrame(spec, num_schema)
    cat_df = spark.createDataFrame(cat, cat_schema)
    num_value = F.lit(None).cast("double")
    cat_value = F.lit(None).cast("string")
    for j, numeric in enumerate(qis_numeric):
        if numeric:
            num_value = F.when(F.col("_cut_attr") == j, F.col(_qi_col(j))).otherwise(num_value)
        else:
            cat_value = F.when(F.col("_cut_attr") == j, F.col(_qi_col(j))).otherwise(cat_value)
    cols = work.columns
    step = (
        work.join(F.broadcast(spec_df), on=_PID, how="left")
        .withColumn("_cut_key", cat_value)
        .join(F.broadcast(cat_df), on=[_PID, "_cut_key"], how="left")
    )
    new_pid = (
        F.when(
            F.col("_cut_thr").isNotNull(),
            F.when(num_value <= F.col("_cut_thr"), F.col("_cut_left")).otherwise(
                F.col("_cut_right")
            ),
        )
        .when(F.col("_cut_child").isNotNull(), F.col("_cut_child"))
        .otherwise(F.col(_PID))
    )
    return step.withColumn(_PID, new_pid).select(*cols).localCheckpoint()
