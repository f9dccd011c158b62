"""The noise of an LDP naive Bayes model: the standard error of every prior and conditional
(at the released figures, or at the shares a preview assumes) and the warnings a release earns.

Every prior and conditional is a ratio of unbiased counts of one report group (about
n / (features + 1) reports). Its variance is the delta method over the oracle's covariance
(`ldp_noise.oracle_covariance`; GRR's counts are negatively correlated, the others'
independent), at the shares the analyst expects, else at the worst share of the value (0 to 1,
the other values sharing the rest equally) and, for conditionals, a class holding 1/(2k) of the
records unless `priors` says more. The floor at one record is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from leteo_fed.ldp.naive_bayes import PRIOR, LdpNaiveBayes
from leteo_fed.privacy.noise_gate import ReleaseWarning
from leteo_fed.protocols.ldp_noise import Expectation, ratio_std, shares, worst_ratio_std
from leteo_fed.protocols.ldp_spec import LdpSpec, NbConditional


def _plain(cond: Any) -> Mapping[str, Any]:
    """A conditional as JSON has it (the accumulator's document holds `NbConditional`s)."""
    if isinstance(cond, NbConditional):
        return {"values": cond.values, "by_class": cond.by_class}
    return cond


def nb_std_errors(
    model: LdpNaiveBayes,
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
        cond = _plain(doc["conditionals"][name])
        features[name] = list(cond["values"])
        conditionals[name] = cond["by_class"]
    model = LdpNaiveBayes(doc["mechanism"], doc["epsilon"], features, list(doc["classes"]))
    return nb_std_errors(model, doc["priors"], conditionals, doc["report_counts"])


def nb_preview(
    model: LdpNaiveBayes, spec: LdpSpec, rows: int, expect: Expectation
) -> tuple[list, str]:
    """The figures of a preview over `rows` reports and the assumption they are taken at."""
    classes = list(spec.classes)
    k = len(classes)
    group = rows / (len(spec.features) + 1)  # reports per type, on average
    given = shares(expect.priors, classes, "priors")
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
            stds.append(worst_ratio_std(prior_oracle, np.zeros(k), cells, 1.0, group))
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
            s = worst_ratio_std(oracle, base, cells, share[c], group)
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


def nb_warnings(doc: Mapping[str, Any]) -> list[ReleaseWarning]:
    """A prior or a conditional whose std error exceeds it."""
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
        cond = _plain(doc["conditionals"][name])
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
