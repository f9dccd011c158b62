"""Parameter checks shared by the DP k-means methods: one message style, with a field.

Every public input of a DP k-means run (epsilon, delta, k, the bounds or the radius) is checked
here BEFORE any data is read, so a bad request is refused without touching the data. Epsilon and
delta use the privacy layer's single checks (DataError, the one epsilon cap); delta must be in
(0, 1) since the only method that takes one is Gaussian. The other checks raise ConfigError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import check_delta, check_epsilon

MAX_K = 100_000  # far above any useful k; stops a typo from allocating k x d arrays of billions


def _number(value: object, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field)
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field) from None


def check_fraction(value: object, field: str) -> float:
    """A budget share strictly between 0 and 1."""
    f = _number(value, field)
    if not (0.0 < f < 1.0):
        raise ConfigError(f"{field} must be in (0, 1), got {value!r}", field=field)
    return f


def check_positive(value: object, field: str) -> float:
    v = _number(value, field)
    if not (math.isfinite(v) and v > 0.0):
        raise ConfigError(f"{field} must be finite and > 0, got {value!r}", field=field)
    return v


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= MAX_K:
        raise ConfigError(f"k must be an integer in [1, {MAX_K}], got {k!r}", field="k")
    return int(k)


def check_dim(d: object) -> int:
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ConfigError(f"need at least one feature, got dimension {d!r}", field="features")
    return int(d)


def check_bounds(
    lo: float | Sequence[float] | np.ndarray, hi: float | Sequence[float] | np.ndarray, d: int
) -> tuple[np.ndarray, np.ndarray]:
    """Public per-feature bounds as two float arrays of length d; lo < hi, both finite.

    A scalar applies to every feature. The bounds must be fixed without looking at the data
    (a domain's documented range): bounds read off the data leak its extreme values.
    """
    try:
        lo_a = np.broadcast_to(np.asarray(lo, dtype=np.float64), (d,)).copy()
        hi_a = np.broadcast_to(np.asarray(hi, dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError):
        raise ConfigError(
            f"bounds must be two numbers or two lists of {d} numbers", field="bounds"
        ) from None
    if not (np.all(np.isfinite(lo_a)) and np.all(np.isfinite(hi_a))):
        raise ConfigError("bounds must be finite numbers", field="bounds")
    bad = np.nonzero(lo_a >= hi_a)[0]
    if bad.size:
        j = int(bad[0])
        raise ConfigError(
            f"bounds need lo < hi for every feature; feature {j} has lo={lo_a[j]:g} >= "
            f"hi={hi_a[j]:g}",
            field="bounds",
        )
    return lo_a, hi_a


def check_radius(radius: object) -> float:
    r = _number(radius, "radius")
    if not (math.isfinite(r) and r > 0.0):
        raise ConfigError(f"radius must be finite and > 0, got {radius!r}", field="radius")
    return r


def check_center(center: float | Sequence[float] | np.ndarray | None, d: int) -> np.ndarray:
    """The public center of the radius ball (default: the origin)."""
    if center is None:
        return np.zeros(d)
    try:
        c = np.broadcast_to(np.asarray(center, dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError):
        raise ConfigError(f"center must be one number or {d} numbers", field="center") from None
    if not np.all(np.isfinite(c)):
        raise ConfigError("center must be finite", field="center")
    return c


def check_seed(seed: object) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}", field="seed")
    return int(seed)


__all__ = [
    "MAX_K",
    "check_bounds",
    "check_center",
    "check_delta",
    "check_dim",
    "check_epsilon",
    "check_fraction",
    "check_k",
    "check_positive",
    "check_radius",
    "check_seed",
]
