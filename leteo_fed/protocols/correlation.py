"""The Pearson correlation matrix of numeric columns, with confidence intervals.

Owner n sends V = sum x, the upper triangle of R = sum x x^T and its row count N. From the
exact integer totals the aggregator forms the scatter S = R - V V^T / N in integer arithmetic
(no cancellation) and r_ij = S_ij / sqrt(S_ii S_jj): numpy.corrcoef of the pooled rows.

Intervals: Fisher's z = atanh(r) is near normal with standard error 1 / sqrt(N - 3), so
tanh(z -/+ q se) covers r at the asked level (q the normal quantile). A DP release adds the
noise's own spread: each coefficient's noise std s_r (drawn around the released totals, no
privacy cost) becomes s_r / (1 - r^2) on the z scale and se = sqrt(1 / (N - 3) + s_z^2), so the
interval holds both the sampling error and the noise.

DP: rows are clipped to L2 norm C (with public bounds, each column is first scaled to [-1, 1],
which leaves every correlation unchanged). One row moves V by x (L2 <= C, L1 <= sqrt(d) C),
the triangle of x x^T by at most ||x||^2 <= C^2 in L2 and (||x||_1^2 + ||x||_2^2) / 2 <=
(d + 1) C^2 / 2 in L1, and N by 1. Noisy totals are post-processed: the covariance is projected
onto the positive semi-definite cone and coefficients kept in [-1, 1].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_release import correlated_columns
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import COUNT, Block, Release, Rows, SecureSumStatistic, Totals

DEFAULT_CONFIDENCE = 0.95
PREVIEW_CORRELATION = 0.5  # the preview's columns: a correlation the noise must not bury


@dataclass(frozen=True)
class CorrelationRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated numeric columns to correlate (2 or more)"}
    )
    confidence: float = field(
        default=0.0, metadata={"help": "level of the confidence intervals, in (0, 1) (0: 0.95)"}
    )


@dataclass(frozen=True)
class CorrelationSpec:
    features: tuple[str, ...]
    confidence: float  # the aggregator's intervals only: owners compute the same sums


@result_type
@dataclass(frozen=True, kw_only=True)
class CorrelationResult(RoundFacts, Result):
    wire: ClassVar[str] = "correlation"
    protocol: str
    method: str
    features: list[str]
    n_rows: int
    correlation: list[list[float]]
    ci_lower: list[list[float]]
    ci_upper: list[list[float]]
    confidence: float
    interval: str
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        cols = {f: [row[j] for row in self.correlation] for j, f in enumerate(self.features)}
        return cols, list(self.features), "feature"


def upper(d: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(d)


def scatter(totals: Totals, d: int) -> tuple[np.ndarray, int]:
    """S = R - V V^T / N from the exact totals: (N R 2^f - V V^T) / (N 2^2f) as integers, one
    rounding per entry; and N."""
    n_exact = totals.exact("rows")[0]
    n = round(n_exact)
    if n <= 3:
        raise DataError(
            f"the pooled row count is {float(n_exact):.4g}: intervals need more than 3 rows"
        )
    v = totals.exact("sums")
    r_tri = totals.exact("products")
    out = np.zeros((d, d))
    for k, (i, j) in enumerate(zip(*upper(d), strict=True)):
        out[i, j] = out[j, i] = float(r_tri[k] - v[i] * v[j] / n)
    return out, n


def correlations(s: np.ndarray, features: tuple[str, ...], noisy: bool) -> np.ndarray:
    """r_ij = S_ij / sqrt(S_ii S_jj); noisy: S first projected onto the PSD cone."""
    if noisy:
        evals, evecs = np.linalg.eigh(s)
        s = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        floor = max(float(np.max(np.diag(s))), 1.0) * 1e-12
        sd = np.sqrt(np.maximum(np.diag(s), floor))
    else:
        flat = [features[i] for i in np.flatnonzero(np.diag(s) <= 0)]
        if flat:
            raise DataError(
                f"column(s) {', '.join(flat)} are constant across all owners: a correlation "
                "with a constant column is undefined",
                field="features",
            )
        sd = np.sqrt(np.diag(s))
    r = np.clip(s / np.outer(sd, sd), -1.0, 1.0)
    np.fill_diagonal(r, 1.0)
    return r


def fisher_interval(
    r: np.ndarray, n: int, confidence: float, noise_z: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """tanh(atanh(r) -/+ q se), se^2 = 1 / (n - 3) (+ the noise's spread on the z scale)."""
    q = NormalDist().inv_cdf(0.5 + confidence / 2)
    var = np.full(r.shape, 1.0 / (n - 3))
    if noise_z is not None:
        var = var + noise_z**2
    with np.errstate(divide="ignore"):
        z = np.arctanh(r)
    half = q * np.sqrt(var)
    lower, higher = np.tanh(z - half), np.tanh(z + half)
    np.fill_diagonal(lower, 1.0)
    np.fill_diagonal(higher, 1.0)
    return lower, higher


def figure_name(a: str, b: str) -> str:
    return f"r({a}, {b})"


class CorrelationStatistic(SecureSumStatistic[CorrelationRequest, CorrelationSpec]):
    name = "correlation"
    request_type = CorrelationRequest
    spec_type = CorrelationSpec
    result_type = CorrelationResult
    summary = ("round_id", "owners", "n_rows", "correlation")
    plot_file = "correlation.png"
    help = "Pearson correlation matrix of numeric columns with confidence intervals"
    description = (
        "Start a correlation round: every owner sends its Paillier-encrypted sums, sums of "
        "products and row count; the aggregator learns only the pooled correlation matrix and "
        "row count (with `dp_epsilon`, noisy), with Fisher-z confidence intervals that hold the "
        "DP noise too."
    )

    def spec(self, request: CorrelationRequest) -> CorrelationSpec:
        features = check_features(tuple(request.features), "correlate")
        if len(features) < 2:
            raise DataError("features must name at least 2 columns to correlate", field="features")
        return CorrelationSpec(features, confidence(request))

    def features(self, spec: CorrelationSpec) -> tuple[str, ...]:
        return tuple(spec.features)

    def blocks(self, spec: CorrelationSpec, bound: float) -> tuple[Block, ...]:
        d = len(spec.features)
        c2 = bound * bound
        return (
            Block("sums", d, bound, l1=math.sqrt(d) * bound, l2=bound),
            Block("products", d * (d + 1) // 2, c2, l1=(d + 1) * c2 / 2, l2=c2),
            Block("rows", 1, 1.0, l1=1.0, l2=1.0, kind=COUNT),
        )

    def sums(self, spec: CorrelationSpec, rows: Rows) -> dict[str, np.ndarray]:
        x = rows.x
        return {
            "sums": x.sum(axis=0),
            "products": (x.T @ x)[upper(x.shape[1])],
            "rows": np.array([rows.n]),
        }

    def result(self, spec: CorrelationSpec, totals: Totals, release: Release) -> dict[str, Any]:
        s, n = scatter(totals, len(spec.features))
        r = correlations(s, spec.features, release.noisy)
        lower, higher = fisher_interval(r, n, spec.confidence)
        return {
            "method": "pearson",
            "features": list(spec.features),
            "n_rows": n,
            "correlation": r.tolist(),
            "ci_lower": lower.tolist(),
            "ci_upper": higher.tolist(),
            "confidence": spec.confidence,
            "interval": "Fisher z: tanh(atanh(r) -/+ q / sqrt(n - 3))",
        }

    def figures(self, spec: CorrelationSpec, result: Mapping[str, Any]) -> dict[str, float]:
        f, r = spec.features, result["correlation"]
        return {
            figure_name(f[i], f[j]): float(r[i][j])
            for i in range(len(f))
            for j in range(i + 1, len(f))
        }

    def with_noise(
        self, spec: CorrelationSpec, result: dict[str, Any], noise_std: Mapping[str, float]
    ) -> dict[str, Any]:
        """The intervals widened by each coefficient's noise (delta method on the z scale)."""
        f = spec.features
        r = np.asarray(result["correlation"])
        noise_z = np.zeros_like(r)
        for i in range(len(f)):
            for j in range(i + 1, len(f)):
                s = noise_std.get(figure_name(f[i], f[j]), math.inf)
                noise_z[i, j] = noise_z[j, i] = s / max(1.0 - r[i, j] ** 2, 1e-12)
        lower, higher = fisher_interval(r, int(result["n_rows"]), spec.confidence, noise_z)
        return result | {
            "ci_lower": lower.tolist(),
            "ci_upper": higher.tolist(),
            "interval": "Fisher z with the DP noise: tanh(atanh(r) -/+ q sqrt(1 / (n - 3) + "
            "s_z^2)), s_z the coefficient's noise std / (1 - r^2)",
        }

    def describe(self, spec: CorrelationSpec) -> str:
        return f"correlation of {len(spec.features)} columns"

    def preview_data(
        self, spec: CorrelationSpec, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        return correlated_columns(columns, list(spec.features), PREVIEW_CORRELATION)


def confidence(request: CorrelationRequest) -> float:
    level = request.confidence or DEFAULT_CONFIDENCE
    if not (math.isfinite(level) and 0 < level < 1):
        raise DataError(f"confidence must be in (0, 1), got {level}", field="confidence")
    return level


PROTOCOL = registry.register(SecureSumProtocol(CorrelationStatistic()))
