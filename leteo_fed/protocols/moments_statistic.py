"""The moments statistic (PCA, DCA, LDA, MDR) as declared for the secure-sum adapter.

Every owner sums R = sum x x^T (upper triangle) and, per declared grouping (a label and its
public classes), each class's V = sum x and row count, zero-filled for the classes it lacks
(`moments`); the aggregator solves the method's eigenproblem from the exact totals (`pca`,
`discriminant`). The blocks are laid out as `moments.encode_moments` lays out a share; a DP
round's sensitivity is `moments.sensitivities_for_scatter`'s (one row moves one class of each
grouping, which a sum over the blocks would overstate). The projection-only mode is the
protocol's (`moments_round`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.errors import ConfigError, DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import discriminant, moments, moments_preview, pca, rotation
from leteo_fed.protocols.moments import ALL_ROWS, Grouping
from leteo_fed.protocols.moments_results import DiscriminantRoundResult, PcaRoundResult
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    Command,
    NoiseReport,
    Release,
    Rows,
    SecureSumStatistic,
    Totals,
)

METHODS = ("pca", "dca", "lda", "mdr")
LABELS_NEEDED = {"pca": 0, "dca": 1, "lda": 1, "mdr": 2}
RIDGE_FLOOR = 3.0  # DP: the noisy S_W (or S_B) has spectral norm ~ 2 sqrt(d) sigma
PRIVACY_LABEL_HELP = "MDR: the label whose classes to hide"


@dataclass(frozen=True)
class LabelClasses:
    """A label column and its public class list (the wire's Grouping)."""

    label_column: str = ""
    classes: tuple[str, ...] = ()


def groupings_from_flags(
    method: str,
    label_column: str | None,
    classes: list[str] | None,
    privacy_label_column: str | None,
    privacy_classes: list[str] | None,
) -> tuple[LabelClasses, ...]:
    """The declared (label, classes) of a discriminant command: MDR adds the label to hide."""
    groupings: tuple[LabelClasses, ...] = (LabelClasses(label_column or "", tuple(classes or ())),)
    if method == "mdr":
        if not privacy_label_column or not privacy_classes:
            raise ConfigError(
                "`method` mdr needs `privacy_label_column` and `privacy_classes`", field="method"
            )
        groupings += (LabelClasses(privacy_label_column, tuple(privacy_classes)),)
    return groupings


GROUPING_FLAGS = {
    "label_column": {"required": True, "help": "the (utility) class label column"},
    "classes": {
        "type": tuple[str, ...],
        "required": True,
        "help": "the label's class names, e.g. 0,1,2",
    },
    "privacy_label_column": {"help": PRIVACY_LABEL_HELP},
    "privacy_classes": {"type": tuple[str, ...], "help": "MDR: the privacy label's classes"},
}


@dataclass(frozen=True)
class MomentsRequest:
    method: str = field(
        default="pca",
        metadata={"help": "analysis (default: dca)", "choices": ("dca", "lda", "mdr")},
    )
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated feature columns", "required": True}
    )
    components: int = field(
        default=0, metadata={"help": "number of components (default: the method's)"}
    )
    standardize: bool = field(default=False, metadata={"help": "PCA of the correlation matrix"})
    groupings: tuple[LabelClasses, ...] = field(
        default=(), metadata={"flags": GROUPING_FLAGS, "build": groupings_from_flags}
    )
    rho: float | None = field(
        default=None,
        metadata={
            "help": "ridge on the denominator matrix (default: DCA 0.02 lambda_max(S_W), LDA "
            "1e-9 lambda_max(S_W), MDR 0.02 lambda_max(S_B privacy))"
        },
    )
    rho_prime: float | None = field(
        default=None, metadata={"help": "DCA ridge on S_B (default: 0.1 rho)"}
    )
    projection_only: bool = field(
        default=False,
        metadata={
            "help": "the aggregator learns only the directions and eigenvalues (the CSP "
            "solves a secretly rotated problem)"
        },
    )


@dataclass(frozen=True)
class MomentsSpec:
    method: str
    features: tuple[str, ...]
    groupings: tuple[LabelClasses, ...] = ()
    rotation: tuple[float, ...] = ()


@dataclass(frozen=True)
class MomentsSettings:
    """What the aggregator alone uses of a request."""

    components: int
    standardize: bool
    ridge: discriminant.Ridge


def declared(spec: Any) -> list[Grouping]:
    """The spec's groupings as the math takes them."""
    return [Grouping(g.label_column, tuple(g.classes)) for g in spec.groupings]


def groupings(spec: Any) -> list[Grouping]:
    """The groupings a share sums over: the declared ones, or every row in one class (PCA)."""
    return declared(spec) or [ALL_ROWS]


