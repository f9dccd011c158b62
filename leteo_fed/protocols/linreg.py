"""Federated linear regression with an intercept: ordinary least squares or ridge, in one round.

Every owner sends the moments of its rows z = [x, y] (features, then the label): the upper
triangle of R = sum z z^T, V = sum z and its row count n, encoded exactly as a PCA share of the
d + 1 columns (`moments`). The aggregator reveals the exact integer totals and forms the centered
scatter matrix S = R - V V^T / n in exact rational arithmetic (one rounding per entry), then

    beta      = (S_xx + lambda I)^-1 S_xy        (lambda = 0: ordinary least squares)
    intercept = mean(y) - mean(x)^T beta          (the intercept is not penalized)
    RSS       = S_yy - 2 beta^T S_xy + beta^T S_xx beta,   sigma^2 = RSS / (n - d - 1)
    Cov(beta) = sigma^2 A^-1 S_xx A^-1  with A = S_xx + lambda I   (OLS: sigma^2 S_xx^-1)
    Var(intercept) = sigma^2 / n + mean(x)^T Cov(beta) mean(x)

with t statistics, two-sided p-values (Student t, n - d - 1 degrees of freedom), confidence
intervals, R^2 = 1 - RSS / S_yy and the adjusted R^2. Without DP this is statsmodels' OLS on the
pooled rows (checked to 1e-8 in the tests).

DP rounds clip every row's features to L2 norm C (`row_norm_bound`) and its label to [-B, B]
(`label_bound`, default C), so ||z||_2 <= sqrt(C^2 + B^2), and add distributed Skellam noise
calibrated to the moments' sensitivity for that norm (`sensitivity`, checked by brute force).
The noisy S is post-processed (no privacy cost): the eigenvalues of S_xx are floored at a
multiple of the noise's spectral size, so S_xx is positive definite, and the RSS is kept above
what the noise alone could make (`fit_from_scatter`). The standard
errors are the sampling errors of the fit to the noisy moments; the noise's own error of every
term is reported beside them (`noise_std_errors`, the delta method at the released estimates).

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled moments of [x, y] (hence the released fit, the pooled means, the row count), never one
site's. Single-round: one DP release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.linalg import eigvalsh

from leteo_fed import defaults
from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.encoding.share import ShareEncoding, require_bound
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, moments, moments_round, registry
from leteo_fed.protocols.base import (
    Common,
    DpSpec,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    SiteData,
    Step,
    check_features,
    clip_count_value,
    dp_facts,
    plan_dp,
    preview_facts,
    require_same_count_scale,
    round_truth,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.moments import ALL_ROWS
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type

PROTOCOL_NAME = "linreg"
EXPLAINED = 0.5  # the preview's label: this share of its variance explained by the features
INTERCEPT = "intercept"
CI_LEVEL = 0.95
DEFAULT_SCALE_BITS = defaults.PCA_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
# DP: the eigenvalues of the noisy S_xx are floored at FLOOR_FACTOR sqrt(d) times the noise std
# of its entries: a symmetric noise matrix has spectral norm ~ 2 sqrt(d) times that, so an
# eigenvalue below the floor is one the noise alone could have made from 0
FLOOR_FACTOR = 2.0
# X'X (plus the ridge) whose smallest eigenvalue is below d x this x its largest is singular to
# working precision: the fit would be rounding error, so it is refused
COLLINEAR_RCOND = 16 * float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class LinregRequest:
    features: tuple[str, ...] = ()
    label_column: str = ""
    ridge: float = 0.0  # lambda >= 0 on the coefficients (not the intercept); 0 = OLS
    label_bound: float = 0.0  # DP: labels clipped to [-B, B] (0 = row_norm_bound)


@dataclass(frozen=True)
class LinregSpec:
    features: tuple[str, ...]
    label_column: str
    label_bound: float  # DP: B; 0 in non-DP rounds (value_bound bounds every value)


@result_type
@dataclass(frozen=True, kw_only=True)
class LinregResult(RoundFacts, Result):
    wire: ClassVar[str] = "linreg"
    protocol: str
    method: str
    features: list[str]
    label_column: str
    ridge: float
    n_rows: int
    df_residual: int
    terms: list[str]
    coefficients: dict[str, float]
    std_errors: dict[str, float]
    t_statistics: dict[str, float]
    p_values: dict[str, float]
    ci_level: float
    ci_lower: dict[str, float]
    ci_upper: dict[str, float]
    r_squared: float
    adj_r_squared: float
    residual_std_error: float
    label_bound: float | None = None
    noise_std_errors: dict[str, float] | None = None
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per term: coefficient, standard error, t, p and the confidence interval."""
        cols = {
            name: [values[t] for t in self.terms]
            for name, values in (
                ("coefficient", self.coefficients),
                ("std_error", self.std_errors),
                ("t_statistic", self.t_statistics),
                ("p_value", self.p_values),
                ("ci_lower", self.ci_lower),
                ("ci_upper", self.ci_upper),
            )
        }
        return cols, list(self.terms), "term"


