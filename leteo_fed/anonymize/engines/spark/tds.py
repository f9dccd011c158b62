"""Top-down specialization on a Spark DataFrame.

The working dataset of TDS (original QIs, transformed QIs and candidate columns) becomes a
compact table on the executors: one row per distinct (leaf codes, sensitive combo) with its row
count ``w``, plus, per QI, the row's current node ``n_j`` and the candidate child ``ch_j`` it would
move to if its node were specialized. Each round is ONE aggregation over that table: every row
emits its current class (``j = -1``) and, for each QI whose node can be specialized, the class it
would have after that specialization; ``groupBy(j, class, combo).sum(w)`` comes back to the driver
as Arrow. The driver holds only these counts, the taxonomies and the current cut; the
:class:`~planners.tds.TdsPlanner` (shared with the in-process engine) scores every
candidate from them. Applying a specialization updates ``n_j`` / ``ch_j`` with a small ``CASE``
over leaf-code ranges (leaves are numbered depth-first, so every node is a code range).
Replicated rows cost nothing after the first aggregation: the table holds distinct rows only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.anonymize.engines.spark.columns import column_types, qi_expr, sensitive_exprs
from leteo_fed.anonymize.engines.spark.mondrian import SUPPRESSED
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.privacy import Combo
from leteo_fed.anonymize.models.taxonomy import Taxonomy, leaf_codes
from leteo_fed.anonymize.planners.tds import (
    Records,
    Specialization,
    TdsPlanner,
    TdsStats,
    build_taxonomies,
    privacy_model,
)
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_ROW = "_tds_row"
_COMBO = "_tds_combo"
_W = "_tds_w"
_CHECKPOINT_EVERY = 20  # rounds of chained projections between lineage cuts


def _key(j: int) -> str:
    return f"_tds_v{j}"  # the QI as compared (double or label)


def _code(j: int) -> str:
    return f"_tds_c{j}"


def _node(j: int) -> str:
    return f"_tds_n{j}"


def _child(j: int) -> str:
    return f"_tds_ch{j}"


def _label(j: int) -> str:
    return f"_tds_l{j}"


def _sens(i: int) -> str:
    return f"_tds_s{i}"


SparkTdsStats = TdsStats  # the name the Spark callers know


def _range_case(code: Column, ranges: list[tuple[int, int, int]]) -> Column:
    """Node of the contiguous, sorted code range holding ``code``."""
    from pyspark.sql import functions as F

    expr = None
    for _, hi, node in ranges[:-1]:
        expr = F.when(code <= hi, node) if expr is None else expr.when(code <= hi, node)
    last = F.lit(ranges[-1][2])
    return (last if expr is None else expr.otherwise(last)).cast("long")


def _small_df(spark, rows: list[tuple], names: list[str], types: list[str]) -> DataFrame:  # noqa: ANN001
    schema = ", ".join(f"`{n}` {t}" for n, t in zip(names, types, strict=True))
    return spark.createDataFrame(rows, schema)


def _histogram(
    work: DataFrame, n_qi: int, as_double: list[bool], n_sens: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[Combo], np.ndarray]:
    """Per QI (distinct values sorted, counts) and the sensitive combos with counts: one job."""
    from pyspark.sql import functions as F

    structs = [
        F.struct(
            F.lit(j).alias("a"),
            (F.col(_key(j)) if as_double[j] else F.lit(None).cast("double")).alias("n"),
            (F.lit(None).cast("string") if as_double[j] else F.col(_key(j))).alias("c"),
        )
        for j in range(n_qi)
    ]
    scols = [_sens(i) for i in range(n_sens)]
    hist = (
        work.select(*scols, F.explode(F.array(*structs)).alias("_h"))
        .select("_h.a", "_h.n", "_h.c", *scols)
        .groupBy("a", "n", "c", *scols)
        .count()
        .toArrow()
        .to_pydict()
    )
    a = np.array(hist["a"], dtype=np.int64)
    counts = np.array(hist["count"], dtype=np.int64)
    distinct = []
    for j in range(n_qi):
        sel = np.flatnonzero(a == j)
        raw = [hist["n"][i] if as_double[j] else hist["c"][i] for i in sel]
        if any(v is None for v in raw):
            raise DataError(f"quasi-identifier #{j} has a missing value")
        values = np.array(raw, dtype=float if as_double[j] else object)
        uniq, inv = np.unique(values, return_inverse=True)
        distinct.append((uniq, np.bincount(inv.reshape(-1), weights=counts[sel]).astype(np.int64)))
    root = np.flatnonzero(a == 0)
    combos = [tuple(hist[c][i] for c in scols) for i in root]
    if any(v is None for combo in combos for v in combo):
        raise DataError("sensitive column has a missing value")
    return distinct, combos, counts[root]


def anonymize_dataframe(
    df: DataFrame,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    progress: Callable[[str], None] | None = None,
) -> tuple[DataFrame, SparkTdsStats]:
    """TDS over ``df``; returns (released DataFrame in input row order, stats).

    QI columns are released as strings (intervals / hierarchy labels), other columns unchanged,
    and a last boolean column :data:`SUPPRESSED` marks the rows of withheld classes.
    """
    from pyspark.sql import functions as F

    spark = df.sparkSession
    fields = column_types(df, config)
    qis = config.quasi_identifiers
    m = len(qis)
    as_double = [q.type == "numeric" and q.column not in hierarchies for q in qis]
    sens, numeric_sens = sensitive_exprs(config, fields)
    work = df.select(
        *[F.col(c) for c in df.columns],
        *[
            qi_expr(q, fields[q.column], as_label=not as_double[j]).alias(_key(j))
            for j, q in enumerate(qis)
        ],
        *[e.alias(_sens(i)) for i, e in enumerate(sens)],
        F.monotonically_increasing_id().alias(_ROW),
    )

    distinct, combos, combo_counts = _histogram(work, m, as_double, len(sens))
    n_rows = int(combo_counts.sum())
    if n_rows == 0:
        raise DataError(f"no output can reach k={config.k}: the table is empty")
    taxonomies = build_taxonomies(config, hierarchies, distinct)
    model = privacy_model(config, hierarchies, numeric_sens, combos, combo_counts)

    # leaf codes and combo codes by broadcast joins against small (value -> code) tables
    coded = work
    code_counts = []
    for j, t in enumerate(taxonomies):
        values, counts = distinct[j]
        codes = leaf_codes(t, values)
        code_counts.append(np.bincount(codes, weights=counts, minlength=t.n_codes).astype(int))
        keys = values.tolist()
        table = _small_df(
            spark,
            list(zip(keys, codes.tolist(), strict=True)),
            [_key(j), _code(j)],
            ["double" if as_double[j] else "string", "long"],
        )
        coded = coded.join(F.broadcast(table), on=_key(j), how="inner")
    if config.sensitive:
        scols = [_sens(i) for i in range(len(sens))]
        combo_table = _small_df(
            spark,
            [(*c, model.combo_index[c]) for c in model.combos],
            [*scols, _COMBO],
            [*("double" if num else "string" for num in numeric_sens), "long"],
        )
        coded = coded.join(F.broadcast(combo_table), on=scols, how="inner")
    else:
        coded = coded.withColumn(_COMBO, F.lit(0).cast("long"))
    compact = (
        coded.groupBy(*[_code(j) for j in range(m)], _COMBO)
        .agg(F.count(F.lit(1)).alias(_W))
        .select(
            "*",
            *[F.lit(0).cast("long").alias(_node(j)) for j in range(m)],
            *[
                _range_case(F.col(_code(j)), t.child_ranges(0)).alias(_child(j))
                for j, t in enumerate(taxonomies)
            ],
        )
        .localCheckpoint()
    )
    distinct_rows = compact.count()

    planner = TdsPlanner(config, taxonomies, model, code_counts, n_rows)
    entries = _record_entries(m)
    while True:
        picked = planner.choose(_records(compact, entries, m))
        if not picked:
            break
        compact = _apply(compact, picked, taxonomies)
        if planner.rounds % _CHECKPOINT_EVERY == 0:
            compact = compact.localCheckpoint()  # keep the plan from growing without bound
        if progress is not None:
            progress(planner.describe(picked))

    released = _release(spark, df, work, config, as_double, distinct, taxonomies, planner)
    stats = SparkTdsStats(
        n_rows,
        planner.n_classes,
        planner.rounds,
        planner.n_suppressed,
        distinct_rows,
        list(planner.history),
    )
    return released, stats


def _record_entries(m: int) -> Column:
    """Per compact row: its current class (j = -1) and its class after specializing each QI j."""
    from pyspark.sql import functions as F

    def entry(j: int) -> Column:
        nodes = [F.col(_child(i) if i == j else _node(i)).alias(f"t{i}") for i in range(m)]
        struct = F.struct(F.lit(j).alias("j"), *nodes)
        if j < 0:
            return struct
        return F.when(F.col(_child(j)) != F.col(_node(j)), struct)

    return F.explode(F.array(*[entry(j) for j in range(-1, m)])).alias("_e")


def _records(compact: DataFrame, entries: Column, m: int) -> Records:
    """The round's single aggregation: (j, class nodes, combo) -> rows, as Arrow."""
    from pyspark.sql import functions as F

    exploded = compact.select(entries, _COMBO, _W).where(F.col("_e").isNotNull())
    table = (
        exploded.select("_e.*", _COMBO, _W)
        .groupBy("j", *[f"t{i}" for i in range(m)], _COMBO)
        .agg(F.sum(_W).alias("count"))
        .toArrow()
    )
    col = lambda name: table.column(name).to_numpy()  # noqa: E731
    tup = np.column_stack([col(f"t{i}") for i in range(m)]) if table.num_rows else np.zeros((0, m))
    return Records.aggregate(col("j"), tup, col(_COMBO), col("count"))


