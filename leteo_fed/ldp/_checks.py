"""Shared parameter checks for the LDP mechanisms (one message style, DataError with a field)."""

from __future__ import annotations

import math

from leteo_fed.errors import DataError

EPSILON_MAX = 50.0  # e^50 ~ 5e21: still comfortably inside float64, and no real use goes higher


def check_epsilon(epsilon: float) -> float:
    """ε as a float, finite and in (0, EPSILON_MAX]; DataError(field="epsilon") otherwise."""
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise DataError(f"epsilon must be a number, got {epsilon!r}", field="epsilon") from None
    if not (math.isfinite(eps) and 0.0 < eps <= EPSILON_MAX):
        raise DataError(
            f"epsilon must be finite in (0, {EPSILON_MAX:g}], got {epsilon!r}", field="epsilon"
        )
    return eps


def check_count(n: int, *, minimum: int, field: str = "n") -> int:
    """A report count as an int >= minimum (integral floats accepted); DataError otherwise."""
    try:
        ok = not isinstance(n, bool) and float(n) == int(n)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or int(n) < minimum:
        raise DataError(f"{field} must be an integer >= {minimum}, got {n!r}", field=field)
    return int(n)
