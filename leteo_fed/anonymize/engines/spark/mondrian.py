"""Mondrian on a Spark DataFrame, in rounds over a global partition tree (Zakerzadeh et al. 2015).

Each round, for all still-splittable partitions at once, ONE Spark aggregation computes the
per-partition histograms of (QI value, sensitive tuple) -> count (map/combine on the executors);
the driver (reduce) decides the cuts with :class:`~planners.mondrian.RoundPlanner`, the planner
the in-process engine feeds with NumPy histograms, so both engines release the same
table; the new partition ids are assigned with broadcast joins against the (small) cut tables.
Partitions without an allowed cut are final and never re-aggregated. The driver only ever holds
histograms and cut tables, never rows. The release labels of the final partitions are joined
back by partition id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.engines.spark.columns import column_types, qi_expr, sensitive_exprs
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.planners.mondrian import Cuts, MondrianStats, QIRound, RoundPlanner
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

SUPPRESSED = "_leteo_suppressed"  # released boolean column: row withheld from the release
_PID = "_mondrian_pid"
_ROW = "_mondrian_row"
SparkMondrianStats = MondrianStats  # the name the Spark callers know


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
    planner = RoundPlanner(config, hierarchies, numeric_sens)
    qis_numeric = [q.type == "numeric" for q in qis]
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
        if planner.rounds == 0:
            a, count = hist.column("a").to_numpy(), hist.column("count").to_numpy()
            n_rows = int(count[a == 0].sum())
        cuts = planner.plan(_rounds(hist, planner, qis_numeric=qis_numeric, scols=scols))
        if cuts.children.size:
            work = _reassign(work, cuts, planner, qis_numeric=qis_numeric)
        active = cuts.children.tolist()
        if progress is not None:
            progress(f"spark mondrian round {planner.rounds}: {cuts.n_cuts} cuts")

    final, per_qi = planner.final()
    label_schema = T.StructType(
        [T.StructField(_PID, T.LongType(), False)]
        + [T.StructField(_qi_col(j), T.StringType(), False) for j in range(len(qis))]
    )
    label_rows = list(zip(final.tolist(), *(lab.tolist() for lab in per_qi), strict=True))
    labels = spark.createDataFrame(label_rows, label_schema)
    joined = work.select(_PID, _ROW, *df.columns).join(F.broadcast(labels), on=_PID, how="inner")
    qi_index = {q.column: j for j, q in enumerate(qis)}
    out_cols = [
        F.col(_qi_col(qi_index[c])).alias(c) if c in qi_index else F.col(c) for c in df.columns
    ]
    released = joined.orderBy(_ROW).select(*out_cols, F.lit(False).alias(SUPPRESSED))
    return released, MondrianStats(n_rows, int(final.size), planner.rounds)


def _combo_codes(hist: pa.Table, scols: list[str], planner: RoundPlanner) -> np.ndarray:
    """Each histogram row's sensitive tuple as the model's code (distinct tuples looked up once)."""
    if not scols:
        return np.zeros(hist.num_rows, dtype=np.int64)
    cols, uniques = [], []
    for c in scols:
        values = np.asarray(hist.column(c).to_numpy(zero_copy_only=False))
        if values.dtype.kind == "O" and any(v is None for v in values.tolist()):
            raise DataError("sensitive column has a missing value")
        u, inv = np.unique(values, return_inverse=True)
        cols.append(inv.reshape(-1))
        uniques.append(u.tolist())
    rows, code = unique_rows(np.stack(cols, axis=1))
    combos = [tuple(uniques[i][v] for i, v in enumerate(r)) for r in rows.tolist()]
    if planner.model is None:
        a = hist.column("a").to_numpy()
        counts = np.bincount(
            code[a == 0], weights=hist.column("count").to_numpy()[a == 0], minlength=len(combos)
        )
        planner.start(combos, counts.astype(np.int64))
    assert planner.model is not None
    return planner.model.combo_codes(combos)[code]


def _rounds(
    hist: pa.Table,
    planner: RoundPlanner,
    *,
    qis_numeric: list[bool],
    scols: list[str],
) -> list[QIRound]:
    """Histogram rows (Arrow) -> one :class:`QIRound` per QI (driver side)."""
    if planner.model is None and not scols:
        a = hist.column("a").to_numpy()
        planner.start([()], np.array([int(hist.column("count").to_numpy()[a == 0].sum())]))
    codes = _combo_codes(hist, scols, planner)
    pid = hist.column(_PID).to_numpy().astype(np.int64)
    attr = hist.column("a").to_numpy().astype(np.int64)
    counts = hist.column("count").to_numpy().astype(np.int64)
    out = []
    for j, numeric in enumerate(qis_numeric):
        sel = np.flatnonzero(attr == j)
        column = hist.column("n" if numeric else "c").take(sel)
        if column.null_count:
            raise DataError(f"quasi-identifier #{j} has a missing value")
        if numeric:
            value = column.to_numpy().astype(float)
        else:
            words, inv = np.unique(
                np.asarray(column.to_pylist(), dtype=object), return_inverse=True
            )
            value = planner.leaf_index(j, words.tolist())[inv.reshape(-1)]
        out.append(QIRound(pid[sel], value, codes[sel], counts[sel]))
    return out


def _reassign(
    work: DataFrame, cuts: Cuts, planner: RoundPlanner, *, qis_numeric: list[bool]
) -> DataFrame:
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
        (p, a, t, left, right)
        for p, a, t, left, right in zip(
            cuts.num_pid.tolist(),
            cuts.num_attr.tolist(),
            cuts.num_threshold.tolist(),
            cuts.num_left.tolist(),
            cuts.num_right.tolist(),
            strict=True,
        )
    ]
    cat_parts, first = np.unique(cuts.cat_pid, return_index=True)
    spec += [
        (p, a, None, None, None)
        for p, a in zip(cat_parts.tolist(), cuts.cat_attr[first].tolist(), strict=True)
    ]
    cat = []
    for j in np.unique(cuts.cat_attr).tolist():
        mine = cuts.cat_attr == j
        words = planner.leaf_labels(j, cuts.cat_leaf[mine])
        cat += list(
            zip(
                cuts.cat_pid[mine].tolist(),
                words.tolist(),
                cuts.cat_child[mine].tolist(),
                strict=True,
            )
        )
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
