"""Federated naive Bayes: Gaussian on numeric features, categorical on categorical ones, one round.

The label's classes c = 1..K are a public list fixed before the round; every categorical feature
j has a public domain of V_j values. Owner n sends, for EVERY class of the list (zeros included,
so a share never says which classes a site holds), class-major: its rows of class c (n_c), per
numeric feature the sums S1_cj, S2_cj of x_j and x_j^2 over those rows, per categorical feature
and value the count N_cjv: K (1 + 2 d_num + sum_j V_j) values. The aggregator reveals the exact
pooled totals and fits the model (`naive_bayes_fit`): without DP it equals scikit-learn's
GaussianNB (var_smoothing) and CategoricalNB (alpha) trained on the pooled rows.

Rows: a missing or non-numeric value refuses the round (rule `values`). Without DP a label
outside the classes or a categorical value outside its domain refuses it (rule `classes`; the
message states the rule, never a value) and a numeric value beyond the round's value bound
too (rule `bounds`); a class with no pooled row refuses the fit (it would have no mean). With
DP such a row is dropped (refusing would reveal it) and numeric values are clipped to their
public bounds [lo_j, hi_j] (`bounds`; a numeric feature without one: [-C, C], C the request's
row_norm_bound), then standardized to u = (x - mid_j) / half_j in [-1, 1], whose sums S1, S2
the share holds: every coordinate then moves by at most one unit per row, so one noise level
fits counts and sums alike.

Sensitivity (DP, F = 2^scale_bits, counts at F too): one row of class c changes n_c by F, each
N_cjv of its categories by F (one per categorical feature), S1_cj and S2_cj by at most F + 1
(the + 1 is the rounding of the owner's sum), and nothing of the other classes (their sums are
accumulated apart, bit-identical: each class's blocks are one `exclusive_blocks` group):
    L1 = F (1 + d_cat) + 2 d_num (F + 1),   L2 = sqrt(F^2 (1 + d_cat) + 2 d_num (F + 1)^2).

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled per-class counts, sums and sums of squares (noisy with DP), hence the model, never one
site's. Single-round: one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols import registry
from leteo_fed.protocols.naive_bayes_fit import (
    FLOOR_FACTOR,
    Fit,
    Layout,
    NaiveBayesBound,
    NaiveBayesDomain,
    centers_and_scales,
    exact_fit,
    local_statistics,
    mean_and_variance_errors,
    noisy_fit,
    split_totals,
    standardize,
)
from leteo_fed.protocols.naive_bayes_model import (
    NaiveBayesCategorical,
    NaiveBayesResult,
    noise_preview,
)
from leteo_fed.protocols.naive_bayes_request import (
    DEFAULT_ALPHA,
    DEFAULT_VAR_SMOOTHING,
    DESCRIPTION,
    FLAGS,
    bounds_of,
    check_bounds,
    check_request,
    check_smoothing,
    classes_of,
    domains_of,
)
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    NoiseReport,
    Release,
    Rows,
    SecureSumStatistic,
)
from leteo_fed.protocols.statistic import Totals as Released

__all__ = [
    "NaiveBayesBound",
    "NaiveBayesDomain",
    "centers_and_scales",
    "mean_and_variance_errors",
    "noisy_fit",
    "split_totals",
    "standardize",
]

PROTOCOL_NAME = "naive_bayes"
METHOD = "naive-bayes"
OUTSIDE_REFUSED = (
    "refused: a site with a label outside the classes or a categorical value outside its "
    "domain declines the round (rule classes), a numeric value beyond the value bound too "
    "(rule bounds); a missing value declines it (rule values)"
)
OUTSIDE_DROPPED = (
    "dropped and clipped: in a DP round a row with a label outside the classes or a "
    "categorical value outside its domain is left out; numeric values are clipped to their "
    "bounds; a missing value declines the round (rule values)"
)


def _flags(*names: str) -> dict[str, Any]:
    return {n: FLAGS[n] for n in names}


@dataclass(frozen=True)
class NaiveBayesRequest:
    features: tuple[str, ...] = field(
        default=(),
        metadata={"flags": _flags("features"), "build": lambda features: tuple(features)},
    )
    domains: tuple[NaiveBayesDomain, ...] = field(
        default=(),
        metadata={"flags": _flags("domain", "features", "label_column"), "build": domains_of},
    )
    label_column: str = field(
        default="",
        metadata={"flags": _flags("label_column"), "build": lambda label_column: label_column},
    )
    classes: tuple[str, ...] = field(
        default=(),
        metadata={"flags": _flags("classes", "domain", "label_column"), "build": classes_of},
    )
    var_smoothing: float | None = field(
        default=None,
        metadata={"flags": _flags("var_smoothing"), "build": lambda var_smoothing: var_smoothing},
    )
    alpha: float | None = field(
        default=None, metadata={"flags": _flags("alpha"), "build": lambda alpha: alpha}
    )
    bounds: tuple[NaiveBayesBound, ...] = field(
        default=(),
        metadata={
            "flags": _flags("bounds", "features", "domain", "label_column", "dp_epsilon"),
            "build": bounds_of,
        },
    )


@dataclass(frozen=True)
class NaiveBayesSpec:
    features: tuple[str, ...]
    domains: tuple[NaiveBayesDomain, ...]
    label_column: str
    classes: tuple[str, ...]
    bounds: tuple[NaiveBayesBound, ...] = ()  # DP: one per numeric feature, in order; else ()


BAD_BOUNDS = (
    "a DP naive Bayes round needs finite bounds lower < upper for every numeric feature, in order"
)


def layout_of(spec: NaiveBayesSpec) -> Layout:
    return Layout.of(spec.features, spec.domains, len(spec.classes))


class NaiveBayes(SecureSumStatistic[NaiveBayesRequest, NaiveBayesSpec]):
    """Naive Bayes as its declaration: a group of blocks per class (its row count, the sums of
    its numeric features, the counts of its categories), read from the site's table by the
    statistic itself (labels, categories, numeric values clipped to the spec's bounds)."""

    name = PROTOCOL_NAME
    request_type = NaiveBayesRequest
    spec_type = NaiveBayesSpec
    result_type = NaiveBayesResult
    output_file = "result.json"
    plot_file = "naive_bayes.png"
    summary = ("round_id", "owners", "classes", "class_count", "theta")
    help = "Gaussian and categorical naive Bayes across the owners"
    description = DESCRIPTION
    takes_bounds = False
    clips_itself = True

    def spec(self, request: NaiveBayesRequest) -> NaiveBayesSpec:
        features, domains, classes = check_request(request)
        numeric = Layout.of(features, domains, len(classes)).numeric
        bounds = check_bounds(request.bounds, numeric)
        return NaiveBayesSpec(features, domains, request.label_column, classes, bounds)

    def settings(self, request: NaiveBayesRequest) -> tuple[float, float]:
        """(var_smoothing, alpha): the aggregator's alone (owners send the same sums)."""
        var_smoothing = request.var_smoothing
        alpha = request.alpha
        return check_smoothing(
            DEFAULT_VAR_SMOOTHING if var_smoothing is None else var_smoothing,
            DEFAULT_ALPHA if alpha is None else alpha,
        )

    def spec_for(self, spec: NaiveBayesSpec, dp: Any) -> NaiveBayesSpec:
        """DP: every numeric feature's bounds, in order (the request's, else [-C, C]); without
        DP the request gives none (the value bound bounds every value)."""
        if dp is None:
            if spec.bounds:
                raise DataError(
                    "bounds apply to DP rounds (the value bound bounds every value otherwise)",
                    field="bounds",
                )
            return spec
        c = dp.row_norm_bound
        given = {b.name: b for b in spec.bounds}
        bounds = tuple(given.get(f, NaiveBayesBound(f, -c, c)) for f in layout_of(spec).numeric)
        return dataclasses.replace(spec, bounds=bounds)

    def implied_row_norm_bound(self, request: NaiveBayesRequest) -> float:
        """The largest |bound| (every numeric feature gets explicit bounds on the command)."""
        return max((max(abs(b.lower), abs(b.upper)) for b in request.bounds), default=1.0)

    def features(self, spec: NaiveBayesSpec) -> tuple[str, ...]:
        return ()  # read, clipped and standardized by `sums` itself

    def other_columns(self, spec: NaiveBayesSpec) -> tuple[str, ...]:
        return (*spec.features, spec.label_column)

    def check_spec(self, spec: NaiveBayesSpec) -> None:
        """The spec's layout checked as its request would be; its bounds well formed."""
        try:
            _, domains, _ = check_request(spec)
        except DataError as exc:
            raise ProtocolError(str(exc)) from None
        if tuple(domains) != tuple(spec.domains):
            raise ProtocolError("the spec's domains are not in the features' order")
        numeric = layout_of(spec).numeric
        if spec.bounds and (
            tuple(b.name for b in spec.bounds) != numeric
            or any(
                not (math.isfinite(b.lower) and b.lower < b.upper < math.inf) for b in spec.bounds
            )
        ):
            raise ProtocolError(BAD_BOUNDS)

    def blocks(self, spec: NaiveBayesSpec, bound: float) -> tuple[Block, ...]:
        """Per class: its row count, (S1, S2) of each numeric feature (|x| <= b: a row adds at
        most b to S1 and b^2 to S2), its categories' counts (one per categorical feature)."""
        if spec.bounds:
            raise ProtocolError("a non-DP naive Bayes round declares no clipping bounds")
        return self._blocks(spec, bound)

    def dp_blocks(self, spec: NaiveBayesSpec, bound: float) -> tuple[Block, ...]:
        """The same of the standardized u in [-1, 1]: a row adds at most 1 to every value."""
        if tuple(b.name for b in spec.bounds) != layout_of(spec).numeric:
            raise ProtocolError(BAD_BOUNDS)
        return self._blocks(spec, 1.0)

    def _blocks(self, spec: NaiveBayesSpec, b: float) -> tuple[Block, ...]:
        return tuple(block for group in self._groups(spec, b) for block in group)

    def _groups(self, spec: NaiveBayesSpec, b: float) -> list[list[Block]]:
        """A class's blocks, class by class (`blocks`)."""
        layout = layout_of(spec)
        d, d_cat = len(layout.numeric), len(layout.categorical)
        l2 = math.sqrt(d * (b * b + b**4))
        out = []
        for c in spec.classes:
            group = [Block(f"rows of class {c}", 1, 1.0, 1.0, 1.0, COUNT)]
            if d:
                group.append(Block(f"sums of class {c}", 2 * d, max(b, b * b), d * (b + b * b), l2))
            if d_cat:
                size, l2_cat = layout.n_categories, math.sqrt(d_cat)
                group.append(Block(f"categories of class {c}", size, 1.0, d_cat, l2_cat, COUNT))
            out.append(group)
        return out

    def exclusive_blocks(self, spec: NaiveBayesSpec) -> list[list[str]]:
        """A row of class c moves class c's blocks alone (each class summed apart)."""
        return [[block.name for block in group] for group in self._groups(spec, 1.0)]

    def sums(self, spec: NaiveBayesSpec, rows: Rows) -> dict[str, np.ndarray]:
        layout = layout_of(spec)
        stats = local_statistics(
            rows.table, layout, spec.label_column, spec.classes, spec.bounds, rows.bound, rows.dp
        )
        rows.check_count(stats.rows)
        out: dict[str, np.ndarray] = {}
        for i, c in enumerate(spec.classes):
            out[f"rows of class {c}"] = stats.count[i : i + 1]
            if layout.numeric:
                pairs = np.empty(2 * len(layout.numeric))
                pairs[0::2], pairs[1::2] = stats.s1[i], stats.s2[i]
                out[f"sums of class {c}"] = pairs
            if layout.categorical:
                out[f"categories of class {c}"] = np.concatenate([b[i] for b in stats.categories])
        return out

    def fit(self, spec: NaiveBayesSpec, totals: Released, release: Release) -> Fit:
        """The model of a round's totals: exact without DP, post-processed with it."""
        first = self._groups(spec, 1.0)[0]  # the row count, then the sums if any
        count_bits = totals.encoded(first[0].name)[1]
        scale_bits = totals.encoded(first[1].name)[1] if first[1].kind != COUNT else 0
        flat = [v for block in self._blocks(spec, 1.0) for v in totals.encoded(block.name)[0]]
        split = split_totals(flat, layout_of(spec))
        var_smoothing, alpha = release.settings
        if not release.noisy:
            return exact_fit(split, scale_bits, count_bits, var_smoothing, alpha, spec.classes)
        sigma = release.noise_std
        return noisy_fit(split, scale_bits, count_bits, var_smoothing, alpha, spec.bounds, sigma)

    def result(self, spec: NaiveBayesSpec, totals: Released, release: Release) -> dict[str, Any]:
        fit = self.fit(spec, totals, release)
        layout = layout_of(spec)
        total = float(fit.class_count.sum())
        numeric = list(layout.numeric)
        var_smoothing, alpha = release.settings
        return {
            "method": METHOD,
            "label_column": spec.label_column,
            "classes": list(spec.classes),
            "numeric_features": numeric,
            "categorical": [
                NaiveBayesCategorical(d.name, list(d.values), counts.tolist(), logp.tolist())
                for d, counts, logp in zip(
                    layout.categorical, fit.category_counts, fit.log_prob, strict=True
                )
            ],
            "class_count": fit.class_count.tolist(),
            "class_prior": (fit.class_count / total).tolist(),
            "theta": {f: fit.theta[:, j].tolist() for j, f in enumerate(numeric)},
            "var": {f: fit.var[:, j].tolist() for j, f in enumerate(numeric)},
            "var_smoothing": var_smoothing,
            "epsilon": fit.epsilon,
            "alpha": alpha,
            "n": total,
            "bounds": {b.name: [b.lower, b.upper] for b in spec.bounds} or None,
            "floored": fit.floored,
            "outside": OUTSIDE_DROPPED if release.noisy else OUTSIDE_REFUSED,
        }

    def figures(self, spec: NaiveBayesSpec, result: Mapping[str, Any]) -> dict[str, float]:
        """Each class's rows, and the mean and variance of every numeric feature in it."""
        out: dict[str, float] = {}
        for i, c in enumerate(spec.classes):
            out[f"rows of class {c}"] = float(result["class_count"][i])
            for f in layout_of(spec).numeric:
                out[f"mean of {f} in class {c}"] = float(result["theta"][f][i])
                out[f"variance of {f} in class {c}"] = float(result["var"][f][i])
        return out

    def noise_report(
        self, spec: NaiveBayesSpec, result: Mapping[str, Any], totals: Released, release: Release
    ) -> NoiseReport:
        return NoiseReport(
            None,
            mechanism="distributed Skellam noise on every per-class count, sum and sum of squares",
            post_processing="class counts at least 1, category counts at least 0; means "
            "of the standardized u = (x - mid) / half clamped to [-1, 1], mean squares to "
            f"[0, 1]; variances of u between {FLOOR_FACTOR:g} x their noise std and 1; then "
            "theta = mid + half theta_u, var = half^2 var_u + epsilon",
            note="numeric values clipped to their bounds and standardized to [-1, 1] at each "
            "owner; noise_std_per_value is in counts and in units of u; rows with a label or "
            "category outside the public lists dropped; every owner charged its ledger; "
            "row_norm_bound is the default bound [-C, C] of a numeric feature without one",
        )

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        lines = [
            f"each of the {doc['values_per_share']} released counts and sums carries noise of "
            f"std {doc['noise_std_per_value']:.4g} (epsilon {doc['epsilon']:g}, delta "
            f"{doc['delta']:g})"
        ]
        if rows is None:
            return lines
        for name, std in doc["noise_std_of_means"].items():
            var_std = doc["noise_std_of_variances"][name]
            lines.append(
                f"  {name}: each class's mean +/- {std:.4g}, variance +/- {var_std:.4g} (1 std)"
            )
        for name, std in doc["noise_std_of_category_probabilities"].items():
            lines.append(f"  {name}: each P(value | class) +/- {std:.4g} (1 std)")
        return lines

    def describe(self, spec: NaiveBayesSpec) -> str:
        layout = layout_of(spec)
        return (
            f"naive Bayes of {spec.label_column} ({len(spec.classes)} classes) on "
            f"{len(layout.numeric)} numeric and {len(layout.categorical)} categorical feature(s)"
        )


PROTOCOL = registry.register(SecureSumProtocol(NaiveBayes()))
