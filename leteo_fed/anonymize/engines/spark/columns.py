"""Typed views of the QI and sensitive columns that both Spark anonymizers work on.

Numeric QIs are compared as doubles; categorical ones (and numeric ones generalized by a
hierarchy file) by their label, with integral floats written like integers ("17", not "17.0"),
exactly as :func:`~models.hierarchy.as_labels` does for hierarchy labels and the verifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from leteo_fed.anonymize.models.config import AnonymizationConfig, QuasiIdentifier
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType


def column_types(df: DataFrame, config: AnonymizationConfig) -> dict[str, DataType]:
    """Spark types by column name; refuses a configured column the DataFrame lacks."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name in (*config.qi_columns, *(s.column for s in config.sensitive)):
        if name not in fields:
            raise DataError(f"column {name!r} not in DataFrame {sorted(fields)}", field=name)
    return fields


def label_expr(col: Column, dtype: object) -> Column:
    """A value as a hierarchy label: integral floats print as integers (17.0 -> "17")."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return F.when(col == F.floor(col), col.cast("long").cast("string")).otherwise(
            col.cast("string")
        )
    return col.cast("string")


def qi_expr(q: QuasiIdentifier, dtype: object, *, as_label: bool = False) -> Column:
    """The QI as a double (numeric) or as its hierarchy label (categorical, or ``as_label``)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    col = F.col(q.column)
    if q.type == "numeric" and not isinstance(dtype, T.NumericType):
        raise DataError(f"numeric QI {q.column!r} has type {dtype}", field=q.column)
    if q.type == "numeric" and not as_label:
        return col.cast("double")
    return label_expr(col, dtype)


def sensitive_exprs(
    config: AnonymizationConfig, fields: Mapping[str, DataType]
) -> tuple[list[Column], list[bool]]:
    """Sensitive columns (double when numeric, else string) and which of them are numeric."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    exprs, numeric = [], []
    for s in config.sensitive:
        num = isinstance(fields[s.column], T.NumericType)
        numeric.append(num)
        col = F.col(s.column)
        exprs.append(col.cast("double") if num else col.cast("string"))
    return exprs, numeric