def _apply(
    compact: DataFrame, picked: list[Specialization], taxonomies: list[Taxonomy]
) -> DataFrame:
    """Move the rows of each specialized node to their child, and to that child's own child."""
    from pyspark.sql import functions as F

    new: dict[str, Column] = {}
    for s in picked:
        j, t = s.attr, taxonomies[s.attr]
        hit = F.col(_node(j)) == s.node
        base_n = new.get(_node(j), F.col(_node(j)))
        base_c = new.get(_child(j), F.col(_child(j)))
        new[_node(j)] = F.when(hit, F.col(_child(j))).otherwise(base_n)
        new[_child(j)] = F.when(hit, _range_case(F.col(_code(j)), t.next_ranges(s.node))).otherwise(
            base_c
        )
    cols = [new[c].alias(c) if c in new else F.col(c) for c in compact.columns]
    return compact.select(*cols)


def _release(
    spark,  # noqa: ANN001
    df: DataFrame,
    work: DataFrame,
    config: AnonymizationConfig,
    as_double: list[bool],
    distinct: list[tuple[np.ndarray, np.ndarray]],
    taxonomies: list[Taxonomy],
    planner: TdsPlanner,
) -> DataFrame:
    """Join each row's final label and node (by its QI value) and the suppressed-class flag."""
    from pyspark.sql import functions as F

    out = work
    m = len(taxonomies)
    for j, t in enumerate(taxonomies):
        values = distinct[j][0]
        node = Taxonomy.pick(planner.final_ranges(j), leaf_codes(t, values))
        rows = [(v, int(n), t.labels[n]) for v, n in zip(values.tolist(), node, strict=True)]
        table = _small_df(
            spark,
            rows,
            [_key(j), _node(j), _label(j)],
            ["double" if as_double[j] else "string", "long", "string"],
        )
        out = out.join(F.broadcast(table), on=_key(j), how="inner")
    gone = planner.suppressed_keys if planner.suppressed_keys is not None else np.zeros((0, m))
    if len(gone):
        flags = _small_df(
            spark,
            [(*map(int, k), True) for k in gone.tolist()],
            [*[_node(j) for j in range(m)], SUPPRESSED],
            [*["long"] * m, "boolean"],
        )
        out = out.join(F.broadcast(flags), on=[_node(j) for j in range(m)], how="left")
        flag = F.coalesce(F.col(SUPPRESSED), F.lit(False))
    else:
        flag = F.lit(False)
    qi_index = {q.column: j for j, q in enumerate(config.quasi_identifiers)}
    cols = [F.col(_label(qi_index[c])).alias(c) if c in qi_index else F.col(c) for c in df.columns]
    return out.orderBy(_ROW).select(*cols, flag.alias(SUPPRESSED))
