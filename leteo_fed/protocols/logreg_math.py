"""The math of federated logistic regression (`logreg`), as pure functions: one owner's sums at
published coefficients, the Newton step from the pooled sums, the noise's error of each term.

At coefficients beta (the intercept, then one per feature) an owner's rows give, with
x~ = [1, x], y = 1 for the positive class else 0 and p = 1 / (1 + exp(-x~^T beta)),

    g = sum (y - p) x~            (the gradient of the log-likelihood, d + 1 values)
    H = sum p (1 - p) x~ x~^T     (minus its Hessian: the upper triangle, (d+1)(d+2)/2 values)

and the aggregator takes beta + H^-1 g from the pooled sums (`newton_step`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.encoding.packing import encode_fixed
from leteo_fed.encoding.share import ShareEncoding, check_row_count
from leteo_fed.errors import DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.protocols import moments_round
from leteo_fed.protocols.linreg_fit import (
    FLOOR_FACTOR,
    floor_eigenvalues,
    spd_inverse,
)
from leteo_fed.protocols.statistic import Totals

# without DP: sum p (1 - p) below this x n means every row is predicted with certainty
SEPARATION_WEIGHT = 1e-8


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
    check_row_count(rows, enc.max_rows_per_owner)
    iu = np.triu_indices(len(g))
    values = encode_fixed(
        np.concatenate([g, h[iu]]), enc.scale_bits, enc.data_bound, "gradient and Hessian sums"
    )
    return [*values, rows << enc.count_scale_bits]


@dataclass(frozen=True)
class Sums:
    """The pooled sums of an iteration in real units: g, H (symmetric) and the row count."""

    gradient: np.ndarray
    hessian: np.ndarray
    n: int


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


# ------------------------------------------------------------------ the Newton step


@dataclass(frozen=True)
class NewtonStep:
    beta: np.ndarray  # the new coefficients
    step: np.ndarray
    hessian_inverse: np.ndarray  # at the iteration's coefficients (after any floor)
    floored: int = 0


def newton_step(
    beta: np.ndarray,
    totals: Sums,
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
    h_inv = spd_inverse(
        h,
        "the Hessian is singular to working precision: a feature is constant or collinear "
        "with others, or the classes are (quasi-)separated; drop a feature",
    )
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


def pooled(totals: Totals, d: int, noisy: bool) -> Sums:
    """The pooled g, H (symmetric) and n in real units; a noisy count rounded to whole rows
    (>= 0)."""
    k = n_terms(d)
    h = np.zeros((k, k))
    h[np.triu_indices(k)] = totals.real("hessian")
    h = h + np.triu(h, 1).T
    (count,), bits = totals.encoded("rows")
    n = max(0, round(count / 2**bits)) if noisy else int(count) >> bits
    return Sums(totals.real("gradient"), h, n)


def check_classes(label_column: str, positive_class: str, n: int, positives: int, d: int) -> None:
    """Without DP: enough rows for the fit, and both classes."""
    if n < d + 2:
        raise DataError(
            f"the pooled data is {n} rows; a fit of {d} feature(s) and an intercept needs "
            f"at least {d + 2}",
            rule="rows",
        )
    if positives in (0, n):
        which = "no row" if positives == 0 else "every row"
        raise DataError(
            f"{which} of label column '{label_column}' is '{positive_class}': "
            "one class only, nothing to fit"
        )
