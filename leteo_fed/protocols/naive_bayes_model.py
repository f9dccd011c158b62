"""Naive Bayes' released model (`NaiveBayesResult`: its parameters and predictions) and what
the noise of a DP round does to it, from public parameters only (`noise_preview`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols.dp_facts import preview_facts
from leteo_fed.protocols.naive_bayes_fit import Layout, category_indices, mean_and_variance_errors
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type

FIXES = (
    "raise `dp_epsilon`",
    "narrow `bounds`: the noise of the sums grows with max(|lo|, |hi|) and its square",
    "use fewer classes, features or categories: each class gets a share of the rows",
    "give `rows` N if the pooled row count is larger",
)


@dataclass(frozen=True)
class NaiveBayesCategorical:
    feature: str
    categories: list[str]
    counts: list[list[float]]  # a row per class
    log_prob: list[list[float]]  # a row per class


@result_type
@dataclass(frozen=True, kw_only=True)
class NaiveBayesResult(RoundFacts, Result):
    wire: ClassVar[str] = "naive_bayes"
    protocol: str
    method: str
    label_column: str
    classes: list[str]
    numeric_features: list[str]
    categorical: list[NaiveBayesCategorical]
    class_count: list[float]
    class_prior: list[float]
    theta: dict[str, list[float]]
    var: dict[str, list[float]]
    var_smoothing: float
    epsilon: float
    alpha: float
    n: float
    bounds: dict[str, list[float]] | None = None
    floored: int = 0
    outside: str = ""
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per class: its count, prior, and the mean and variance of each numeric
        feature."""
        cols: dict[str, list] = {"count": list(self.class_count), "prior": list(self.class_prior)}
        for f in self.numeric_features:
            cols[f"mean({f})"] = list(self.theta[f])
            cols[f"var({f})"] = list(self.var[f])
        return cols, list(self.classes), self.label_column

    def joint_log_likelihood(self, rows: Mapping[str, Any]) -> np.ndarray:
        """log P(c) + log P(x | c) of every row (m x K): `rows` maps each feature to its
        values (a dict of arrays or a pandas DataFrame); categorical values are compared as
        text and must lie in their domain."""
        return joint_log_likelihood(self, rows)

    def predict_log_proba(self, rows: Mapping[str, Any]) -> np.ndarray:
        """log P(c | x) of every row (m x K), normalized with log-sum-exp."""
        jll = self.joint_log_likelihood(rows)
        top = jll.max(axis=1, keepdims=True)
        return jll - (top + np.log(np.exp(jll - top).sum(axis=1, keepdims=True)))

    def predict(self, rows: Mapping[str, Any]) -> list[str]:
        """The most likely class of every row (the first of the list among ties)."""
        jll = self.joint_log_likelihood(rows)
        return [self.classes[i] for i in np.argmax(jll, axis=1)]


def joint_log_likelihood(result: Any, rows: Mapping[str, Any]) -> np.ndarray:
    """log prior + sum of the Gaussian log densities + sum of the categorical log
    probabilities, per row and class (GaussianNB's and CategoricalNB's formulas), under a
    `NaiveBayesResult`."""
    k = len(result.classes)
    with np.errstate(divide="ignore"):
        jll_prior = np.log(np.asarray(result.class_prior, dtype=np.float64))
    m = None
    parts = []
    if result.numeric_features:
        x = np.column_stack(
            [np.asarray(rows[f], dtype=np.float64) for f in result.numeric_features]
        )
        theta = np.array([result.theta[f] for f in result.numeric_features]).T  # K x d
        var = np.array([result.var[f] for f in result.numeric_features]).T
        m = len(x)
        gauss = -0.5 * np.sum(np.log(2.0 * np.pi * var), axis=1)[None, :]
        gauss = gauss - 0.5 * np.sum((x[:, None, :] - theta[None, :, :]) ** 2 / var, axis=2)
        parts.append(gauss)
    for table in result.categorical:
        values = [str(v) for v in np.asarray(rows[table.feature], dtype=object).tolist()]
        idx, ok = category_indices(values, table.categories)
        if not ok.all():
            raise DataError(
                f"column '{table.feature}' has {int((~ok).sum())} value(s) outside its domain",
                field=table.feature,
            )
        m = len(idx)
        parts.append(np.asarray(table.log_prob, dtype=np.float64).T[idx])
    if m is None:
        raise DataError("the model has no feature", field="features")
    jll = np.broadcast_to(jll_prior, (m, k)).copy()
    for p in parts:
        jll += p
    return jll


def noise_preview(plan: Any, rows: int | None = None) -> dict:
    """What the noise of a DP round does to the model, from public parameters only (`plan`, a
    `secure_sum.StatisticPlan`).

    Every released value (class counts, S1, S2, category counts) carries noise of std sigma in
    real units (with the quorum's shares). At `rows` pooled rows split evenly over the K
    classes (n = rows / K per class), per numeric feature at the midpoint of its bounds with a
    standard deviation of a quarter of their width (theta_u = 0, m2_u = 1/4): the std of a
    class's mean (half x) and variance (half^2 x `mean_and_variance_errors`); per categorical
    feature at P = 1 / V: the std of P(v | c), sigma sqrt((V - 1) / V) / (n + alpha V).
    Checks: each class count against rows / K, each mean's error against half the bounds'
    width, each variance's against half^2, each category probability's against 1."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    spec, (_, alpha) = plan.spec, plan.settings
    layout = Layout.of(spec.features, spec.domains, len(spec.classes))
    doc |= {
        "classes": len(spec.classes),
        "values_per_share": layout.n_values,
        "bounds": {b.name: [b.lower, b.upper] for b in spec.bounds},
        "noise_std_per_value": sigma,
        "fixes": list(FIXES),
    }
    if rows is None:
        return doc
    if not rows > 0:
        raise DataError("rows must be positive", field="rows")
    n = rows / layout.k
    doc["assumed_rows"] = rows
    doc["assumed_rows_per_class"] = n
    checks = [SignalCheck("count of each class", sigma, n)]
    mean_std, var_std = {}, {}
    for b in spec.bounds:
        half = (b.upper - b.lower) / 2.0
        me, ve = mean_and_variance_errors(sigma, n, 0.0, 0.25)
        mean_std[b.name], var_std[b.name] = half * float(me), half * half * float(ve)
        checks.append(SignalCheck(f"mean of {b.name} per class", mean_std[b.name], half))
        checks.append(SignalCheck(f"variance of {b.name} per class", var_std[b.name], half**2))
    prob_std = {}
    for d in layout.categorical:
        v = len(d.values)
        prob_std[d.name] = sigma * math.sqrt((v - 1) / v) / (n + alpha * v)
        checks.append(SignalCheck(f"P({d.name} = v | class)", prob_std[d.name], 1.0))
    doc["noise_std_of_means"] = mean_std
    doc["noise_std_of_variances"] = var_std
    doc["noise_std_of_category_probabilities"] = prob_std
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc
