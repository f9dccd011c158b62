"""Read the features of a Spark-readable dataset for the DP k-means jobs, without collecting it.

A CSV is read as text and each column typed by :mod:`leteo_fed.anonymize.models.kinds` (one
aggregation, like Spark's own schema inference), so the in-process engine (:mod:`local_io`) picks
the same numeric columns. Refusals come from the types alone (:mod:`features`), so they reveal
nothing about individual rows. Rows with a null, NaN or infinite value in a selected feature are
DROPPED on the executors: a per-row filter keeps the DP guarantee of what follows (a
neighbouring dataset differs in at most one kept row). How many rows were dropped is not
reported, because that count is not private.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from leteo_fed.errors import DataError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def col(name: str) -> Column:
    """A column by exact name (backticks stop Spark reading dots as struct access)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def feature_names(i: int) -> str:
    """Internal name of feature i in the prepared DataFrame."""
    return f"c{i}"


def read_dataset(path: str, fmt: str | None = None) -> DataFrame:
    """CSV (with header; columns typed by content) or Parquet, by the explicit format or the path."""
    from pyspark.errors import AnalysisException

    from leteo_fed.anonymize.engines.spark.scan import scan_spark
    from leteo_fed.anonymize.inputs import input_format
    from leteo_fed.anonymize.models import kinds as K
    from leteo_fed.data.spark_stats import get_spark

    fmt = input_format(path, fmt)
    spark = get_spark()
    try:
        if fmt == "parquet":
            return spark.read.parquet(path)
        df = spark.read.csv(path, header=True, quote='"', escape='"')
    except AnalysisException as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot read {path!r} as {fmt}: {first}", field="data") from exc
    rows, scans = scan_spark(df, df.columns)
    kinds = {c: K.text_kind(scans[c], rows) for c in df.columns}
    return df.select(
        *[
            col(c).cast("long" if kinds[c] == K.INTEGER else "double").alias(c)
            if kinds[c] in K.NUMERIC
            else col(c)
            for c in df.columns
        ]
    )


def spark_kinds(df: DataFrame) -> dict[str, str]:
    """Kinds of a DataFrame's columns from its (typed) schema."""
    from leteo_fed.anonymize.engines.spark.scan import spark_kind

    return {f.name: spark_kind(f.dataType) for f in df.schema.fields}


def select_features(df: DataFrame, features: Sequence[str] | None) -> tuple[DataFrame, list[str]]:
    """(DataFrame of doubles c0..c{d-1} with no null/NaN/inf, the feature names used).

    `features` None means every numeric column, in file order.
    """
    from pyspark.sql import functions as F

    from leteo_fed.clustering.features import pick_features

    names = pick_features(df.columns, spark_kinds(df), features)
    cols = [col(n).cast("double").alias(feature_names(i)) for i, n in enumerate(names)]
    out = df.select(*cols)
    finite = [
        F.col(feature_names(i)).isNotNull()
        & ~F.isnan(F.col(feature_names(i)))
        & (F.abs(F.col(feature_names(i))) != float("inf"))
        for i in range(len(names))
    ]
    return out.where(reduce(lambda a, b: a & b, finite)), names


def load_features(
    path: str, features: Sequence[str] | None = None, fmt: str | None = None
) -> tuple[DataFrame, list[str]]:
    return select_features(read_dataset(path, fmt), features)