def _grouping(msg: LabelClasses, features: tuple[str, ...]) -> LabelClasses:
    label = msg.label_column
    if not label:
        raise DataError("a grouping needs a label column", field="groupings.label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="groupings.label_column")
    if len(msg.classes) < 2 or any(not c for c in msg.classes):
        raise DataError(
            f"label column '{label}' needs at least 2 non-empty class names",
            field="groupings.classes",
        )
    Grouping(label, tuple(msg.classes))  # no duplicates
    return LabelClasses(label, tuple(msg.classes))


def _ridge_value(value: float | None, name: str, non_negative: bool) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or (non_negative and value < 0):
        raise DataError(
            f"{name} must be a finite{' non-negative' if non_negative else ''} number", field=name
        )
    return value


def _block_names(g: Grouping) -> list[tuple[str, str]]:
    """(sum, count) block names of each class of a grouping."""
    if g.label_column is None:
        return [("sum of x", "rows")]
    return [(f"sum of x: {g.label_column}={c}", f"rows: {g.label_column}={c}") for c in g.classes]


class Moments(SecureSumStatistic[MomentsRequest, MomentsSpec]):
    name = "moments"
    request_type = MomentsRequest
    spec_type = MomentsSpec
    result_type = PcaRoundResult
    spark_engine = True
    rows_field = "n_samples"
    summary = ("round_id", "owners", "n_samples", "eigenvalues")
    commands = (
        Command(
            "pca",
            help="run a federated PCA round against running services",
            description="Start a federated PCA round at the aggregator and wait for the result. "
            "Owners send encrypted sums of x x^T, x and counts; the result equals PCA on the "
            "pooled rows. Writes OUT/pca.json.",
            fixed={"method": "pca"},
            omit=("groupings", "rho", "rho_prime"),
            previews="each eigenvalue",
        ),
        Command(
            "dca",
            help="run a federated DCA / LDA / MDR round against running services",
            description="Start a federated discriminant analysis at the aggregator. Owners send "
            "encrypted sums of x x^T and per-class sums and counts for ALL declared classes "
            "(zero-filled), so no share reveals which classes a site holds. Writes "
            "OUT/dca.json.",
            defaults={"method": "dca"},
            omit=("standardize",),
            previews="each class mean",
        ),
    )

    # ---------------------------------------------------------------- what is asked

    def spec(self, request: MomentsRequest) -> MomentsSpec:
        method = request.method or pca.PROTOCOL
        if method not in METHODS:
            raise DataError(f"unknown method {method!r}; expected one of {METHODS}", field="method")
        features = check_features(tuple(request.features), "analyse")
        given = tuple(_grouping(g, features) for g in request.groupings)
        needed = LABELS_NEEDED[method]
        if len(given) != needed:
            what = {
                0: "no label column",
                1: "one label column",
                2: "a utility and a privacy label column",
            }
            raise DataError(f"{method} takes {what[needed]}, got {len(given)}", field="groupings")
        if needed == 2 and given[0].label_column == given[1].label_column:
            raise DataError(
                "the utility and privacy labels must be different columns", field="groupings"
            )
        return MomentsSpec(method, features, given)

    def settings(self, request: MomentsRequest) -> MomentsSettings:
        spec = self.spec(request)
        d = len(spec.features)
        if spec.method == pca.PROTOCOL:
            default_k = min(2, d)
        else:
            default_k = min(d, max(1, len(spec.groupings[0].classes) - 1))
        components = request.components or default_k
        if not 1 <= components <= d:
            raise DataError(f"components must be in 1..{d}, got {components}", field="components")
        if request.standardize:
            if spec.method != pca.PROTOCOL:
                raise DataError("standardize applies to PCA only", field="standardize")
            if request.projection_only:
                raise DataError(
                    "standardize is not available in projection-only mode (correlation is not "
                    "rotation-equivariant)",
                    field="standardize",
                )
        ridge = discriminant.Ridge(
            _ridge_value(request.rho, "rho", non_negative=True),
            _ridge_value(request.rho_prime, "rho_prime", non_negative=False),
        )
        return MomentsSettings(components, request.standardize, ridge)

    def features(self, spec: MomentsSpec) -> tuple[str, ...]:
        return tuple(spec.features)

    def other_columns(self, spec: MomentsSpec) -> tuple[str, ...]:
        return tuple(g.label_column for g in spec.groupings)

    # ---------------------------------------------------------------- what an owner sends

    def blocks(self, spec: MomentsSpec, bound: float) -> tuple[Block, ...]:
        """R's triangle, then per grouping and class its sums and row count. One row moves R
        by x x^T (L2 <= C^2, L1 <= (d + 1) C^2 / 2), its class's sums by x, its count by 1.
        The most one row adds is stated at ceil(b) (and times d for the rotated rows of a
        projection-only round, ||x'|| <= sqrt(d) b): the encoding's bound as it always was."""
        d = len(spec.features)
        b, widen = math.ceil(bound), (d if spec.rotation else 1)
        c = float(bound)
        out = [Block("sum of x x^T", d * (d + 1) // 2, widen * b * b, (d + 1) * c * c / 2, c * c)]
        for g in groupings(spec):
            for sums, rows in _block_names(g):
                out.append(Block(sums, d, widen * b, math.sqrt(d) * c, c))
                out.append(Block(rows, 1, 1.0, 1.0, 1.0, kind=COUNT))
        return tuple(out)

    def share_sensitivity(
        self, spec: MomentsSpec, bound: float, scale_bits: int, count_bits: int
    ) -> noise.Sensitivity:
        gs = groupings(spec)
        return moments.sensitivities_for_scatter(
            bound,
            scale_bits,
            len(spec.features),
            len(gs),
            n_classes=[len(g.classes) for g in gs],
            count_scale_bits=count_bits,
        )

    def sums(self, spec: MomentsSpec, rows: Rows) -> dict[str, np.ndarray]:
        index: list[np.ndarray | None] = [
            moments.class_indices(rows.labels(str(g.label_column)), g) for g in declared(spec)
        ]
        return self._blocks_of(
            spec, moments.local_moments(rows.x, index or [None], groupings(spec))
        )

    def spark_sums(self, spec: MomentsSpec, site: Any, bound: float) -> dict[str, np.ndarray]:
        return self._blocks_of(spec, site.spark_moments(list(spec.features), declared(spec), bound))

    @staticmethod
    def _blocks_of(spec: MomentsSpec, mom: moments.LocalMoments) -> dict[str, np.ndarray]:
        """One site's moments as its blocks (projection-only: of its rotated rows)."""
        d = len(spec.features)
        if spec.rotation:
            mom = rotation.rotate_moments(mom, rotation.rotation_from_wire(spec.rotation, d))
        out = {"sum of x x^T": mom.r[np.triu_indices(d)]}
        for g, v, m in zip(groupings(spec), mom.v, mom.m, strict=True):
            for k, (sums, rows) in enumerate(_block_names(g)):
                out[sums], out[rows] = v[k], np.array([m[k]])
        return out

    # ---------------------------------------------------------------- what the totals give

    def aggregate(self, spec: MomentsSpec, totals: Totals, noisy: bool) -> moments.IntegerMoments:
        flat: list[int] = []
        bits = (0, 0)
        for block in self.blocks(spec, 1.0):
            values, b = totals.encoded(block.name)
            flat += values
            bits = (bits[0], b) if block.kind == COUNT else (b, bits[1])
        d = len(spec.features)
        return moments.decode_totals(flat, d, groupings(spec), bits[0], bits[1], noisy=noisy)

    def result(self, spec: MomentsSpec, totals: Totals, release: Release) -> dict[str, Any]:
        """The eigen-release; a bounded release is solved in the scaled columns and mapped back
        to natural units (post-processing)."""
        settings: MomentsSettings = release.settings
        agg = self.aggregate(spec, totals, release.noisy)
        features = list(spec.features)
        bounds = release.bounds
        if spec.method == pca.PROTOCOL:
            scatter, mean = moments.total_scatter(agg), moments.mean(agg)
            if bounds:  # a noisy mean is kept within the bounds
                scatter = bounds_of.unscale_scatter(scatter, bounds)
                mean = bounds_of.clip_to(bounds_of.unscale_mean(mean, bounds), bounds)
            res = pca.pca_from_scatter(
                scatter, mean, agg.n, features, settings.components, settings.standardize,
                psd_project=release.noisy,
            )  # fmt: skip
            return res.to_dict()
        ridge = settings.ridge
        if release.noisy:
            floor = RIDGE_FLOOR * math.sqrt(len(features)) * release.quorum_noise_std
            ridge = discriminant.Ridge(ridge.rho, ridge.rho_prime, floor)
        dis = discriminant.from_aggregate(
            agg, spec.method, groupings(spec), features, settings.components, ridge
        )
        if bounds:  # w = H^-1 w': the generalized eigenvalues are unchanged by H . H
            _, half = bounds_of.centers_halves(bounds)
            w = np.asarray(dis.components, dtype=np.float64).T / half[:, None]
            w = pca.orient_components(w / np.linalg.norm(w, axis=0))
            dis.components = [[float(c) for c in w[:, i]] for i in range(w.shape[1])]
            mean = bounds_of.unscale_mean(dis.mean, bounds)
            dis.mean = bounds_of.clip_to(mean, bounds).tolist()
        return dis.to_dict()

    def result_class(self, spec: MomentsSpec) -> type:
        return PcaRoundResult if spec.method == pca.PROTOCOL else DiscriminantRoundResult

    def figures(self, spec: MomentsSpec, result: Mapping[str, Any]) -> dict[str, float]:
        """Its eigenvalues and the pooled means."""
        figures = {f"eigenvalue {i + 1}": v for i, v in enumerate(result["eigenvalues"])}
        means = zip(result["features"], result["mean"], strict=True)
        return figures | {f"mean of {f}": m for f, m in means}

    def noise_report(
        self, spec: MomentsSpec, result: Mapping[str, Any], totals: Totals, release: Release
    ) -> NoiseReport:
        return NoiseReport(mechanism="distributed Skellam noise on the encoded statistics")

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return moments_preview.moments_noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str] | None:
        return moments_preview.preview_lines(doc, rows)

    def describe(self, spec: MomentsSpec) -> str:
        return f"{spec.method} on {len(spec.features)} features"

    def preview_data(
        self, spec: MomentsSpec, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        return moments_preview.preview_data(spec, columns, rng)
