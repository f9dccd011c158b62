"""Spark aggregates: the same exact integers as the in-process engine, rows never collected.

The input is read by anonymize's reader (CSV as text), checked in one aggregation (missing
columns, nulls, NaN, non-numbers, values outside a domain: the in-process engine's messages),
and encoded by SQL expressions doing the in-process engine's arithmetic (:mod:`encoding`). The
histograms are `groupBy(class, cell).count()`; the per-cluster sums are per-partition NumPy
blocks (the same `summer` closure) added with `treeReduce`. The driver only sees counts per cell
and sums per cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from leteo_fed.synth import encoding as E
from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.partition import cell_count, strides
from leteo_fed.synth.statistics import Sums, pair_counter, pair_offsets, split_pairs, summer

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

BATCH_ROWS = 1 << 16


def _col(name: str) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _code_name(i: int) -> str:
    return f"_c{i}"


def _index_expr(text: SparkColumn, domain: tuple[str, ...]) -> SparkColumn:
    from pyspark.sql import functions as F

    return (F.array_position(F.array(*[F.lit(v) for v in domain]), text) - 1).cast("long")


def _examples(df: DataFrame, expr: SparkColumn, bad: SparkColumn) -> list[str]:
    rows = df.where(bad).select(expr.alias("v")).distinct().orderBy("v").limit(5).collect()
    return [str(r["v"]) for r in rows]


def encode_frame(df: DataFrame, config: SynthConfig) -> tuple[DataFrame, dict[str, Any]]:
    """(DataFrame of long columns _cls, _c0.., the clipped counts); DataError like `encoding`."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    names = set(df.columns)
    for c in config.columns:
        if c.name not in names:
            raise E.missing_column(c.name)
    if config.label is not None and config.label not in names:
        raise E.missing_column(config.label, "label column")
    types = {f.name: f.dataType for f in df.schema.fields}
    checks, texts, numbers = [], {}, {}
    specs: list[tuple[str, tuple[str, ...] | None]] = [
        (c.name, c.categories if c.kind == "categorical" else None) for c in config.columns
    ]
    if config.label is not None:
        specs.append((config.label, config.classes))
    for name, domain in specs:
        raw = _col(name)
        if domain is not None:
            text = raw.cast("string")
            texts[name] = text
            idx = _index_expr(text, domain)
            checks += [
                F.sum(text.isNull().cast("long")).alias(f"{name}\0null"),
                F.sum((text.isNotNull() & (idx < 0)).cast("long")).alias(f"{name}\0out"),
            ]
            continue
        col = next(c for c in config.columns if c.name == name)
        if not isinstance(types[name], (T.NumericType, T.StringType)):
            raise E.DataError(f"numeric column {name!r} has type {types[name]}", field=name)
        x = raw.cast("double")
        numbers[name] = x
        checks += [
            F.sum(raw.isNull().cast("long")).alias(f"{name}\0null"),
            F.sum((raw.isNotNull() & x.isNull()).cast("long")).alias(f"{name}\0bad"),
            F.sum(F.isnan(x).cast("long")).alias(f"{name}\0nan"),
            F.sum((x < F.lit(col.lo)).cast("long")).alias(f"{name}\0below"),
            F.sum((x > F.lit(col.hi)).cast("long")).alias(f"{name}\0above"),
        ]
    found = df.agg(*checks).collect()[0].asDict()
    clipped: dict[str, dict[str, int]] = {}
    for name, domain in specs:  # same order and words as the in-process checks
        what = "label column" if name == config.label else "column"
        nulls = int(found[f"{name}\0null"] or 0)
        if nulls:
            raise E.missing_values(name, nulls)
        if domain is not None:
            if found[f"{name}\0out"]:
                bad = _index_expr(texts[name], domain) < 0
                raise E.outside_domain(name, _examples(df, texts[name], bad), what)
            continue
        if found[f"{name}\0bad"]:
            bad = _col(name).isNotNull() & numbers[name].isNull()
            raise E.not_numbers(name, _examples(df, _col(name).cast("string"), bad))
        if found[f"{name}\0nan"]:
            raise E.missing_values(name, int(found[f"{name}\0nan"]))
        clipped[name] = {
            "below": int(found[f"{name}\0below"] or 0),
            "above": int(found[f"{name}\0above"] or 0),
        }
    cols = []
    for i, c in enumerate(config.columns):
        if c.kind == "categorical":
            cols.append(_index_expr(texts[c.name], c.categories).alias(_code_name(i)))
            continue
        x = F.least(F.greatest(numbers[c.name], F.lit(c.lo)), F.lit(c.hi))
        u = (x - F.lit(c.lo)) / F.lit(c.hi - c.lo)
        cols.append(
            F.floor(u * F.lit(float(E.SCALE)) + F.lit(0.5)).cast("long").alias(_code_name(i))
        )
    cls = (
        _index_expr(texts[config.label], config.classes)
        if config.label is not None
        else F.lit(0).cast("long")
    )
    return df.select(cls.alias("_cls"), *cols), clipped


