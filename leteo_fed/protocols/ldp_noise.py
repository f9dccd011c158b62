"""The noise of an LDP collection, before and after: the preview's expected error of every
released figure, the standard errors of a naive Bayes model, and the warnings a release earns.

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
- geo: (m + 1) / (e^2 n) per coordinate (see `ldp_collection.geo_noise_variance`).
- naive Bayes: every prior and conditional is a ratio of unbiased counts of one report group
  (about n / (features + 1) reports). Its variance is the delta method over the oracle's
  covariance (`oracle_covariance`; GRR's counts are negatively correlated, the others'
  independent), at the shares the analyst expects, else at the worst share of the value
  (0 to 1, the other values sharing the rest equally) and, for conditionals, a class holding
  1/(2k) of the records unless `priors` says more. The floor at one record is ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.ldp.frequency import FrequencyOracle
from leteo_fed.ldp.naive_bayes import PRIOR
from leteo_fed.privacy.noise_gate import LOCAL_FIXES, ReleaseWarning, SignalCheck
from leteo_fed.protocols import ldp_collection as lc

SHARE_GRID = np.linspace(0.0, 1.0, 21)  # the worst share of a value is sought on this grid
PILED_UP = 0.10  # geo (remap): more than this share of reports on the box's faces is heavy


@dataclass(frozen=True)
class Expectation:
    """What the analyst expects of the data, to replace the preview's worst case.

    frequencies: value -> expected share (frequency oracles; values left out: worst case).
    mean, std: the expected mean and standard deviation of the column, in its units (numeric
    mechanisms; several columns: one value for all or one per column).
    priors: class -> expected share (naive Bayes).
    """

    frequencies: Mapping[str, float] = field(default_factory=dict)
    mean: Sequence[float] = ()
    std: Sequence[float] = ()
    priors: Mapping[str, float] = field(default_factory=dict)

    def given(self) -> bool:
        return bool(self.frequencies or self.mean or self.std or self.priors)


def _per_column(values: Sequence[float], m: int, name: str) -> list[float | None]:
    if not values:
        return [None] * m
    if len(values) == 1:
        return [float(values[0])] * m
    if len(values) != m:
        raise DataError(f"{name}: give one value or one per column ({m})", field=name)
    return [float(v) for v in values]


def _shares(given: Mapping[str, float], names: Sequence[str], what: str) -> dict[str, float]:
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


def _worst_ratio_std(
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


# ------------------------------------------------------------------ naive Bayes


def nb_std_errors(
    model,
    priors: Mapping[str, float],
    conditionals: Mapping[str, Mapping[str, Sequence[float]]],
    report_counts: Mapping[str, float],
) -> dict:
    """Std error of every prior and conditional at the given shares (plug-in: the released
    figures after a round, the expected ones in a preview) and reports per group."""
    classes = list(model.classes.values)
    k = len(classes)
    prior = np.array([priors[c] for c in classes], dtype=np.float64)
    out: dict = {"priors": {}, "conditionals": {}}
    for j, c in enumerate(classes):
        out["priors"][c] = ratio_std(
            model.oracles[PRIOR], prior, j, np.arange(k), report_counts[PRIOR]
        )
    for name, dom in model.domains.items():
        d = len(dom)
        table = np.array([conditionals[name][c] for c in classes], dtype=np.float64).T  # (d, k)
        joint = (table * prior[None, :]).ravel()  # code = value * k + class
        per_class: dict[str, list[float]] = {}
        for j, c in enumerate(classes):
            cells = np.arange(d) * k + j
            per_class[c] = [
                ratio_std(model.oracles[name], joint, int(cells[x]), cells, report_counts[name])
                for x in range(d)
            ]
        out["conditionals"][name] = per_class
    return out


def nb_std_errors_of(doc: Mapping[str, Any]) -> dict:
    """`nb_std_errors` of a naive Bayes result document (its own figures, plug-in)."""
    features = {}
    conditionals = {}
    for name in doc["features"]:
        cond = doc["conditionals"][name]
        if isinstance(cond, lc.NbConditional):
            cond = {"values": cond.values, "by_class": cond.by_class}
        features[name] = list(cond["values"])
        conditionals[name] = cond["by_class"]
    spec = lc.LdpSpec(
        column=doc["column"],
        mechanism=doc["mechanism"],
        epsilon=doc["epsilon"],
        label_column=doc["column"],
        classes=tuple(doc["classes"]),
        features=tuple(lc.FeatureDomain(n, tuple(v)) for n, v in features.items()),
    )
    model = lc.naive_bayes_model(spec)
    return nb_std_errors(model, doc["priors"], conditionals, doc["report_counts"])


def _nb_preview(spec: lc.LdpSpec, rows: int, expect: Expectation) -> tuple[list, str]:
    model = lc.naive_bayes_model(spec)
    classes = list(spec.classes)
    k = len(classes)
    group = rows / (len(spec.features) + 1)  # reports per type, on average
    given = _shares(expect.priors, classes, "priors")
    figures: list[dict] = []
    prior_oracle = model.oracles[PRIOR]
    if len(given) == k:
        prior = np.array([given[c] for c in classes])
        stds = [ratio_std(prior_oracle, prior, j, np.arange(k), group) for j in range(k)]
        basis = "the class shares you expect"
    else:
        order = np.arange(k)
        stds = []
        for j in range(k):
            cells = np.concatenate([[j], np.delete(order, j)])
            stds.append(_worst_ratio_std(prior_oracle, np.zeros(k), cells, 1.0, group))
        basis = "each class's worst share"
    for c, s in zip(classes, stds, strict=True):
        figures.append({"figure": f"prior {c}", "expected_std": s})
    share = {c: given.get(c, 1.0 / (2 * k)) for c in classes}
    for f in spec.features:
        oracle = model.oracles[f.name]
        d = len(f.values)
        for j, c in enumerate(classes):
            base = np.zeros(d * k)
            rest = np.delete(np.arange(k), j)
            for h in rest:  # the other classes: their share spread evenly over the values
                base[np.arange(d) * k + h] = (1.0 - share[c]) / (len(rest) * d)
            cells = np.arange(d) * k + j
            s = _worst_ratio_std(oracle, base, cells, share[c], group)
            figures.append({"figure": f"P({f.name} = each value | {c})", "expected_std": s})
    assumption = (
        f"{rows} reports, about {group:.0f} per report type ({len(spec.features) + 1} types); "
        f"priors at {basis}; each conditional at the worst share of its value (0 to 1) in a "
        "class holding "
        + (
            "the share you expect (`expect_priors`)"
            if len(given) == k
            else f"1/(2k) = {1 / (2 * k):.3g} of the records (give `expect_priors` if a class "
            "is rarer or to tighten it)"
        )
    )
    return figures, assumption


# ------------------------------------------------------------------ the preview


def noise_preview(
    spec: lc.LdpSpec, rows: int | None = None, quorum: int = 1, expect: Expectation | None = None
) -> dict:
    """The expected error (one std) of every figure the collection releases (module doc)."""
    expect = expect or Expectation()
    doc: dict = {
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "quorum": quorum,
        "fixes": list(LOCAL_FIXES),
    }
    if lc.is_naive_bayes(spec):
        doc["kind"] = "naive_bayes"
        if rows is None:
            return doc
        figures, assumption = _nb_preview(spec, rows, expect)
        checks = [SignalCheck(f["figure"], f["expected_std"], 1.0) for f in figures]
        return _finish(doc, rows, figures, assumption, checks)
    if spec.mechanism == lc.GEO:
        return _geo_preview(doc, spec, rows, expect)
    mech = lc.mechanism_for(spec)
    if lc.is_frequency(spec.mechanism):
        doc["kind"] = "frequency"
        doc["variance_per_report"] = mech.theoretical_variance_per_user()
        if rows is None:
            return doc
        given = _shares(expect.frequencies, spec.domain, "frequencies")
        figures = []
        for v in spec.domain:
            var = (
                float(frequency_variance(mech, given[v]))
                if v in given
                else worst_frequency_variance(mech)
            )
            std = math.sqrt(var / rows)
            figures.append(
                {"figure": f"frequency of {v}", "expected_std": std, "count_std": std * rows}
            )
        doc["frequency_std_error"] = max(f["expected_std"] for f in figures)
        doc["count_std_error"] = doc["frequency_std_error"] * rows
        assumption = f"{rows} reports; " + (
            "each value's share as you expect it (`expect_frequencies`), the worst share (0 "
            "or 1) for the others"
            if given
            else "each value at its worst share (0 or 1): give `expect_frequencies` V=F,... to "
            "use the shares you expect"
        )
        checks = [SignalCheck("frequency of a value", doc["frequency_std_error"], 1.0)]
        return _finish(doc, rows, figures, assumption, checks)
    doc["kind"] = "mean"
    columns = list(spec.columns) if lc.is_multi(spec) else [spec.column]
    m = len(columns)
    lows = list(spec.box_lower) if lc.is_multi(spec) else [spec.lower]
    highs = list(spec.box_upper) if lc.is_multi(spec) else [spec.upper]
    means = _per_column(expect.mean, m, "mean")
    stds = _per_column(expect.std, m, "std")
    figures = []
    worst_var = mech.worst_case_variance(d=m)
    for name, lo, hi, mu, sigma in zip(columns, lows, highs, means, stds, strict=True):
        half, mid = (hi - lo) / 2, (hi + lo) / 2
        low_t2 = (((mu - mid) / half) ** 2 if mu is not None else 0.0) + (
            (sigma / half) ** 2 if sigma is not None else 0.0
        )
        low_t2 = min(low_t2, 1.0)
        high_t2 = low_t2 if (mu is not None and sigma is not None) else 1.0
        var = max(
            float(mech.report_variance(math.sqrt(low_t2), d=m)),
            float(mech.report_variance(math.sqrt(high_t2), d=m)),
        )
        figures.append(
            {"figure": f"mean of {name}", "expected_std": math.sqrt(var / rows) * half}
            if rows is not None
            else {"figure": f"mean of {name}", "variance_per_report": var * half * half}
        )
    half0 = (highs[0] - lows[0]) / 2
    doc["variance_per_report"] = worst_var * half0 * half0
    if rows is None:
        return doc
    doc["mean_std_error"] = max(f["expected_std"] for f in figures)
    if expect.mean or expect.std:
        told = " and ".join(
            w for w, v in (("mean", expect.mean), ("standard deviation", expect.std)) if v
        )
        assumption = (
            f"{rows} reports; the column's {told} as you expect (`expect_mean`/`expect_std`), "
            "the worst case over the bounds for what you did not give"
        )
    else:
        assumption = (
            f"{rows} reports; the worst case over the bounds (the mechanism's variance depends "
            "on the values): give `expect_mean` and `expect_std` for the data you expect"
        )
    checks = [
        SignalCheck(f["figure"], f["expected_std"], (hi - lo) / 2)
        for f, lo, hi in zip(figures, lows, highs, strict=True)
    ]
    if not lc.is_multi(spec):
        checks = [SignalCheck("mean", figures[0]["expected_std"], half0)]
    return _finish(doc, rows, figures, assumption, checks)


GEO_SAMPLE = 20_000  # points of the seeded simulation of the box's bias
GEO_POSITIONS = np.linspace(0.0, 0.5, 11)  # where the default spread's mean may sit


def geo_box_bias(
    spec: lc.LdpSpec, means: Sequence[float], stds: Sequence[float], seed: int = 0
) -> np.ndarray:
    """Per column, how far fitting the reports into the box moves the mean report, for points
    drawn N(mean, std) per column (clipped into the box, as owners clip them): a seeded
    simulation through the owner's own perturbation (`perturb_chunks`). Remap: the mean
    displacement of the clipped reports (exact in expectation, no noise term); resample: the
    mean report minus the mean point."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
    q = (np.arange(GEO_SAMPLE) + 0.5) / GEO_SAMPLE
    from scipy.special import ndtri

    z = ndtri(q)
    x = np.column_stack(
        [
            np.clip(mu + sd * rng.permutation(z), a, b)
            for mu, sd, a, b in zip(means, stds, lo, hi, strict=True)
        ]
    )
    if spec.box_fit == "resample":
        reports = np.vstack(list(lc.perturb_chunks(x, spec, rng)))
        return reports.mean(axis=0) - x.mean(axis=0)
    from leteo_fed.ldp.geo import nd_laplace

    raw = nd_laplace(x, spec.epsilon, rng)
    return (np.clip(raw, lo, hi) - raw).mean(axis=0)


