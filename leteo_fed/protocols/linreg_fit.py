"""A linear regression from the centered scatter of [x, y]: the fit, its sampling errors, its
t tests and the noise's own error of every term (the math of `linreg`, on plain arrays).

DP post-processing (no privacy cost): the eigenvalues of a noisy S_xx are floored at a multiple
of the noise's spectral size, so S_xx is positive definite, and the RSS is kept above what the
noise alone could make (`fit_from_scatter`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols.dp_facts import preview_facts

INTERCEPT = "intercept"
CI_LEVEL = 0.95
# DP: the eigenvalues of the noisy S_xx are floored at FLOOR_FACTOR sqrt(d) times the noise std
# of its entries: a symmetric noise matrix has spectral norm ~ 2 sqrt(d) times that, so an
# eigenvalue below the floor is one the noise alone could have made from 0
FLOOR_FACTOR = 2.0
# X'X (plus the ridge) whose smallest eigenvalue is below d x this x its largest is singular to
# working precision: the fit would be rounding error, so it is refused
COLLINEAR_RCOND = 16 * float(np.finfo(np.float64).eps)


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


def spd_inverse(matrix: np.ndarray, singular: str) -> np.ndarray:
    """The inverse of a symmetric positive definite matrix by its Cholesky factor (exactly
    symmetric); DataError `singular` when its condition puts it beyond working precision
    (smallest eigenvalue below k COLLINEAR_RCOND times the largest)."""
    k = matrix.shape[0]
    evals = np.linalg.eigvalsh(matrix)
    try:
        if not evals[0] > evals[-1] * k * COLLINEAR_RCOND:
            raise np.linalg.LinAlgError
        chol = np.linalg.cholesky(matrix)
    except np.linalg.LinAlgError:
        raise DataError(singular) from None
    chol_inv = np.linalg.inv(chol)
    inverse = chol_inv.T @ chol_inv
    return (inverse + inverse.T) / 2


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
    a_inv = spd_inverse(
        a,
        "the features are collinear (or one is constant): X'X is singular to working "
        "precision; drop a feature or give a ridge penalty",
    )
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


def t_tests(fit: Fit) -> dict[str, np.ndarray]:
    """Each term's (intercept, then coefficients) t statistic, two-sided p-value (Student t,
    df residual degrees of freedom) and CI_LEVEL confidence interval."""
    from scipy import stats as sps  # for p-values only: owners never load it

    coef = np.concatenate([[fit.intercept], fit.coefficients])
    se = fit.std_errors
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, coef / np.where(se > 0, se, 1.0), np.nan)
    q = float(sps.t.ppf(0.5 + CI_LEVEL / 2, fit.df))
    p = 2.0 * sps.t.sf(np.abs(t), fit.df)
    return {"coef": coef, "t": t, "p": p, "lower": coef - q * se, "upper": coef + q * se}


def noise_preview(
    plan: Any,
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
    spec, ridge = plan.spec, plan.settings
    d = len(spec.features)
    doc |= {"label_bound": spec.label_bound, "noise_std_per_value": sigma}
    if rows is None:
        return doc
    if rows < d + 2:
        raise DataError(f"rows must be at least {d + 2} for {d} feature(s)", field="rows")
    c = plan.dp.row_norm_bound  # preview_facts checked it is there
    cov = (
        np.asarray(feature_cov, dtype=np.float64).reshape(d, d)
        if feature_cov is not None
        else np.eye(d) * (c * c / d)
    )
    beta = np.asarray(coefficients, dtype=np.float64) if coefficients is not None else np.zeros(d)
    m_x = np.asarray(feature_means, dtype=np.float64) if feature_means is not None else np.zeros(d)
    mean = np.append(m_x, float(label_mean))
    a_inv = np.linalg.inv(rows * cov + ridge * np.eye(d))
    errs = noise_errors(a_inv, beta, mean, float(rows), sigma)
    terms = [INTERCEPT, *spec.features]
    doc["assumed_rows"] = rows
    doc["std_error"] = dict(zip(terms, errs.tolist(), strict=True))
    doc["expected_error"] = {f"coefficient {t}": e for t, e in doc["std_error"].items()}
    floor = eigenvalue_floor(sigma, m_x)
    doc["eigenvalue_floor"] = floor
    checks = [
        SignalCheck("row count", sigma, float(rows)),
        # below the floor the fit is shrunk: the features' scatter must stand above the noise
        SignalCheck(
            "smallest spread of the features", floor, rows * float(np.linalg.eigvalsh(cov)[0])
        ),
    ]
    for j, f in enumerate(spec.features):
        spread = math.sqrt(max(float(cov[j, j]), 0.0))
        largest = spec.label_bound / spread if spread > 0 else math.inf
        checks.append(SignalCheck(f"coefficient of {f}", float(errs[1 + j]), largest))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc
