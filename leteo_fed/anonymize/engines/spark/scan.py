"""One pass over a Spark DataFrame's columns: what :mod:`models.kinds`
needs to type them and check them.

For every named column: nulls; for text, how many values look like integers / decimal numbers /
``NaN``; for numbers, how many are NaN; and the smallest and largest number, in one Spark
aggregation (rows stay on the executors). The in-process engine's
:mod:`engines.local.scan` counts by the same patterns (``kinds``), so the
engines type a column alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from leteo_fed.anonymize.models import kinds as K

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def scan_spark(df: DataFrame, names: Sequence[str]) -> tuple[int, dict[str, K.ColumnScan]]:
    """(rows, scans of the named columns) of a Spark DataFrame, in one aggregation."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    types = {f.name: f.dataType for f in df.schema.fields}
    aggs = [F.count(F.lit(1)).alias("rows")]

    def count(cond: Column, name: str) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).alias(name)

    for i, name in enumerate(names):
        c, t = _col(name), types[name]
        aggs.append(count(c.isNull(), f"null{i}"))
        if isinstance(t, T.StringType):
            aggs.append(count(c.rlike(K.INT_PATTERN), f"int{i}"))
            aggs.append(count(c.rlike(K.FLOAT_PATTERN) | c.rlike(K.NAN_PATTERN), f"float{i}"))
            aggs.append(count(c.rlike(K.NAN_PATTERN), f"nan{i}"))
            number = F.when(c.rlike(K.FLOAT_PATTERN), c.try_cast("double"))
        elif isinstance(t, T.NumericType):
            nan = F.isnan(c) if isinstance(t, (T.DoubleType, T.FloatType)) else F.lit(False)
            aggs.append(count(nan, f"nan{i}"))
            number = F.when(~nan, c.cast("double"))
        else:
            continue
        aggs += [F.min(number).alias(f"lo{i}"), F.max(number).alias(f"hi{i}")]
    res = df.agg(*aggs).first()
    assert res is not None
    got = res.asDict()
    scans = {}
    for i, name in enumerate(names):
        scans[name] = K.ColumnScan(
            nulls=int(got.get(f"null{i}") or 0),
            ints=int(got.get(f"int{i}") or 0),
            floats=int(got.get(f"float{i}") or 0),
            nans=int(got.get(f"nan{i}") or 0),
            lo=got.get(f"lo{i}"),
            hi=got.get(f"hi{i}"),
        )
    return int(got["rows"]), scans


def spark_kind(dtype: Any) -> str:
    """The kind (:mod:`models.kinds`) of a stored Spark type."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.IntegralType):
        return K.INTEGER
    if isinstance(dtype, T.FractionalType):
        return K.FLOAT
    if isinstance(dtype, T.StringType):
        return K.TEXT
    return K.OTHER