def _geo_bias(spec: lc.LdpSpec, expect: Expectation) -> tuple[np.ndarray, str]:
    """The box's bias under what the analyst expects, else under the worst placement of a
    spread of a sixth of the box per column."""
    m = len(spec.columns)
    lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
    width = hi - lo
    means = _per_column(expect.mean, m, "mean")
    stds = _per_column(expect.std, m, "std")
    if all(v is not None for v in means) and all(v is not None for v in stds):
        bias = geo_box_bias(spec, means, stds)  # type: ignore[arg-type]
        return np.abs(bias), "the points N(mean, std) per column as you expect them"
    sd = [s if s is not None else w / 6 for s, w in zip(stds, width, strict=True)]
    worst = np.zeros(m)
    for t in GEO_POSITIONS:
        mu = [v if v is not None else a + t * w for v, a, w in zip(means, lo, width, strict=True)]
        worst = np.maximum(worst, np.abs(geo_box_bias(spec, mu, sd)))
    return worst, (
        "the points spread a sixth of the box per column (or `expect_std`) around the worst "
        "mean (or `expect_mean`) for the box's bias"
    )


def _geo_preview(
    doc: dict, spec: lc.LdpSpec, rows: int | None, expect: Expectation | None = None
) -> dict:
    per_report = lc.geo_noise_variance(spec)
    m = len(spec.columns)
    doc["kind"] = "geo"
    doc["columns"] = list(spec.columns)
    doc["box_fit"] = spec.box_fit
    doc["draw_epsilon"] = lc.draw_epsilon(spec)
    doc["variance_per_report"] = per_report  # per coordinate, in the columns' unit squared
    doc["mean_noise_distance"] = m / lc.draw_epsilon(spec)  # E[r], r ~ Gamma(m, 1/e)
    if rows is None:
        return doc
    std = math.sqrt(per_report / rows)
    doc["mean_std_error"] = std
    bias, basis = _geo_bias(spec, expect or Expectation())
    doc["box_bias"] = bias.tolist()
    figures = [
        {
            "figure": f"mean of {c}",
            "expected_std": math.hypot(std, float(b)),
            "noise_std": std,
            "bias": float(b),
        }
        for c, b in zip(spec.columns, bias, strict=True)
    ]
    half = min(b - a for a, b in zip(spec.box_lower, spec.box_upper, strict=True)) / 2
    assumption = (
        f"{rows} reports; each mean's error is its noise (the same for every column) and the "
        f"bias of fitting reports into the box ({spec.box_fit}), under {basis}"
    )
    return _finish(doc, rows, figures, assumption, [SignalCheck("mean location", std, half)])


