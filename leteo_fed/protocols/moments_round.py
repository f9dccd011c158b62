"""The moments protocols (PCA, DCA, LDA, MDR) as one round of the engine.

Every owner sends R = sum x x^T and per-class sums and counts (`moments`); the aggregator
reveals the exact integer totals and solves the method's eigenproblem (`pca`, `discriminant`).
Projection-only mode: owners send the moments of rows rotated by a secret orthogonal matrix, the
CSP eigendecomposes the rotated aggregate and only the aggregator can rotate the directions back
(`rotation`). DP mode: owners clip rows to L2 norm C and add distributed Skellam noise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
    require_bound,
)
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import discriminant, dp_release, moments, pca, registry, rotation
from leteo_fed.protocols.dp_facts import clip_note, dp_facts, preview_facts, round_truth
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    clip_count_value,
    clip_for_release,
    plan_dp,
    require_same_count_scale,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.moments import ALL_ROWS, Grouping
from leteo_fed.protocols.requests import Common, check_features
from leteo_fed.protocols.results import (
    DpFacts,
    Result,
    RoundFacts,
    component_table,
    omitted,
    result_type,
)
from leteo_fed.protocols.round_types import Outcome, ProjectionQuery, RoundPlan, SiteData, Step

METHODS = ("pca", "dca", "lda", "mdr")
PREVIEW_CORRELATION = 0.5  # the preview's columns: mixed eigenvectors, the noisier case
PREVIEW_CLASS_SHIFT = 0.5  # the preview's classes: means this many std apart per column
DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
_LABELS_NEEDED = {"pca": 0, "dca": 1, "lda": 1, "mdr": 2}


@dataclass(frozen=True)
class LabelClasses:
    """A label column and its public class list (the wire's Grouping)."""

    label_column: str = ""
    classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MomentsRequest:
    method: str = "pca"
    features: tuple[str, ...] = ()
    components: int = 0
    standardize: bool = False
    groupings: tuple[LabelClasses, ...] = ()
    rho: float | None = None
    rho_prime: float | None = None
    projection_only: bool = False


@dataclass(frozen=True)
class MomentsSpec:
    method: str
    features: tuple[str, ...]
    groupings: tuple[LabelClasses, ...] = ()
    rotation: tuple[float, ...] = ()


@result_type
@dataclass(frozen=True, kw_only=True)
class PcaRoundResult(RoundFacts, Result):
    wire: ClassVar[str] = "pca"
    protocol: str
    features: list[str]
    n_samples: int
    eigenvalues: list[float]
    eigenvalue_normalization: str
    components: list[list[float]]
    explained_variance_ratio: list[float]
    mean: list[float]
    standardized: bool
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        cols, index, name = component_table(self.features, self.components, self.eigenvalues)
        cols["explained_variance_ratio"] = list(self.explained_variance_ratio)
        return cols, index, name


@result_type
@dataclass(frozen=True, kw_only=True)
class DiscriminantRoundResult(RoundFacts, Result):
    wire: ClassVar[str] = "discriminant"
    protocol: str
    method: str
    features: list[str]
    classes: list[str]
    n_samples: int
    eigenvalues: list[float]
    components: list[list[float]]
    mean: list[float]
    ridge: dict[str, float]
    pencil: str
    privacy_classes: list[str] | None = omitted()  # MDR only
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        return component_table(self.features, self.components, self.eigenvalues)


@result_type
@dataclass(frozen=True, kw_only=True)
class ProjectionOnlyResult(RoundFacts, Result):
    wire: ClassVar[str] = "projection_only"
    protocol: str
    method: str
    mode: str
    features: list[str]
    eigenvalues: list[float]
    components: list[list[float]]
    n_samples: int | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        return component_table(self.features, self.components, self.eigenvalues)

    explained_variance_ratio: list[float] | None = omitted()  # PCA
    standardized: bool | None = omitted()  # PCA
    classes: list[str] | None = omitted()  # DCA, LDA, MDR
    ridge: dict[str, float] | None = omitted()
    privacy_classes: list[str] | None = omitted()  # MDR
    dp: DpFacts | None = None


@dataclass(frozen=True)
class MomentsPlan:
    label: str  # the method
    features: tuple[str, ...]
    components: int
    min_owners: int
    deadline_seconds: float
    standardize: bool
    groupings: tuple[Grouping, ...]  # effective: (ALL_ROWS,) for PCA
    declared: tuple[Grouping, ...]  # what travels in the spec
    ridge: discriminant.Ridge
    encoding: ShareEncoding
    projection_only: bool = False
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None

    @property
    def n_values(self) -> int:
        extra = 1 if self.dp is not None and self.dp.counts_clipped else 0
        return moments.n_values(len(self.features), self.groupings) + extra


def data_bound(value_bound: float, max_rows: int, widen: int, scale_bits: int, count_bits: int):
    """Largest |encoded statistic| of one owner: |R_ij| <= rows * B^2 (scaled), counts <= rows.

    A rotated row has ||x'|| = ||x|| <= sqrt(d) B, so rotated statistics satisfy
    |R'_ij| <= rows * d * B^2 and |V'_i| <= rows * sqrt(d) * B (`widen` = d)."""
    b = math.ceil(value_bound)
    widen = max(widen, 1)
    data = max(max_rows * widen * b * b, max_rows * widen * b, 1) << scale_bits
    return max(data, max_rows << count_bits)


def encoding(
    scale_bits: int = DEFAULT_SCALE_BITS,
    value_bound: float = DEFAULT_VALUE_BOUND,
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER,
    max_owners: int = DEFAULT_MAX_OWNERS,
    rotation_dimension: int = 0,
    count_scale_bits: int = 0,
    noise_bound: int = 0,
) -> ShareEncoding:
    """The share encoding of a moments round."""
    check_parameters(scale_bits, value_bound, max_rows_per_owner, max_owners, count_scale_bits)
    bound = data_bound(
        value_bound, max_rows_per_owner, rotation_dimension, scale_bits, count_scale_bits
    )
    return ShareEncoding(
        scale_bits=scale_bits,
        value_bound=value_bound,
        data_bound=bound,
        max_rows_per_owner=max_rows_per_owner,
        max_owners=max_owners,
        rotation_dimension=rotation_dimension,
        count_scale_bits=count_scale_bits,
        noise_bound=noise_bound,
    )


def sensitivity(
    row_norm_bound: float, scale_bits: int, d: int, groupings, count_scale_bits: int
) -> noise.Sensitivity:
    """L1/L2 sensitivity of one owner's moments share (add/remove one row of norm <= C)."""
    return moments.sensitivities_for_scatter(
        row_norm_bound,
        scale_bits,
        d,
        len(groupings),
        n_classes=[len(g.classes) for g in groupings],
        count_scale_bits=count_scale_bits,
    )


def _grouping(msg: LabelClasses, features: tuple[str, ...]) -> Grouping:
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
    return Grouping(label, tuple(msg.classes))


def _ridge_value(value: float | None, name: str, non_negative: bool) -> float | None:
    if value is None:
        return None
    if not math.isfinite(value) or (non_negative and value < 0):
        raise DataError(
            f"{name} must be a finite{' non-negative' if non_negative else ''} number", field=name
        )
    return value


def _declared(spec: MomentsSpec) -> list[Grouping]:
    return [Grouping(g.label_column, tuple(g.classes)) for g in spec.groupings]


def pca_noise_preview(
    plan: MomentsPlan,
    rows: int | None = None,
    eigenvalues: Sequence[float] | None = None,
    components: Sequence[Sequence[float]] | None = None,
    mean: Sequence[float] | None = None,
) -> dict:
    """What the noise of a DP PCA round will do, from public parameters only.

    Every released value (R = sum x x^T, V = sum x, the row count Q) carries Skellam noise of
    standard deviation sigma = sqrt(2 mu) / 2^f in real units (with the quorum's shares). To
    first order an eigenvalue lambda of the covariance (R - V V^T / Q) / (Q - 1), with unit
    eigenvector u and pooled mean m, has standard error
    sigma sqrt(2 - sum u_i^4 + 4 (u.m)^2 + ((u.m)^2 - lambda)^2) / (rows - 1):
    the analyst's guesses of the eigenpairs and mean if given, else a spread eigenvector, a mean
    of 0 and lambda of 0 (the smallest error; data far from 0 is noisier). A projection-only
    round releases the same moments in a secretly rotated frame, where a spread eigenvector is
    the expected case: the same figures hold.
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    if plan.label != pca.PROTOCOL:
        raise DataError("a discriminant round's preview is discriminant_noise_preview")
    d = len(plan.features)
    doc["noise_std_per_value"] = sigma
    if rows is None:
        return doc
    if rows < 2:
        raise DataError("rows must be at least 2", field="rows")
    k = plan.components or d
    lams = list(eigenvalues) if eigenvalues is not None else [0.0] * k
    vecs = (
        np.asarray(components, dtype=np.float64)
        if components is not None
        else np.full((k, d), 1 / math.sqrt(d))
    )
    m = np.asarray(mean, dtype=np.float64) if mean is not None else np.zeros(d)
    errors = []
    for lam, u in zip(lams, vecs, strict=True):
        um = float(u @ m)
        spread = 2.0 - float(np.sum(u**4))
        errors.append(sigma * math.sqrt(spread + 4 * um * um + (um * um - lam) ** 2) / (rows - 1))
    doc["eigenvalue_std_error"] = errors
    bound = plan.dp.row_norm_bound  # type: ignore[union-attr]  # preview_facts checked it
    checks = [SignalCheck("row count", sigma, float(rows))]
    if not plan.standardize:  # a covariance eigenvalue is at most E||x||^2 <= C^2
        checks.append(SignalCheck("eigenvalue 1", errors[0], bound * bound))
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


def discriminant_noise_preview(
    plan: MomentsPlan, rows: int | None = None, class_sizes: Sequence[float] | None = None
) -> dict:
    """What the noise of a DP DCA / LDA / MDR round will do, from public parameters only.

    The round releases R = sum x x^T and, per declared class c, V_c = sum of its rows and its
    row count N_c, each value with Skellam noise of standard deviation sigma (real units). The
    scatter matrices are built from the class means V_c / N_c, which move (root mean square of
    the distance, to first order, for a mean near 0) by sigma sqrt(d) / N_c: with the analyst's
    guesses of the class sizes if given, else rows / classes each.
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    if plan.label == pca.PROTOCOL:
        raise DataError("a PCA round's preview is pca_noise_preview")
    doc["noise_std_per_value"] = sigma
    if rows is None and class_sizes is None:
        return doc
    d = len(plan.features)
    bound = plan.dp.row_norm_bound  # type: ignore[union-attr]  # preview_facts checked it
    doc["class_mean_rms_error"] = {}
    checks = []
    for i, g in enumerate(plan.groupings):
        if i == 0 and class_sizes is not None:  # the guesses are for the utility label
            sizes = [float(n) for n in class_sizes]
        elif rows is not None:
            sizes = [rows / len(g.classes)] * len(g.classes)
        else:
            raise DataError("give rows for the privacy label's classes", field="rows")
        if len(sizes) != len(g.classes) or any(not n > 0 for n in sizes):
            raise DataError(f"give one positive size per class of '{g.label_column}'", field="rows")
        errs = {c: sigma * math.sqrt(d) / n for c, n in zip(g.classes, sizes, strict=True)}
        doc["class_mean_rms_error"][g.label_column] = errs
        smallest = min(zip(sizes, g.classes, strict=True))
        checks.append(
            SignalCheck(f"rows of class {g.label_column}={smallest[1]}", sigma, smallest[0])
        )
        checks.append(
            SignalCheck(f"mean of class {g.label_column}={smallest[1]}", errs[smallest[1]], bound)
        )
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


def moments_noise_preview(plan: MomentsPlan, rows: int | None = None) -> dict:
    """The preview of the plan's method: PCA or discriminant analysis."""
    if plan.label == pca.PROTOCOL:
        return pca_noise_preview(plan, rows)
    return discriminant_noise_preview(plan, rows)


def decoded(plan: MomentsPlan, totals: list[int]) -> moments.IntegerMoments:
    """A round's totals as moments (a bounded release's clipped-rows count set aside)."""
    totals, _ = split_clip_count(totals, plan.dp, plan.encoding.count_scale_bits)
    return moments.decode_totals(
        totals,
        len(plan.features),
        plan.groupings,
        plan.encoding.scale_bits,
        plan.encoding.count_scale_bits,
        noisy=plan.dp is not None,
    )


def pca_figures(result: pca.PcaResult | discriminant.DiscriminantResult) -> dict[str, float]:
    """The figures an eigen-release (PCA, DCA, LDA, MDR) states: its eigenvalues and the
    pooled means."""
    figures = {f"eigenvalue {i + 1}": v for i, v in enumerate(result.eigenvalues)}
    figures |= {f"mean of {f}": m for f, m in zip(result.features, result.mean, strict=True)}
    return figures


class MomentsProtocol(FederatedProtocol):
    name = "moments"
    takes_bounds = True
    request_type = MomentsRequest
    spec_type = MomentsSpec

    def result_file(self, label: str) -> str | None:
        """pca.json; the discriminant methods share dca.json."""
        return {"pca": "pca.json", "dca": "dca.json", "lda": "dca.json", "mdr": "dca.json"}.get(
            label
        )

    def output_file(self, request: MomentsRequest) -> str:
        return self.result_file(request.method) or f"{request.method}.json"

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: MomentsRequest, common: Common) -> MomentsPlan:
        method = request.method or pca.PROTOCOL
        if method not in METHODS:
            raise DataError(f"unknown method {method!r}; expected one of {METHODS}", field="method")
        features = check_features(tuple(request.features), "analyse")
        declared = tuple(_grouping(g, features) for g in request.groupings)
        needed = _LABELS_NEEDED[method]
        if len(declared) != needed:
            what = {
                0: "no label column",
                1: "one label column",
                2: "a utility and a privacy label column",
            }
            raise DataError(
                f"{method} takes {what[needed]}, got {len(declared)}", field="groupings"
            )
        if needed == 2 and declared[0].label_column == declared[1].label_column:
            raise DataError(
                "the utility and privacy labels must be different columns", field="groupings"
            )
        groupings = declared or (ALL_ROWS,)
        d = len(features)
        default_k = (
            min(2, d) if method == pca.PROTOCOL else min(d, max(1, len(declared[0].classes) - 1))
        )
        components = request.components or default_k
        if not 1 <= components <= d:
            raise DataError(f"components must be in 1..{d}, got {components}", field="components")
        self._check_standardize(request, method, common)
        min_owners = common.quorum()
        deadline = common.deadline()
        ridge = discriminant.Ridge(
            _ridge_value(request.rho, "rho", non_negative=True),
            _ridge_value(request.rho_prime, "rho_prime", non_negative=False),
        )
        # slots sized for the invited owners: the CSP sums at most one share of each
        max_owners = common.n_invited
        rotation_dimension = d if request.projection_only else 0
        dp_spec, sens = None, None
        if common.dp is None:
            enc = encoding(
                common.scale_bits or DEFAULT_SCALE_BITS,
                common.value_bound or DEFAULT_VALUE_BOUND,
                max_owners=max_owners,
                rotation_dimension=rotation_dimension,
            )
        else:
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            bounds = common.dp.release_bounds(features)
            if bounds and request.projection_only:
                raise DataError(
                    "per-column bounds are not available in projection-only mode (the CSP's "
                    "directions are of the scaled columns); give row_norm_bound",
                    field="bounds",
                )
            dp_spec, noise_bound, sens, _ = plan_dp(
                common.dp,
                features,
                lambda c: sensitivity(c, f, d, groupings, count_scale_bits=f),
                moments.n_values(d, groupings),
                f,
                min_owners,
            )
            c = dp_spec.row_norm_bound
            if method != pca.PROTOCOL:
                # the noisy S_W (or S_B of the privacy label) has spectral norm ~ 2 sqrt(d) sigma
                sigma = dp_spec.noise_std(min_owners, f)
                ridge = discriminant.Ridge(ridge.rho, ridge.rho_prime, 3 * math.sqrt(d) * sigma)
            # clipped rows have |x_i| <= C; the noise needs room in every slot
            enc = encoding(
                f,
                c,
                max_owners=max_owners,
                rotation_dimension=rotation_dimension,
                count_scale_bits=f,
                noise_bound=noise_bound,
            )
        return MomentsPlan(
            method,
            features,
            components,
            min_owners,
            deadline,
            request.standardize,
            groupings,
            declared,
            ridge,
            enc,
            request.projection_only,
            dp_spec,
            sens,
        )

    @staticmethod
    def _check_standardize(request: MomentsRequest, method: str, common: Common) -> None:
        if not request.standardize:
            return
        if method != pca.PROTOCOL:
            raise DataError("standardize applies to PCA only", field="standardize")
        if common.dp is not None:
            raise DataError("standardize is not available for DP releases", field="standardize")
        if request.projection_only:
            raise DataError(
                "standardize is not available in projection-only mode (correlation is not "
                "rotation-equivariant)",
                field="standardize",
            )

    def start(self, plan: MomentsPlan, job_id: str, invited: list[str]) -> dict:
        d = len(plan.features)
        return {"rotation": rotation.random_rotation(d) if plan.projection_only else None}

    def expected_round(
        self, plan: MomentsPlan, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """The rotation of a projection-only round is the aggregator's secret: owners check
        that it is a d x d orthogonal matrix (and the CSP that every owner got the same one)."""
        omega = None
        if plan.projection_only:
            omega = rotation.rotation_from_wire(received.rotation, len(plan.features))
        return self.next_round(plan, {"rotation": omega}, index)

    def next_round(self, plan: MomentsPlan, state: dict, index: int) -> RoundPlan:
        omega = state["rotation"]
        spec = MomentsSpec(
            method=plan.label,
            features=plan.features,
            groupings=tuple(LabelClasses(g.label_column or "", g.classes) for g in plan.declared),
            rotation=tuple(omega.ravel().tolist()) if omega is not None else (),
        )
        return RoundPlan(
            spec,
            plan.label,
            plan.encoding,
            plan.n_values,
            plan.dp,
            "projection" if plan.projection_only else "blinded",
            len(plan.features),
        )

    def projection_query(self, plan: MomentsPlan, state: dict, n_owners: int) -> ProjectionQuery:
        return ProjectionQuery(
            method=plan.label,
            dimension=len(plan.features),
            classes_per_grouping=tuple(len(g.classes) for g in plan.declared),
            components=plan.components,
            rho=plan.ridge.rho,
            rho_prime=plan.ridge.rho_prime,
            ridge_noise_floor=plan.ridge.noise_floor,
        )

    def finish_round(self, plan: MomentsPlan, state: dict, outcome: Outcome) -> Step:
        if outcome.projection is not None:
            return Step(self._projection_result(plan, state, outcome))
        start = time.perf_counter()
        totals = outcome.require_totals()
        result: pca.PcaResult | discriminant.DiscriminantResult = (
            self.pca_from_totals(plan, totals)
            if plan.label == pca.PROTOCOL
            else self.discriminant_from_totals(plan, totals)
        )
        outcome.timings["eigendecomposition_seconds"] = time.perf_counter() - start
        truth = None
        if plan.dp is not None:
            start = time.perf_counter()
            truth = round_truth(
                plan.dp,
                outcome,
                lambda t: self.release_figures(plan, t, outcome.n_owners),
                result.n_samples,
                plan.encoding.count_scale_bits,
            )
            outcome.timings["noise_bootstrap_seconds"] = time.perf_counter() - start
        dp = self._dp_facts(plan, outcome.n_owners, truth)
        if isinstance(result, pca.PcaResult):
            return Step(PcaRoundResult(**result.to_dict(), **outcome.facts(), dp=dp))
        return Step(DiscriminantRoundResult(**result.to_dict(), **outcome.facts(), dp=dp))

    def preview_data(
        self, plan: MomentsPlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's columns pairwise correlated: an eigenvalue whose eigenvector mixes
        several columns is noisier than one along a single column (up to 1.5x its variance),
        and real data's eigenvectors mix; independent columns would flatter."""
        names = list(plan.features)
        if len(names) < 2:
            return columns, ""
        mixed, said = dp_release.correlated_columns(columns, names, PREVIEW_CORRELATION)
        n_rows = len(mixed[names[0]])
        for g in plan.declared:  # DCA, LDA, MDR: classes of equal size, means apart
            k = len(g.classes)
            index = rng.integers(0, k, size=n_rows)
            shift = (index - (k - 1) / 2.0) * PREVIEW_CLASS_SHIFT
            for n in names:
                mixed[n] = mixed[n] + shift * columns[n].std()
            mixed[str(g.label_column)] = np.array(g.classes, dtype=object)[index]
            said += (
                f"; {g.label_column}'s {k} classes of equal size, each class's mean "
                f"{PREVIEW_CLASS_SHIFT:g} std above the previous one's on every column"
            )
        return columns | mixed, said

    def release_figures(self, plan: MomentsPlan, totals: list[int], n_owners: int) -> dict:
        if plan.label == pca.PROTOCOL:
            return pca_figures(self.pca_from_totals(plan, totals))
        return pca_figures(self.discriminant_from_totals(plan, totals))

    @staticmethod
    def discriminant_from_totals(
        plan: MomentsPlan, totals: list[int]
    ) -> discriminant.DiscriminantResult:
        """The DCA / LDA / MDR a round's totals give. A bounded release is solved in the
        scaled columns (the ridge is in their units) and its directions mapped back:
        w = H^-1 w' (the generalized eigenvalues are unchanged by the congruence H . H)."""
        agg = decoded(plan, totals)
        result = discriminant.from_aggregate(
            agg, plan.label, plan.groupings, list(plan.features), plan.components, plan.ridge
        )
        if plan.dp is not None and plan.dp.bounds:
            _, half = bounds_of.centers_halves(plan.dp.bounds)
            w = np.asarray(result.components, dtype=np.float64).T / half[:, None]
            w = pca.orient_components(w / np.linalg.norm(w, axis=0))
            result.components = [[float(c) for c in w[:, i]] for i in range(w.shape[1])]
            mean = bounds_of.unscale_mean(result.mean, plan.dp.bounds)
            result.mean = bounds_of.clip_to(mean, plan.dp.bounds).tolist()
        return result

    @staticmethod
    def pca_from_totals(plan: MomentsPlan, totals: list[int]) -> pca.PcaResult:
        """The PCA a round's totals give, in natural units (a bounded release is mapped back
        from its scaled columns: post-processing)."""
        agg = decoded(plan, totals)
        scatter, mean = moments.total_scatter(agg), moments.mean(agg)
        if plan.dp is not None and plan.dp.bounds:  # a noisy mean is kept within the bounds
            scatter = bounds_of.unscale_scatter(scatter, plan.dp.bounds)
            mean = bounds_of.clip_to(bounds_of.unscale_mean(mean, plan.dp.bounds), plan.dp.bounds)
        return pca.pca_from_scatter(
            scatter,
            mean,
            agg.n,
            list(plan.features),
            plan.components,
            plan.standardize,
            psd_project=plan.dp is not None,
        )

    def _projection_result(
        self, plan: MomentsPlan, state: dict, outcome: Outcome
    ) -> ProjectionOnlyResult:
        reply = outcome.require_projection()
        d, k = len(plan.features), plan.components
        rotated = np.array(reply.components, dtype=np.float64).reshape(k, d)
        start = time.perf_counter()
        comps = rotation.rotate_back(rotated, state["rotation"])
        outcome.timings["rotate_back_seconds"] = time.perf_counter() - start
        is_pca = plan.label == pca.PROTOCOL
        return ProjectionOnlyResult(
            protocol=plan.label,
            method=plan.label,
            mode="projection-only",
            features=list(plan.features),
            eigenvalues=list(reply.eigenvalues),
            components=comps.tolist(),
            n_samples=None,  # withheld: the aggregator learns only directions and eigenvalues
            explained_variance_ratio=list(reply.explained_variance_ratio) if is_pca else None,
            standardized=False if is_pca else None,
            classes=None if is_pca else list(plan.declared[0].classes),
            ridge=None if is_pca else dict(reply.ridge),
            privacy_classes=list(plan.declared[1].classes) if len(plan.declared) > 1 else None,
            **outcome.facts(),
            dp=self._dp_facts(plan, outcome.n_owners),
        )

    @staticmethod
    def _dp_facts(
        plan: MomentsPlan, n: int, truth: dp_release.Truth | None = None
    ) -> DpFacts | None:
        dp = plan.dp
        if dp is None or plan.sensitivity is None:
            return None
        return dp_facts(
            "distributed Skellam noise on the encoded statistics",
            dp,
            plan.sensitivity,
            truth,
            skellam_mu_aggregate=dp.aggregate_mu(n),
            noise_std_per_value=dp.noise_std(n, plan.encoding.scale_bits),
            note=(
                "every value clipped to its column's public bounds and scaled to [-1, 1], "
                if dp.bounds
                else ""
            )
            + "rows clipped to row_norm_bound at each owner; every owner charged its ledger",
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: MomentsSpec) -> list[str]:
        return [*spec.features, *(g.label_column for g in spec.groupings)]

    def request_columns(self, request: MomentsRequest) -> list[str]:
        return [*request.features, *(g.label_column for g in request.groupings)]

    def dimension(self, spec: MomentsSpec) -> int:
        return len(spec.features)

    def reveal_mode(self, spec: MomentsSpec) -> str:
        # rotated statistics: the CSP computes only directions, the aggregator never the sum
        return "projection" if spec.rotation else "blinded"

    def check(
        self, spec: MomentsSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None:
            raise ProtocolError("a moments round needs an encoding")
        d = len(spec.features)
        if spec.rotation and enc.rotation_dimension != d:
            raise ProtocolError("a rotated round needs a rotated encoding of the same dimension")
        require_bound(
            enc,
            data_bound(
                enc.value_bound,
                enc.max_rows_per_owner,
                enc.rotation_dimension,
                enc.scale_bits,
                enc.count_scale_bits,
            ),
        )
        if dp is None:
            return
        if site.uses_spark:
            raise DataError(
                'DP rounds are computed with the numpy engine only (engine = "spark" is set)'
            )
        require_same_count_scale(enc)
        groupings = _declared(spec) or [ALL_ROWS]
        verify_dp(
            dp,
            spec.features,
            self.dp_sensitivity(spec, enc, dp),
            moments.n_values(d, groupings),
            enc,
        )

    def dp_sensitivity(
        self, spec: MomentsSpec, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a moments round needs an encoding")
        groupings = _declared(spec) or [ALL_ROWS]
        d = len(spec.features)
        return sensitivity(dp.row_norm_bound, enc.scale_bits, d, groupings, enc.count_scale_bits)

    def describe(self, spec: MomentsSpec, dp: DpSpec | None) -> str:
        return f"{spec.method} on {len(spec.features)} features" + clip_note(dp)

    def share_values(
        self,
        spec: MomentsSpec,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        features = list(spec.features)
        declared = _declared(spec)
        mom, clipped = self._local_moments(features, declared, enc, dp, site)
        if spec.rotation:  # projection-only mode: send the moments of rotated rows
            omega = rotation.rotation_from_wire(spec.rotation, len(features))
            mom = rotation.rotate_moments(mom, omega)
        timings["statistics_seconds"] = time.perf_counter() - start
        values = moments.encode_moments(
            mom, enc.scale_bits, enc.data_bound, enc.max_rows_per_owner, enc.count_scale_bits
        )
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values

    @staticmethod
    def _local_moments(
        features, declared, enc, dp, site: SiteData
    ) -> tuple[moments.LocalMoments, np.ndarray]:
        """R and per-class sums/counts of this site's rows, and which rows were clipped; DP
        rounds clip (and, with public bounds, scale) every row (`clip_for_release`)."""
        groupings = declared or [ALL_ROWS]
        if site.uses_spark and dp is None:
            return site.spark_moments(features, declared, enc.value_bound), np.zeros(0, bool)
        table = site.read([*features, *(g.label_column for g in declared)])
        x = table.matrix(features)
        clipped = np.zeros(x.shape[0], dtype=bool)
        if dp is not None:
            x, clipped = clip_for_release(x, features, dp)
        enc.check_rows(x, features)
        index: list[np.ndarray | None] = [
            moments.class_indices(table.labels(str(g.label_column)), g) for g in declared
        ]
        return moments.local_moments(x, index or [None], groupings), clipped


PROTOCOL = registry.register(MomentsProtocol())
