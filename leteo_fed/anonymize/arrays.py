"""Grouping rows of integer arrays: the hot loop of every anonymizer and measurement.

``np.unique(..., axis=0)`` sorts rows through a structured view, which is many times slower than
sorting one int64 key; :func:`unique_rows` packs rows into such a key when the value ranges
allow it (and falls back to ``np.lexsort`` otherwise). Results are exactly ``np.unique``'s: rows
in lexicographic order, ``inverse`` mapping every input row to its unique row.
"""

from __future__ import annotations

import numpy as np

_MAX_KEY = np.iinfo(np.int64).max


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique rows in lexicographic order, inverse) of a 2-D integer array."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 2:
        raise ValueError(f"unique_rows needs a 2-D array, got shape {rows.shape}")
    n, m = rows.shape
    if n == 0:
        return rows.copy(), np.zeros(0, dtype=np.int64)
    lo = rows.min(axis=0)
    spans = rows.max(axis=0) - lo + 1
    if float(np.prod(spans.astype(float))) < _MAX_KEY:
        key = np.zeros(n, dtype=np.int64)
        for j in range(m):
            key = key * spans[j] + (rows[:, j] - lo[j])
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        return rows[first], inverse.reshape(-1)
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    change = np.ones(n, dtype=bool)
    change[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    group = np.cumsum(change) - 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = group
    return ordered[change], inverse