def _finish(
    doc: dict, rows: int, figures: list[dict], assumption: str, checks: list[SignalCheck]
) -> dict:
    doc["rows"] = rows
    doc["assumption"] = assumption
    doc["figures"] = figures
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


# ------------------------------------------------------------------ after the release


def release_warnings(doc: Mapping[str, Any]) -> list[ReleaseWarning]:
    """The released figures the noise (or the box) buries, from an LDP result document (the
    aggregator's `result()` or a result's `to_dict()`):

    - a frequency estimate below zero (before consistency), or whose std error exceeds it;
    - a mean whose std error exceeds half the width of its bounds, or that lies outside them;
    - geo: a mean location whose std error exceeds half the box's side, or (remap) more than
      10% of the reports clipped onto the box's faces;
    - naive Bayes: a prior or a conditional whose std error exceeds it.
    """
    found: list[ReleaseWarning] = []
    if "estimates" in doc:
        n = doc["n"]
        for v, est in doc["estimates"].items():
            se = doc["std_errors"][v]
            name = f"frequency of {v}"
            if est < 0:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} is negative ({est:.4g} +/- {se:.3g} records of {n}) before "
                        "consistency: the value is rarer than the noise resolves; raise "
                        "epsilon or collect more records",
                    )
                )
            elif se > est:
                found.append(
                    ReleaseWarning(
                        name,
                        f"{name} ({est:.4g} records of {n}) is smaller than its std error "
                        f"({se:.3g}): it is noise; raise epsilon or collect more records",
                    )
                )
        return found
    if "priors" in doc:
        return _nb_warnings(doc)
    if "points" in doc:
        return _geo_warnings(doc)
    if "means" in doc:
        items = [
            (c, doc["means"][c], doc["std_errors"][c], lo, hi)
            for c, lo, hi in zip(doc["columns"], *doc["bounds"], strict=True)
        ]
    else:
        items = [(doc["column"], doc["mean"], doc["std_error"], *doc["bounds"])]
    for column, mean, se, lo, hi in items:
        name = f"mean of {column}"
        if se > (hi - lo) / 2:
            found.append(
                ReleaseWarning(
                    name,
                    f"{name} ({mean:.4g}) has a std error ({se:.3g}) above half its bounds' "
                    f"width ({(hi - lo) / 2:.3g}): it is noise; raise epsilon, collect more "
                    "records or use pm/hm",
                )
            )
        elif not lo <= mean <= hi:
            found.append(
                ReleaseWarning(
                    name,
                    f"{name} ({mean:.4g} +/- {se:.3g}) lies outside its bounds [{lo:g}, "
                    f"{hi:g}]: the noise moved it there; read it as the nearest bound",
                )
            )
    return found