@dataclass(frozen=True)
class LinregPlan:
    features: tuple[str, ...]
    label_column: str
    ridge: float
    label_bound: float  # B of a DP round, else 0
    min_owners: int
    deadline_seconds: float
    encoding: ShareEncoding
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None
    label: str = PROTOCOL_NAME


def n_values(d: int) -> int:
    """The moments of the d + 1 columns [x, y]: R's upper triangle, V and the row count."""
    return moments.n_values(d + 1, [ALL_ROWS])


def joint_bound(row_norm_bound: float, label_bound: float) -> float:
    """||[x, y]||_2 of a clipped row: sqrt(C^2 + B^2)."""
    return math.hypot(row_norm_bound, label_bound)


def sensitivity(
    row_norm_bound: float, label_bound: float, scale_bits: int, d: int, count_scale_bits: int
) -> noise.Sensitivity:
    """L1/L2 sensitivity, in integer units, of one owner's share when one row is added or
    removed: the share is the moments share of z = [x, y] with ||x||_2 <= C and |y| <= B, so
    ||z||_2 <= sqrt(C^2 + B^2) and `moments.sensitivities_for_scatter` (d + 1 columns, one
    class) bounds it: R's triangle L2 <= (C^2 + B^2) F + sqrt(T), V's L2 <= sqrt(C^2 + B^2) F
    + sqrt(d + 1), the count 2^count_scale_bits exactly (F = 2^scale_bits, T = (d+1)(d+2)/2)."""
    return moments_round.sensitivity(
        joint_bound(row_norm_bound, label_bound),
        scale_bits,
        d + 1,
        [ALL_ROWS],
        count_scale_bits,
    )


# ------------------------------------------------------------------ the fit


@dataclass(frozen=True)
class Fit:
    n: int
    df: int
    intercept: float
    coefficients: np.ndarray  # d
    std_errors: np.ndarray  # d + 1: the intercept, then the coefficients
    r_squared: float
    adj_r_squared: float
    residual_std_error: float
    mean: np.ndarray  # d + 1: the pooled means of x, then of y
    a_inverse: np.ndarray  # (S_xx + lambda I)^-1, for the noise's delta method
    floored: int = 0  # DP: eigenvalues of the noisy scatter raised to the floor
    covariance: np.ndarray | None = None  # (d + 1) square: the intercept, then beta

    def in_natural_units(self, bounds: Sequence[ColumnBounds]) -> Fit:
        """The fit of scaled columns x' = (x - c) / h, y' = (y - c_y) / h_y mapped back:
        beta_j = h_y beta'_j / h_j, intercept = c_y + h_y (b0' - sum_j beta'_j c_j / h_j),
        their covariance T C T^T for that linear map T (post-processing)."""
        center, half = bounds_of.centers_halves(bounds)
        c_x, h_x, c_y, h_y = center[:-1], half[:-1], float(center[-1]), float(half[-1])
        d = len(c_x)
        t = np.zeros((d + 1, d + 1))
        t[0, 0] = h_y
        t[0, 1:] = -h_y * c_x / h_x
        t[1:, 1:] = np.diag(h_y / h_x)
        theta = t @ np.concatenate([[self.intercept], self.coefficients])
        theta[0] += c_y
        assert self.covariance is not None
        cov = t @ self.covariance @ t.T
        return dataclasses.replace(
            self,
            intercept=float(theta[0]),
            coefficients=theta[1:],
            std_errors=np.sqrt(np.maximum(np.diag(cov), 0.0)),
            residual_std_error=self.residual_std_error * h_y,
            mean=center + half * self.mean,
            covariance=cov,
        )


