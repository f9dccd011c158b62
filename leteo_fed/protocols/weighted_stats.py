"""Federated weighted mean and variance per column, optionally differentially private.

Owner n sends, for its rows x_i with weights w_i in [0, W] (a weight column, or 1 per row):
the total weight S_w = sum w_i, per column S_wx = sum w_i x_ij and S_wxx = sum w_i x_ij^2, and
its row count N. The aggregator reveals the exact integer totals and computes, per column,

    mean     = S_wx / S_w
    variance = S_wxx / S_w - mean^2  = (S_wxx S_w - S_wx^2) / S_w^2

in exact rational arithmetic (one rounding per value). DP rounds clip every row to L2 norm C
and add distributed Skellam noise; the sensitivity of one row is stated in `sensitivity` and
checked by brute force in the tests. Noisy totals are post-processed: a non-positive total
weight refuses the release, variances are floored at 0, means are projected onto [-C, C].

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled totals (hence the released means, variances, total weight and row count), never one
site's. Single-round, so one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.packing import check_finite_and_bounded, encode_fixed
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
    require_bound,
)
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import pca, registry
from leteo_fed.protocols.base import (
    Common,
    DpSpec,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    SiteData,
    Step,
    check_features,
    clip_count_value,
    clip_for_release,
    clip_note,
    dp_facts,
    plan_dp,
    preview_facts,
    require_same_count_scale,
    round_truth,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type

METHOD = "weighted-mean-variance"
DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND


@dataclass(frozen=True)
class WeightedStatsRequest:
    features: tuple[str, ...] = ()
    weight_column: str = ""  # "" = every row weighs 1
    weight_bound: float = 0.0  # public bound W on every weight (0 = 1)


@dataclass(frozen=True)
class WeightedStatsSpec:
    features: tuple[str, ...]
    weight_column: str
    weight_bound: float


@result_type
@dataclass(frozen=True, kw_only=True)
class WeightedStatsResult(RoundFacts, Result):
    wire: ClassVar[str] = "weighted_stats"
    protocol: str
    method: str
    features: list[str]
    weight_column: str | None
    weight_bound: float
    n_rows: int
    total_weight: float
    means: dict[str, float]
    variances: dict[str, float]
    variance_definition: str
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per feature: its weighted mean and variance."""
        cols = {
            "mean": [self.means[f] for f in self.features],
            "variance": [self.variances[f] for f in self.features],
        }
        return cols, list(self.features), "feature"


@dataclass(frozen=True)
class WeightedStatsPlan:
    features: tuple[str, ...]
    weight_column: str
    weight_bound: float
    min_owners: int
    deadline_seconds: float
    encoding: ShareEncoding
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None
    label: str = "weighted_stats"


def n_values(d: int) -> int:
    """S_w, then per column S_wx and S_wxx, then N."""
    return 2 + 2 * d


def data_bound(
    value_bound: float, weight_bound: float, max_rows: int, scale_bits: int, count_bits: int
) -> int:
    """Largest |encoded value| of one owner: |S_wxx| <= rows W B^2, |S_wx| <= rows W B,
    S_w <= rows W (all at scale 2^f); N <= rows (at the count scale)."""
    b, w = math.ceil(value_bound), math.ceil(weight_bound)
    data = max(max_rows * w * b * b, max_rows * w * b, max_rows * w, 1) << scale_bits
    return max(data, max_rows << count_bits)


def encoding(
    scale_bits: int = DEFAULT_SCALE_BITS,
    value_bound: float = DEFAULT_VALUE_BOUND,
    weight_bound: float = 1.0,
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER,
    max_owners: int = DEFAULT_MAX_OWNERS,
    count_scale_bits: int = 0,
    noise_bound: int = 0,
) -> ShareEncoding:
    check_parameters(scale_bits, value_bound, max_rows_per_owner, max_owners, count_scale_bits)
    bound = data_bound(value_bound, weight_bound, max_rows_per_owner, scale_bits, count_scale_bits)
    return ShareEncoding(
        scale_bits=scale_bits,
        value_bound=value_bound,
        data_bound=bound,
        max_rows_per_owner=max_rows_per_owner,
        max_owners=max_owners,
        count_scale_bits=count_scale_bits,
        noise_bound=noise_bound,
    )


