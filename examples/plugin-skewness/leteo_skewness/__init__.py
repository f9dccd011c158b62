"""Skewness and excess kurtosis per column across sites: a LETEO-Fed plugin statistic.

Each owner sends, per column, the power sums S1 = sum x, S2 = sum x^2, S3 = sum x^3,
S4 = sum x^4, and its row count N. From the exact totals the aggregator forms the central
moments m_k (divisor N) and releases, per column,

    skewness        g1 = m3 / m2^(3/2)
    excess kurtosis g2 = m4 / m2^2 - 3

(the population definitions of scipy.stats.skew and kurtosis with bias=True). Both are
unchanged by a positive affine change of a column, so a DP round's public bounds (which scale
each column to [-1, 1]) cost nothing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols.statistic import COUNT, Block, Release, Rows, SecureSumStatistic, Totals

POWERS = (1, 2, 3, 4)


@dataclass(frozen=True)
class SkewnessRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated numeric columns"}
    )


@dataclass(frozen=True)
class SkewnessSpec:
    features: tuple[str, ...]


class SkewnessStatistic(SecureSumStatistic[SkewnessRequest, SkewnessSpec]):
    name = "skewness"
    version = "1.0.0"
    request_type = SkewnessRequest
    spec_type = SkewnessSpec
    summary = ("round_id", "owners", "n_rows", "skewness", "excess_kurtosis")
    help = "skewness and excess kurtosis per column (plugin)"

    def spec(self, request: SkewnessRequest) -> SkewnessSpec:
        features = tuple(request.features)
        if not features or len(set(features)) != len(features):
            raise DataError("features must name distinct columns", field="features")
        return SkewnessSpec(features)

    def features(self, spec: SkewnessSpec) -> tuple[str, ...]:
        return spec.features

    def blocks(self, spec: SkewnessSpec, bound: float) -> tuple[Block, ...]:
        """With ||x||_2 <= C: sum_j |x_j|^k <= C^k for k >= 2, and sqrt(d) C for k = 1."""
        d = len(spec.features)
        out = [Block("s1", d, bound, l1=np.sqrt(d) * bound, l2=bound)]
        for k in POWERS[1:]:
            out.append(Block(f"s{k}", d, bound**k, l1=bound**k, l2=bound**k))
        out.append(Block("rows", 1, 1.0, l1=1.0, l2=1.0, kind=COUNT))
        return tuple(out)

    def sums(self, spec: SkewnessSpec, rows: Rows) -> dict[str, np.ndarray]:
        x = rows.x
        out = {f"s{k}": (x**k).sum(axis=0) for k in POWERS}
        out["rows"] = np.array([rows.n])
        return out

    def result(self, spec: SkewnessSpec, totals: Totals, release: Release) -> dict[str, Any]:
        n = round(totals.exact("rows")[0])
        if n < 2:
            raise DataError(f"{n} rows in all: skewness needs at least 2")
        s = {k: totals.exact(f"s{k}") for k in POWERS}
        skew, kurt = {}, {}
        for j, name in enumerate(spec.features):
            mean = s[1][j] / n
            m2 = s[2][j] / n - mean**2
            m3 = s[3][j] / n - 3 * mean * s[2][j] / n + 2 * mean**3
            m4 = s[4][j] / n - 4 * mean * s[3][j] / n + 6 * mean**2 * s[2][j] / n - 3 * mean**4
            if m2 <= 0:
                if not release.noisy:
                    raise DataError(f"column '{name}' is constant: its skewness is undefined")
                m2 = Fraction(1, 10**12)  # noisy: the variance at its floor
            skew[name] = float(m3) / float(m2) ** 1.5
            kurt[name] = float(m4 / (m2 * m2)) - 3.0
        return {
            "features": list(spec.features),
            "n_rows": n,
            "skewness": skew,
            "excess_kurtosis": kurt,
        }

    def figures(self, spec: SkewnessSpec, result: Mapping[str, Any]) -> dict[str, float]:
        out = {f"skewness of {f}": result["skewness"][f] for f in spec.features}
        out |= {f"excess kurtosis of {f}": result["excess_kurtosis"][f] for f in spec.features}
        return out