def floor_eigenvalues(matrix: np.ndarray, floor: float) -> tuple[np.ndarray, int]:
    """The symmetric matrix with every eigenvalue below `floor` raised to it (unchanged if
    none is), and how many were: the DP post-processing that keeps S_xx positive definite."""
    evals, evecs = np.linalg.eigh((matrix + matrix.T) / 2)
    low = int(np.sum(evals < floor))
    if not low:
        return matrix, 0
    return (evecs * np.maximum(evals, floor)) @ evecs.T, low


def eigenvalue_floor(sigma: float, mean: np.ndarray) -> float:
    """FLOOR_FACTOR sqrt(k) times the largest entry std of a noisy k x k centered scatter:
    S_ij = R_ij - V_i V_j / n moves by sigma sqrt((1 + m_i^2)(1 + m_j^2)) to first order, and
    a symmetric matrix of such noise has spectral norm ~ 2 sqrt(k) times that. An eigenvalue
    below the floor is one the noise alone could have made from 0."""
    m2 = float(np.max(np.asarray(mean) ** 2)) if len(mean) else 0.0
    return FLOOR_FACTOR * math.sqrt(len(mean)) * sigma * (1.0 + m2)


def fit_from_scatter(
    scatter: np.ndarray, mean: np.ndarray, n: int, ridge: float, noisy: bool, sigma: float = 0.0
) -> Fit:
    """The regression from the centered scatter S of [x, y] (d + 1 square), the means and n.

    `noisy` (DP rounds, `sigma` the noise std per released value) post-processes, at no privacy
    cost: S_xx's eigenvalues are floored at `eigenvalue_floor` (S_xx positive definite; the fit
    is shrunk only in directions the noise could have made from nothing), the RSS is kept at
    least the floor of [x, y] times |w|^2 (w = [beta, -1]: what an RSS the noise could have
    made from 0 looks like), and S_yy at least the RSS, so 0 <= R^2 < 1."""
    d = scatter.shape[0] - 1
    df = n - d - 1
    if df < 1:
        what = "noisy row count" if noisy else "pooled data"
        raise DataError(
            f"the {what} is {n} rows; a fit of {d} feature(s) and an intercept needs at least "
            f"{d + 2}" + ("; the data is too small for this epsilon" if noisy else ""),
            rule="rows",
        )
    mean = np.asarray(mean, dtype=np.float64)
    s_xx, s_xy, s_yy = scatter[:d, :d], scatter[:d, d], float(scatter[d, d])
    floored = 0
    if noisy:
        s_xx, floored = floor_eigenvalues(s_xx, eigenvalue_floor(sigma, mean[:d]))
    elif not s_yy > 0:
        raise DataError("the label is constant over the pooled rows: nothing to regress")
    a = s_xx + ridge * np.eye(d)
    evals = np.linalg.eigvalsh(a)
    try:
        if not evals[0] > evals[-1] * d * COLLINEAR_RCOND:
            raise np.linalg.LinAlgError
        chol = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        raise DataError(
            "the features are collinear (or one is constant): X'X is singular to working "
            "precision; drop a feature or give a ridge penalty"
        ) from None
    chol_inv = np.linalg.inv(chol)
    a_inv = chol_inv.T @ chol_inv
    a_inv = (a_inv + a_inv.T) / 2
    beta = np.linalg.solve(a, s_xy)
    rss = s_yy - 2.0 * float(beta @ s_xy) + float(beta @ s_xx @ beta)
    if noisy:
        rss = max(rss, eigenvalue_floor(sigma, mean) * (1.0 + float(beta @ beta)))
        s_yy = max(s_yy, rss)
    elif not rss > 0:
        raise DataError("the label is an exact linear function of the features (RSS = 0)")
    sigma2 = rss / df
    cov_beta = sigma2 * (a_inv if ridge == 0 else a_inv @ s_xx @ a_inv)
    m_x, m_y = mean[:d], float(mean[d])
    intercept = m_y - float(m_x @ beta)
    var_intercept = sigma2 / n + float(m_x @ cov_beta @ m_x)
    se = np.sqrt(np.maximum(np.concatenate([[var_intercept], np.diag(cov_beta)]), 0.0))
    cov = np.empty((d + 1, d + 1))
    cov[0, 0], cov[1:, 1:] = var_intercept, cov_beta
    cov[0, 1:] = cov[1:, 0] = -(cov_beta @ m_x)  # intercept = mean(y) - mean(x)^T beta
    r2 = 1.0 - rss / s_yy
    return Fit(
        n=n,
        df=df,
        intercept=intercept,
        coefficients=beta,
        std_errors=se,
        r_squared=r2,
        adj_r_squared=1.0 - (1.0 - r2) * (n - 1) / df,
        residual_std_error=math.sqrt(sigma2),
        mean=mean,
        a_inverse=a_inv,
        floored=floored,
        covariance=cov,
    )