def local_sums(x: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, int]:
    """(S_w, S_wx, S_wxx, N) of one site's rows."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return float(w.sum()), w @ x, w @ (x * x), int(len(x))


def encode_sums(
    sums: tuple[float, np.ndarray, np.ndarray, int], enc: ShareEncoding, max_rows: int
) -> list[int]:
    s_w, s_wx, s_wxx, n = sums
    if n > max_rows:
        raise EncodingError(f"row count {n} exceeds max_rows_per_owner {max_rows}", rule="rows")
    f, bound = enc.scale_bits, enc.data_bound
    values = encode_fixed(np.array([s_w]), f, bound, "total weight")
    values += encode_fixed(s_wx, f, bound, "weighted sum of x")
    values += encode_fixed(s_wxx, f, bound, "weighted sum of x^2")
    return [*values, n << enc.count_scale_bits]


def sensitivity(
    row_norm_bound: float, weight_bound: float, scale_bits: int, d: int, count_scale_bits: int
) -> noise.Sensitivity:
    """L1/L2 sensitivity, in integer units, of one owner's share when one row x (||x||_2 <= C)
    with weight w in [0, W] is added or removed. With F = 2^f, F_c = 2^count_scale_bits:
      S_w  changes by w:            L2 = L1 <= W F + 1
      S_wx changes by w x:          L2 <= W C F + sqrt(d),   L1 <= W sqrt(d) C F + d
      S_wxx changes by w x^2:       L2 <= W C^2 F + sqrt(d), L1 <= W C^2 F + d
        (||x^2||_2 <= ||x^2||_1 = ||x||_2^2 <= C^2)
      N    changes by F_c exactly.
    The +1 per coordinate is the rounding slack |round(aF) - round(bF)| <= |a - b| F + 1.
    """
    c, wb = float(row_norm_bound), float(weight_bound)
    f, fc = float(2**scale_bits), float(2**count_scale_bits)
    parts_l2 = (wb * f + 1, wb * c * f + math.sqrt(d), wb * c * c * f + math.sqrt(d), fc)
    l1 = (wb * f + 1) + (wb * math.sqrt(d) * c * f + d) + (wb * c * c * f + d) + fc
    l2 = math.sqrt(sum(p * p for p in parts_l2))
    return noise.Sensitivity(l1=min(l1, math.sqrt(n_values(d)) * l2), l2=l2)


def _rational(value: int, scale_bits: int) -> Fraction:
    return Fraction(value, 1 << scale_bits)


def statistics(
    totals: list[int], d: int, enc: ShareEncoding, noisy: bool, noise_std: float = 0.0
) -> dict:
    """Means and variances from the exact integer totals (exact rationals, rounded once).

    Noisy totals are post-processed (no privacy cost): a mean is projected onto [-C, C], and a
    variance is kept at least its own standard error sigma sqrt(1 + 4 m^2 + m^4) / S_w (the
    smallest variance the release can tell from 0; `noise_preview`), never 0 or negative."""
    if len(totals) != n_values(d):
        raise ProtocolError(f"expected {n_values(d)} totals, got {len(totals)}")
    f, cs = enc.scale_bits, enc.count_scale_bits
    s_w = _rational(totals[0], f)
    n = round(_rational(totals[-1], cs))
    if s_w <= 0:
        what = "noisy total weight" if noisy else "total weight"
        hint = "; the data is too small for this epsilon" if noisy else ""
        raise DataError(f"the {what} is {float(s_w):.6g}, not positive{hint}")
    means, variances = [], []
    for j in range(d):
        s_wx, s_wxx = _rational(totals[1 + j], f), _rational(totals[1 + d + j], f)
        mean = s_wx / s_w
        var = s_wxx / s_w - mean * mean
        if noisy:  # post-processing: project onto what clipped rows allow
            c = Fraction(enc.value_bound)
            mean = min(max(mean, -c), c)
            m = float(mean)
            floor = noise_std * math.sqrt(1 + 4 * m * m + m**4) / float(s_w)
            var = max(var, Fraction(floor) if floor > 0 else Fraction(0))
        elif var < 0:
            raise ProtocolError(f"negative variance for column {j}: corrupted aggregate")
        means.append(float(mean))
        variances.append(float(var))
    return {"total_weight": float(s_w), "n_rows": max(n, 0), "means": means, "variances": variances}


def noise_preview(
    plan: WeightedStatsPlan,
    rows: int | None = None,
    mean_weight: float = 1.0,
    means: list[float] | None = None,
    variances: list[float] | None = None,
) -> dict:
    """What the noise of a DP round will do, from public parameters only (nothing is sent).

    Every released sum (S_w, each S_wx and S_wxx, N) carries Skellam noise of standard
    deviation sigma = sqrt(2 mu) / 2^f in real units (with the quorum's shares; n shares give
    sqrt(n / quorum) times more). With S_w ~ rows x mean_weight, the delta method gives the
    standard error of each column's mean, sigma sqrt(1 + m^2) / S_w, and of its variance,
    sigma sqrt(1 + 4 m^2 + (m^2 - v)^2) / S_w, where m and v are the column's mean and variance:
    the analyst's guesses if given, else 0 (the smallest error; a column far from 0 is noisier).
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    d = len(plan.features)
    doc |= {"noise_std_per_sum": sigma, "noise_std_of_row_count": sigma}
    if rows is None:
        return doc
    if not rows > 0 or not mean_weight > 0:
        raise DataError("rows and the mean weight must be positive", field="rows")
    s_w = rows * mean_weight
    m = list(means) if means is not None else [0.0] * d
    v = list(variances) if variances is not None else [0.0] * d
    doc["assumed_total_weight"] = s_w
    doc["mean_std_error"] = {
        f: sigma * math.sqrt(1 + mj * mj) / s_w for f, mj in zip(plan.features, m, strict=True)
    }
    doc["variance_std_error"] = {
        f: sigma * math.sqrt(1 + 4 * mj * mj + (mj * mj - vj) ** 2) / s_w
        for f, mj, vj in zip(plan.features, m, v, strict=True)
    }
    c = plan.dp.row_norm_bound  # type: ignore[union-attr]  # rows clipped to C: |x_j| <= C
    checks = [SignalCheck("total weight", sigma, s_w)]
    for f in plan.features:
        checks.append(SignalCheck(f"mean of {f}", doc["mean_std_error"][f], c))
        checks.append(SignalCheck(f"variance of {f}", doc["variance_std_error"][f], c * c))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


