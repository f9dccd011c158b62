"""Checked in-memory columns for the NumPy reference anonymizers (Mondrian and TDS)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from leteo_fed.anonymize.models.config import AnonymizationConfig, QuasiIdentifier
from leteo_fed.anonymize.models.hierarchy import as_labels
from leteo_fed.anonymize.models.privacy import Combo, SensitiveValue
from leteo_fed.errors import DataError


@dataclass(frozen=True)
class InMemoryTable:
    """QI columns (floats or labels), and each row's tuple of sensitive values."""

    n: int
    qi_values: list[np.ndarray]
    numeric_sensitive: list[bool]
    row_combos: list[Combo]


def qi_values(column: np.ndarray, qi: QuasiIdentifier) -> np.ndarray:
    """A numeric QI as finite floats, any other as hierarchy labels."""
    if qi.type == "numeric":
        arr = np.asarray(column)
        if arr.dtype.kind not in "biuf":
            raise DataError(f"numeric QI {qi.column!r} has dtype {arr.dtype}", field=qi.column)
        arr = arr.astype(float)
        if not np.isfinite(arr).all():
            raise DataError(f"numeric QI {qi.column!r} has missing values", field=qi.column)
        return arr
    return as_labels(np.asarray(column, dtype=object)).astype(str).astype(object)


def _sens_key(value: object, numeric: bool) -> SensitiveValue:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise DataError("sensitive column has a missing value")
    if not numeric:
        return str(value)
    if not isinstance(value, (int, float)):  # a numeric column's .tolist() gives int/float/bool
        raise DataError(f"numeric sensitive column has a non-numeric value {value!r}")
    return float(value)


def read_columns(columns: Mapping[str, np.ndarray], config: AnonymizationConfig) -> InMemoryTable:
    """Refuse ragged, empty or incomplete tables; extract what the algorithms read."""
    lengths = {len(np.asarray(v)) for v in columns.values()}
    if len(lengths) != 1:
        raise DataError(f"columns have different lengths {sorted(lengths)}")
    (n,) = lengths
    for name in (*config.qi_columns, *(s.column for s in config.sensitive)):
        if name not in columns:
            raise DataError(f"column {name!r} not in table {sorted(columns)}", field=name)
    if n == 0:
        raise DataError(f"no output can reach k={config.k}: the table is empty")
    qvals = [qi_values(columns[q.column], q) for q in config.quasi_identifiers]
    numeric = [np.asarray(columns[s.column]).dtype.kind in "biuf" for s in config.sensitive]
    sens_cols = [np.asarray(columns[s.column]).tolist() for s in config.sensitive]
    combos = [
        tuple(_sens_key(col[r], num) for col, num in zip(sens_cols, numeric, strict=True))
        for r in range(n)
    ]
    return InMemoryTable(n, qvals, numeric, combos)
