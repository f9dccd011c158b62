"""A DP round's noise, planned once and checked by every owner: the Skellam parameter each
owner adds (`skellam_plan`, `plan_dp`), the owner's check that the announced noise is enough for
the sensitivity it recomputes (`verify_dp`), and the clipped-rows count that rides in a
bounded release's share."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.verify import verify_release
from leteo_fed.protocols.requests import (
    DpRequest,
)


@dataclass(frozen=True)
class DpSpec:
    """Distributed Skellam noise of a DP round (the wire's DpSpec).

    (epsilon, delta) is what `compositions` rounds with this noise give together (0 or 1: a
    single release; a multi-round job: its T rounds, calibrated by Renyi composition)."""

    epsilon: float
    delta: float
    row_norm_bound: float
    mu: float  # aggregate Skellam parameter with exactly `quorum` shares
    quorum: int
    mechanism: str = "skellam"
    compositions: int = 0
    bounds: tuple[ColumnBounds, ...] = ()  # owners clip and scale these columns; +1 value

    @property
    def counts_clipped(self) -> bool:
        """A release with public bounds carries one more value: the rows clipped."""
        return bool(self.bounds)

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def releases(self) -> int:
        """How many rounds with this noise the (epsilon, delta) covers."""
        return max(1, int(self.compositions))

    def aggregate_mu(self, n_shares: int) -> float:
        """The released sum's Skellam parameter with `n_shares` owners' noise in it."""
        return noise.effective_mu(self.mu, self.quorum, n_shares)

    def noise_std(self, n_shares: int, scale_bits: int) -> float:
        """Standard deviation of the aggregate noise per value, in real units at that scale."""
        return math.sqrt(2 * noise.effective_mu(self.mu, self.quorum, n_shares)) / 2**scale_bits


MAX_OWNER_MU = 1e17  # numpy's exact Poisson sampler stops near 9e18


def skellam_plan(
    dp: DpRequest,
    sensitivity: noise.Sensitivity,
    quorum: int,
    n_values: int,
    *,
    row_norm_bound: float | None = None,
    bounds: tuple[ColumnBounds, ...] = (),
    compositions: int = 1,
    remedy: str | None = None,
) -> tuple[DpSpec, int]:
    """Calibrate the aggregate Skellam noise so that `compositions` releases with it are
    together (epsilon, delta)-DP (Renyi composition); (spec, per-owner noise bound).

    With `bounds` the owners clip and scale those columns and add the count of clipped rows as
    one more value: `sensitivity` and `n_values` must already count it (`with_clip_count`)."""
    mu = noise.calibrate_mu(
        dp.epsilon, dp.delta, sensitivity.l1, sensitivity.l2, compositions=compositions
    )
    spec = DpSpec(
        dp.epsilon,
        dp.delta,
        dp.row_norm_bound if row_norm_bound is None else row_norm_bound,
        mu,
        quorum,
        compositions=compositions if compositions > 1 else 0,
        bounds=bounds,
    )
    if remedy is None:
        return spec, owner_noise_bound(mu, quorum, n_values)
    return spec, owner_noise_bound(mu, quorum, n_values, remedy)


def plan_dp(
    dp: DpRequest,
    columns: Sequence[str],
    sensitivity_of: Callable[[float], noise.Sensitivity],
    n_values: int,
    count_scale_bits: int,
    quorum: int,
    norm_columns: int | None = None,
    compositions: int = 1,
) -> tuple[DpSpec, int, noise.Sensitivity, int]:
    """The DP part of a secure-sum plan, the same for every protocol: the public bounds of the
    numeric `columns` (if the request has bounds), the row-norm bound C (given, or derived for
    `norm_columns` scaled columns), the sensitivity at C (one more count for the clipped
    rows), the calibrated noise. Returns (spec, per-owner noise bound, sensitivity, values)."""
    bounds = dp.release_bounds(columns)
    c = dp.norm_for(len(columns) if norm_columns is None else norm_columns)
    if not bounds:
        c = dp.row_norm_bound
    sens, n_vals = with_clip_count(sensitivity_of(c), n_values, count_scale_bits, bool(bounds))
    spec, noise_bound = skellam_plan(
        dp, sens, quorum, n_vals, row_norm_bound=c, bounds=bounds, compositions=compositions
    )
    return spec, noise_bound, sens, n_vals


def verify_dp(
    dp: DpSpec,
    columns: Sequence[str],
    sensitivity: noise.Sensitivity,
    n_values: int,
    encoding: ShareEncoding,
) -> None:
    """The owner's side of `plan_dp`: the bounds are the signed request's for exactly these
    columns, and the announced noise delivers the announced budget at the sensitivity the owner
    recomputed (`verify_release`), with room in the encoding."""
    if dp.bounds:
        bounds_of.for_columns(dp.bounds, columns)
    sens, n_vals = with_clip_count(
        sensitivity, n_values, encoding.count_scale_bits, dp.counts_clipped
    )
    verify_release(dp, sens, n_vals, encoding.noise_bound)


def with_clip_count(
    sensitivity: noise.Sensitivity, n_values: int, count_scale_bits: int, bounded: bool
) -> tuple[noise.Sensitivity, int]:
    """A bounded release's share has one more value, the rows this owner clipped (encoded as
    a count, 2^count_scale_bits per row): one row moves it by at most one count."""
    if not bounded:
        return sensitivity, n_values
    unit = float(2**count_scale_bits)
    return (
        noise.Sensitivity(sensitivity.l1 + unit, math.hypot(sensitivity.l2, unit)),
        n_values + 1,
    )


def split_clip_count(
    totals: list[int], dp: DpSpec | None, count_scale_bits: int
) -> tuple[list[int], float | None]:
    """The released totals without the clipped-rows value, and that (noisy) count."""
    if dp is None or not dp.counts_clipped:
        return totals, None
    return totals[:-1], totals[-1] / 2**count_scale_bits


def clip_for_release(
    x: np.ndarray, columns: Sequence[str], dp: DpSpec, bounded: Mapping[str, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """An owner's rows as a DP release reads them: any finite value accepted; with public
    bounds each column clipped and scaled to [-1, 1]; every row then clipped to L2 norm
    `row_norm_bound`. `bounded`: columns after `columns` in x, each clipped to [-B, B] on its
    own instead (e.g. a regression's label). Returns the rows and which of them were clipped."""
    side = dict(bounded or {})
    names = [*columns, *side]
    check_finite_and_bounded(x, names, np.inf)
    if x.shape[0] == 0:
        raise DataError("the data source has no rows", rule="rows")
    clipped = np.zeros(x.shape[0], dtype=bool)
    if dp.bounds:
        x, clipped = bounds_of.scale_columns(x, bounds_of.for_columns(dp.bounds, names))
    if not side:
        clipped |= np.linalg.norm(x, axis=1) > dp.row_norm_bound
        return noise.clip_rows(x, dp.row_norm_bound), clipped
    d = len(columns)
    clipped |= np.linalg.norm(x[:, :d], axis=1) > dp.row_norm_bound
    out = [noise.clip_rows(x[:, :d], dp.row_norm_bound)]
    for j, b in enumerate(side.values()):
        clipped |= np.abs(x[:, d + j]) > b
        out.append(np.clip(x[:, d + j], -b, b)[:, None])
    return np.hstack(out), clipped


def clip_count_value(clipped: np.ndarray, count_scale_bits: int) -> int:
    return int(np.count_nonzero(clipped)) << count_scale_bits


def owner_noise_bound(
    mu: float,
    quorum: int,
    n_values: int,
    remedy: str = "give public `bounds` per column (data in natural units), or rescale the "
    "columns so rows have norms near 1 and lower row_norm_bound to match, lower scale_bits, "
    "or raise dp_epsilon",
) -> int:
    """The slot room one owner's Skellam(mu / quorum) noise needs, refusing noise too large to
    sample exactly."""
    owner_mu = mu / quorum
    if owner_mu > MAX_OWNER_MU:
        raise DataError(
            f"the noise (Skellam mu {owner_mu:.3g} per owner) is too large to sample exactly: "
            f"{remedy}",
            field="scale_bits",
        )
    return noise.skellam_magnitude_bound(owner_mu, n_values)


def require_same_count_scale(encoding: ShareEncoding) -> None:
    """One noise level fits every coordinate only if counts are scaled like the sums."""
    if encoding.count_scale_bits != encoding.scale_bits:
        raise ProtocolError("DP rounds must encode counts at the same scale as sums")