def stats_figures(features: list[str], stats: dict) -> dict[str, float]:
    """The figures a statistics release states: each column's mean and variance."""
    figures = {f"mean of {f}": m for f, m in zip(features, stats["means"], strict=True)}
    figures |= {f"variance of {f}": v for f, v in zip(features, stats["variances"], strict=True)}
    return figures


class WeightedStatsProtocol(FederatedProtocol):
    name = "weighted_stats"
    takes_bounds = True
    request_type = WeightedStatsRequest
    spec_type = WeightedStatsSpec

    def result_file(self, label: str) -> str | None:
        return "stats.json" if label == self.name else None

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: WeightedStatsRequest, common: Common) -> WeightedStatsPlan:
        features = check_features(tuple(request.features), "summarize")
        if request.weight_column and request.weight_column in features:
            raise DataError(
                f"weight column '{request.weight_column}' is also a feature", field="weight_column"
            )
        wb = request.weight_bound or 1.0
        if not (math.isfinite(wb) and wb > 0):
            raise DataError(
                f"weight_bound must be a positive number, got {wb}", field="weight_bound"
            )
        min_owners, deadline = common.quorum(), common.deadline()
        d = len(features)
        # slots sized for the invited owners: the CSP sums at most one share of each
        max_owners = common.n_invited
        dp, sens = None, None
        if common.dp is None:
            enc = encoding(
                common.scale_bits or DEFAULT_SCALE_BITS,
                common.value_bound or DEFAULT_VALUE_BOUND,
                wb,
                max_owners=max_owners,
            )
        else:
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            dp, noise_bound, sens, _ = plan_dp(
                common.dp,
                features,
                lambda c: sensitivity(c, wb, f, d, f),
                n_values(d),
                f,
                min_owners,
            )
            c = dp.row_norm_bound
            enc = encoding(
                f, c, wb, max_owners=max_owners, count_scale_bits=f, noise_bound=noise_bound
            )
        return WeightedStatsPlan(
            features, request.weight_column, wb, min_owners, deadline, enc, dp, sens
        )

    def next_round(self, plan: WeightedStatsPlan, state: None, index: int) -> RoundPlan:
        spec = WeightedStatsSpec(plan.features, plan.weight_column, plan.weight_bound)
        d = len(plan.features)
        n_vals = n_values(d) + (1 if plan.dp is not None and plan.dp.counts_clipped else 0)
        return RoundPlan(spec, plan.label, plan.encoding, n_vals, plan.dp, dimension=d)

    def finish_round(self, plan: WeightedStatsPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        totals = outcome.require_totals()
        stats = self.statistics_of(plan, totals, outcome.n_owners)
        outcome.timings["statistics_seconds"] = time.perf_counter() - start
        names = list(plan.features)
        dp = None
        if plan.dp is not None and plan.sensitivity is not None:
            truth = round_truth(
                plan.dp,
                outcome,
                lambda t: self.release_figures(plan, t, outcome.n_owners),
                stats["n_rows"],
                plan.encoding.count_scale_bits,
            )
            dp = dp_facts(
                "distributed Skellam noise on every encoded total",
                plan.dp,
                plan.sensitivity,
                truth,
                noise_std_per_value=plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits),
                post_processing="means projected onto [-C, C]; each variance kept at least its "
                "own standard error (never 0 or negative)"
                + ("; then mapped back from the scaled [-1, 1] columns" if plan.dp.bounds else ""),
            )
        return Step(
            WeightedStatsResult(
                protocol=self.name,
                method=METHOD,
                features=names,
                weight_column=plan.weight_column or None,
                weight_bound=plan.weight_bound,
                n_rows=stats["n_rows"],
                total_weight=stats["total_weight"],
                means=dict(zip(names, stats["means"], strict=True)),
                variances=dict(zip(names, stats["variances"], strict=True)),
                variance_definition="weighted population variance: sum w (x - mean)^2 / sum w",
                **outcome.facts(),
                dp=dp,
            )
        )

    @staticmethod
    def statistics_of(plan: WeightedStatsPlan, totals: list[int], n_owners: int) -> dict:
        """Means and variances a round's totals give, in natural units."""
        totals, _ = split_clip_count(totals, plan.dp, plan.encoding.count_scale_bits)
        sigma = 0.0
        if plan.dp is not None:
            sigma = plan.dp.noise_std(n_owners, plan.encoding.scale_bits)
        stats = statistics(totals, len(plan.features), plan.encoding, plan.dp is not None, sigma)
        if plan.dp is not None and plan.dp.bounds:
            _, half = bounds_of.centers_halves(plan.dp.bounds)
            stats["means"] = bounds_of.unscale_mean(stats["means"], plan.dp.bounds).tolist()
            stats["variances"] = (np.asarray(stats["variances"]) * half * half).tolist()
        return stats

    def release_figures(self, plan: WeightedStatsPlan, totals: list[int], n_owners: int) -> dict:
        return stats_figures(list(plan.features), self.statistics_of(plan, totals, n_owners))

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: WeightedStatsSpec) -> list[str]:
        return [*spec.features, *([spec.weight_column] if spec.weight_column else [])]

    def request_columns(self, request: WeightedStatsRequest) -> list[str]:
        return [*request.features, *([request.weight_column] if request.weight_column else [])]

    def dimension(self, spec: WeightedStatsSpec) -> int:
        return len(spec.features)

    def check(
        self, spec: WeightedStatsSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError("a weighted-statistics round needs a plain encoding")
        if not (math.isfinite(spec.weight_bound) and spec.weight_bound > 0):
            raise ProtocolError("the round's weight bound is not a positive number")
        bound = data_bound(
            enc.value_bound,
            spec.weight_bound,
            enc.max_rows_per_owner,
            enc.scale_bits,
            enc.count_scale_bits,
        )
        require_bound(enc, bound)
        if dp is not None:
            d = len(spec.features)
            require_same_count_scale(enc)
            verify_dp(dp, spec.features, self.dp_sensitivity(spec, enc, dp), n_values(d), enc)

    def dp_sensitivity(
        self, spec: WeightedStatsSpec, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a weighted-statistics round needs an encoding")
        d = len(spec.features)
        return sensitivity(
            dp.row_norm_bound, spec.weight_bound, enc.scale_bits, d, enc.count_scale_bits
        )

    def describe(self, spec: WeightedStatsSpec, dp: DpSpec | None) -> str:
        return f"weighted mean/variance of {len(spec.features)} column(s)" + clip_note(dp)

    def share_values(
        self,
        spec: WeightedStatsSpec,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        features = list(spec.features)
        table = site.read(self.columns(spec))
        x = table.matrix(features)
        clipped = np.zeros(len(x), dtype=bool)
        if dp is not None:
            x, clipped = clip_for_release(x, features, dp)
        pca.validate_rows(x, features, enc)
        if spec.weight_column:
            w = table.matrix([spec.weight_column])[:, 0]
            if dp is not None:  # DP rounds clip weights into [0, weight_bound], like rows
                check_finite_and_bounded(w[:, None], [spec.weight_column], np.inf)
                w = np.clip(w, 0.0, spec.weight_bound)
            check_finite_and_bounded(w[:, None], [spec.weight_column], spec.weight_bound)
            if np.any(w < 0):
                raise DataError(
                    f"column '{spec.weight_column}' has negative weights",
                    field=spec.weight_column,
                    rule="bounds",
                )
        else:
            w = np.ones(len(x))
        sums = local_sums(x, w)
        timings["statistics_seconds"] = time.perf_counter() - start
        values = encode_sums(sums, enc, enc.max_rows_per_owner)
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values


PROTOCOL = registry.register(WeightedStatsProtocol())
