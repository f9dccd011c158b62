"""Privacy events and their Renyi-DP composition: what a site's ledger adds up.

One event per release, each with ONE privacy curve (one map per measurement, as in OpenDP): its
Renyi divergence bound eps(alpha) at every order alpha of `ORDERS`. Composition adds the curves
(adaptive composition of RDP, Mironov 2017, Prop. 1) and converts the sum once to (epsilon, delta)
(`rdp.rdp_to_dp`, the improved conversion of Canonne-Kamath-Steinke 2020, Prop. 12).

Events and their curves (add/remove-one-row neighbours, like every mechanism here)
-------------------------------------------------------------------------------
- `SkellamEvent(mu, l1, l2)`: the distributed Skellam noise of a secure sum, aggregate parameter
  mu, integer sensitivities l1, l2: the Agarwal-Kairouz-Liu bound (`Skellam.rdp`). That bound is
  stated for integer orders; a Renyi divergence is non-decreasing in its order (van Erven &
  Harremoes 2014, Thm. 3), so at a fractional order we use the bound at the next integer.
- `GaussianEvent(noise_multiplier)` (sigma / L2 sensitivity): alpha / (2 z^2) (Mironov 2017,
  Prop. 7), exact.
- `LaplaceEvent(epsilon)` (L1 sensitivity / scale): Mironov 2017, Prop. 6, exact:
      eps(alpha) = 1/(alpha-1) log( alpha/(2 alpha-1) e^((alpha-1) eps)
                                    + (alpha-1)/(2 alpha-1) e^(-alpha eps) ).
- `PureEvent(epsilon)`: any epsilon-DP release (the LDP mechanisms' reports): the sharp bound
  of a pure-DP mechanism, attained by randomized response (Steinke, "Sharp RDP & zCDP from pure
  DP", differentialprivacy.org 2024, Thm. 4; it refines Bun & Steinke 2016, Prop. 3.3,
  eps-DP => (eps^2/2)-zCDP):
      eps(alpha) = eps - 1/(alpha-1) log( (1 + e^-eps) / (1 + e^-((2 alpha-1) eps)) ),
  which is <= min(eps, alpha eps^2 / 2).
- `ApproxEvent(epsilon, delta)`: a release known only as (epsilon, delta)-DP, with no curve (a
  ledger entry written before events were recorded). It is composed safely: its epsilon and
  delta are ADDED to the conversion of the RDP part, and its delta is taken from the delta that
  conversion may use (basic composition of the RDP part's (eps', delta') with the rest).

A composition that holds only pure events (Laplace, Pure) is also (sum of epsilons, 0)-DP; the
smaller of that and the RDP conversion is reported (both are valid bounds).

Every event has a `count` (k identical releases: k times the curve) and serializes to a small
JSON dict (`to_dict` / `event_from_dict`), stored with each ledger entry.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.budget import Budget, check_delta, check_epsilon
from leteo_fed.privacy.mechanisms.rdp import DEFAULT_ALPHAS, rdp_to_dp
from leteo_fed.privacy.mechanisms.skellam import Skellam

# Renyi orders: 1.1 .. 10.9 by 0.1 (they matter for large epsilon; the grid of Google's
# dp-accounting), then every integer 11..128 and a geometric grid to 1e6 (DEFAULT_ALPHAS).
ORDERS: np.ndarray = np.unique(
    np.concatenate([1.0 + np.arange(1, 100) / 10.0, DEFAULT_ALPHAS])
).astype(np.float64)

ACCOUNTANTS = ("rdp", "basic")


def _positive(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataError(f"{field} must be a number, got {value!r}", field=field)
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise DataError(f"{field} must be finite and > 0, got {value!r}", field=field)
    return v


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"count must be an integer >= 1, got {value!r}", field="count")
    return int(value)


class PrivacyEvent(ABC):
    """One kind of release, `count` times; its RDP curve is `rdp(orders)`."""

    kind: ClassVar[str]
    count: int

    @abstractmethod
    def curve(self, orders: np.ndarray) -> np.ndarray:
        """The RDP bound of ONE release at each order (> 1)."""

    def rdp(self, orders: np.ndarray = ORDERS) -> np.ndarray:
        """The RDP bound of all `count` releases (curves add under composition)."""
        return self.count * self.curve(np.asarray(orders, dtype=np.float64))

    def times(self, k: int) -> PrivacyEvent:
        """k times this event (k * count releases)."""
        return replace(self, count=self.count * _count(k))  # type: ignore[type-var]

    @property
    def is_pure(self) -> bool:
        """Pure epsilon-DP (then `pure_epsilon` is its epsilon for all `count` releases)."""
        return False

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    def epsilon(self, delta: float) -> float:
        """(epsilon at `delta`) of this event alone (all `count` releases)."""
        return compose_epsilon([self], delta)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):  # type: ignore[arg-type]
            doc[f.name] = getattr(self, f.name)
        return doc


@dataclass(frozen=True)
class SkellamEvent(PrivacyEvent):
    """Distributed Skellam noise: aggregate parameter mu, integer sensitivities l1, l2."""

    mu: float
    l1: float
    l2: float
    count: int = 1
    kind: ClassVar[str] = "skellam"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu", _positive(self.mu, "mu"))
        object.__setattr__(self, "l1", _positive(self.l1, "l1"))
        object.__setattr__(self, "l2", _positive(self.l2, "l2"))
        object.__setattr__(self, "count", _count(self.count))

    def curve(self, orders: np.ndarray) -> np.ndarray:
        # RDP is non-decreasing in the order: a fractional order takes the next integer's bound
        sens = (self.l1, self.l2)
        return np.asarray(Skellam(self.mu).rdp(np.ceil(orders), sens), dtype=np.float64)  # type: ignore[arg-type]


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """The Gaussian mechanism with noise multiplier z = sigma / L2 sensitivity."""

    noise_multiplier: float
    count: int = 1
    kind: ClassVar[str] = "gaussian"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "noise_multiplier", _positive(self.noise_multiplier, "noise_multiplier")
        )
        object.__setattr__(self, "count", _count(self.count))

    def curve(self, orders: np.ndarray) -> np.ndarray:
        z = self.noise_multiplier
        return orders / (2.0 * z * z)


@dataclass(frozen=True)
class _PureEpsilonEvent(PrivacyEvent):
    """A pure epsilon-DP release: its epsilon, how many of them, and the RDP curve its kind
    gives (composed by that curve, or by adding epsilons when every release is pure)."""

    epsilon_: float
    count: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon_", _positive(self.epsilon_, "epsilon"))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def is_pure(self) -> bool:
        return True

    @property
    def pure_epsilon(self) -> float:
        return self.count * self.epsilon_

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "epsilon": self.epsilon_, "count": self.count}


@dataclass(frozen=True)
class LaplaceEvent(_PureEpsilonEvent):
    """The Laplace mechanism with epsilon = L1 sensitivity / scale (pure epsilon-DP)."""

    kind: ClassVar[str] = "laplace"

    def curve(self, orders: np.ndarray) -> np.ndarray:
        """Mironov 2017, Prop. 6, in log space (stable for large orders and epsilons)."""
        e, a = self.epsilon_, orders
        log_terms = np.logaddexp(
            np.log(a / (2 * a - 1)) + (a - 1) * e, np.log((a - 1) / (2 * a - 1)) - a * e
        )
        return np.minimum(log_terms / (a - 1), e)


@dataclass(frozen=True)
class PureEvent(_PureEpsilonEvent):
    """Any pure epsilon-DP release (the LDP mechanisms): the sharp pure-DP-to-RDP curve."""

    kind: ClassVar[str] = "pure"

    def curve(self, orders: np.ndarray) -> np.ndarray:
        """eps - 1/(a-1) log((1 + e^-eps) / (1 + e^-((2a-1) eps))), capped by
        min(eps, a eps^2 / 2) (both also valid bounds; the cap only absorbs rounding)."""
        e, a = self.epsilon_, orders
        sharp = e - (np.log1p(np.exp(-e)) - np.log1p(np.exp(-(2 * a - 1) * e))) / (a - 1)
        return np.minimum(sharp, np.minimum(e, a * e * e / 2.0))


@dataclass(frozen=True)
class ApproxEvent(PrivacyEvent):
    """A release known only as (epsilon, delta)-DP: composed by adding epsilon and delta."""

    epsilon_: float
    delta: float
    count: int = 1
    kind: ClassVar[str] = "approx"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon_", check_epsilon(self.epsilon_, capped=False))
        object.__setattr__(self, "delta", check_delta(self.delta, allow_zero=True))
        object.__setattr__(self, "count", _count(self.count))

    @property
    def is_pure(self) -> bool:
        return self.delta == 0.0

    @property
    def pure_epsilon(self) -> float:
        return self.count * self.epsilon_ if self.delta == 0.0 else math.inf

    def curve(self, orders: np.ndarray) -> np.ndarray:
        return np.zeros_like(orders)  # it has none: `compose_epsilon` adds it separately

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "epsilon": self.epsilon_,
            "delta": self.delta,
            "count": self.count,
        }


_KINDS: dict[str, type[PrivacyEvent]] = {
    c.kind: c for c in (SkellamEvent, GaussianEvent, LaplaceEvent, PureEvent, ApproxEvent)
}


def event_from_dict(doc: Any) -> PrivacyEvent:
    """The event a `to_dict` wrote; DataError for anything else."""
    if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
        raise DataError(f"not a privacy event: {doc!r}", field="event")
    kind = doc["kind"]
    args = {k: v for k, v in doc.items() if k != "kind"}
    if kind in ("laplace", "pure", "approx") and "epsilon" in args:
        args["epsilon_"] = args.pop("epsilon")
    try:
        return _KINDS[kind](**args)
    except TypeError as exc:
        raise DataError(f"privacy event {doc!r}: {exc}", field="event") from None


def approx(budget: Budget) -> ApproxEvent:
    return ApproxEvent(budget.epsilon, budget.delta)


def compose_epsilon(
    events: Iterable[PrivacyEvent], delta: float, orders: np.ndarray = ORDERS
) -> float:
    """Epsilon at `delta` of all `events` together (0 for none; inf if `delta` cannot be met).

    The RDP curves of every event with one are added and converted once, at delta minus the
    ApproxEvents' deltas; the ApproxEvents' epsilons are added to the result."""
    delta = check_delta(delta, allow_zero=True)
    items = list(events)
    eps_fixed = math.fsum(e.count * e.epsilon_ for e in items if isinstance(e, ApproxEvent))
    delta_fixed = math.fsum(e.count * e.delta for e in items if isinstance(e, ApproxEvent))
    curved = [e for e in items if not isinstance(e, ApproxEvent)]
    if delta_fixed > delta * (1 + 1e-12):
        return math.inf
    if not curved:
        return eps_fixed
    candidates = []
    if all(e.is_pure for e in curved):  # basic composition of pure releases
        candidates.append(math.fsum(e.pure_epsilon for e in curved))
    room = delta - delta_fixed
    if room > 0:
        total = np.zeros_like(np.asarray(orders, dtype=np.float64))
        for e in curved:
            total = total + e.rdp(orders)
        candidates.append(rdp_to_dp(total, orders, min(room, 1.0 - 1e-16))[0])
    if not candidates:
        return math.inf
    return math.fsum([eps_fixed, min(candidates)])


def check_accountant(name: Any, field: str = "privacy.accountant") -> str:
    if name not in ACCOUNTANTS:
        from leteo_fed.errors import ConfigError

        raise ConfigError(
            f"{field} must be one of {', '.join(repr(a) for a in ACCOUNTANTS)}, got {name!r}",
            field=field,
        )
    return str(name)


__all__ = [
    "ACCOUNTANTS",
    "ORDERS",
    "ApproxEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "PrivacyEvent",
    "PureEvent",
    "SkellamEvent",
    "approx",
    "check_accountant",
    "compose_epsilon",
    "event_from_dict",
]
