"""Naive Bayes' request: its validation into the spec's parts, and its command-line form (the
flags `cli.statistics` adds for the request's fields, and how their values build them).

The classes are a public list fixed before the round (`classes`, or the label column's
`domain`); a categorical feature is one with a `domain`; DP rounds clip every numeric feature
to public `bounds` (`COL=LO,HI`, or `LO,HI` for every numeric feature without its own).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from leteo_fed.errors import ConfigError, DataError
from leteo_fed.protocols.crosstab_grid import column_values
from leteo_fed.protocols.naive_bayes_fit import Layout, NaiveBayesBound, NaiveBayesDomain
from leteo_fed.protocols.requests import check_features

MAX_VALUES = 65_536  # encrypted values per owner share
DEFAULT_VAR_SMOOTHING = 1e-9  # scikit-learn's GaussianNB default
DEFAULT_ALPHA = 1.0  # scikit-learn's CategoricalNB default


def check_request(
    request: Any,
) -> tuple[tuple[str, ...], tuple[NaiveBayesDomain, ...], tuple[str, ...]]:
    """The request's features, domains (in the features' order) and classes, validated
    (DataError naming the field)."""
    features = check_features(tuple(request.features), "classify on")
    label = request.label_column
    if not label:
        raise DataError("label_column is empty: name the class column", field="label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="label_column")
    classes = tuple(request.classes)
    if not classes:
        raise DataError(
            "classes is empty: the label's classes are a public list fixed before the round "
            "(`classes` a,b,... or `domain` LABEL=a,b,...)",
            field="classes",
        )
    if len(classes) < 2 or any(not c for c in classes) or len(set(classes)) != len(classes):
        raise DataError("classes must list at least 2 distinct, non-empty classes", field="classes")
    domains = []
    seen: set[str] = set()
    for d in request.domains:
        if d.name not in features:
            raise DataError(
                f"domain of '{d.name}', which is not a feature (list it in features)",
                field="domains",
            )
        if d.name in seen:
            raise DataError(f"feature '{d.name}' has more than one domain", field="domains")
        seen.add(d.name)
        values = tuple(d.values)
        if not values or any(not v for v in values) or len(set(values)) != len(values):
            raise DataError(
                f"the domain of '{d.name}' must list distinct, non-empty values",
                field="domains",
            )
        domains.append(NaiveBayesDomain(d.name, values))
    ordered = tuple(sorted(domains, key=lambda d: features.index(d.name)))
    layout = Layout.of(features, ordered, len(classes))
    if layout.n_values > MAX_VALUES:
        raise DataError(
            f"a share would hold {layout.n_values} values (classes x (1 + 2 numeric features + "
            f"categories)); at most {MAX_VALUES}: use fewer classes, features or categories",
            field="features",
        )
    return features, ordered, classes


def check_bounds(
    bounds: Sequence[NaiveBayesBound], numeric: Sequence[str]
) -> tuple[NaiveBayesBound, ...]:
    """The request's clipping bounds, validated, in the numeric features' order."""
    given: dict[str, NaiveBayesBound] = {}
    for b in bounds:
        if b.name not in numeric:
            raise DataError(
                f"bounds name '{b.name}', which is not a numeric feature", field="bounds"
            )
        if b.name in given:
            raise DataError(f"feature '{b.name}' has more than one bound", field="bounds")
        lo, hi = float(b.lower), float(b.upper)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DataError(
                f"the bounds of '{b.name}' must be finite with lower < upper, got [{lo}, {hi}]",
                field="bounds",
            )
        given[b.name] = NaiveBayesBound(b.name, lo, hi)
    return tuple(given[f] for f in numeric if f in given)


def check_smoothing(var_smoothing: float, alpha: float) -> tuple[float, float]:
    if not (math.isfinite(var_smoothing) and var_smoothing >= 0):
        raise DataError(
            f"var_smoothing must be a finite number >= 0, got {var_smoothing}",
            field="var_smoothing",
        )
    if not (math.isfinite(alpha) and alpha > 0):
        raise DataError(f"alpha must be a positive number, got {alpha}", field="alpha")
    return float(var_smoothing), float(alpha)


# ------------------------------------------------------------------ the command line's form


DESCRIPTION = """\
Naive Bayes of `label_column` on `features` in one round: every owner sends, for every class
of `classes` (zeros included), its Paillier-encrypted row count, the sums and sums of squares
of the numeric features and the counts of each categorical feature's values (`domain`
COL=v1,v2,...; a feature without a `domain` is numeric). The aggregator learns only the pooled
statistics and fits Gaussian naive Bayes on the numeric features and categorical naive Bayes
on the categorical ones (scikit-learn's GaussianNB and CategoricalNB on the pooled rows).
Writes OUT/result.json and OUT/naive_bayes.png (per class: each numeric feature's mean +/- one
standard deviation, each categorical feature's value probabilities).

With `dp_epsilon` the release is (epsilon, delta)-DP: numeric values are clipped to their
`bounds`, and every owner adds its share of Skellam noise. See docs/naive-bayes.md.
"""


def feature_bounds(text: str) -> tuple[str | None, tuple[float, float]]:
    """`COL=LO,HI` (one numeric feature) or `LO,HI` (every numeric feature without its own)."""
    name, sep, rest = text.rpartition("=")
    try:
        lo, hi = (float(v) for v in rest.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected COL=LO,HI or LO,HI, got {text!r}") from exc
    if sep and not name.strip():
        raise argparse.ArgumentTypeError(f"expected COL=LO,HI, got {text!r}")
    return (name.strip() if sep else None), (lo, hi)


FLAGS: dict[str, Any] = {
    "features": {
        "type": tuple[str, ...],
        "required": True,
        "help": "comma-separated feature columns",
    },
    "domain": {
        "type": column_values,
        "action": "append",
        "default": [],
        "metavar": "COL=V1,V2,...",
        "help": "a categorical feature and its public values (split on the first '=': a value "
        "may contain '='); a value outside them refuses a non-DP round and drops the row in a "
        "DP one",
    },
    "label_column": {"required": True, "help": "the class column (y)"},
    "classes": {
        "type": tuple[str, ...],
        "default": None,
        "help": "the label's public classes, comma-separated (or `domain` LABEL=a,b,...); "
        "required: the share of every site holds every class",
    },
    "var_smoothing": {
        "type": float,
        "default": None,
        "help": "Gaussian: the variances get var_smoothing x the largest pooled variance "
        "(default: 1e-9, scikit-learn's)",
    },
    "alpha": {
        "type": float,
        "default": None,
        "help": "categorical: additive smoothing of the value counts (default: 1)",
    },
    "bounds": {
        "type": feature_bounds,
        "action": "append",
        "default": [],
        "metavar": "[COL=]LO,HI",
        "help": "DP: numeric values are clipped to [LO, HI]; COL=LO,HI for one feature, LO,HI "
        "for every numeric feature without its own (required for each numeric feature with DP)",
    },
    "dp_epsilon": None,  # the command's own DP flag: read, not added
}


def domains_of(
    domain: Sequence[tuple[str, list[str]]], features: Sequence[str], label_column: str
) -> tuple[NaiveBayesDomain, ...]:
    """The categorical features' domains given as `domain` COL=..., the label's left out."""
    out: dict[str, list[str]] = {}
    for name, values in domain:
        if name == label_column:
            continue
        if name in out:
            raise ConfigError(f"feature '{name}' has more than one `domain`", field="domain")
        if name not in features:
            raise ConfigError(
                f"`domain` names '{name}', which is not in `features`", field="domain"
            )
        out[name] = values
    return tuple(NaiveBayesDomain(n, tuple(v)) for n, v in out.items())


def classes_of(
    classes: Sequence[str] | None, domain: Sequence[tuple[str, list[str]]], label_column: str
) -> tuple[str, ...]:
    """The classes, given as `classes` or as the label column's `domain` (not both)."""
    found = list(classes) if classes else None
    for name, values in domain:
        if name != label_column:
            continue
        if found is not None:
            raise ConfigError(
                f"the classes are given twice (`classes` and `domain` {label_column}=...)",
                field="classes",
            )
        found = values
    if found is None:
        raise ConfigError(
            f"the classes of '{label_column}' are a public list fixed before the round: give "
            f"`classes` a,b,... or `domain` {label_column}=a,b,...",
            field="classes",
        )
    return tuple(found)


def bounds_of(
    bounds: Sequence[tuple[str | None, tuple[float, float]]],
    features: Sequence[str],
    domain: Sequence[tuple[str, list[str]]],
    label_column: str,
    dp_epsilon: float | None,
) -> tuple[NaiveBayesBound, ...]:
    """Every numeric feature's bounds (a DP round's: each one's own, else the `LO,HI` one)."""
    categorical = {name for name, _ in domain if name != label_column}
    numeric = [f for f in features if f not in categorical]
    default: tuple[float, float] | None = None
    given: dict[str, tuple[float, float]] = {}
    for name, pair in bounds:
        if name is None:
            if default is not None:
                raise ConfigError("more than one `bounds` LO,HI", field="bounds")
            default = pair
        elif name in given:
            raise ConfigError(f"feature '{name}' has more than one `bounds`", field="bounds")
        else:
            given[name] = pair
    if dp_epsilon is None:
        if bounds:
            raise ConfigError("`bounds` applies to DP rounds (give `dp_epsilon`)", field="bounds")
        return ()
    missing = [f for f in numeric if f not in given and default is None]
    if missing:
        raise ConfigError(
            f"a DP round clips every numeric feature to public bounds: give `bounds` "
            f"COL=LO,HI for {', '.join(missing)} (or `bounds` LO,HI for all)",
            field="bounds",
        )
    out = []
    for f in numeric:
        lo, hi = given.pop(f, None) or default  # type: ignore[misc]
        out.append(NaiveBayesBound(f, lo, hi))
    if given:
        raise ConfigError(
            f"`bounds` names non-numeric feature(s): {', '.join(sorted(given))}", field="bounds"
        )
    return tuple(out)
