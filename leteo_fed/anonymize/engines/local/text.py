"""Values as the text Spark gives them, for the in-process engine (Arrow columns).

Wherever the Spark job turns a value into text (a pseudonym's message, a hierarchy label, a cell
of a CSV release) it uses Spark's cast to string; the in-process engine must produce the same
characters or the two engines would release different tables. Arrow agrees with Spark on text,
integers, booleans (``true``/``false``) and dates (``2024-01-31``); floating point is printed here
the Java way (``40.0``, ``1.0E-5``, ``1.23456789E8``: plain for 1e-3 <= |x| < 1e7, else
scientific) from the shortest round-trip digits, per distinct value. Java before 19 prints a few
doubles with one digit more than the shortest (JDK-4511638); on such a JVM those rare values
differ in their last digit between the engines. Other types (timestamps, decimals, binary,
nested) are refused: :func:`supported` tells the engine choice to leave them to Spark.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.errors import DataError


def supported(t: pa.DataType) -> bool:
    """Whether the in-process engine reads, prints and writes this type like Spark."""
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date32(t)
        or pa.types.is_null(t)
    )


def java_float(x: float, single: bool = False) -> str:
    """``Double.toString`` (``Float.toString`` when ``single``) from the shortest digits."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    text = str(np.float32(x)) if single else repr(float(x))
    sign, digits, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    ds = "".join(map(str, digits)).rstrip("0") or "0"
    exponent += len(digits) - len(ds)  # the zeros stripped
    point = len(ds) + exponent  # digits before the decimal point
    head = "-" if sign else ""
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{head}0.{'0' * -point}{ds}"
        if point >= len(ds):
            return f"{head}{ds}{'0' * (point - len(ds))}.0"
        return f"{head}{ds[:point]}.{ds[point:]}"
    return f"{head}{ds[0]}.{ds[1:] or '0'}E{point - 1}"


def _floats(arr: pa.ChunkedArray, labels: bool) -> pa.ChunkedArray:
    single = pa.types.is_float32(arr.type) or pa.types.is_float16(arr.type)
    encoded = pc.dictionary_encode(arr).combine_chunks()
    values = encoded.dictionary.to_numpy(zero_copy_only=False).astype(float)
    text = []
    for v in values.tolist():
        if labels and math.isfinite(v) and v == math.floor(v):
            text.append(str(int(v)))
        else:
            text.append(java_float(v, single))
    out = pa.DictionaryArray.from_arrays(encoded.indices, pa.array(text, pa.string()))
    return pa.chunked_array([out.dictionary_decode()])


def spark_text(arr: pa.ChunkedArray | pa.Array, *, labels: bool = False) -> pa.ChunkedArray:
    """The column as Spark's ``cast(... as string)`` writes it; nulls stay null.

    ``labels``: as a hierarchy label, where integral floats print as integers (``17.0`` -> ``17``).
    """
    if isinstance(arr, pa.Array):
        arr = pa.chunked_array([arr])
    t = arr.type
    if pa.types.is_string(t):
        return arr
    if pa.types.is_floating(t):
        return _floats(arr, labels)
    if supported(t):
        return pc.cast(arr, pa.string())
    raise DataError(f"the in-process engine cannot print values of type {t}; use --engine spark")
