"""What the central mechanisms share: the sensitivity type, parameter checks, a seeded generator.

Mechanism parameters (mu, sigma, scale, sensitivities, counts) are refused with ConfigError, as
they come from a round's configuration; epsilon and delta go through `privacy.budget`.
"""

from __future__ import annotations

import math
import secrets
from typing import NamedTuple

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import Budget

# The smallest positive float: a privacy map whose epsilon is 0 reports this instead, since
# (0, delta)-DP implies (epsilon, delta)-DP for every epsilon > 0 and a Budget cannot be zero.
_TINY_EPSILON = math.ulp(0.0)


class Sensitivity(NamedTuple):
    """L1 and L2 sensitivity of a query (e.g. an integer share vector) under add/remove-one-row."""

    l1: float
    l2: float


def new_rng() -> np.random.Generator:
    """A numpy Generator seeded with 128 bits from the OS's cryptographic source."""
    return np.random.default_rng(secrets.randbits(128))


def positive_finite(value: float, field: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{field} must be a number, got {value!r}", field=field) from None
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{field} must be finite and > 0, got {value!r}", field=field)
    return v


def positive_int(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"{field} must be an integer >= 1, got {value!r}", field=field)
    return int(value)


def mapped_budget(epsilon: float, delta: float) -> Budget:
    """The Budget a privacy map reports for a computed epsilon (0 becomes the smallest float)."""
    return Budget(max(float(epsilon), _TINY_EPSILON), delta)
