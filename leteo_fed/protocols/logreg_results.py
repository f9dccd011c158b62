"""The results of federated logistic regression (`logreg`): the fit an iteration publishes, its
DP facts, and the preview of a DP job's noise, as functions of the plan and the Newton step."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import dp_release
from leteo_fed.protocols.dp_facts import preview_facts, truth_fields
from leteo_fed.protocols.iterative import COMPOSITION, IterativeJob, IterativePlan, job_epsilon
from leteo_fed.protocols.linreg_fit import FLOOR_FACTOR
from leteo_fed.protocols.logreg_math import (
    NewtonStep,
    coefficient_noise,
    hessian_floor,
    information,
    natural_units_map,
)
from leteo_fed.protocols.results import (
    EncodingFacts,
    IterationDpFacts,
    Result,
    RoundTimings,
    TermsTable,
    result_type,
)
from leteo_fed.protocols.round_types import Outcome

METHOD = "newton"
INTERCEPT = "intercept"
CI_LEVEL = 0.95
# preview: a coefficient moving the log-odds by more than this per feature standard deviation
# takes p from 0.7% to 99.3% across one std: a fit beyond it is (near) separation
LOGIT_SPAN = 10.0
PREVIEW_BASE_RATE = 0.25  # the preview's label: this share of rows in the positive class


@dataclass(frozen=True, kw_only=True)
class LogregIterationSummary:
    iteration: int
    round_id: str
    owners: list[str]
    coefficients: list[float]
    max_step: float
    max_abs_gradient: float
    seconds: float


@dataclass(frozen=True, kw_only=True)
class LogregDpFacts(IterationDpFacts):
    noise_std_per_value: float


@result_type
@dataclass(frozen=True, kw_only=True)
class LogregResult(TermsTable, Result):
    wire: ClassVar[str] = "logreg"
    test_statistic: ClassVar[str] = "z_statistics"
    protocol: str
    method: str
    job_id: str
    features: list[str]
    label_column: str
    positive_class: str
    n_rows: int
    n_positive: int
    terms: list[str]
    coefficients: dict[str, float]
    std_errors: dict[str, float]
    z_statistics: dict[str, float]
    p_values: dict[str, float]
    ci_level: float
    ci_lower: dict[str, float]
    ci_upper: dict[str, float]
    iterations_run: int
    max_iterations: int
    tolerance: float
    converged: bool
    coefficient_bound: float
    noise_std_errors: dict[str, float] | None = None
    iterations: list[LogregIterationSummary]
    round_id: str
    owners: list[str]
    declined: dict[str, str]
    encoding: EncodingFacts
    timings: RoundTimings
    dp: LogregDpFacts | None = None


# ------------------------------------------------------------------ the preview


def noise_preview(
    plan: IterativePlan,
    rows: int | None = None,
    feature_cov: Sequence[Sequence[float]] | None = None,
    feature_means: Sequence[float] | None = None,
    positive_rate: float = 0.5,
) -> dict:
    """What the noise of a DP job does to the coefficients, from public parameters only.

    Every released value carries Skellam noise of std sigma = sqrt(2 mu) / 2^f (per
    iteration's budget, with the quorum's shares). The error of each term is
    sigma sqrt(diag(H^-2)) (`coefficient_noise`) at H = rows x p (1 - p) E[x~ x~^T]: from the
    analyst's guesses of the features' covariance, their means and the positive rate if given,
    else the most spread clipped rows allow (C^2 / d I), means 0 and rate 1/2 (p (1 - p) = 1/4,
    its largest: the smallest error). Signal checks: the row count against its noise; the
    Hessian floor against H's smallest eigenvalue; each coefficient's error against
    LOGIT_SPAN / s_j (the intercept's against LOGIT_SPAN)."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    total = plan.dp_total or (doc["epsilon"], doc["delta"])
    features = plan.spec.features
    d = len(features)
    doc |= {
        "epsilon": total[0],
        "delta": total[1],
        "iterations": plan.spec.max_iterations,
        "accountant": "rdp",
        # one iteration alone at the job's delta; T of them compose to epsilon by RDP
        "epsilon_per_iteration": job_epsilon(plan, 1),
        "noise_std_per_value": sigma,
    }
    if rows is None:
        return doc
    if rows < d + 2:
        raise DataError(f"rows must be at least {d + 2} for {d} feature(s)", field="rows")
    if not 0.0 < positive_rate < 1.0:
        raise DataError(
            f"positive_rate must be in (0, 1), got {positive_rate}", field="positive_rate"
        )
    c = plan.dp.row_norm_bound  # type: ignore[union-attr]
    cov = (
        np.asarray(feature_cov, dtype=np.float64).reshape(d, d)
        if feature_cov is not None
        else np.eye(d) * (c * c / d)
    )
    m = np.asarray(feature_means, dtype=np.float64) if feature_means is not None else np.zeros(d)
    h = information(rows, cov, m, positive_rate)
    h_inv = np.linalg.inv(h)
    errs = coefficient_noise(h_inv, sigma)
    terms = [INTERCEPT, *features]
    doc["assumed_rows"] = rows
    doc["std_error"] = dict(zip(terms, errs.tolist(), strict=True))
    doc["sampling_std_error"] = dict(zip(terms, np.sqrt(np.diag(h_inv)).tolist(), strict=True))
    floor = hessian_floor(sigma, d + 1)
    doc["hessian_floor"] = floor
    checks = [
        SignalCheck("row count", sigma, float(rows)),
        SignalCheck("smallest eigenvalue of the Hessian", floor, float(np.linalg.eigvalsh(h)[0])),
        SignalCheck("intercept", float(errs[0]), LOGIT_SPAN),
    ]
    for j, f in enumerate(features):
        spread = math.sqrt(max(float(cov[j, j]), 0.0))
        largest = LOGIT_SPAN / spread if spread > 0 else math.inf
        checks.append(SignalCheck(f"coefficient of {f}", float(errs[1 + j]), largest))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


def fit_result(
    name: str,
    plan: IterativePlan,
    job: IterativeJob,
    iterations: list[LogregIterationSummary],
    converged: bool,
    outcome: Outcome,
    nstep: NewtonStep,
) -> LogregResult:
    """The fit after an iteration, as published: coefficients (in natural units with public
    bounds), their sampling errors from the last Hessian, z, p, the Wald intervals and, with
    DP, each term's noise error (first order) and what the release says of its noise."""
    spec = plan.spec
    sigma = plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits) if plan.dp else 0.0
    terms = [INTERCEPT, *spec.features]
    coef, cov = nstep.beta, nstep.hessian_inverse
    noise_cov = sigma * sigma * (cov @ cov)  # the noise's, to first order (coefficient_noise)
    if plan.dp is not None and plan.dp.bounds:  # fitted on scaled features: map back
        t = natural_units_map(plan.dp.bounds)
        coef, cov, noise_cov = t @ coef, t @ cov @ t.T, t @ noise_cov @ t.T
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, coef / np.where(se > 0, se, 1.0), np.nan)
    from scipy import stats as sps  # for p-values only: owners never load it

    p = 2.0 * sps.norm.sf(np.abs(z))
    q = float(sps.norm.ppf(0.5 + CI_LEVEL / 2))

    def by_term(values) -> dict[str, float]:
        return {k: float(v) for k, v in zip(terms, values, strict=True)}

    n_rows, n_positive = int(job.carry["n_rows"]), int(job.carry["n_positive"])
    noise_se, truth = None, None
    if plan.dp is not None:
        noise = np.sqrt(np.maximum(np.diag(noise_cov), 0.0))
        noise_se = by_term(noise)
        figures = {f"coefficient {k}": float(v) for k, v in zip(terms, coef, strict=True)}
        stated = {f"coefficient {k}": float(v) for k, v in zip(terms, noise, strict=True)}
        truth = dp_release.Truth(
            stated,
            [
                *dp_release.clipping_warning(job.clipped_rows, n_rows),
                *dp_release.buried(figures, stated),
            ],
            job.clipped_rows,
            figures,
        )
    facts = outcome.facts()
    return LogregResult(
        protocol=name,
        method=METHOD,
        job_id=job.job_id,
        features=list(spec.features),
        label_column=spec.label_column,
        positive_class=spec.positive_class,
        n_rows=n_rows,
        n_positive=n_positive,
        terms=terms,
        coefficients=by_term(coef),
        std_errors=by_term(se),
        z_statistics=by_term(z),
        p_values=by_term(p),
        ci_level=CI_LEVEL,
        ci_lower=by_term(coef - q * se),
        ci_upper=by_term(coef + q * se),
        iterations_run=len(iterations),
        max_iterations=spec.max_iterations,
        tolerance=plan.settings,
        converged=converged,
        coefficient_bound=spec.coefficient_bound,
        noise_std_errors=noise_se,
        iterations=list(iterations),
        round_id=facts["round_id"],
        owners=facts["owners"],
        declined=facts["declined"],
        encoding=facts["encoding"],
        timings=facts["timings"],
        dp=_dp_facts(plan, outcome.n_owners, len(iterations), nstep.floored, truth),
    )