def fit_from_totals(
    totals: list[int], d: int, enc: ShareEncoding, ridge: float, noisy: bool, sigma: float = 0.0
) -> Fit:
    """The exact integer totals -> the fit; `sigma` (DP) is the noise std per released value."""
    agg = moments.decode_totals(
        totals, d + 1, [ALL_ROWS], enc.scale_bits, enc.count_scale_bits, noisy=noisy
    )
    scatter = moments.total_scatter(agg)  # exact rationals, one rounding per entry
    return fit_from_scatter(scatter, moments.mean(agg), agg.n, ridge, noisy, sigma)


def noise_errors(
    a_inverse: np.ndarray, beta: np.ndarray, mean: np.ndarray, n: float, sigma: float
) -> np.ndarray:
    """The std of each term's error (intercept, then coefficients) caused by noise of std sigma
    on every released value (R's triangle, V, n), to first order (the delta method).

    With w = [beta, -1], c = mean^T w (= -intercept), A^-1 = (S_xx + lambda I)^-1, G = A^-1 P
    (P: the feature rows) and h = P^T A^-1 mean_x, the noise (E on R's triangle, mirrored; e_V;
    e_n) moves the centered scatter by dS = E - e_V m^T - m e_V^T + m m^T e_n, and
      d beta      = -G (E w) + G (c I + m w^T) e_V - c G m e_n
      d intercept = h^T E w - ((1/n + h^T m) w + c h)^T e_V + c (1/n + h^T m) e_n
    where Cov(E w) = sigma^2 (|w|^2 I + w w^T - diag(w^2)) (E symmetric, iid upper triangle)."""
    d = len(beta)
    w = np.append(beta, -1.0)
    m = np.asarray(mean, dtype=np.float64)
    c = float(m @ w)
    g = np.hstack([a_inverse, np.zeros((d, 1))])
    k_w = float(w @ w) * np.eye(d + 1) + np.outer(w, w) - np.diag(w * w)
    b_v = g @ (c * np.eye(d + 1) + np.outer(m, w))
    gm = g @ m
    cov_beta = g @ k_w @ g.T + b_v @ b_v.T + c * c * np.outer(gm, gm)
    h = np.append(a_inverse @ m[:d], 0.0)
    s = 1.0 / n + float(h @ m)
    coef_v = s * w + c * h
    var_intercept = float(h @ k_w @ h) + float(coef_v @ coef_v) + (c * s) ** 2
    variances = np.concatenate([[var_intercept], np.diag(cov_beta)])
    return sigma * np.sqrt(np.maximum(variances, 0.0))