def _partition_sums_fn(
    width_spec: list[int], n_keys: int, n_codes: int
) -> Callable[[Iterable[Any]], Iterator[Sums]]:
    """Per partition the exact sums of its rows (key, codes...), in NumPy blocks."""
    sums = summer(width_spec, n_keys)
    batch_rows = BATCH_ROWS

    def partition(rows: Iterable[Any]) -> Iterator[Sums]:
        acc = sums(np.zeros(0, dtype=np.int64), np.zeros((0, n_codes), dtype=np.int64))
        it = iter(rows)
        while batch := list(islice(it, batch_rows)):
            block = np.array(batch, dtype=np.int64).reshape(len(batch), n_codes + 1)
            part = sums(block[:, 0].copy(), block[:, 1:])
            acc = (acc[0] + part[0], acc[1] + part[1], acc[2] + part[2])
        yield acc  # always one element, so treeReduce never meets an empty partition

    return partition


def _pairs_arrow_fn(levels: list[int], n_classes: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow body: per partition the pair counts of its Arrow batches (class, levels...),
    yielded as one row holding the int64 vector's bytes."""
    count = pair_counter(levels, n_classes)
    width = len(levels) + 1

    def partition(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        acc = count(np.zeros((0, width), dtype=np.int64))
        for batch in batches:
            block = np.column_stack(
                [batch.column(i).to_numpy(zero_copy_only=False) for i in range(width)]
            ).astype(np.int64)
            acc += count(block)
        yield pa.RecordBatch.from_pydict({"counts": [acc.tobytes()]})

    return partition


def _add_fn() -> Callable[[Sums, Sums], Sums]:
    def add(a: Sums, b: Sums) -> Sums:
        return (a[0] + b[0], a[1] + b[1], a[2] + b[2])

    return add


class SparkAggregator:
    """Exact aggregates of the encoded DataFrame (cached: it is read once per pass)."""

    def __init__(self, frame: DataFrame, config: SynthConfig) -> None:
        self.frame = frame.cache()
        self.config = config
        self.n_classes = max(1, len(config.classes))
        self.index = {c.name: i for i, c in enumerate(config.columns)}

    def close(self) -> None:
        """Drop the cached encoded frame (the session outlives the job)."""
        self.frame.unpersist()

    def _level(self, c: Column) -> SparkColumn:
        from pyspark.sql import functions as F

        if c.kind == "categorical":
            return F.col(_code_name(self.index[c.name]))
        code = F.col(_code_name(self.index[c.name]))
        if c.edges:  # how many inner edges' codes the value reaches (E.level's searchsorted)
            reached = F.lit(0).cast("long")
            for cut in E.cuts(c).tolist():
                reached = reached + F.when(code >= F.lit(int(cut)), 1).otherwise(0).cast("long")
            return reached
        binned = F.expr(f"({_code_name(self.index[c.name])} * {c.bins}) div {E.SCALE}")
        return F.least(binned, F.lit(c.bins - 1).cast("long"))

    def _cell(self, group: list[Column]) -> SparkColumn:
        from pyspark.sql import functions as F

        expr = F.lit(0).cast("long")
        for c, s in zip(group, strides(group), strict=True):
            expr = expr + self._level(c) * F.lit(s)
        return expr

    def _sums(self, frame: DataFrame, group: list[Column], n_keys: int) -> Sums:
        codes = [_code_name(self.index[c.name]) for c in group]
        rdd = frame.select("_key", *codes).rdd
        fn = _partition_sums_fn(E.widths(group), n_keys, len(group))
        result: Sums = rdd.mapPartitions(fn).treeReduce(_add_fn())
        return result

    def histogram(self, group: list[Column]) -> np.ndarray:
        cells = cell_count(group)
        out = np.zeros((self.n_classes, cells), dtype=np.int64)
        rows = (
            self.frame.select("_cls", self._cell(group).alias("_cell"))
            .groupBy("_cls", "_cell")
            .count()
            .collect()
        )
        for r in rows:
            out[int(r["_cls"]), int(r["_cell"])] = int(r["count"])
        return out

    def pair_histograms(self, cols: list[Column]) -> dict[tuple[int, int], np.ndarray]:
        levels = [c.levels for c in cols]
        frame = self.frame.select(
            "_cls", *[self._level(c).alias(f"_l{i}") for i, c in enumerate(cols)]
        )
        parts = frame.mapInArrow(_pairs_arrow_fn(levels, self.n_classes), "counts binary")
        flat = sum(
            (np.frombuffer(r["counts"], dtype=np.int64) for r in parts.collect()),
            np.zeros(sum(s for _, s in pair_offsets(levels, self.n_classes).values()), np.int64),
        )  # one row per partition: the driver adds a few count vectors, never a data row
        return split_pairs(flat, levels, self.n_classes)

    def cluster_sums(
        self, group: list[Column], key_of_cell: np.ndarray, n_keys: int, numeric: list[Column]
    ) -> Sums:
        from pyspark.sql import functions as F

        spark = self.frame.sparkSession
        table = [
            (int(c), int(cell), int(key_of_cell[c, cell]))
            for c in range(key_of_cell.shape[0])
            for cell in range(key_of_cell.shape[1])
        ]  # one row per public grid cell: at most classes * max_cells
        mapping = spark.createDataFrame(table, "_cls long, _cell long, _key long")
        frame = self.frame.withColumn("_cell", self._cell(group)).join(
            F.broadcast(mapping), on=["_cls", "_cell"], how="inner"
        )
        return self._sums(frame, numeric, n_keys)