def _dp_facts(
    plan: IterativePlan,
    n: int,
    iterations_run: int,
    floored: int,
    truth: dp_release.Truth | None = None,
) -> LogregDpFacts | None:
    dp = plan.dp
    if dp is None or plan.sensitivity is None or plan.dp_total is None:
        return None
    eps, delta = plan.dp_total
    return LogregDpFacts(
        mechanism="distributed Skellam noise on every gradient, Hessian and count sum",
        epsilon=eps,
        delta=delta,
        row_norm_bound=dp.row_norm_bound,
        quorum=dp.quorum,
        sensitivity_l1=plan.sensitivity.l1,
        sensitivity_l2=plan.sensitivity.l2,
        composition=COMPOSITION,
        accountant="rdp",
        iterations_budgeted=plan.spec.max_iterations,
        epsilon_per_iteration=job_epsilon(plan, 1),
        delta_per_iteration=dp.delta,
        epsilon_spent=job_epsilon(plan, iterations_run),
        delta_spent=delta if iterations_run else 0.0,
        skellam_mu_per_iteration=dp.mu,
        noise_std_per_value=dp.noise_std(n, plan.encoding.scale_bits),
        post_processing="eigenvalues of the noisy Hessian floored at "
        f"{FLOOR_FACTOR:g} sqrt(d + 1) sigma ({floored} of {len(plan.spec.features) + 1} raised "
        "in the last iteration); coefficients projected into +/-coefficient_bound; noisy "
        "counts rounded to whole rows",
        note=(
            "every feature clipped to its public bounds and scaled to [-1, 1], "
            if dp.bounds
            else ""
        )
        + f"features clipped to L2 norm {dp.row_norm_bound:g} at each owner; every owner "
        "charges its ledger once per iteration it takes part in; std_errors exclude the "
        "noise (see noise_std_errors)",
        **truth_fields(dp, truth),
    )