def _geo_warnings(doc: Mapping[str, Any]) -> list[ReleaseWarning]:
    found: list[ReleaseWarning] = []
    lo, hi = (np.asarray(b, dtype=np.float64) for b in doc["box"])
    for j, column in enumerate(doc["columns"]):
        se, half = doc["std_errors"][j], (hi[j] - lo[j]) / 2
        if se > half:
            found.append(
                ReleaseWarning(
                    f"mean of {column}",
                    f"mean of {column} has a std error ({se:.3g}) above half the box's side "
                    f"({half:.3g}): it is noise; raise epsilon or collect more points",
                )
            )
    points = np.asarray(doc["points"], dtype=np.float64)
    if doc.get("box_fit", "remap") == "remap" and points.size:
        on_face = float(np.mean(np.any((points <= lo) | (points >= hi), axis=1)))
        if on_face > PILED_UP:
            found.append(
                ReleaseWarning(
                    "points",
                    f"{on_face:.0%} of the reports were clipped onto the box's faces: the "
                    "density piles up there and the mean is pulled toward the box; widen the "
                    "box, raise epsilon, or use `box_fit` resample",
                )
            )
    return found


def _nb_warnings(doc: Mapping[str, Any]) -> list[ReleaseWarning]:
    se = doc.get("std_errors") or nb_std_errors_of(doc)
    found: list[ReleaseWarning] = []
    for c, p in doc["priors"].items():
        s = se["priors"][c]
        if s > p:
            found.append(
                ReleaseWarning(
                    f"prior {c}",
                    f"prior {c} ({p:.3g}) is smaller than its std error ({s:.3g}): it is "
                    "noise; raise epsilon or collect more records",
                )
            )
    for name in doc["features"]:
        cond = doc["conditionals"][name]
        if isinstance(cond, lc.NbConditional):
            cond = {"values": cond.values, "by_class": cond.by_class}
        for c, probs in cond["by_class"].items():
            for value, p, s in zip(cond["values"], probs, se["conditionals"][name][c], strict=True):
                if s > p:
                    figure = f"P({name} = {value} | {c})"
                    found.append(
                        ReleaseWarning(
                            figure,
                            f"{figure} ({p:.3g}) is smaller than its std error ({s:.3g}): it "
                            "is noise; raise epsilon, collect more records or merge rare values",
                        )
                    )
    return found