def noise_preview(
    plan: LinregPlan,
    rows: int | None = None,
    feature_cov: Sequence[Sequence[float]] | None = None,
    coefficients: Sequence[float] | None = None,
    feature_means: Sequence[float] | None = None,
    label_mean: float = 0.0,
) -> dict:
    """What the noise of a DP round will do, from public parameters only (nothing is sent).

    Every released value (R = sum z z^T, V = sum z, the row count) carries Skellam noise of
    standard deviation sigma = sqrt(2 mu) / 2^f in real units (with the quorum's shares). The
    standard error of each term follows from `noise_errors` at S_xx = rows x the features'
    covariance: the analyst's guesses of that covariance, the coefficients and the means if
    given, else the most spread clipped rows allow (covariance C^2 / d I), coefficients 0 and
    means 0, the smallest error (data with less spread, or far from 0, is noisier).
    Signal checks: the row count against its noise; the eigenvalue floor of DP rounds (what
    the noise could make of a spread of 0) against the smallest eigenvalue of rows x the
    features' covariance (below it, the fit is shrunk); each coefficient's error against B / s_j
    (s_j the feature's standard deviation): sum_j beta_j^2 s_j^2 <= var(y) <= B^2 for
    uncorrelated features, so a coefficient beyond that explains more than the label varies.
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    d = len(plan.features)
    doc |= {"label_bound": plan.label_bound, "noise_std_per_value": sigma}
    if rows is None:
        return doc
    if rows < d + 2:
        raise DataError(f"rows must be at least {d + 2} for {d} feature(s)", field="rows")
    c = plan.dp.row_norm_bound  # type: ignore[union-attr]  # preview_facts checked it
    cov = (
        np.asarray(feature_cov, dtype=np.float64).reshape(d, d)
        if feature_cov is not None
        else np.eye(d) * (c * c / d)
    )
    beta = np.asarray(coefficients, dtype=np.float64) if coefficients is not None else np.zeros(d)
    m_x = np.asarray(feature_means, dtype=np.float64) if feature_means is not None else np.zeros(d)
    mean = np.append(m_x, float(label_mean))
    a_inv = np.linalg.inv(rows * cov + plan.ridge * np.eye(d))
    errs = noise_errors(a_inv, beta, mean, float(rows), sigma)
    terms = [INTERCEPT, *plan.features]
    doc["assumed_rows"] = rows
    doc["std_error"] = dict(zip(terms, errs.tolist(), strict=True))
    floor = eigenvalue_floor(sigma, m_x)
    doc["eigenvalue_floor"] = floor
    checks = [
        SignalCheck("row count", sigma, float(rows)),
        # below the floor the fit is shrunk: the features' scatter must stand above the noise
        SignalCheck("smallest spread of the features", floor, rows * float(eigvalsh(cov)[0])),
    ]
    for j, f in enumerate(plan.features):
        spread = math.sqrt(max(float(cov[j, j]), 0.0))
        largest = plan.label_bound / spread if spread > 0 else math.inf
        checks.append(SignalCheck(f"coefficient of {f}", float(errs[1 + j]), largest))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


# ------------------------------------------------------------------ the protocol


def _check_request(request: LinregRequest, common: Common) -> tuple[tuple[str, ...], float]:
    features = check_features(tuple(request.features), "regress on")
    label = request.label_column
    if not label:
        raise DataError("label_column is empty: name the column to predict", field="label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="label_column")
    if INTERCEPT in features:
        raise DataError(
            f"a feature may not be named '{INTERCEPT}' (the result's name of the constant term)",
            field="features",
        )
    if not (math.isfinite(request.ridge) and request.ridge >= 0):
        raise DataError(f"ridge must be a finite number >= 0, got {request.ridge}", field="ridge")
    if common.dp is None:
        if request.label_bound:
            raise DataError(
                "label_bound applies to DP rounds (value_bound bounds every value otherwise)",
                field="label_bound",
            )
        return features, 0.0
    if common.dp.bounds:
        if request.label_bound:
            raise DataError(
                "with per-column bounds the label's bounds come from them: give the label "
                "column's bounds (`bounds`), not label_bound",
                field="label_bound",
            )
        return features, 1.0  # every scaled value lies in [-1, 1]
    b = request.label_bound or common.dp.row_norm_bound
    if not (math.isfinite(b) and b > 0):
        raise DataError(f"label_bound must be a positive number, got {b}", field="label_bound")
    return features, float(b)


def linreg_figures(features: Sequence[str], fit: Fit) -> dict[str, float]:
    """The figures a regression release states: every coefficient and R^2."""
    figures = {f"coefficient {INTERCEPT}": fit.intercept}
    figures |= {
        f"coefficient {f}": float(b) for f, b in zip(features, fit.coefficients, strict=True)
    }
    figures["r_squared"] = fit.r_squared
    return figures


class LinregProtocol(FederatedProtocol):
    name = PROTOCOL_NAME
    takes_bounds = True
    request_type = LinregRequest
    spec_type = LinregSpec

    plot_file = "coefficients.png"

    def result_file(self, label: str) -> str | None:
        return "result.json" if label == self.name else None

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: LinregRequest, common: Common) -> LinregPlan:
        features, label_bound = _check_request(request, common)
        min_owners, deadline = common.quorum(), common.deadline()
        d = len(features)
        max_owners = common.n_invited  # the CSP sums at most one share of each invited owner
        dp, sens = None, None
        if common.dp is None:
            enc = moments_round.encoding(
                common.scale_bits or DEFAULT_SCALE_BITS,
                common.value_bound or DEFAULT_VALUE_BOUND,
                max_owners=max_owners,
            )
        else:
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            dp, noise_bound, sens, _ = plan_dp(
                common.dp,
                [*features, request.label_column],
                lambda c: sensitivity(c, label_bound, f, d, f),
                n_values(d),
                f,
                min_owners,
                norm_columns=d,  # the features' norm; the label is bounded on its own
            )
            c = dp.row_norm_bound
            enc = moments_round.encoding(
                f,
                joint_bound(c, label_bound),
                max_owners=max_owners,
                count_scale_bits=f,
                noise_bound=noise_bound,
            )
        return LinregPlan(
            features,
            request.label_column,
            float(request.ridge),
            label_bound,
            min_owners,
            deadline,
            enc,
            dp,
            sens,
        )

    def next_round(self, plan: LinregPlan, state: None, index: int) -> RoundPlan:
        spec = LinregSpec(plan.features, plan.label_column, plan.label_bound)
        d = len(plan.features)
        n_vals = n_values(d) + (1 if plan.dp is not None and plan.dp.counts_clipped else 0)
        return RoundPlan(spec, plan.label, plan.encoding, n_vals, plan.dp, dimension=d + 1)

    def finish_round(self, plan: LinregPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        totals = outcome.require_totals()
        fit = self.fit_from_totals(plan, totals, outcome.n_owners)
        terms = [INTERCEPT, *plan.features]
        coef = np.concatenate([[fit.intercept], fit.coefficients])
        se = fit.std_errors
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(se > 0, coef / np.where(se > 0, se, 1.0), np.nan)
        from scipy import stats as sps  # for p-values only: owners never load it

        p = 2.0 * sps.t.sf(np.abs(t), fit.df)
        q = float(sps.t.ppf(0.5 + CI_LEVEL / 2, fit.df))
        noise_se, truth = None, None
        outcome.timings["regression_seconds"] = time.perf_counter() - start
        if plan.dp is not None:  # post-processing: noise redrawn around the released totals
            start = time.perf_counter()
            _, clipped = split_clip_count(totals, plan.dp, plan.encoding.count_scale_bits)
            extra = []
            if fit.floored:
                extra.append(
                    ReleaseWarning(
                        "spread of the features",
                        f"{fit.floored} of {len(plan.features)} directions of the features' "
                        "spread are below what the noise alone could make: the fit is shrunk "
                        "there (raise epsilon, pool more rows)",
                    )
                )
            truth = round_truth(
                plan.dp,
                outcome,
                lambda t: self.release_figures(plan, t, outcome.n_owners),
                fit.n,
                plan.encoding.count_scale_bits,
                extra,
            )
            noise_se = {term: truth.figure_noise_std[f"coefficient {term}"] for term in terms}
            outcome.timings["noise_bootstrap_seconds"] = time.perf_counter() - start

        def by_term(values) -> dict[str, float]:
            return {k: float(v) for k, v in zip(terms, values, strict=True)}

        return Step(
            LinregResult(
                protocol=self.name,
                method="ridge" if plan.ridge > 0 else "ols",
                features=list(plan.features),
                label_column=plan.label_column,
                ridge=plan.ridge,
                n_rows=fit.n,
                df_residual=fit.df,
                terms=terms,
                coefficients=by_term(coef),
                std_errors=by_term(se),
                t_statistics=by_term(t),
                p_values=by_term(p),
                ci_level=CI_LEVEL,
                ci_lower=by_term(coef - q * se),
                ci_upper=by_term(coef + q * se),
                r_squared=fit.r_squared,
                adj_r_squared=fit.adj_r_squared,
                residual_std_error=fit.residual_std_error,
                label_bound=plan.label_bound if plan.dp is not None else None,
                noise_std_errors=noise_se,
                **outcome.facts(),
                dp=self._dp_facts(plan, outcome.n_owners, fit.floored, truth),
            )
        )

    def preview_data(
        self, plan: LinregPlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's label depends on the features: half its variance explained by them,
        in equal parts (a label independent of them would make every coefficient 0, and the
        preview would call each one noise whatever epsilon)."""
        x = np.column_stack([columns[f] for f in plan.features])
        y = columns[plan.label_column]
        sd_x = np.maximum(x.std(axis=0), 1e-300)
        sd_y, mean_y = float(y.std()), float(y.mean())
        d = len(plan.features)
        beta = sd_y * math.sqrt(EXPLAINED / d) / sd_x
        noise = rng.normal(0.0, sd_y * math.sqrt(1 - EXPLAINED), size=len(y))
        label = mean_y + (x - x.mean(axis=0)) @ beta + noise
        return columns | {plan.label_column: label}, (
            f"{plan.label_column} = its mean + a linear function of the features explaining "
            f"{EXPLAINED:.0%} of its variance in equal parts + normal noise"
        )

    def release_figures(self, plan: LinregPlan, totals: list[int], n_owners: int) -> dict:
        return linreg_figures(plan.features, self.fit_from_totals(plan, totals, n_owners))

    @staticmethod
    def fit_from_totals(plan: LinregPlan, totals: list[int], n_owners: int) -> Fit:
        """The fit a round's totals give, in natural units."""
        totals, _ = split_clip_count(totals, plan.dp, plan.encoding.count_scale_bits)
        d = len(plan.features)
        sigma = 0.0
        if plan.dp is not None:
            sigma = plan.dp.noise_std(n_owners, plan.encoding.scale_bits)
        fit = fit_from_totals(totals, d, plan.encoding, plan.ridge, plan.dp is not None, sigma)
        if plan.dp is not None and plan.dp.bounds:
            fit = fit.in_natural_units(plan.dp.bounds)
        return fit

    @staticmethod
    def _dp_facts(
        plan: LinregPlan, n: int, floored: int, truth: dp_release.Truth | None = None
    ) -> DpFacts | None:
        dp = plan.dp
        if dp is None or plan.sensitivity is None:
            return None
        return dp_facts(
            "distributed Skellam noise on the encoded moments of [x, y]",
            dp,
            plan.sensitivity,
            truth,
            skellam_mu_aggregate=dp.aggregate_mu(n),
            noise_std_per_value=dp.noise_std(n, plan.encoding.scale_bits),
            post_processing="eigenvalues of the noisy centered X'X floored at "
            f"{FLOOR_FACTOR:g} sqrt(d) sigma (1 + max mean(x)^2): {floored} of "
            f"{len(plan.features)} raised (the fit is shrunk in those directions); the RSS "
            f"kept at least {FLOOR_FACTOR:g} sqrt(d + 1) sigma (1 + max mean^2) (1 + |beta|^2) "
            "and S_yy at least the RSS; the noisy row count rounded to whole rows",
            note=f"features clipped to L2 norm {dp.row_norm_bound:g} and labels to "
            f"[-{plan.label_bound:g}, {plan.label_bound:g}] at each owner; every owner charged "
            "its ledger; std_errors exclude the noise (see noise_std_errors)",
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: LinregSpec) -> list[str]:
        return [*spec.features, spec.label_column]

    def request_columns(self, request: LinregRequest) -> list[str]:
        return [*request.features, request.label_column]

    def dimension(self, spec: LinregSpec) -> int:
        return len(spec.features) + 1

    def check(
        self, spec: LinregSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError("a linear-regression round needs a plain encoding")
        require_bound(
            enc,
            moments_round.data_bound(
                enc.value_bound, enc.max_rows_per_owner, 0, enc.scale_bits, enc.count_scale_bits
            ),
        )
        if dp is None:
            return
        if not (math.isfinite(spec.label_bound) and spec.label_bound > 0):
            raise ProtocolError("a DP regression round needs a positive label bound")
        if site.uses_spark:
            raise DataError(
                'DP rounds are computed with the numpy engine only (engine = "spark" is set)'
            )
        require_same_count_scale(enc)
        d = len(spec.features)
        verify_dp(dp, self.columns(spec), self.dp_sensitivity(spec, enc, dp), n_values(d), enc)

    def dp_sensitivity(
        self, spec: LinregSpec, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a regression round needs an encoding")
        d = len(spec.features)
        return sensitivity(
            dp.row_norm_bound, spec.label_bound, enc.scale_bits, d, enc.count_scale_bits
        )

    def describe(self, spec: LinregSpec, dp: DpSpec | None) -> str:
        text = f"linear regression of {spec.label_column} on {len(spec.features)} feature(s)"
        if dp is not None:
            text += f", features clipped to {dp.row_norm_bound:g}, label to +/-{spec.label_bound:g}"
        return text

    def share_values(
        self,
        spec: LinregSpec,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        columns = self.columns(spec)
        if site.uses_spark and dp is None:
            mom = site.spark_moments(columns, [], enc.value_bound)
        else:
            table = site.read(columns)
            z = table.matrix(columns)
            if dp is not None:  # (bounds: scaled;) features clipped to norm C, label to +/-B
                check_finite_and_bounded(z, columns, np.inf)
                clipped = np.zeros(z.shape[0], dtype=bool)
                if dp.bounds:
                    z, clipped = bounds_of.scale_columns(
                        z, bounds_of.for_columns(dp.bounds, columns)
                    )
                clipped |= np.linalg.norm(z[:, :-1], axis=1) > dp.row_norm_bound
                clipped |= np.abs(z[:, -1]) > spec.label_bound
                x = noise.clip_rows(z[:, :-1], dp.row_norm_bound)  # finite: checked above
                y = np.clip(z[:, -1], -spec.label_bound, spec.label_bound)
                z = np.column_stack([x, y])
            enc.check_rows(z, columns)
            mom = moments.local_moments(z, [None], [ALL_ROWS])
        timings["statistics_seconds"] = time.perf_counter() - start
        values = moments.encode_moments(
            mom, enc.scale_bits, enc.data_bound, enc.max_rows_per_owner, enc.count_scale_bits
        )
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values


PROTOCOL = registry.register(LinregProtocol())