def preview_lines(doc: Mapping[str, Any], rows: int | None) -> list[str]:
    """What the job's noise does to each coefficient."""
    lines = [
        f"each released sum carries noise of std {doc['noise_std_per_value']:.4g} per "
        f"iteration (epsilon {doc['epsilon']:g} for the {doc['iterations']} iterations "
        f"together by Renyi composition ({doc['accountant']} accountant), "
        f"{doc['epsilon_per_iteration']:.4g} for one alone; features clipped to "
        f"{doc['row_norm_bound']:g})"
    ]
    if rows is None:
        return [*lines, "give `rows` N for the expected error of each coefficient"]
    for term, err in doc["std_error"].items():
        sampling = doc["sampling_std_error"][term]
        lines.append(
            f"  {term}: +/- {err:.4g} (1 std, from the noise; sampling error {sampling:.4g})"
        )
    lines.append(
        "  (for features spread as far as the clipping allows, means near 0 and half the "
        "rows positive: less spread or a rarer class is noisier)"
    )
    return lines


def preview_label(
    spec: Any, columns: dict[str, np.ndarray], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], str]:
    """The preview's label: positive with probability sigmoid(a + x'b), the features'
    log-odds of standard deviation 1 in equal parts and a base rate of PREVIEW_BASE_RATE
    (a label unrelated to the features would make every coefficient 0)."""
    x = np.column_stack([columns[f] for f in spec.features])
    z = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-300)
    logit = math.log(PREVIEW_BASE_RATE / (1 - PREVIEW_BASE_RATE)) + z.sum(axis=1) / math.sqrt(
        z.shape[1]
    )
    positive = rng.random(len(logit)) < 1.0 / (1.0 + np.exp(-logit))
    labels = np.where(positive, spec.positive_class, "other").astype(object)
    return columns | {spec.label_column: labels}, (
        f"{spec.label_column} is '{spec.positive_class}' for about "
        f"{PREVIEW_BASE_RATE:.0%} of rows, its log-odds rising by 1 std over the features "
        "in equal parts"
    )
