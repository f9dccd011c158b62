"""Federated percentiles of numeric columns over public bounds, from a dyadic-tree histogram.

Per feature, [lower, upper] is cut into B = 2^h equal leaf bins, with a dyadic tree of h + 1
levels over them (`histogram_tree`: the bins, the tree's layout, its consistency and the
percentiles a histogram gives).

Without DP, owner n sends only the B leaf counts of every feature (the aggregator reveals the
exact pooled histogram: the inner nodes would add nothing); a value outside [lower, upper] or a
missing one refuses the round (rule `values`). With DP, owner n sends every node of every tree
(level-major, root first), values clamped to the bounds (refusing would reveal them); a missing
value still refuses (rule `values`).

Sensitivity (DP, `Quantiles.dp_blocks`): one row adds 1 to exactly one node per level of each
feature's tree, so removing it changes h + 1 coordinates of each of the d trees by
F = 2^scale_bits each: L1 = d (h + 1) F, L2 = sqrt(d (h + 1)) F (checked by brute force in the
tests); there is nothing to clip.

Post-processing (no privacy cost): per feature, the noisy tree is made consistent and its
leaves non-negative (`histogram_tree.consistent_tree`, `nonnegative_leaves`). Percentiles are
read off the histogram by numpy.percentile's 'linear' rule on its order statistics, so without
DP every percentile is within one bin width of `numpy.percentile` on the pooled rows.

Rank error (DP): the count below a percentile in leaf j sums popcount(j) + 1 noisy nodes
(`histogram_tree.rank_nodes`), so its noise std is at most sigma sqrt(h + 1); `rank_error`
reports it per feature and percentile, in rows (0 without DP).

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled leaf counts (non-DP) or the pooled noisy tree (DP), never one site's. Single-round, so
one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_facts import preview_facts
from leteo_fed.protocols.histogram_tree import (
    consistent_tree,
    leaf_counts,
    levels,
    n_values,
    nonnegative_leaves,
    percentiles_from_histogram,
    rank_nodes,
    read_binned,
    tree_counts,
)
from leteo_fed.protocols.requests import check_features, low_high
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    NoiseReport,
    Release,
    Rows,
    SecureSumStatistic,
    Totals,
)

METHOD = "dyadic-tree-histogram"
DEFAULT_BINS = 64
MAX_BINS = 4096  # 2^12 leaves: 8191 tree nodes per feature
MAX_VALUES = 65_536  # encrypted counts per owner share (features x nodes)
MAX_PERCENTILES = 99
DEFAULT_PERCENTILES = (10.0, 25.0, 50.0, 75.0, 90.0)
ROW_NORM = 1.0  # a row is one count per tree level: nothing to clip
INTERPOLATION = (
    "values spread uniformly inside each bin; the m-th smallest value (0-based) is read at "
    "cumulative count m + 1/2; percentile p is numpy's 'linear' rule on these: the "
    "interpolation between ranks floor(k) and ceil(k), k = p (n - 1) / 100"
)
OUTSIDE_REFUSED = (
    "refused: a site with a value outside [lower, upper], or a missing one, declines the round "
    "(rule values)"
)
OUTSIDE_CLAMPED = (
    "clamped: in a DP round a value below lower counts in the first bin, one above upper in "
    "the last; a missing value declines the round (rule values)"
)
FIXES = (
    "raise `dp_epsilon`",
    "use fewer `bins`: a prefix count sums up to log2(bins) + 1 noisy nodes",
    "ask for fewer `features`: the noise grows with sqrt(features)",
    "give `rows` N if the pooled row count is larger",
)


BOUNDS_FLAG = {
    "bounds": {
        "type": low_high,
        "required": True,
        "metavar": "LO,HI",
        "help": "public bounds of every column: a value outside refuses a non-DP round and is "
        "clamped to them in a DP one",
    }
}


@dataclass(frozen=True)
class QuantilesRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated columns", "required": True}
    )
    lower: float = field(
        default=0.0, metadata={"flags": BOUNDS_FLAG, "build": lambda bounds: bounds[0]}
    )
    upper: float = field(
        default=0.0, metadata={"flags": BOUNDS_FLAG, "build": lambda bounds: bounds[1]}
    )
    percentiles: tuple[float, ...] = field(
        default=(),
        metadata={"help": "comma-separated percentiles in [0, 100] (default: 10,25,50,75,90)"},
    )
    bins: int = field(
        default=0,
        metadata={
            "help": "leaf bins, a power of two up to 4096 (default: 64); the percentiles' "
            "resolution is (HI - LO) / bins"
        },
    )


@dataclass(frozen=True)
class QuantilesSpec:
    features: tuple[str, ...]
    lower: float
    upper: float
    bins: int


@result_type
@dataclass(frozen=True, kw_only=True)
class QuantilesResult(RoundFacts, Result):
    wire: ClassVar[str] = "quantiles"
    protocol: str
    method: str
    features: list[str]
    lower: float
    upper: float
    bins: int
    bin_width: float
    percentiles: list[float]
    quantiles: dict[str, list[float]]
    rank_error: dict[str, list[float]]
    histogram: dict[str, list[float]]
    n: dict[str, float]
    interpolation: str
    outside: str
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per percentile, a column per feature: its estimated quantile."""
        cols = {f: list(self.quantiles[f]) for f in self.features}
        return cols, list(self.percentiles), "percentile"


