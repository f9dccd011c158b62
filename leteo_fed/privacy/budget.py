"""One privacy-budget type and one epsilon/delta check for the whole code base.

Every epsilon or delta that enters the system (an LDP oracle's parameter, a central mechanism's
calibration target, a DP round's announcement, a ledger charge) goes through `check_epsilon` /
`check_delta`, so a bad value is refused with the same message and field wherever it comes from.

The cap
-------
`EPSILON_MAX` = 50 bounds the epsilon of any single release. Two reasons: e^50 ~ 5e21 is still
far inside float64, so the mechanisms' probabilities e^eps / (e^eps + d - 1) and likelihood
ratios are computed without overflow or total loss of precision; and a release at epsilon = 50
already lets an observer multiply the odds of any statement about a record by e^50, so no
meaningful guarantee remains above it. Sums are not capped: a ledger's total or a composition of
many capped releases may exceed 50 (`check_epsilon(..., capped=False)`), and `Budget` itself,
being closed under composition, is not capped either.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from leteo_fed.errors import DataError

EPSILON_MAX = 50.0


def _number(value: object, field: str) -> float:
    """A real number as float; bools and strings are refused (True is not epsilon = 1)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise DataError(f"{field} must be a number, got {value!r}", field=field)
    return float(value)


def check_epsilon(
    value: object, field: str = "epsilon", *, capped: bool = True, allow_zero: bool = False
) -> float:
    """epsilon as a float, finite and > 0 (>= 0 with `allow_zero`), at most EPSILON_MAX unless
    `capped=False` (sums of releases, geo-indistinguishability rates per unit of distance).

    DataError(field=field) otherwise: epsilon <= 0 or NaN gives no privacy statement at all.
    """
    eps = _number(value, field)
    low_ok = eps >= 0.0 if allow_zero else eps > 0.0
    if capped:
        if not (math.isfinite(eps) and low_ok and eps <= EPSILON_MAX):
            lo = "[0" if allow_zero else "(0"
            raise DataError(
                f"{field} must be finite and in {lo}, {EPSILON_MAX:g}], got {value!r}", field=field
            )
    elif not (math.isfinite(eps) and low_ok):
        raise DataError(
            f"{field} must be finite and {'>=' if allow_zero else '>'} 0, got {value!r}",
            field=field,
        )
    return eps


def check_delta(value: object, field: str = "delta", *, allow_zero: bool = False) -> float:
    """delta as a float in (0, 1), or [0, 1) with `allow_zero` (pure DP); DataError otherwise.

    delta >= 1 promises nothing. delta = 0 is refused by default because the mechanisms that
    take a delta (Gaussian, Skellam) cannot meet it; budgets and ledgers pass allow_zero=True.
    """
    d = _number(value, field)
    ok = (0.0 <= d < 1.0) if allow_zero else (0.0 < d < 1.0)  # both reject NaN
    if not ok:
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise DataError(f"{field} must be in {interval}, got {value!r}", field=field)
    return d


def _check_count(n: object, field: str) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 1:
        raise DataError(f"{field} must be an integer >= 1, got {n!r}", field=field)
    return int(n)


@dataclass(frozen=True)
class Budget:
    """An (epsilon, delta) differential-privacy guarantee: what a release costs or may cost.

    Validated on construction (finite, epsilon > 0, 0 <= delta < 1, no bools). Not capped at
    EPSILON_MAX, so that compositions and privacy maps stay representable; the cap is applied
    where a single release is requested.
    """

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, capped=False))
        object.__setattr__(self, "delta", check_delta(self.delta, allow_zero=True))

    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0

    def __add__(self, other: Budget) -> Budget:
        """Sequential composition: epsilons and deltas add up."""
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget(
            math.fsum((self.epsilon, other.epsilon)), math.fsum((self.delta, other.delta))
        )

    @staticmethod
    def compose(budgets: Iterable[Budget]) -> Budget:
        """Sequential composition of several releases, summed exactly rounded (math.fsum)."""
        items = list(budgets)
        if not items or not all(isinstance(b, Budget) for b in items):
            raise DataError("compose needs a non-empty list of Budget objects", field="budget")
        return Budget(math.fsum(b.epsilon for b in items), math.fsum(b.delta for b in items))

    def split(self, n: int) -> Budget:
        """The budget of each of n releases that together spend this one (basic composition)."""
        k = _check_count(n, "n")
        return Budget(self.epsilon / k, self.delta / k)

    def times(self, n: int) -> Budget:
        """The cost of n releases at this budget (basic composition)."""
        k = _check_count(n, "n")
        return Budget(self.epsilon * k, self.delta * k)

    def fits_within(self, total: Budget | Balance, *, rel_slack: float = 0.0) -> bool:
        """True if this budget is at most `total` in both epsilon and delta.

        `rel_slack` absorbs floating-point rounding of amounts that were computed, not chosen
        (e.g. 1e-12 for decimal-to-binary rounding of sums; 1e-6 for re-run accounting).
        """
        s = 1.0 + float(rel_slack)
        return self.epsilon <= total.epsilon * s and self.delta <= total.delta * s

    def __str__(self) -> str:
        return f"(epsilon={self.epsilon:.6g}, delta={self.delta:.6g})"


class Balance(NamedTuple):
    """An amount of budget that may be zero: what a ledger has spent, reserved or left.

    A tuple, so `eps, delta = ledger.remaining()` keeps working; a Budget cannot be zero.
    """

    epsilon: float
    delta: float

    def covers(self, budget: Budget, *, rel_slack: float = 0.0) -> bool:
        """True if `budget` fits in this amount."""
        return budget.fits_within(self, rel_slack=rel_slack)

    def __str__(self) -> str:
        return f"(epsilon={self.epsilon:.6g}, delta={self.delta:.6g})"


__all__ = ["EPSILON_MAX", "Balance", "Budget", "check_delta", "check_epsilon"]
