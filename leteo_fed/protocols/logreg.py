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
and H whatever beta is (`sensitivity`, checked by brute force). The job's (epsilon, delta) covers
the signed max_iterations together by Renyi composition (each iteration's Skellam noise is
calibrated with compositions = T, `skellam_plan`); every owner's ledger is charged once per
iteration it takes part in (its Skellam event; a basic ledger the increment of the RDP bound). The noisy H's eigenvalues are floored (post-processing), the
coefficients are projected into the signed bound, and the noise's own error of each term,
sigma sqrt(diag(H^-2)) to first order, is reported beside the sampling errors.

Every party learns: owners the published coefficients of each iteration; the CSP masked
plaintexts only; the aggregator the pooled g, H and n at each beta it chose (not one site's).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.packing import encode_fixed
from leteo_fed.encoding.share import ShareEncoding, check_parameters, require_bound
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import dp_release, kmeans, moments_round, registry
from leteo_fed.protocols.dp_facts import clip_note, preview_facts, truth_fields
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    clip_count_value,
    clip_for_release,
    plan_dp,
    require_same_count_scale,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.interface import (
    MultiRoundJob,
    SecureSumRounds,
)
from leteo_fed.protocols.linreg_fit import COLLINEAR_RCOND, FLOOR_FACTOR, floor_eigenvalues
from leteo_fed.protocols.requests import Common, check_features
from leteo_fed.protocols.results import (
    EncodingFacts,
    ReleaseNoiseFacts,
    Result,
    RoundTimings,
    result_type,
)
from leteo_fed.protocols.round_types import Outcome, RoundPlan, SiteData, Step

PROTOCOL_NAME = "logreg"
PREVIEW_BASE_RATE = 0.25  # the preview's label: this share of rows in the positive class
METHOD = "newton"
INTERCEPT = "intercept"
CI_LEVEL = 0.95
DEFAULT_MAX_ITERATIONS = 25
MAX_ITERATIONS = 100
DEFAULT_TOLERANCE = 1e-8  # statsmodels' Newton tolerance on the largest coefficient change
DEFAULT_COEFFICIENT_BOUND = 1000.0
MAX_COEFFICIENT_BOUND = 1e6
DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
# without DP: sum p (1 - p) below this x n means every row is predicted with certainty
SEPARATION_WEIGHT = 1e-8
# preview: a coefficient moving the log-odds by more than this per feature standard deviation
# takes p from 0.7% to 99.3% across one std: a fit beyond it is (near) separation
LOGIT_SPAN = 10.0
SNAPSHOT_VERSION = 1


@dataclass(frozen=True)
class LogregRequest:
    features: tuple[str, ...] = ()
    label_column: str = ""
    positive_class: str = ""
    max_iterations: int = 0  # 0: DEFAULT_MAX_ITERATIONS
    tolerance: float = 0.0  # 0: DEFAULT_TOLERANCE
    coefficient_bound: float = 0.0  # 0: DEFAULT_COEFFICIENT_BOUND


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
class LogregDpFacts(ReleaseNoiseFacts):
    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    composition: str
    accountant: str
    iterations_budgeted: int
    epsilon_per_iteration: float
    delta_per_iteration: float
    epsilon_spent: float
    delta_spent: float
    skellam_mu_per_iteration: float
    noise_std_per_value: float
    post_processing: str
    note: str


@result_type
@dataclass(frozen=True, kw_only=True)
class LogregResult(Result):
    wire: ClassVar[str] = "logreg"
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

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per term: coefficient, standard error, z, p and the confidence interval."""
        cols = {
            name: [values[t] for t in self.terms]
            for name, values in (
                ("coefficient", self.coefficients),
                ("std_error", self.std_errors),
                ("z_statistic", self.z_statistics),
                ("p_value", self.p_values),
                ("ci_lower", self.ci_lower),
                ("ci_upper", self.ci_upper),
            )
        }
        return cols, list(self.terms), "term"


@dataclass(frozen=True)
class LogregPlan:
    features: tuple[str, ...]
    label_column: str
    positive_class: str
    max_iterations: int
    tolerance: float
    coefficient_bound: float
    min_owners: int
    deadline_seconds: float  # per iteration
    encoding: ShareEncoding
    dp: DpSpec | None = None  # per iteration: (epsilon / T, delta / T)
    dp_total: tuple[float, float] | None = None  # the job's (epsilon, delta)
    sensitivity: noise.Sensitivity | None = None
    label: str = PROTOCOL_NAME


@dataclass
class LogregState:
    job_id: str
    invited: list[str]
    beta: np.ndarray  # the coefficients the next iteration is computed at
    iterations: list[LogregIterationSummary] = field(default_factory=list)
    n_rows: int = 0
    n_positive: int = 0
    clipped_rows: float | None = None  # bounded DP: the first iteration's noisy count
    converged: bool = False
    started: float = field(default_factory=time.perf_counter)
    opened: float = field(default_factory=time.perf_counter)


# ------------------------------------------------------------------ encoding and statistics


def n_terms(d: int) -> int:
    return d + 1


def n_values(d: int) -> int:
    """The gradient (d + 1), the Hessian's upper triangle and the row count."""
    k = n_terms(d)
    return k + k * (k + 1) // 2 + 1


def data_bound(value_bound: float, max_rows: int, scale_bits: int, count_scale_bits: int) -> int:
    """Largest |encoded value| of one owner: with B = max(value_bound, 1) (x~ holds a 1),
    |g_j| <= rows B and |H_ij| <= rows B^2 / 4, both below rows B^2 (scaled); the count rows."""
    return moments_round.data_bound(
        max(value_bound, 1.0), max_rows, 0, scale_bits, count_scale_bits
    )


def encoding(
    scale_bits: int,
    value_bound: float,
    max_owners: int,
    count_scale_bits: int = 0,
    noise_bound: int = 0,
    max_rows_per_owner: int = moments_round.DEFAULT_MAX_ROWS_PER_OWNER,
) -> ShareEncoding:
    check_parameters(scale_bits, value_bound, max_rows_per_owner, max_owners, count_scale_bits)
    return ShareEncoding(
        scale_bits=scale_bits,
        value_bound=value_bound,
        data_bound=data_bound(value_bound, max_rows_per_owner, scale_bits, count_scale_bits),
        max_rows_per_owner=max_rows_per_owner,
        max_owners=max_owners,
        count_scale_bits=count_scale_bits,
        noise_bound=noise_bound,
    )


def local_statistics(x: np.ndarray, y: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, ...]:
    """(g, H) of these rows at beta: sum (y - p) x~ and sum p (1 - p) x~ x~^T."""
    xt = np.column_stack([np.ones(len(x)), np.asarray(x, dtype=np.float64)])
    # the logistic function as exp(-log(1 + e^-z)): no overflow for any finite beta, and no
    # SciPy in the owner agents that compute this
    p = np.exp(-np.logaddexp(0.0, -(xt @ beta)))
    g = xt.T @ (y - p)
    h = (xt * (p * (1.0 - p))[:, None]).T @ xt
    return g, h


def encode_statistics(g: np.ndarray, h: np.ndarray, rows: int, enc: ShareEncoding) -> list[int]:
    """g, H's upper triangle (row by row), then the count at 2^count_scale_bits; refuses
    (EncodingError) a value beyond the encoding's bound and more rows than it declares."""
    if rows > enc.max_rows_per_owner:
        raise DataError(
            f"{rows} rows exceed the round's max_rows_per_owner {enc.max_rows_per_owner}",
            rule="rows",
        )
    iu = np.triu_indices(len(g))
    values = encode_fixed(
        np.concatenate([g, h[iu]]), enc.scale_bits, enc.data_bound, "gradient and Hessian sums"
    )
    return [*values, rows << enc.count_scale_bits]


@dataclass(frozen=True)
class Totals:
    gradient: np.ndarray
    hessian: np.ndarray
    n: int


def decode_totals(totals: Sequence[int], d: int, enc: ShareEncoding, noisy: bool) -> Totals:
    """The exact integer totals in real units; a noisy count rounded to whole rows (>= 0)."""
    k = n_terms(d)
    if len(totals) != n_values(d):
        raise ProtocolError(f"a logreg total has {len(totals)} values, expected {n_values(d)}")
    f = enc.scale_bits
    vals = np.array([math.ldexp(float(v), -f) for v in totals[:-1]])
    iu = np.triu_indices(k)
    h = np.zeros((k, k))
    h[iu] = vals[k:]
    h = h + np.triu(h, 1).T
    count = totals[-1] / 2**enc.count_scale_bits
    n = max(0, round(count)) if noisy else int(totals[-1]) >> enc.count_scale_bits
    return Totals(vals[:k], h, n)


# ------------------------------------------------------------------ differential privacy


def sensitivity(row_norm_bound: float, scale_bits: int, d: int) -> noise.Sensitivity:
    """L1/L2 sensitivity, in integer units, of one owner's share when one row is added or
    removed, at any beta (F = 2^f; counts at the same scale; x~ = [1, x], ||x||_2 <= C, so
    s^2 = ||x~||_2^2 <= 1 + C^2 and ||x~||_1 <= 1 + sqrt(d) C =: a):
      g moves by (y - p) x~ with |y - p| < 1:        L2 <= s F + sqrt(k), L1 <= a F + k;
      H moves by p (1 - p) x~ x~^T, p (1 - p) <= 1/4: its upper triangle has
        L2 <= |x~ x~^T|_F / 4 = s^2 F / 4 (+ sqrt(T)), L1 <= (a^2 + s^2) F / 8 (+ T)
        (sum_{i<=j} |u_i u_j| = ((sum |u_i|)^2 + |u|^2) / 2);
      the count moves by F exactly.
    The sqrt(k), k, sqrt(T), T are the rounding slack (|round(aF) - round(bF)| <= |a - b| F + 1);
    k = d + 1, T = k (k + 1) / 2. L1 is capped by sqrt(n_values) L2."""
    c = float(row_norm_bound)
    if not (math.isfinite(c) and c > 0):
        raise DataError(f"row_norm_bound must be a positive number, got {row_norm_bound}")
    f = float(2**scale_bits)
    k = n_terms(d)
    t = k * (k + 1) // 2
    s2 = 1.0 + c * c
    a = 1.0 + math.sqrt(d) * c
    l2_g = math.sqrt(s2) * f + math.sqrt(k)
    l2_h = s2 * f / 4 + math.sqrt(t)
    l2 = math.sqrt(l2_g**2 + l2_h**2 + f**2)
    l1 = (a * f + k) + ((a * a + s2) * f / 8 + t) + f
    return noise.Sensitivity(l1=min(l1, math.sqrt(n_values(d)) * l2), l2=l2)


def hessian_floor(sigma: float, k: int) -> float:
    """FLOOR_FACTOR sqrt(k) sigma: a symmetric k x k matrix of iid noise of std sigma has
    spectral norm ~ 2 sqrt(k) sigma; an eigenvalue of the noisy H below it is one the noise
    alone could have made from 0."""
    return FLOOR_FACTOR * math.sqrt(k) * sigma


def coefficient_noise(hessian_inverse: np.ndarray, sigma: float) -> np.ndarray:
    """The std of each term's error caused by noise of std sigma on every released value, to
    first order: near the optimum the Newton step is H^-1 (g + e), and the Hessian's noise
    multiplies g ~ 0, so the error is H^-1 e with covariance sigma^2 H^-2."""
    h2 = hessian_inverse @ hessian_inverse
    return sigma * np.sqrt(np.maximum(np.diag(h2), 0.0))


def information(
    rows: int, feature_cov: np.ndarray, feature_means: np.ndarray, positive_rate: float
) -> np.ndarray:
    """rows x E[p (1 - p) x~ x~^T] with p (1 - p) taken constant at the base rate's."""
    w = positive_rate * (1.0 - positive_rate)
    m = np.asarray(feature_means, dtype=np.float64)
    second = np.asarray(feature_cov, dtype=np.float64) + np.outer(m, m)
    top = np.concatenate([[1.0], m])
    return rows * w * np.vstack([top, np.column_stack([m, second])])


def noise_preview(
    plan: LogregPlan,
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
    d = len(plan.features)
    doc |= {
        "epsilon": total[0],
        "delta": total[1],
        "iterations": plan.max_iterations,
        "accountant": "rdp",
        # one iteration alone at the job's delta; T of them compose to epsilon by RDP
        "epsilon_per_iteration": _rdp_epsilon(plan, 1),
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
    terms = [INTERCEPT, *plan.features]
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
    for j, f in enumerate(plan.features):
        spread = math.sqrt(max(float(cov[j, j]), 0.0))
        largest = LOGIT_SPAN / spread if spread > 0 else math.inf
        checks.append(SignalCheck(f"coefficient of {f}", float(errs[1 + j]), largest))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


# ------------------------------------------------------------------ the Newton step


@dataclass(frozen=True)
class NewtonStep:
    beta: np.ndarray  # the new coefficients
    step: np.ndarray
    hessian_inverse: np.ndarray  # at the iteration's coefficients (after any floor)
    floored: int = 0


def newton_step(
    beta: np.ndarray,
    totals: Totals,
    bound: float,
    noisy: bool,
    sigma: float = 0.0,
) -> NewtonStep:
    """beta + H^-1 g. Without DP a singular H or separated classes are refused; with DP the
    noisy H's eigenvalues are floored (`hessian_floor`) and the result projected into
    [-bound, bound] (post-processing)."""
    h, k = totals.hessian, len(beta)
    floored = 0
    if noisy:
        h, floored = floor_eigenvalues(h, hessian_floor(sigma, k))
    else:
        if not totals.hessian[0, 0] > SEPARATION_WEIGHT * max(totals.n, 1):
            raise DataError(
                "the classes are separated: every row is predicted with certainty (sum of "
                "p (1 - p) is 0 to working precision), so the coefficients have no finite "
                "maximum-likelihood estimate; drop the separating feature(s)"
            )
    evals = np.linalg.eigvalsh(h)
    try:
        if not evals[0] > evals[-1] * k * COLLINEAR_RCOND:
            raise np.linalg.LinAlgError
        chol = np.linalg.cholesky(h)
    except np.linalg.LinAlgError:
        raise DataError(
            "the Hessian is singular to working precision: a feature is constant or collinear "
            "with others, or the classes are (quasi-)separated; drop a feature"
        ) from None
    chol_inv = np.linalg.inv(chol)
    h_inv = chol_inv.T @ chol_inv
    h_inv = (h_inv + h_inv.T) / 2
    step = h_inv @ totals.gradient
    new = beta + step
    if not noisy and not np.all(np.abs(new) <= bound):
        worst = float(np.max(np.abs(new)))
        raise DataError(
            f"a Newton step takes a coefficient to {worst:.4g}, beyond the bound {bound:g}: the "
            "classes are (quasi-)separated, or the features need rescaling (or a larger "
            "coefficient_bound)"
        )
    if noisy:
        new = np.clip(new, -bound, bound)
    return NewtonStep(new, new - beta, h_inv, floored)


def check_coefficients(values: Sequence[float], d: int, bound: float, name: str) -> np.ndarray:
    """Published coefficients: d + 1 finite numbers within +/- bound."""
    beta = np.asarray(values, dtype=np.float64)
    if beta.shape != (d + 1,):
        raise DataError(f"{name} has {beta.size} value(s), expected {d + 1}", field=name)
    if not np.all(np.isfinite(beta)):
        raise DataError(f"{name} holds a non-finite value", field=name)
    if not np.all(np.abs(beta) <= bound):
        raise DataError(f"{name} holds a value beyond the bound +/-{bound:g}", field=name)
    return beta


# ------------------------------------------------------------------ the protocol


def _check_request(request: LogregRequest) -> tuple[tuple[str, ...], int, float, float]:
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
    tol = request.tolerance or DEFAULT_TOLERANCE
    if not (math.isfinite(tol) and tol > 0):
        raise DataError(f"tolerance must be a finite number > 0, got {tol}", field="tolerance")
    bound = request.coefficient_bound or DEFAULT_COEFFICIENT_BOUND
    if not (math.isfinite(bound) and 0 < bound <= MAX_COEFFICIENT_BOUND):
        raise DataError(
            f"coefficient_bound must be in (0, {MAX_COEFFICIENT_BOUND:g}], got {bound}",
            field="coefficient_bound",
        )
    return features, iterations, float(tol), float(bound)


def _rdp_epsilon(plan: LogregPlan, rounds: int) -> float:
    """Epsilon at the job's delta of `rounds` iterations with the plan's noise (RDP)."""
    dp, sens = plan.dp, plan.sensitivity
    if dp is None or sens is None:
        raise DataError("a preview is of DP noise: give dp_epsilon", field="dp_epsilon")
    return kmeans.rdp_epsilon(dp.mu, sens, dp.delta, rounds)


def natural_units_map(bounds: Sequence[ColumnBounds]) -> np.ndarray:
    """T with [b0, b] = T [b0', b'] for features scaled x' = (x - c) / h: the logit
    b0' + sum b'_j (x_j - c_j) / h_j gives b_j = b'_j / h_j and b0 = b0' - sum b'_j c_j / h_j
    (a logistic fit is equivariant to affine maps of its features)."""
    center, half = bounds_of.centers_halves(bounds)
    d = len(center)
    t = np.zeros((d + 1, d + 1))
    t[0, 0] = 1.0
    t[0, 1:] = -center / half
    t[1:, 1:] = np.diag(1.0 / half)
    return t


class LogregProtocol(MultiRoundJob, SecureSumRounds):
    name = PROTOCOL_NAME
    takes_bounds = True
    request_type = LogregRequest
    spec_type = LogregIteration
    multi_round = True
    plot_file = "coefficients.png"

    def result_file(self, label: str) -> str | None:
        return "result.json" if label == self.name else None

    def job_timeout(self, request: LogregRequest, deadline_seconds: float) -> float:
        """Every iteration is a round that may use its deadline."""
        return (request.max_iterations or DEFAULT_MAX_ITERATIONS) * (deadline_seconds + 30)

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: LogregRequest, common: Common) -> LogregPlan:
        features, iterations, tol, bound = _check_request(request)
        min_owners, deadline = common.quorum(), common.deadline()
        d = len(features)
        max_owners = common.n_invited  # the CSP sums at most one share of each invited owner
        dp, dp_total, sens = None, None, None
        if common.dp is None:
            enc = encoding(
                common.scale_bits or DEFAULT_SCALE_BITS,
                common.value_bound or DEFAULT_VALUE_BOUND,
                max_owners,
            )
        else:
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            # the T iterations together meet (epsilon, delta) by Renyi composition
            dp, noise_bound, sens, _ = plan_dp(
                common.dp,
                features,
                lambda c: sensitivity(c, f, d),
                n_values(d),
                f,
                min_owners,
                compositions=iterations,
            )
            c = dp.row_norm_bound
            dp_total = (common.dp.epsilon, common.dp.delta)
            enc = encoding(f, c, max_owners, count_scale_bits=f, noise_bound=noise_bound)
        return LogregPlan(
            features,
            request.label_column,
            request.positive_class,
            iterations,
            tol,
            bound,
            min_owners,
            deadline,
            enc,
            dp,
            dp_total,
            sens,
        )

    def start(self, plan: LogregPlan, job_id: str, invited: list[str]) -> LogregState:
        return LogregState(job_id, list(invited), np.zeros(len(plan.features) + 1))

    def next_round(self, plan: LogregPlan, state: LogregState, index: int) -> RoundPlan:
        state.opened = time.perf_counter()
        spec = LogregIteration(
            job_id=state.job_id,
            iteration=index,
            max_iterations=plan.max_iterations,
            features=plan.features,
            label_column=plan.label_column,
            positive_class=plan.positive_class,
            coefficients=tuple(float(b) for b in state.beta),
            coefficient_bound=plan.coefficient_bound,
        )
        d = len(plan.features)
        n_vals = n_values(d) + (1 if plan.dp is not None and plan.dp.counts_clipped else 0)
        return RoundPlan(spec, plan.label, plan.encoding, n_vals, plan.dp, dimension=d)

    def preview_data(
        self, plan: LogregPlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's label: positive with probability sigmoid(a + x'b), the features'
        log-odds of standard deviation 1 in equal parts and a base rate of PREVIEW_BASE_RATE
        (a label unrelated to the features would make every coefficient 0)."""
        x = np.column_stack([columns[f] for f in plan.features])
        z = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-300)
        logit = math.log(PREVIEW_BASE_RATE / (1 - PREVIEW_BASE_RATE)) + z.sum(axis=1) / math.sqrt(
            z.shape[1]
        )
        positive = rng.random(len(logit)) < 1.0 / (1.0 + np.exp(-logit))
        labels = np.where(positive, plan.positive_class, "other").astype(object)
        return columns | {plan.label_column: labels}, (
            f"{plan.label_column} is '{plan.positive_class}' for about "
            f"{PREVIEW_BASE_RATE:.0%} of rows, its log-odds rising by 1 std over the features "
            "in equal parts"
        )

    def max_rounds(self, plan: LogregPlan) -> int:
        return plan.max_iterations

    def expected_round(
        self, plan: LogregPlan, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """Iteration 1 is at beta = 0; later ones at the coefficients the aggregator computed
        from earlier totals, which no owner can check beyond their shape and the signed bound
        (`chosen_by_aggregator`)."""
        state = self.start(plan, job_id, invited)
        if index > 1:
            state.beta = check_coefficients(
                received.coefficients,
                len(plan.features),
                plan.coefficient_bound,
                "coefficients",
            )
        return self.next_round(plan, state, index)

    def chosen_by_aggregator(self, spec: LogregIteration) -> bool:
        return spec.iteration > 1

    def progress(self, plan: LogregPlan, index: int, round_id: str) -> str:
        return f"iteration {index} of at most {plan.max_iterations} open ({round_id})"

    def failure(self, plan: LogregPlan, index: int, message: str) -> str:
        return f"iteration {index} of at most {plan.max_iterations} failed: {message}"

    def finish_round(self, plan: LogregPlan, state: LogregState, outcome: Outcome) -> Step:
        """The Newton step from the revealed sums; every iteration publishes the fit so far."""
        start = time.perf_counter()
        d = len(plan.features)
        noisy = plan.dp is not None
        sigma = plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits) if noisy else 0.0  # type: ignore[union-attr]
        released, clipped = split_clip_count(
            outcome.require_totals(), plan.dp, plan.encoding.count_scale_bits
        )
        totals = decode_totals(released, d, plan.encoding, noisy)
        if clipped is not None:
            state.clipped_rows = clipped
        index = len(state.iterations) + 1
        if index == 1:  # at beta = 0: p = 1/2, so g_0 = n_positive - n / 2
            state.n_rows = totals.n
            positives = round(float(totals.gradient[0]) + totals.n / 2)
            state.n_positive = min(max(positives, 0), totals.n)
            if not noisy:
                self._check_classes(plan, totals.n, state.n_positive, d)
        nstep = newton_step(state.beta, totals, plan.coefficient_bound, noisy, sigma)
        outcome.timings["newton_seconds"] = time.perf_counter() - start
        max_step = float(np.max(np.abs(nstep.step)))
        state.iterations.append(
            LogregIterationSummary(
                iteration=index,
                round_id=outcome.round_id,
                owners=sorted(outcome.submitted),
                coefficients=nstep.beta.tolist(),
                max_step=max_step,
                max_abs_gradient=float(np.max(np.abs(totals.gradient))),
                seconds=time.perf_counter() - state.opened,
            )
        )
        state.beta = nstep.beta
        state.converged = max_step <= plan.tolerance
        done = state.converged or index >= plan.max_iterations
        result = self._result(plan, state, outcome, nstep, sigma)
        if done:
            how = "converged" if state.converged else "reached the iteration limit (not converged)"
            message = f"{index} iteration(s), {how}"
        else:
            message = (
                f"iteration {index} of at most {plan.max_iterations} done with "
                f"{len(outcome.submitted)} owner(s); largest coefficient change {max_step:.6g}"
            )
        return Step(result, done, message)

    @staticmethod
    def _check_classes(plan: LogregPlan, n: int, positives: int, d: int) -> None:
        if n < d + 2:
            raise DataError(
                f"the pooled data is {n} rows; a fit of {d} feature(s) and an intercept needs "
                f"at least {d + 2}",
                rule="rows",
            )
        if positives in (0, n):
            which = "no row" if positives == 0 else "every row"
            raise DataError(
                f"{which} of label column '{plan.label_column}' is '{plan.positive_class}': "
                "one class only, nothing to fit"
            )

    def _result(
        self,
        plan: LogregPlan,
        state: LogregState,
        outcome: Outcome,
        nstep: NewtonStep,
        sigma: float,
    ) -> LogregResult:
        terms = [INTERCEPT, *plan.features]
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

        noise_se, truth = None, None
        if plan.dp is not None:
            noise = np.sqrt(np.maximum(np.diag(noise_cov), 0.0))
            noise_se = by_term(noise)
            figures = {f"coefficient {k}": float(v) for k, v in zip(terms, coef, strict=True)}
            stated = {f"coefficient {k}": float(v) for k, v in zip(terms, noise, strict=True)}
            truth = dp_release.Truth(
                stated,
                [
                    *dp_release.clipping_warning(state.clipped_rows, state.n_rows),
                    *dp_release.buried(figures, stated),
                ],
                state.clipped_rows,
                figures,
            )
        facts = outcome.facts()
        return LogregResult(
            protocol=self.name,
            method=METHOD,
            job_id=state.job_id,
            features=list(plan.features),
            label_column=plan.label_column,
            positive_class=plan.positive_class,
            n_rows=state.n_rows,
            n_positive=state.n_positive,
            terms=terms,
            coefficients=by_term(coef),
            std_errors=by_term(se),
            z_statistics=by_term(z),
            p_values=by_term(p),
            ci_level=CI_LEVEL,
            ci_lower=by_term(coef - q * se),
            ci_upper=by_term(coef + q * se),
            iterations_run=len(state.iterations),
            max_iterations=plan.max_iterations,
            tolerance=plan.tolerance,
            converged=state.converged,
            coefficient_bound=plan.coefficient_bound,
            noise_std_errors=noise_se,
            iterations=list(state.iterations),
            round_id=facts["round_id"],
            owners=facts["owners"],
            declined=facts["declined"],
            encoding=facts["encoding"],
            timings=facts["timings"],
            dp=self._dp_facts(plan, outcome.n_owners, len(state.iterations), nstep.floored, truth),
        )

    @staticmethod
    def _dp_facts(
        plan: LogregPlan,
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
            composition="Renyi (RDP): the T iterations' curves added and converted once at "
            "delta; each iteration's noise calibrated so that T of them are (epsilon, delta)-DP",
            accountant="rdp",
            iterations_budgeted=plan.max_iterations,
            epsilon_per_iteration=_rdp_epsilon(plan, 1),
            delta_per_iteration=dp.delta,
            epsilon_spent=_rdp_epsilon(plan, iterations_run),
            delta_spent=delta if iterations_run else 0.0,
            skellam_mu_per_iteration=dp.mu,
            noise_std_per_value=dp.noise_std(n, plan.encoding.scale_bits),
            post_processing="eigenvalues of the noisy Hessian floored at "
            f"{FLOOR_FACTOR:g} sqrt(d + 1) sigma ({floored} of {len(plan.features) + 1} raised "
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

    def snapshot(self, state: LogregState) -> dict[str, Any]:
        """The job after its last completed iteration, as JSON data."""
        return {
            "version": SNAPSHOT_VERSION,
            "job_id": state.job_id,
            "invited": list(state.invited),
            "beta": [float(b) for b in state.beta],
            "iterations": [dataclasses.asdict(it) for it in state.iterations],
            "n_rows": int(state.n_rows),
            "n_positive": int(state.n_positive),
            "converged": bool(state.converged),
            "elapsed_seconds": time.perf_counter() - state.started,
        }

    def restore(
        self, plan: LogregPlan, job_id: str, invited: list[str], snapshot: dict[str, Any]
    ) -> LogregState:
        """The state of `snapshot`, checked against the plan (planned again from the request)."""
        try:
            if snapshot.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"version {snapshot.get('version')!r}, not {SNAPSHOT_VERSION}")
            if snapshot["job_id"] != job_id:
                raise ValueError(f"it is job {snapshot['job_id']!r}'s")
            beta = check_coefficients(
                snapshot["beta"], len(plan.features), plan.coefficient_bound, "beta"
            )
            iterations = [LogregIterationSummary(**it) for it in snapshot["iterations"]]
            if [it.iteration for it in iterations] != list(range(1, len(iterations) + 1)):
                raise ValueError("the iterations are not numbered 1, 2, ...")
            if len(iterations) > plan.max_iterations:
                raise ValueError(
                    f"{len(iterations)} iterations, the plan allows {plan.max_iterations}"
                )
            state = LogregState(
                job_id,
                list(invited),
                beta,
                iterations,
                int(snapshot["n_rows"]),
                int(snapshot["n_positive"]),
                bool(snapshot["converged"]),
            )
            elapsed = float(snapshot.get("elapsed_seconds", 0.0))
        except (KeyError, TypeError, ValueError, DataError) as exc:
            raise ProtocolError(f"the snapshot of logreg job {job_id} is unusable: {exc}") from exc
        state.started = time.perf_counter() - max(0.0, elapsed)
        return state

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: LogregIteration) -> list[str]:
        return [*spec.features, spec.label_column]

    def request_columns(self, request: LogregRequest) -> list[str]:
        return [*request.features, request.label_column]

    def dimension(self, spec: LogregIteration) -> int:
        return len(spec.features)

    def check(
        self, spec: LogregIteration, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError("a logistic-regression round needs a plain encoding")
        require_bound(
            enc,
            data_bound(
                enc.value_bound, enc.max_rows_per_owner, enc.scale_bits, enc.count_scale_bits
            ),
        )
        if not 1 <= spec.iteration <= spec.max_iterations:
            raise ProtocolError(
                f"iteration {spec.iteration} of a job of at most {spec.max_iterations}"
            )
        d = len(spec.features)
        check_coefficients(spec.coefficients, d, spec.coefficient_bound, "coefficients")
        if site.uses_spark:
            raise DataError(
                "logistic-regression rounds are computed with the numpy engine only (engine = "
                '"spark" is set)'
            )
        if dp is None:
            return
        require_same_count_scale(enc)
        if dp.releases != max(1, spec.max_iterations):
            raise ProtocolError(
                f"the round's noise is accounted for {dp.releases} iteration(s), the job "
                f"declares {spec.max_iterations}"
            )
        verify_dp(dp, spec.features, self.dp_sensitivity(spec, enc, dp), n_values(d), enc)

    def dp_sensitivity(
        self, spec: LogregIteration, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a logistic-regression round needs a plain encoding")
        if not enc.value_bound >= dp.row_norm_bound:
            raise ProtocolError("the encoding's value bound is below the DP row-norm bound")
        return sensitivity(dp.row_norm_bound, enc.scale_bits, len(spec.features))

    def iterations_of(self, spec: Any) -> tuple[int, int]:
        return spec.iteration, spec.max_iterations

    def describe(self, spec: LogregIteration, dp: DpSpec | None) -> str:
        what = (
            f"logreg job {spec.job_id} iteration {spec.iteration}/{spec.max_iterations}: "
            f"{spec.label_column} = {spec.positive_class} on {len(spec.features)} feature(s)"
        )
        return what + clip_note(dp)

    def share_values(
        self,
        spec: LogregIteration,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        """g, H and n of this site's rows at the published coefficients."""
        features = list(spec.features)
        d = len(features)
        beta = check_coefficients(spec.coefficients, d, spec.coefficient_bound, "coefficients")
        start = time.perf_counter()
        table = site.read(self.columns(spec))
        x = table.matrix(features)
        labels = np.asarray(table.labels(spec.label_column), dtype=object)
        if len(labels) != len(x):
            raise DataError(
                f"label column '{spec.label_column}' has {len(labels)} values, "
                f"the features {len(x)}"
            )
        y = (labels == spec.positive_class).astype(np.float64)
        clipped = np.zeros(len(x), dtype=bool)
        if dp is not None:  # (bounds: scaled;) features clipped to L2 norm C
            x, clipped = clip_for_release(x, features, dp)
        enc.check_rows(x, features)
        timings["read_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        g, h = local_statistics(x, y, beta)
        timings["statistics_seconds"] = time.perf_counter() - start
        values = encode_statistics(g, h, len(x), enc)
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values


PROTOCOL = registry.register(LogregProtocol())
