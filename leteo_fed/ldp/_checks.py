"""Shared parameter checks for the LDP mechanisms (one message style, DataError with a field).

Epsilon goes through the privacy layer's single check, with its one cap EPSILON_MAX (the LDP
probabilities e^ε / (e^ε + d - 1) are computed in float64; see `leteo_fed.privacy.budget`).
"""

from __future__ import annotations

from leteo_fed.errors import DataError
from leteo_fed.privacy.budget import EPSILON_MAX, check_epsilon


def check_count(n: int, *, minimum: int, field: str = "n") -> int:
    """A report count as an int >= minimum (integral floats accepted); DataError otherwise."""
    try:
        ok = not isinstance(n, bool) and float(n) == int(n)
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or int(n) < minimum:
        raise DataError(f"{field} must be an integer >= {minimum}, got {n!r}", field=field)
    return int(n)


__all__ = ["EPSILON_MAX", "check_count", "check_epsilon"]