# ------------------------------------------------------------------ parameters


def check_bounds(lower: float, upper: float) -> tuple[float, float]:
    lo, hi = float(lower), float(upper)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DataError(
            f"the bounds must be finite with lower < upper, got [{lo}, {hi}]", field="bounds"
        )
    return lo, hi


def check_bins(bins: int, features: int, tree: bool) -> int:
    b = int(bins) or DEFAULT_BINS
    if b < 2 or b > MAX_BINS or b & (b - 1):
        raise DataError(f"bins must be a power of two in 2..{MAX_BINS}, got {bins}", field="bins")
    if n_values(features, b, tree) > MAX_VALUES:
        raise DataError(
            f"{features} feature(s) x {b} bins need {n_values(features, b, tree)} counts per "
            f"share; at most {MAX_VALUES}: use fewer bins or features",
            field="bins",
        )
    return b


def check_percentiles(percentiles: tuple[float, ...]) -> tuple[float, ...]:
    ps = tuple(float(p) for p in percentiles) or DEFAULT_PERCENTILES
    if len(ps) > MAX_PERCENTILES or not all(math.isfinite(p) and 0 <= p <= 100 for p in ps):
        raise DataError(
            f"percentiles must be 1 to {MAX_PERCENTILES} numbers in [0, 100]",
            field="percentiles",
        )
    return ps


# ------------------------------------------------------------------ owner side


# ------------------------------------------------------------------ aggregator side


def quantile_figures(
    features: Sequence[str], percentiles: Sequence[float], quants: Mapping[str, list[float]]
) -> dict[str, float]:
    """The figures a percentiles release states: each percentile of each feature."""
    return {
        f"{p:g}th percentile of {name}": float(v)
        for name in features
        for p, v in zip(percentiles, quants[name], strict=True)
    }


def histograms(spec: QuantilesSpec, totals: Totals, release: Release) -> tuple[dict, ...]:
    """Per feature: the released histogram, its percentiles (`release.settings`), their rank
    errors and the row count, from the round's totals (a noisy tree made consistent and
    non-negative)."""
    b, sigma, percentiles = spec.bins, release.noise_std, release.settings
    counts, s = totals.encoded("tree" if release.noisy else "leaves")
    hist, quants, errors, n = {}, {}, {}, {}
    for j, name in enumerate(spec.features):
        if release.noisy:
            y = np.array([t / (1 << s) for t in counts[j * (2 * b - 1) : (j + 1) * (2 * b - 1)]])
            leaves = nonnegative_leaves(consistent_tree(y), b)
        else:
            part = counts[j * b : (j + 1) * b]
            if any(t < 0 or t % (1 << s) for t in part):
                raise ProtocolError(
                    "a count total is negative or not a whole count: corrupted aggregate"
                )
            leaves = np.array([t >> s for t in part], dtype=np.float64)
        q = percentiles_from_histogram(leaves, percentiles, spec.lower, spec.upper)
        hist[name] = [float(v) for v in leaves]
        quants[name] = [float(v) for v in q]
        nodes = rank_nodes(leaves, q, spec.lower, spec.upper)
        errors[name] = [sigma * math.sqrt(k) for k in nodes]
        n[name] = float(leaves.sum())
    return hist, quants, errors, n


