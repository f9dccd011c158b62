"""The noise of an LDP collection, before and after: the preview's expected error of every
released figure and the warnings a release earns, each computed by the collection's kind
(`reports.ReportStatistic.preview`, `release_warnings`) with the formulas shared here.

Pure functions of public parameters (the preview) or of the released figures (the standard
errors and the warnings): nothing here reads data or talks to anyone.

Preview (`noise_preview`): one standard deviation per released figure, from the mechanism's
variance formula and the number of reports n (one per row, `rows`). Where that variance
depends on the data, the preview takes the worst case unless the analyst states what they
expect (`Expectation`), and says which on screen (`assumption`):

- frequency of a value with share f: (v0 + f b) / n with v0 = q*(1-q*)/(p*-q*)^2 and
  b = (1-p*-q*)/(p*-q*) (the exact variance of Wang et al. 2017; SHE: 8/e^2). Without an
  expected share, f = 0 or 1, whichever is larger: never below the truth.
- mean of a numeric mechanism: the report variance is a + c t^2 in the unit scale
  t = (x - mid) / half; over the rows its mean is a + c E[t^2], E[t^2] = ((mu - mid)^2 +
  sigma^2) / half^2 for an expected mean mu and spread sigma. An unknown part is taken at its
  worst (E[t^2] = 1 if c > 0, else its smallest value).
- geo: (m + 1) / (e^2 n) per coordinate (see `ldp_geo.geo_noise_variance`).
- naive Bayes: every prior and conditional is a ratio of unbiased counts of one report group
  (about n / (features + 1) reports). Its variance is the delta method over the oracle's
  covariance (`oracle_covariance`; GRR's counts are negatively correlated, the others'
  independent), at the shares the analyst expects, else at the worst share of the value
  (0 to 1, the other values sharing the rest equally) and, for conditionals, a class holding
  1/(2k) of the records unless `priors` says more. The floor at one record is ignored
  (`ldp_naive_bayes_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.ldp.frequency import FrequencyOracle
from leteo_fed.privacy.noise_gate import LOCAL_FIXES, ReleaseWarning, SignalCheck
from leteo_fed.protocols.reports import Expectation, statistic_for, statistic_of_result

if TYPE_CHECKING:
    from leteo_fed.protocols.ldp_spec import LdpSpec

__all__ = [
    "Expectation",
    "finish",
    "frequency_variance",
    "noise_preview",
    "oracle_covariance",
    "per_column",
    "ratio_std",
    "release_warnings",
    "shares",
    "worst_frequency_variance",
    "worst_ratio_std",
]

SHARE_GRID = np.linspace(0.0, 1.0, 21)  # the worst share of a value is sought on this grid


def per_column(values: Sequence[float], m: int, name: str) -> list[float | None]:
    if not values:
        return [None] * m
    if len(values) == 1:
        return [float(values[0])] * m
    if len(values) != m:
        raise DataError(f"{name}: give one value or one per column ({m})", field=name)
    return [float(v) for v in values]


def shares(given: Mapping[str, float], names: Sequence[str], what: str) -> dict[str, float]:
    unknown = [v for v in given if v not in names]
    if unknown:
        raise DataError(f"{what}: {unknown[0]!r} is not one of {list(names)}", field=what)
    bad = [v for v, f in given.items() if not (math.isfinite(f) and 0.0 <= f <= 1.0)]
    if bad:
        raise DataError(f"{what}: the share of {bad[0]!r} must be in [0, 1]", field=what)
    if sum(given.values()) > 1.0 + 1e-9:
        raise DataError(f"{what}: the shares add up to more than 1", field=what)
    return {v: float(f) for v, f in given.items()}


# ------------------------------------------------------------------ variance formulas


def frequency_variance(oracle: FrequencyOracle, share: float | np.ndarray) -> Any:
    """Variance per report of the unbiased share estimate of a value with true share f."""
    if oracle.name == "she":
        return np.full_like(np.asarray(share, dtype=np.float64), 8.0 / oracle.epsilon**2)
    p, q = oracle.p, oracle.q
    return q * (1 - q) / (p - q) ** 2 + np.asarray(share) * (1 - p - q) / (p - q)


def worst_frequency_variance(oracle: FrequencyOracle) -> float:
    return float(max(frequency_variance(oracle, 0.0), frequency_variance(oracle, 1.0)))


def oracle_covariance(oracle: FrequencyOracle, shares: np.ndarray) -> np.ndarray:
    """n times the covariance matrix of the unbiased share estimates at true shares f: the
    diagonal is `frequency_variance`; GRR's reports support one value each, so two estimates
    covary by -(q^2 + (f_a + f_b) q (p - q)) / (p - q)^2; the other oracles' are independent
    (OLH's up to a hash collision term of order 1/g^2)."""
    f = np.asarray(shares, dtype=np.float64)
    cov = np.diag(frequency_variance(oracle, f))
    if oracle.name == "grr":
        p, q = oracle.p, oracle.q
        off = -(q * q + (f[:, None] + f[None, :]) * q * (p - q)) / (p - q) ** 2
        np.fill_diagonal(off, 0.0)
        cov = cov + off
    return cov


def ratio_std(
    oracle: FrequencyOracle, shares: np.ndarray, part: int, whole: np.ndarray, reports: float
) -> float:
    """Std of f_part / sum(f[whole]) estimated from `reports` reports (delta method)."""
    f = np.asarray(shares, dtype=np.float64)
    total = float(f[whole].sum())
    if total <= 0 or reports <= 0:
        return math.inf
    ratio = f[part] / total
    g = np.zeros(f.size)
    g[whole] = -ratio / total
    g[part] += 1.0 / total
    var = float(g @ oracle_covariance(oracle, f) @ g) / reports
    return math.sqrt(max(var, 0.0))


def worst_ratio_std(
    oracle: FrequencyOracle, base: np.ndarray, cells: np.ndarray, mass: float, reports: float
) -> float:
    """The largest `ratio_std` of one cell of `cells` (which hold `mass` of the shares) as its
    share of them goes from 0 to 1, the other cells sharing the rest equally."""
    worst = 0.0
    others = len(cells) - 1
    for s in SHARE_GRID:
        f = base.copy()
        f[cells] = mass * (1 - s) / others if others else mass
        f[cells[0]] = mass * s if others else mass
        worst = max(worst, ratio_std(oracle, f, int(cells[0]), cells, reports))
    return worst


# ------------------------------------------------------------------ the preview and warnings


def noise_preview(
    spec: LdpSpec, rows: int | None = None, quorum: int = 1, expect: Expectation | None = None
) -> dict:
    """The expected error (one std) of every figure the collection releases (module doc)."""
    doc: dict = {
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "quorum": quorum,
        "fixes": list(LOCAL_FIXES),
    }
    return statistic_for(spec).preview(doc, spec, rows, expect or Expectation())


def finish(
    doc: dict, rows: int, figures: list[dict], assumption: str, checks: list[SignalCheck]
) -> dict:
    """A preview's document completed with its figures, assumption and signal checks."""
    doc["rows"] = rows
    doc["assumption"] = assumption
    doc["figures"] = figures
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


def release_warnings(doc: Mapping[str, Any]) -> list[ReleaseWarning]:
    """The released figures the noise (or the box) buries, from an LDP result document (the
    aggregator's `result()` or a result's `to_dict()`), as its kind states them:

    - a frequency estimate below zero (before consistency), or whose std error exceeds it;
    - a mean whose std error exceeds half the width of its bounds, or that lies outside them;
    - geo: a mean location whose std error exceeds half the box's side, or (remap) more than
      10% of the reports clipped onto the box's faces;
    - naive Bayes: a prior or a conditional whose std error exceeds it.
    """
    return statistic_of_result(doc).release_warnings(doc)
