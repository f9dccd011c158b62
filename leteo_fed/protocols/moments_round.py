"""The moments protocols (PCA, DCA, LDA, MDR): the `moments_statistic.Moments` declaration run by
the secure-sum adapter, plus the projection-only mode.

Every owner sends R = sum x x^T and per-class sums and counts (`moments`); the aggregator
reveals the exact integer totals and solves the method's eigenproblem (`pca`, `discriminant`).
DP mode: owners clip rows to L2 norm C and add distributed Skellam noise (the adapter's).
Projection-only mode (`projection_only`): owners send the moments of rows rotated by a secret
orthogonal matrix the aggregator draws when the job starts; the CSP eigendecomposes the rotated
aggregate (`projection_query`) and only the aggregator can rotate the directions back
(`rotation`). Its encoding is sized for rotated rows and its shares are revealed to the CSP in
the "projection" mode only, both read by owners from the spec.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
)
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols import pca, registry, rotation
from leteo_fed.protocols.dp_plan import DpSpec
from leteo_fed.protocols.interface import ProjectionRounds
from leteo_fed.protocols.moments_results import ProjectionOnlyResult
from leteo_fed.protocols.moments_statistic import RIDGE_FLOOR, Moments
from leteo_fed.protocols.moments_statistic import LabelClasses as LabelClasses
from leteo_fed.protocols.moments_statistic import MomentsRequest as MomentsRequest
from leteo_fed.protocols.moments_statistic import MomentsSpec as MomentsSpec
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.round_types import Outcome, ProjectionQuery, RoundPlan, SiteData, Step
from leteo_fed.protocols.secure_sum import SecureSumProtocol, StatisticPlan
from leteo_fed.protocols.statistic import NoiseReport

DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
RESULT_FILES = {"pca": "pca.json", "dca": "dca.json", "lda": "dca.json", "mdr": "dca.json"}


def data_bound(value_bound: float, max_rows: int, widen: int, scale_bits: int, count_bits: int):
    """Largest |encoded statistic| of one owner: |R_ij| <= rows * B^2 (scaled), counts <= rows.

    A rotated row has ||x'|| = ||x|| <= sqrt(d) B, so rotated statistics satisfy
    |R'_ij| <= rows * d * B^2 and |V'_i| <= rows * sqrt(d) * B (`widen` = d). The blocks of
    `Moments` state the same bound."""
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


def ridge_noise_floor(plan: StatisticPlan) -> float:
    """A DP discriminant round's least ridge: the noisy S_W (or S_B of the privacy label) has
    spectral norm ~ 2 sqrt(d) sigma (sigma at the quorum); 0 for PCA and without DP."""
    if plan.dp is None or plan.spec.method == pca.PROTOCOL:
        return 0.0
    sigma = plan.dp.noise_std(plan.dp.quorum, plan.encoding.scale_bits)
    return RIDGE_FLOOR * math.sqrt(len(plan.spec.features)) * sigma


class MomentsProtocol(SecureSumProtocol, ProjectionRounds):
    """The adapter of `Moments`; its jobs are labelled by their method (pca, dca, lda, mdr)."""

    def __init__(self) -> None:
        super().__init__(Moments())

    def result_file(self, label: str) -> str | None:
        """pca.json; the discriminant methods share dca.json."""
        return RESULT_FILES.get(label)

    def output_file(self, request: Any) -> str:
        return self.result_file(request.method) or f"{request.method}.json"

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: MomentsRequest, common: Common) -> StatisticPlan:
        self.statistic.settings(request)  # the request's own errors first
        if request.standardize and common.dp is not None:
            raise DataError("standardize is not available for DP releases", field="standardize")
        bounded = common.dp is not None and common.dp.release_bounds(request.features)
        if request.projection_only and bounded:
            raise DataError(
                "per-column bounds are not available in projection-only mode (the CSP's "
                "directions are of the scaled columns); give row_norm_bound",
                field="bounds",
            )
        plan = super().plan(request, common)
        plan = dataclasses.replace(plan, label=plan.spec.method)
        if not request.projection_only:
            return plan
        enc = plan.encoding  # sized for rotated rows
        rotated = encoding(
            enc.scale_bits,
            enc.value_bound,
            enc.max_rows_per_owner,
            enc.max_owners,
            len(plan.spec.features),
            enc.count_scale_bits,
            enc.noise_bound,
        )
        return dataclasses.replace(plan, encoding=rotated)

    def start(self, plan: StatisticPlan, job_id: str, invited: list[str]) -> dict:
        d = len(plan.spec.features)
        return {
            "rotation": rotation.random_rotation(d) if plan.encoding.rotation_dimension else None
        }

    def expected_round(
        self, plan: StatisticPlan, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """The rotation of a projection-only round is the aggregator's secret: owners check
        that it is a d x d orthogonal matrix (and the CSP that every owner got the same one)."""
        omega = None
        if plan.encoding.rotation_dimension:
            omega = rotation.rotation_from_wire(received.rotation, len(plan.spec.features))
        return self.next_round(plan, {"rotation": omega}, index)

    def next_round(self, plan: StatisticPlan, state: Any, index: int) -> RoundPlan:
        omega = (state or {}).get("rotation")
        spec = dataclasses.replace(
            plan.spec, rotation=tuple(omega.ravel().tolist()) if omega is not None else ()
        )
        round_plan = super().next_round(dataclasses.replace(plan, spec=spec), None, index)
        return dataclasses.replace(round_plan, reveal=self.reveal_mode(spec))

    def projection_query(self, plan: StatisticPlan, state: Any, n_owners: int) -> ProjectionQuery:
        return ProjectionQuery(
            method=plan.spec.method,
            dimension=len(plan.spec.features),
            classes_per_grouping=tuple(len(g.classes) for g in plan.spec.groupings),
            components=plan.settings.components,
            rho=plan.settings.ridge.rho,
            rho_prime=plan.settings.ridge.rho_prime,
            ridge_noise_floor=ridge_noise_floor(plan),
        )

    def finish_round(self, plan: StatisticPlan, state: Any, outcome: Outcome) -> Step:
        if outcome.projection is not None:
            return Step(self._projection_result(plan, state, outcome))
        return super().finish_round(plan, state, outcome)

    def make_result(self, plan: StatisticPlan, fields: dict, outcome: Outcome, dp: Any) -> Any:
        seconds = outcome.timings.pop("statistics_seconds", None)
        if seconds is not None:
            outcome.timings["eigendecomposition_seconds"] = seconds
        result_type = self.statistic.result_class(plan.spec)  # type: ignore[attr-defined]
        return result_type(**fields, **outcome.facts(), dp=dp)

    def _projection_result(
        self, plan: StatisticPlan, state: Any, outcome: Outcome
    ) -> ProjectionOnlyResult:
        reply = outcome.require_projection()
        spec = plan.spec
        d, k = len(spec.features), plan.settings.components
        rotated = np.array(reply.components, dtype=np.float64).reshape(k, d)
        start = time.perf_counter()
        comps = rotation.rotate_back(rotated, state["rotation"])
        outcome.timings["rotate_back_seconds"] = time.perf_counter() - start
        is_pca = spec.method == pca.PROTOCOL
        report = NoiseReport(mechanism="distributed Skellam noise on the encoded statistics")
        return ProjectionOnlyResult(
            protocol=spec.method,
            method=spec.method,
            mode="projection-only",
            features=list(spec.features),
            eigenvalues=list(reply.eigenvalues),
            components=comps.tolist(),
            n_samples=None,  # withheld: the aggregator learns only directions and eigenvalues
            explained_variance_ratio=list(reply.explained_variance_ratio) if is_pca else None,
            standardized=False if is_pca else None,
            classes=None if is_pca else list(spec.groupings[0].classes),
            ridge=None if is_pca else dict(reply.ridge),
            privacy_classes=list(spec.groupings[1].classes) if len(spec.groupings) > 1 else None,
            **outcome.facts(),
            dp=self.release_facts(plan, outcome.n_owners, report=report),
        )

    # ---------------------------------------------------------------- owner side

    def request_columns(self, request: MomentsRequest) -> list[str]:
        """Every column the request names, as it names them (not validated: an owner reads no
        other, whatever the request is)."""
        return [*request.features, *(g.label_column for g in request.groupings)]

    def reveal_mode(self, spec: MomentsSpec) -> str:
        # rotated statistics: the CSP computes only directions, the aggregator never the sum
        return "projection" if spec.rotation else "blinded"

    def check(
        self, spec: MomentsSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        """A rotated round needs an encoding sized for rotated rows of its dimension (the
        blocks of a rotated spec state that bound); the rest is the adapter's check."""
        if enc is not None and (spec.rotation or enc.rotation_dimension):
            if not spec.rotation or enc.rotation_dimension != len(spec.features):
                raise ProtocolError(
                    "a rotated round needs a rotated encoding of the same dimension"
                )
            enc = dataclasses.replace(enc, rotation_dimension=0)
        super().check(spec, enc, dp, site)


PROTOCOL = registry.register(MomentsProtocol())