def noise_preview(plan: Any, rows: int | None = None) -> dict:
    """What the noise of a DP round does to the ranks, from public parameters only: every tree
    node carries noise of std sigma (with the quorum's shares); the count below a percentile
    sums at most h + 1 nodes (sigma sqrt(h + 1)), checked against the row count."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    spec = plan.spec
    h = levels(spec.bins)
    worst = sigma * math.sqrt(h + 1)
    doc |= {
        "features": len(spec.features),
        "bins": spec.bins,
        "tree_levels": h + 1,
        "bin_width": (spec.upper - spec.lower) / spec.bins,
        "noise_std_per_node": sigma,
        "rank_error_at_most": worst,
        "fixes": list(FIXES),
        "expected_error": {"the count below each percentile": worst, "each leaf count": sigma},
    }
    if rows is None:
        return doc
    doc["assumed_rows"] = rows
    doc["rank_error_at_most_percent"] = 100 * worst / rows
    checks = [
        SignalCheck("the count below each percentile", worst, rows),
        SignalCheck("each leaf count", sigma, rows),
    ]
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


class Quantiles(SecureSumStatistic[QuantilesRequest, QuantilesSpec]):
    name = "quantiles"
    request_type = QuantilesRequest
    spec_type = QuantilesSpec
    result_type = QuantilesResult
    output_file = "result.json"
    plot_file = "quantiles.png"
    fixed_row_norm_bound = ROW_NORM
    takes_bounds = False
    summary = ("round_id", "owners", "percentiles", "quantiles", "rank_error")
    help = "percentiles of numeric columns over public bounds across the owners"
    description = (
        "Start a quantiles round: every owner sends the Paillier-encrypted counts of a "
        "histogram of each column over the public bounds (with `dp_epsilon`, every node of a "
        "dyadic tree over it, with noise); the aggregator learns only the pooled counts and "
        "reads the percentiles off them (without DP within one bin width of the exact ones). "
        "Writes OUT/result.json and the histogram with the percentiles OUT/quantiles.png."
    )

    def spec(self, request: QuantilesRequest) -> QuantilesSpec:
        features = check_features(tuple(request.features), "summarize")
        lower, upper = check_bounds(request.lower, request.upper)
        return QuantilesSpec(features, lower, upper, check_bins(request.bins, len(features), False))

    def settings(self, request: QuantilesRequest) -> tuple[float, ...]:
        """The percentiles to read off the histogram (the owners send the same counts)."""
        return check_percentiles(tuple(request.percentiles))

    def features(self, spec: QuantilesSpec) -> tuple[str, ...]:
        return ()  # values are binned (clamped in DP), never clipped as rows: read from the table

    def other_columns(self, spec: QuantilesSpec) -> tuple[str, ...]:
        return tuple(spec.features)

    def check_spec(self, spec: QuantilesSpec) -> None:
        features = check_features(tuple(spec.features), "summarize")
        check_bounds(spec.lower, spec.upper)
        if int(spec.bins) != check_bins(spec.bins, len(features), False):
            raise ProtocolError("the round's bins are not a power of two")

    def blocks(self, spec: QuantilesSpec, bound: float) -> tuple[Block, ...]:
        """Without DP the leaves of each feature's histogram: a row adds 1 to one per feature."""
        d = len(spec.features)
        return (Block("leaves", d * spec.bins, 1.0, l1=d, l2=math.sqrt(d), kind=COUNT),)

    def dp_blocks(self, spec: QuantilesSpec, bound: float) -> tuple[Block, ...]:
        """With DP every node of each feature's tree: a row adds 1 to one node per level of
        each of the d trees, L1 = d (h + 1), L2 = sqrt(d (h + 1)) counts."""
        d = len(spec.features)
        bins = check_bins(spec.bins, d, True)
        touched = d * (levels(bins) + 1)
        size = n_values(d, bins, True)
        return (Block("tree", size, 1.0, l1=touched, l2=math.sqrt(touched), kind=COUNT),)

    def sums(self, spec: QuantilesSpec, rows: Rows) -> dict[str, np.ndarray]:
        x = read_binned(rows.table, spec.features, spec.lower, spec.upper, clamp=rows.dp)
        rows.check_count(len(x))
        leaves = leaf_counts(x, spec.lower, spec.upper, spec.bins)
        if rows.dp:
            return {"tree": np.concatenate([tree_counts(r) for r in leaves])}
        return {"leaves": np.ravel(leaves)}

    def result(self, spec: QuantilesSpec, totals: Totals, release: Release) -> dict[str, Any]:
        hist, quants, errors, n = histograms(spec, totals, release)
        return {
            "method": METHOD,
            "features": list(spec.features),
            "lower": spec.lower,
            "upper": spec.upper,
            "bins": spec.bins,
            "bin_width": (spec.upper - spec.lower) / spec.bins,
            "percentiles": list(release.settings),
            "quantiles": quants,
            "rank_error": errors,
            "histogram": hist,
            "n": n,
            "interpolation": INTERPOLATION,
            "outside": OUTSIDE_CLAMPED if release.noisy else OUTSIDE_REFUSED,
        }

    def figures(self, spec: QuantilesSpec, result: Mapping[str, Any]) -> dict[str, float]:
        return quantile_figures(spec.features, result["percentiles"], result["quantiles"])

    def noise_report(
        self, spec: QuantilesSpec, result: Mapping[str, Any], totals: Totals, release: Release
    ) -> NoiseReport:
        return NoiseReport(
            mechanism="distributed Skellam noise on every node of each feature's dyadic tree",
            post_processing="least-squares consistent tree (Hay et al. 2010), then the leaves "
            "projected onto the non-negative histograms with the root as total",
            note="noise_std_per_value is per tree node, in counts; row_norm_bound is 1: a row "
            "is one count per tree level",
        )

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        lines = [
            f"each of the {doc['tree_levels']} levels' nodes carries noise of std "
            f"{doc['noise_std_per_node']:.4g} (epsilon {doc['epsilon']:g}, delta "
            f"{doc['delta']:g}); the count below a percentile at most "
            f"{doc['rank_error_at_most']:.4g} (1 std); bins {doc['bin_width']:.4g} wide"
        ]
        return lines

    def describe(self, spec: QuantilesSpec) -> str:
        return f"quantiles of {', '.join(spec.features)} ({spec.bins} bins)"


PROTOCOL = registry.register(SecureSumProtocol(Quantiles()))
