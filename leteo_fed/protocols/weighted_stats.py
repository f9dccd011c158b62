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
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_facts import preview_facts
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type
from leteo_fed.protocols.secure_sum import SecureSumProtocol, StatisticPlan
from leteo_fed.protocols.statistic import COUNT, Block, Release, Rows, SecureSumStatistic, Totals

METHOD = "weighted-mean-variance"


@dataclass(frozen=True)
class WeightedStatsRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated feature columns"}
    )
    weight_column: str = field(
        default="", metadata={"help": "column of row weights (default: every row weighs 1)"}
    )
    weight_bound: float = field(
        default=0.0,
        metadata={
            "help": "public bound on every weight; larger weights are refused (clipped to it "
            "in DP rounds) (default: 1)"
        },
    )


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


def local_sums(x: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, int]:
    """(S_w, S_wx, S_wxx, N) of one site's rows."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return float(w.sum()), w @ x, w @ (x * x), int(len(x))


def statistics(totals: Totals, d: int, bound: float, noisy: bool, noise_std: float = 0.0) -> dict:
    """Means and variances from the exact totals (exact rationals, rounded once).

    Noisy totals are post-processed (no privacy cost): a mean is projected onto [-C, C], and a
    variance is kept at least its own standard error sigma sqrt(1 + 4 m^2 + m^4) / S_w (the
    smallest variance the release can tell from 0; `noise_preview`), never 0 or negative."""
    s_w = totals.exact("weight")[0]
    n = round(totals.exact("rows")[0])
    s_wx, s_wxx = totals.exact("sums"), totals.exact("squares")
    if s_w <= 0:
        what = "noisy total weight" if noisy else "total weight"
        hint = "; the data is too small for this epsilon" if noisy else ""
        raise DataError(f"the {what} is {float(s_w):.6g}, not positive{hint}")
    means, variances = [], []
    for j in range(d):
        mean = s_wx[j] / s_w
        var = s_wxx[j] / s_w - mean * mean
        if noisy:  # post-processing: project onto what clipped rows allow
            c = Fraction(bound)
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
    plan: StatisticPlan,
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
    features = plan.spec.features
    d = len(features)
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
        f: sigma * math.sqrt(1 + mj * mj) / s_w for f, mj in zip(features, m, strict=True)
    }
    doc["variance_std_error"] = {
        f: sigma * math.sqrt(1 + 4 * mj * mj + (mj * mj - vj) ** 2) / s_w
        for f, mj, vj in zip(features, m, v, strict=True)
    }
    doc["expected_error"] = {f"mean of {f}": e for f, e in doc["mean_std_error"].items()} | {
        f"variance of {f}": e for f, e in doc["variance_std_error"].items()
    }
    c = plan.dp.row_norm_bound  # type: ignore[union-attr]  # rows clipped to C: |x_j| <= C
    checks = [SignalCheck("total weight", sigma, s_w)]
    for f in features:
        checks.append(SignalCheck(f"mean of {f}", doc["mean_std_error"][f], c))
        checks.append(SignalCheck(f"variance of {f}", doc["variance_std_error"][f], c * c))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


class WeightedStats(SecureSumStatistic[WeightedStatsRequest, WeightedStatsSpec]):
    name = "weighted_stats"
    command = "stats"
    request_type = WeightedStatsRequest
    spec_type = WeightedStatsSpec
    result_type = WeightedStatsResult
    output_file = "stats.json"
    summary = ("round_id", "owners", "n_rows", "means", "variances")
    help = "weighted mean and variance per column across the owners"
    description = (
        "Start a weighted-statistics round: every owner sends its Paillier-encrypted total "
        "weight, weighted sums of x and x^2 and its row count; the aggregator learns only the "
        "pooled means, variances, total weight and row count (with `dp_epsilon`, noisy)."
    )

    def spec(self, request: WeightedStatsRequest) -> WeightedStatsSpec:
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
        return WeightedStatsSpec(features, request.weight_column, wb)

    def features(self, spec: WeightedStatsSpec) -> tuple[str, ...]:
        return tuple(spec.features)

    def other_columns(self, spec: WeightedStatsSpec) -> tuple[str, ...]:
        return (spec.weight_column,) if spec.weight_column else ()

    def check_spec(self, spec: WeightedStatsSpec) -> None:
        if not (math.isfinite(spec.weight_bound) and spec.weight_bound > 0):
            raise ProtocolError("the round's weight bound is not a positive number")

    def blocks(self, spec: WeightedStatsSpec, bound: float) -> tuple[Block, ...]:
        """One row x (||x||_2 <= C) of weight w in [0, W] moves S_w by w <= W, S_wx by w x
        (L2 <= W C, L1 <= W sqrt(d) C) and S_wxx by w x^2 (L1 and L2 <= W C^2, since
        ||x^2||_2 <= ||x^2||_1 = ||x||_2^2), and N by 1."""
        d, w, b = len(spec.features), spec.weight_bound, bound
        return (
            Block("weight", 1, w, l1=w, l2=w),
            Block("sums", d, w * b, l1=w * math.sqrt(d) * b, l2=w * b),
            Block("squares", d, w * b * b, l1=w * b * b, l2=w * b * b),
            Block("rows", 1, 1.0, l1=1.0, l2=1.0, kind=COUNT),
        )

    def sums(self, spec: WeightedStatsSpec, rows: Rows) -> dict[str, np.ndarray]:
        x = rows.x
        if spec.weight_column:
            w = rows.column(spec.weight_column)
            if rows.dp:  # DP rounds clip weights into [0, weight_bound], like rows
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
        s_w, s_wx, s_wxx, n = local_sums(x, w)
        return {"weight": np.array([s_w]), "sums": s_wx, "squares": s_wxx, "rows": np.array([n])}

    def result(self, spec: WeightedStatsSpec, totals: Totals, release: Release) -> dict[str, Any]:
        """Means and variances in natural units (a bounded release is mapped back)."""
        stats = statistics(
            totals, len(spec.features), release.bound, release.noisy, release.noise_std
        )
        if release.bounds:
            _, half = bounds_of.centers_halves(release.bounds)
            stats["means"] = bounds_of.unscale_mean(stats["means"], release.bounds).tolist()
            stats["variances"] = (np.asarray(stats["variances"]) * half * half).tolist()
        names = list(spec.features)
        return {
            "method": METHOD,
            "features": names,
            "weight_column": spec.weight_column or None,
            "weight_bound": spec.weight_bound,
            "n_rows": stats["n_rows"],
            "total_weight": stats["total_weight"],
            "means": dict(zip(names, stats["means"], strict=True)),
            "variances": dict(zip(names, stats["variances"], strict=True)),
            "variance_definition": "weighted population variance: sum w (x - mean)^2 / sum w",
        }

    def figures(self, spec: WeightedStatsSpec, result: Mapping[str, Any]) -> dict[str, float]:
        """Each column's mean and variance."""
        figures = {f"mean of {f}": result["means"][f] for f in spec.features}
        return figures | {f"variance of {f}": result["variances"][f] for f in spec.features}

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def describe(self, spec: WeightedStatsSpec) -> str:
        return f"weighted mean/variance of {len(spec.features)} column(s)"


PROTOCOL = registry.register(SecureSumProtocol(WeightedStats()))
