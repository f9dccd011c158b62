"""Noisy counts made into counts (post-processing: no privacy cost).

A DP release of counts adds noise to every count; what the analyst gets are non-negative
integers that keep the noisy total: the noisy counts projected in least squares onto the
non-negative vectors with that total, then rounded keeping it (largest remainders).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import ProtocolError


def nonnegative_projection(y: np.ndarray, total: float) -> np.ndarray:
    """argmin ||x - y||_2 over x >= 0 with sum x = total (Euclidean projection onto the scaled
    simplex, sort-based): x = max(y - theta, 0) for the one theta that gives the total."""
    y = np.asarray(y, dtype=np.float64)
    if total <= 0 or y.size == 0:
        return np.zeros_like(y)
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, y.size + 1)
    rho = int(np.nonzero(u - css / k > 0)[0][-1])
    theta = css[rho] / (rho + 1)
    return np.maximum(y - theta, 0.0)


def round_keeping_total(x: np.ndarray, total: int) -> np.ndarray:
    """Non-negative integers summing to `total`: floors, then one more to the largest
    remainders (the first cell first among equal remainders)."""
    low = np.floor(np.maximum(x, 0.0)).astype(np.int64)
    missing = total - int(low.sum())
    if missing > 0:
        order = np.argsort(-(x - low), kind="stable")
        low[order[: min(missing, low.size)]] += 1
    elif missing < 0:  # float slack only: take from the largest cells
        for i in np.argsort(-low, kind="stable")[:-missing]:
            low[i] -= 1 if low[i] > 0 else 0
    return low


def released_counts(totals: Sequence[int], count_scale_bits: int, noisy: bool) -> np.ndarray:
    """Cell counts from the revealed integer totals (at 2^count_scale_bits): exact (non-DP), or
    post-processed noisy counts, non-negative and summing to the noisy total (DP)."""
    s = count_scale_bits
    if not noisy:
        if any(t < 0 or t % (1 << s) for t in totals):
            raise ProtocolError(
                "a cell total is negative or not a whole count: corrupted aggregate"
            )
        return np.array([t >> s for t in totals], dtype=np.int64)
    y = np.array([t / (1 << s) for t in totals], dtype=np.float64)
    total = max(int(round(float(y.sum()))), 0)
    return round_keeping_total(nonnegative_projection(y, total), total)
