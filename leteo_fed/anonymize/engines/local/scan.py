"""One pass over an Arrow table's columns: what :mod:`models.kinds` needs
to type them and check them.

For every named column: nulls; for text, how many values look like integers / decimal numbers /
``NaN``; for numbers, how many are NaN; and the smallest and largest number, with pyarrow compute
kernels. The Spark engine's :mod:`engines.spark.scan` counts by the same
patterns (``kinds``), so the engines type a column alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.anonymize.models import kinds as K


def _count(mask: pa.ChunkedArray) -> int:
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def scan_arrow(table: pa.Table, names: Sequence[str]) -> dict[str, K.ColumnScan]:
    """Scan the named columns of an Arrow table."""
    out = {}
    for name in names:
        col = table.column(name)
        t = col.type
        ints = floats = nans = 0
        number: pa.ChunkedArray | None = None
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            is_float = pc.match_substring_regex(col, K.FLOAT_PATTERN)
            is_nan = pc.match_substring_regex(col, K.NAN_PATTERN)
            ints = _count(pc.match_substring_regex(col, K.INT_PATTERN))
            floats = _count(pc.or_(is_float, is_nan))
            nans = _count(is_nan)
            number = pc.cast(pc.if_else(is_float, col, pa.scalar(None, t)), pa.float64())
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            number = pc.cast(col, pa.float64())
            nans = _count(pc.is_nan(number)) if pa.types.is_floating(t) else 0
        lo = hi = None
        if number is not None:
            finite = pc.filter(number, pc.invert(pc.is_nan(number)))
            mm = pc.min_max(finite)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
        out[name] = K.ColumnScan(col.null_count, ints, floats, nans, lo, hi)
    return out
