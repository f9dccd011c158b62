"""What the analyst asks, as every protocol reads it: the round's common parameters
(`Common`: owners, quorum, deadline, encoding) and its DP request (`DpRequest`: epsilon, delta,
the row-norm bound or public per-column bounds), validated before anything is planned."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

from leteo_fed import defaults
from leteo_fed.errors import DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.budget import Budget, check_delta, check_epsilon


@dataclass(frozen=True)
class DpRequest:
    """A DP release: the budget, and what bounds a row: public bounds per column (values
    clipped and scaled to [-1, 1], `leteo_fed.privacy.bounds`) and/or an L2 bound every row is
    clipped to (0: derived from the bounds, sqrt(d) for d bounded columns)."""

    epsilon: float
    delta: float
    row_norm: float
    bounds: tuple[ColumnBounds, ...] = ()

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def row_norm_bound(self) -> float:
        """The L2 bound of a protocol that takes no per-column bounds."""
        if self.row_norm <= 0:
            raise DataError(
                "this protocol clips whole rows: give row_norm_bound",
                field="row_norm_bound",
            )
        return self.row_norm

    def release_bounds(self, columns: Sequence[str]) -> tuple[ColumnBounds, ...]:
        """The bounds of the numeric `columns` a release reads, in order; () without bounds."""
        if not self.bounds:
            return ()
        return bounds_of.for_columns(self.bounds, columns)

    def norm_for(self, d: int) -> float:
        """The L2 bound of rows of d columns: the one given, else sqrt(d) (every scaled value
        in [-1, 1]). With bounds, a given bound is in the scaled units."""
        if self.row_norm > 0:
            return self.row_norm
        return math.sqrt(d)


MAX_SCALE_BITS = 64  # fixed-point fraction bits any encoding accepts (encoding.share)


@dataclass(frozen=True)
class Common:
    """Round parameters every protocol shares (the request's fields outside its payload)."""

    n_invited: int
    min_owners: int = 0  # 0: the protocol's default quorum
    deadline_seconds: float = 0.0  # 0: the default deadline
    scale_bits: int = 0  # 0: the protocol's default
    value_bound: float = 0.0  # 0: the protocol's default
    dp: DpRequest | None = None

    def __post_init__(self) -> None:
        # checked here, before any protocol derives a bound or a sensitivity from it
        if not 0 <= self.scale_bits <= MAX_SCALE_BITS:
            raise DataError(
                f"scale_bits must be in 0..{MAX_SCALE_BITS} (0: the protocol's default), got "
                f"{self.scale_bits}",
                field="scale_bits",
            )

    def quorum(self, minimum: int = defaults.MIN_QUORUM) -> int:
        """The request's quorum; without one, DEFAULT_QUORUM (what the owners' default policy
        asks), or every invited owner if fewer are invited (never below `minimum`)."""
        default = minimum  # LDP: every report is private on its own
        if minimum >= defaults.MIN_QUORUM:  # a secure sum
            default = max(minimum, min(defaults.DEFAULT_QUORUM, self.n_invited))
        q = self.min_owners or default
        if q < minimum:
            why = "a single share would be revealed" if minimum >= 2 else "no owner"
            raise DataError(f"min_owners must be at least {minimum}: {why}", field="min_owners")
        return q

    def deadline(self) -> float:
        d = self.deadline_seconds or defaults.DEFAULT_DEADLINE_SECONDS
        if not (math.isfinite(d) and 0 < d <= defaults.MAX_DEADLINE_SECONDS):
            raise DataError(
                f"deadline_seconds must be in (0, {defaults.MAX_DEADLINE_SECONDS:.0f}]",
                field="deadline_seconds",
            )
        return d

    def no_dp(self, protocol: str) -> None:
        if self.dp is not None:
            raise DataError(f"{protocol} rounds take no dp_epsilon", field="dp_epsilon")


def check_features(features: tuple[str, ...], purpose: str) -> tuple[str, ...]:
    """The request's feature columns: at least one, at most MAX_FEATURES, no duplicates."""
    if not features:
        raise DataError(f"features is empty: name the columns to {purpose}", field="features")
    if len(features) > defaults.MAX_FEATURES:
        raise DataError(
            f"features names {len(features)} columns; a request may name at most "
            f"{defaults.MAX_FEATURES}",
            field="features",
        )
    if len(set(features)) != len(features):
        raise DataError("features contains duplicates", field="features")
    return features


def dp_request(
    epsilon: float | None,
    delta: float | None,
    row_norm_bound: float | None,
    bounds: Sequence[ColumnBounds] = (),
) -> DpRequest | None:
    """The request's DP fields, validated (one validator for every protocol)."""
    if epsilon is None:
        if delta is not None or row_norm_bound is not None or bounds:
            raise DataError(
                "dp_delta, row_norm_bound and `bounds` need dp_epsilon", field="dp_epsilon"
            )
        return None
    bounds = bounds_of.check_unique(bounds)
    eps = check_epsilon(epsilon, field="dp_epsilon")
    dlt = defaults.DEFAULT_DP_DELTA if delta is None else check_delta(delta, field="dp_delta")
    if dlt > defaults.MAX_DP_DELTA:  # a larger delta allows leaking a row outright
        raise DataError(
            f"dp_delta must be in (0, {defaults.MAX_DP_DELTA:g}], got {delta}", field="dp_delta"
        )
    if row_norm_bound is None:
        if bounds:
            return DpRequest(eps, dlt, 0.0, bounds)
        raise DataError(
            "a DP round needs public bounds per column (`bounds`) or "
            "row_norm_bound (rows are clipped to it)",
            field="row_norm_bound",
        )
    if not (math.isfinite(row_norm_bound) and row_norm_bound > 0):
        raise DataError(
            f"row_norm_bound must be a positive number, got {row_norm_bound}",
            field="row_norm_bound",
        )
    return DpRequest(eps, dlt, float(row_norm_bound), bounds)


def low_high(text: str) -> tuple[float, float]:
    """`LO,HI`: the two ends of a public interval, as a command line gives them (a request
    field's flag type: argparse names the flag in its error)."""
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected LO,HI") from exc
    return lo, hi
