"""Federated logistic regression with an intercept, by Newton iterations: one secure sum per step.

Rows are labelled y = 1 if their label column equals the public `positive_class`, else 0, and
x~ = [1, x]. Every iteration t publishes the coefficients beta_t (the intercept, then one per
feature; beta_1 = 0, signed in the request) and every owner sends, at beta_t, the secure sums

    g = sum (y - p) x~            (the gradient of the log-likelihood, d + 1 values)
    H = sum p (1 - p) x~ x~^T     (minus its Hessian: the upper triangle, (d+1)(d+2)/2 values)
    n = the row count             with p = 1 / (1 + exp(-x~^T beta_t))

encoded in fixed point like a moments share. The aggregator reveals the exact integer totals and
takes the Newton step beta_{t+1} = beta_t + H^-1 g, stopping once no coefficient moves more than
the tolerance (statsmodels' rule) or after the signed `max_iterations`. Standard errors are
sqrt(diag(H^-1)) of the last iteration's H, taken at beta_T while the coefficients are
beta_{T+1}: converged means |beta_{T+1} - beta_T| <= tolerance (1e-8), and H is smooth in beta, so
the two Hessians' inverses differ by O(tolerance) relative, far below the 1e-6 agreement with
statsmodels' Logit (which evaluates it at its final estimate); no extra round is needed.
z statistics, two-sided normal p-values and Wald confidence intervals follow.

Iteration 1 is at beta = 0, where p = 1/2 for every row, so g_0 = n_positive - n / 2: the class
count needs no extra value. Without DP, a Hessian singular to working precision (a constant or
collinear feature) and separated classes (every p within 1e-8 of 0 or 1, or a step beyond the
signed coefficient bound) are refused with an error saying so.

DP jobs clip every row's features to L2 norm C (the intercept's 1 is not clipped), so
||x~||_2 <= sqrt(1 + C^2); |y - p| < 1 and p (1 - p) <= 1/4 bound one row's contribution to g
and H whatever beta is (`Logreg.blocks`, checked by brute force). The job's (epsilon, delta) covers
the signed max_iterations together by Renyi composition (each iteration's Skellam noise is
calibrated with compositions = T, `skellam_plan`); every owner's ledger is charged once per
iteration it takes part in (its Skellam event; a basic ledger the increment of the RDP bound).
The noisy H's eigenvalues are floored (post-processing), the coefficients are projected into
the signed bound, and the noise's own error of each term, sigma sqrt(diag(H^-2)) to first
order, is reported beside the sampling errors.

The protocol is an `iterative.IterativeStatistic` (`Logreg`): the spec of an iteration carries
its coefficients, and the next iteration's follow from its totals by the Newton step
(`logreg_math`); `iterative_protocol.IterativeSecureSumProtocol` runs the job.

Every party learns: owners the published coefficients of each iteration; the CSP masked
plaintexts only; the aggregator the pooled g, H and n at each beta it chose (not one site's).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols import registry
from leteo_fed.protocols.iterative import (
    Iterate,
    IterativeJob,
    IterativePlan,
    IterativeStatistic,
)
from leteo_fed.protocols.iterative_protocol import IterativeSecureSumProtocol
from leteo_fed.protocols.logreg_math import (
    check_classes,
    check_coefficients,
    data_bound,
    local_statistics,
    n_terms,
    newton_step,
    pooled,
)
from leteo_fed.protocols.logreg_results import (
    INTERCEPT,
    LogregIterationSummary,
    LogregResult,
    fit_result,
    noise_preview,
    preview_label,
    preview_lines,
)
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.round_types import Outcome, SiteData
from leteo_fed.protocols.statistic import Block, Release, Rows, Totals

PROTOCOL_NAME = "logreg"
DEFAULT_MAX_ITERATIONS = 25
MAX_ITERATIONS = 100
DEFAULT_TOLERANCE = 1e-8  # statsmodels' Newton tolerance on the largest coefficient change
DEFAULT_COEFFICIENT_BOUND = 1000.0
MAX_COEFFICIENT_BOUND = 1e6


@dataclass(frozen=True)
class LogregRequest:
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated feature columns", "required": True}
    )
    label_column: str = field(default="", metadata={"help": "the class column", "required": True})
    positive_class: str = field(
        default="",
        metadata={
            "help": "the label value that counts as 1 (every other value counts as 0)",
            "metavar": "V",
            "required": True,
        },
    )
    max_iterations: int = field(  # 0: DEFAULT_MAX_ITERATIONS
        default=0,
        metadata={
            "help": "the most Newton iterations (rounds), signed in the request; a DP budget "
            f"is split over them (default: {DEFAULT_MAX_ITERATIONS}, at most {MAX_ITERATIONS})",
            "metavar": "N",
        },
    )
    tolerance: float = field(  # 0: DEFAULT_TOLERANCE
        default=0.0,
        metadata={
            "help": "stop once no coefficient moves more than this (default: "
            f"{DEFAULT_TOLERANCE:g})"
        },
    )
    coefficient_bound: float = field(  # 0: DEFAULT_COEFFICIENT_BOUND
        default=0.0,
        metadata={
            "help": "owners refuse coefficients beyond +/- this; without DP a step beyond it "
            f"is refused as separation (default: {DEFAULT_COEFFICIENT_BOUND:g})"
        },
    )


@dataclass(frozen=True)
class LogregIteration:
    job_id: str
    iteration: int
    max_iterations: int
    features: tuple[str, ...]
    label_column: str
    positive_class: str
    coefficients: tuple[float, ...]
    coefficient_bound: float


# ------------------------------------------------------------------ the statistic


def _check_request(request: LogregRequest) -> tuple[tuple[str, ...], int, float]:
    features = check_features(tuple(request.features), "regress on")
    label = request.label_column
    if not label:
        raise DataError("label_column is empty: name the class column", field="label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="label_column")
    if INTERCEPT in features:
        raise DataError(
            f"a feature may not be named '{INTERCEPT}' (the result's name of the constant term)",
            field="features",
        )
    if not request.positive_class:
        raise DataError(
            "positive_class is empty: name the label value that counts as 1",
            field="positive_class",
        )
    iterations = request.max_iterations or DEFAULT_MAX_ITERATIONS
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise DataError(
            f"max_iterations must be in 1..{MAX_ITERATIONS}, got {iterations}",
            field="max_iterations",
        )
    bound = request.coefficient_bound or DEFAULT_COEFFICIENT_BOUND
    if not (math.isfinite(bound) and 0 < bound <= MAX_COEFFICIENT_BOUND):
        raise DataError(
            f"coefficient_bound must be in (0, {MAX_COEFFICIENT_BOUND:g}], got {bound}",
            field="coefficient_bound",
        )
    return features, iterations, float(bound)


class Logreg(IterativeStatistic):
    """Logistic regression by Newton iterations (see the module's docstring)."""

    name = PROTOCOL_NAME
    request_type = LogregRequest
    spec_type = LogregIteration
    result_type = LogregResult
    output_file = "result.json"
    plot_file = "coefficients.png"
    summary = ("job_id", "owners", "n_rows", "iterations_run", "converged") + (
        "coefficients",
        "std_errors",
    )
    help = "logistic regression (Newton iterations) across the owners"
    description = (
        "Logistic regression of (`label_column` == `positive_class`) on `features`, with an\n"
        "intercept, by Newton iterations: each iteration is one round in which every owner sends,\n"
        "at the published coefficients, the Paillier-encrypted sums of the gradient (y - p) [1, x]\n"
        "and the Hessian p (1 - p) [1, x][1, x]^T of its rows; the aggregator learns only the pooled\n"
        "sums and takes the Newton step, until no coefficient moves more than `tolerance` or after\n"
        "`max_iterations`. Writes OUT/result.json (coefficients, standard errors, z statistics,\n"
        "p-values, 95% confidence intervals, the iterations) and OUT/coefficients.png (each\n"
        "coefficient with its interval).\n"
        "\n"
        "With `dp_epsilon` the job is (epsilon, delta)-DP: the budget covers `max_iterations`\n"
        "together (every owner is charged once per iteration it takes part in); every owner clips\n"
        "its rows' features to `row_norm_bound` (L2) and adds its share of Skellam noise.\n"
        "See docs/logistic-regression.md.\n"
    )
    iterations_field = "max_iterations"
    title = "logreg"
    default_iterations = DEFAULT_MAX_ITERATIONS
    round_help = ("owners needed for each iteration", "deadline of each iteration in seconds")
    noise_of = "each coefficient"

    # ---------------------------------------------------------------- what is asked

    def spec(self, request: LogregRequest) -> LogregIteration:
        """Iteration 1: at beta = 0, signed in the request."""
        features, iterations, bound = _check_request(request)
        return LogregIteration(
            job_id="",
            iteration=1,
            max_iterations=iterations,
            features=features,
            label_column=request.label_column,
            positive_class=request.positive_class,
            coefficients=(0.0,) * n_terms(len(features)),
            coefficient_bound=bound,
        )

    def settings(self, request: LogregRequest) -> float:
        """The tolerance: the aggregator's alone (when to stop)."""
        tol = request.tolerance or DEFAULT_TOLERANCE
        if not (math.isfinite(tol) and tol > 0):
            raise DataError(f"tolerance must be a finite number > 0, got {tol}", field="tolerance")
        return float(tol)

    def request_columns(self, request: LogregRequest) -> list[str]:
        return [*request.features, request.label_column]

    def features(self, spec: LogregIteration) -> tuple[str, ...]:
        return tuple(spec.features)

    def other_columns(self, spec: LogregIteration) -> tuple[str, ...]:
        return (spec.label_column,)

    def check_spec(self, spec: LogregIteration) -> None:
        check_coefficients(
            spec.coefficients, len(spec.features), spec.coefficient_bound, "coefficients"
        )

    def follow(self, plan: IterativePlan, spec: LogregIteration, received: Any) -> LogregIteration:
        """A later iteration's coefficients, as the aggregator computed them: their count,
        finiteness and the signed bound checked."""
        beta = check_coefficients(
            received.coefficients, len(spec.features), spec.coefficient_bound, "coefficients"
        )
        return dataclasses.replace(spec, coefficients=tuple(float(b) for b in beta))

    def check_site(self, site: SiteData) -> None:
        if site.uses_spark:
            raise DataError(
                "logistic-regression rounds are computed with the numpy engine only (engine = "
                '"spark" is set)'
            )

    def describe(self, spec: LogregIteration) -> str:
        return (
            f"logreg job {spec.job_id} iteration {spec.iteration}/{spec.max_iterations}: "
            f"{spec.label_column} = {spec.positive_class} on {len(spec.features)} feature(s)"
        )

    # ---------------------------------------------------------------- what an owner sends

    def blocks(self, spec: LogregIteration, bound: float) -> tuple[Block, ...]:
        """g, H's upper triangle, the row count. At a bound b on every feature value a row
        adds at most B = max(b, 1) to g (|y - p| < 1, x~ holds a 1) and B^2 / 4 to H; DP
        rounds clip features to L2 norm C, so s^2 = ||x~||_2^2 <= 1 + C^2 and
        ||x~||_1 <= 1 + sqrt(d) C =: a: g moves by L2 <= s, L1 <= a; H by
        L2 <= |x~ x~^T|_F / 4 = s^2 / 4, L1 <= (a^2 + s^2) / 8
        (sum_{i<=j} |u_i u_j| = ((sum |u_i|)^2 + |u|^2) / 2)."""
        d = len(spec.features)
        k = n_terms(d)
        b = max(bound, 1.0)
        s2 = 1.0 + bound * bound
        a = 1.0 + math.sqrt(d) * bound
        return (
            Block("gradient", k, b, a, math.sqrt(s2)),
            Block("hessian", k * (k + 1) // 2, b * b / 4, (a * a + s2) / 8, s2 / 4),
            Block("rows", 1, 1.0, 1.0, 1.0, kind="count"),
        )

    def share_bound(
        self, spec: Any, value_bound: float, max_rows: int, scale_bits: int, count_bits: int
    ) -> int:
        return data_bound(value_bound, max_rows, scale_bits, count_bits)

    def sums(self, spec: LogregIteration, rows: Rows) -> Mapping[str, np.ndarray]:
        """g, H and n of this site's rows at the published coefficients."""
        labels = np.asarray(rows.labels(spec.label_column), dtype=object)
        if len(labels) != rows.n:
            raise DataError(
                f"label column '{spec.label_column}' has {len(labels)} values, "
                f"the features {rows.n}"
            )
        y = (labels == spec.positive_class).astype(np.float64)
        g, h = local_statistics(rows.x, y, np.asarray(spec.coefficients, dtype=np.float64))
        return {"gradient": g, "hessian": h[np.triu_indices(len(g))], "rows": np.array([rows.n])}

    # ---------------------------------------------------------------- what the totals give

    def iterate(
        self,
        plan: IterativePlan,
        job: IterativeJob,
        spec: LogregIteration,
        totals: Totals,
        release: Release,
        outcome: Outcome,
    ) -> Iterate:
        """The Newton step from the revealed sums; every iteration publishes the fit so far."""
        start = time.perf_counter()
        d = len(spec.features)
        sums = pooled(totals, d, release.noisy)
        index = len(job.records) + 1
        if index == 1:  # at beta = 0: p = 1/2, so g_0 = n_positive - n / 2
            positives = round(float(sums.gradient[0]) + sums.n / 2)
            job.carry = {"n_rows": sums.n, "n_positive": min(max(positives, 0), sums.n)}
            if not release.noisy:
                check_classes(
                    spec.label_column, spec.positive_class, sums.n, job.carry["n_positive"], d
                )
        beta = np.asarray(spec.coefficients, dtype=np.float64)
        nstep = newton_step(beta, sums, spec.coefficient_bound, release.noisy, release.noise_std)
        outcome.timings["newton_seconds"] = time.perf_counter() - start
        max_step = float(np.max(np.abs(nstep.step)))
        record = LogregIterationSummary(
            iteration=index,
            round_id=outcome.round_id,
            owners=sorted(outcome.submitted),
            coefficients=nstep.beta.tolist(),
            max_step=max_step,
            max_abs_gradient=float(np.max(np.abs(sums.gradient))),
            seconds=time.perf_counter() - job.opened,
        )
        converged = max_step <= plan.settings
        result = fit_result(self.name, plan, job, [*job.records, record], converged, outcome, nstep)
        return Iterate(
            record,
            dataclasses.replace(spec, coefficients=tuple(float(b) for b in nstep.beta)),
            converged,
            result,
            f"largest coefficient change {max_step:.6g}",
        )

    def notes(self, result: Mapping[str, Any]) -> list[str]:
        """A job that stopped at its limit says so."""
        if result["converged"]:
            return []
        return [
            f"warning: not converged after {result['iterations_run']} iteration(s) (the last "
            f"step moved a coefficient by {result['iterations'][-1]['max_step']:.3g}); raise "
            "`max_iterations`" + (" or accept the noise floor" if result.get("dp") else "")
        ]

    # ---------------------------------------------------------------- snapshots

    def keep(self, job: IterativeJob) -> dict[str, Any]:
        return {
            "beta": [float(b) for b in job.spec.coefficients],
            "n_rows": int(job.carry.get("n_rows", 0)),
            "n_positive": int(job.carry.get("n_positive", 0)),
        }

    def resume(self, plan: IterativePlan, job: IterativeJob, doc: Mapping[str, Any]) -> None:
        spec = plan.spec
        beta = check_coefficients(doc["beta"], len(spec.features), spec.coefficient_bound, "beta")
        job.spec = dataclasses.replace(job.spec, coefficients=tuple(float(b) for b in beta))
        job.carry = {"n_rows": int(doc["n_rows"]), "n_positive": int(doc["n_positive"])}

    def record(self, doc: Mapping[str, Any]) -> LogregIterationSummary:
        return LogregIterationSummary(**doc)

    # ---------------------------------------------------------------- the preview

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        return preview_lines(doc, rows)

    def preview_data(
        self, spec: LogregIteration, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        return preview_label(spec, columns, rng)


PROTOCOL = registry.register(IterativeSecureSumProtocol(Logreg()))
