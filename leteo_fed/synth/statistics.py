"""Exact per-key sums (both engines), their Laplace noise, and the model each cluster releases.

Sensitivities under add/remove of one record (docs/synthetic-data.md derives them):

* the cell histogram: L1 = 1 (the record is in one cell);
* over a group's w numeric columns (values in [0, 1]; categorical columns need no moments:
  the grid cell fixes their value), the cluster sum of x: L1 <= w;
* the cluster sum of the upper triangle (diagonal included) of x x^T:
  L1 = sum_{i <= j} x_i x_j = ((sum x)^2 + sum x_i^2) / 2 <= (w^2 + w) / 2.
  (`summer` also takes one-hot blocks, each adding at most 1 to the sum: the DP grouping uses it.)

Given the partition (itself post-processing of the DP histogram), a record changes only its own
cluster's vectors, so the clusters compose in parallel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import Laplace

Sums = tuple[np.ndarray, np.ndarray, np.ndarray]  # counts [K], S [K, d], Q [K, d, d] (int64)
EXACT_ROWS = 1 << 20  # float64 Gram blocks stay exact: 2^32 per product * 2^20 rows < 2^53


def sum_l1(width: int) -> float:
    """L1 sensitivity of a cluster's sum of x: one record adds at most 1 per released column."""
    return float(width)


def gram_l1(width: int) -> float:
    """L1 sensitivity of the upper triangle of a cluster's sum of x x^T: (w^2 + w) / 2."""
    return width * (width + 1) / 2.0


def upper(d: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(d)


def summer(widths: list[int], n_keys: int) -> Callable[[np.ndarray, np.ndarray], Sums]:
    """`sums(keys, codes)`: exact int64 per-key counts, sums of x and Gram matrices (scaled by
    SCALE and SCALE^2), from the keys and the code matrix [n, columns]. A closure with no
    reference to leteo_fed, so Spark ships it to executors by value."""
    scale = 1 << 16
    block_rows = EXACT_ROWS
    dims = sum(max(w, 1) for w in widths)

    def expand(codes: np.ndarray) -> np.ndarray:
        n = codes.shape[0]
        out = np.zeros((n, dims), dtype=np.int64)
        at, rows = 0, np.arange(n)
        for j, w in enumerate(widths):
            if w == 0:
                out[:, at] = codes[:, j]
                at += 1
            else:
                out[rows, at + codes[:, j]] = scale
                at += w
        return out

    def sums(keys: np.ndarray, codes: np.ndarray) -> Sums:
        counts = np.bincount(keys, minlength=n_keys).astype(np.int64)
        s = np.zeros((n_keys, dims), dtype=np.int64)
        q = np.zeros((n_keys, dims, dims), dtype=np.int64)
        if keys.shape[0] == 0:
            return counts, s, q
        order = np.argsort(keys, kind="stable")
        x = expand(codes[order])
        sorted_keys = keys[order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        ends = np.r_[starts[1:], sorted_keys.shape[0]]
        s[sorted_keys[starts]] = np.add.reduceat(x, starts, axis=0)
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):  # one step per key
            acc = np.zeros((dims, dims), dtype=np.int64)
            for lo in range(a, b, block_rows):
                blk = x[lo : min(b, lo + block_rows)].astype(np.float64)
                acc += (blk.T @ blk).astype(np.int64)  # exact: every partial sum < 2^53
            q[sorted_keys[a]] = acc
        return counts, s, q

    return sums


def pair_counter(levels: list[int], n_classes: int) -> Callable[[np.ndarray], np.ndarray]:
    """`count(block)`: for a block [rows, 1 + k] of (class, grid level of each column), the
    exact int64 counts of every pair of columns per class, as one flat vector (pair (i, j) at
    `pair_offsets`, laid out [class, level_i, level_j]). A closure with no reference to
    leteo_fed, so Spark ships it to executors by value; partial counts add up."""
    k = len(levels)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    sizes = [n_classes * levels[i] * levels[j] for i, j in pairs]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(starts[-1])

    def count(block: np.ndarray) -> np.ndarray:
        out = np.zeros(total, dtype=np.int64)
        cls = block[:, 0]
        for (i, j), at, size in zip(pairs, starts[:-1].tolist(), sizes, strict=True):
            flat = (cls * levels[i] + block[:, 1 + i]) * levels[j] + block[:, 1 + j]
            out[at : at + size] += np.bincount(flat, minlength=size)
        return out

    return count


def pair_offsets(levels: list[int], n_classes: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(start, size) of each pair's counts in `pair_counter`'s vector."""
    out, at = {}, 0
    for i in range(len(levels)):
        for j in range(i + 1, len(levels)):
            size = n_classes * levels[i] * levels[j]
            out[(i, j)] = (at, size)
            at += size
    return out


def split_pairs(
    flat: np.ndarray, levels: list[int], n_classes: int
) -> dict[tuple[int, int], np.ndarray]:
    """The flat vector as {(i, j): [classes, Li * Lj]}."""
    return {
        p: flat[at : at + size].reshape(n_classes, size // n_classes)
        for p, (at, size) in pair_offsets(levels, n_classes).items()
    }


def add_sums(a: Sums, b: Sums) -> Sums:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def total(parts: Iterable[Sums]) -> Sums:
    it = iter(parts)
    acc = next(it)
    for p in it:
        acc = add_sums(acc, p)
    return acc


@dataclass(frozen=True)
class ClusterModel:
    """The released model of a group within one class: the cells' clipped noisy counts and
    their clusters; per cluster the noisy count and, over the group's numeric columns, the mean
    and PSD covariance on the encoded [0, 1] scale (d = 0 without numeric columns)."""

    counts: np.ndarray  # [m] noisy counts (sum of the cells' max(0, noisy) counts)
    cell_counts: np.ndarray  # [cells] noisy count of every cell, 0 below the noise floor
    means: np.ndarray  # [m, d]
    covariances: np.ndarray  # [m, d, d], positive semi-definite
    factors: np.ndarray  # [m, d, d], F with F F^T = covariance (drawing x = mu + F z)
    cluster_of_cell: np.ndarray  # [cells] the partition (post-processing of the histogram)


RESOLVED_NOISE_SDS = 2.0  # a variance this many noise standard deviations up is measured


def laplace(budget_epsilon: float, l1: float) -> Laplace:
    return Laplace.calibrate(Budget(budget_epsilon, 0.0), l1)


def inverse_variance_mean(estimates: np.ndarray, variances: np.ndarray) -> tuple[np.ndarray, float]:
    """(per row of `estimates` [rows, K], the K unbiased estimates combined with weights
    1 / variance; the combination's standard deviation): the least-variance unbiased mean."""
    w = 1.0 / np.maximum(np.asarray(variances, dtype=float), 1e-300)
    return estimates @ w / w.sum(), float(np.sqrt(1.0 / w.sum()))


def noise_shrinkage(value: np.ndarray, noise_var: np.ndarray | float) -> np.ndarray:
    """The share max(0, 1 - v / x^2) of a noisy value x kept when its noise has variance v
    (positive-part shrinkage): a value the noise alone would explain is dropped, one far above
    it is kept whole."""
    return np.maximum(0.0, 1.0 - noise_var / np.maximum(value * value, 1e-300))


def noisy_moments(
    exact_s: np.ndarray,
    exact_q: np.ndarray,
    width: int,
    eps_sums: float,
    eps_cov: float,
    rng_sums: np.random.Generator,
    rng_cov: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """(noisy S [m, d], noisy symmetric Q [m, d, d]) on the [0, 1] scale: Laplace on S at
    L1 = w and on the upper triangle of Q at L1 = w(w+1)/2 (scales from the mechanism layer)."""
    scale = float(1 << 16)
    m, d = exact_s.shape
    s = exact_s / scale + np.asarray(laplace(eps_sums, sum_l1(width)).sample((m, d), rng_sums))
    iu = upper(d)
    tri = exact_q[:, iu[0], iu[1]] / (scale * scale)
    tri = tri + np.asarray(laplace(eps_cov, gram_l1(width)).sample(tri.shape, rng_cov))
    q = np.zeros((m, d, d))
    q[:, iu[0], iu[1]] = tri
    q[:, iu[1], iu[0]] = tri
    return s, q


def gaussian_model(
    counts: np.ndarray,
    s: np.ndarray,
    q: np.ndarray,
    q_scale: float = 0.0,
    s_scale: float = 0.0,
    prior: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means clip(S / N, 0, 1) (blended with the histogram's estimate when `prior` is given),
    covariances Q / N - mu mu^T repaired to PSD by clipping the
    eigenvalues at 0 (post-processing; no redraw until positive definite), and their factors
    V sqrt(W).

    `q_scale` (the public Laplace scale of Q's noise) shrinks each off-diagonal entry towards 0
    by the positive part of 1 - v / c^2, v = 2 q_scale^2 / N^2 the noise variance of the entry
    c: a correlation the noise alone would explain is not passed on to the generated rows (in
    the copula it would become a strong spurious dependence). Post-processing too.

    It also raises each variance to at least sqrt(v), the noise's standard deviation on that
    entry: a variance the noise cannot resolve is not a point mass. Clipped to 0 instead, it
    stacked every row of a cluster on its noisy mean (issue 32: Adult's capital-gain at 10
    equal bins, every synthetic `<=50K` row at 1,106 while 96% of the real ones are 0, and a
    classifier trained on the result called nearly every real 0 `>50K`: accuracy 0.25).

    A covariance with a column whose variance is below `RESOLVED_NOISE_SDS` noise standard
    deviations is set to 0: a correlation between spreads the noise cannot resolve is noise.
    Kept, it met the variances raised to the floor, and the PSD repair turned it into +/-1
    (issue 32: Adult's largest `<=50K` cell of fnlwgt x hours-per-week at 4 bins, real
    within-cell correlation -0.02, released as +1.00: every synthetic row with a low fnlwgt
    got short hours, and a classifier trained on the table read those cells as `>50K`)."""
    n = np.maximum(counts, 1.0)[:, None]
    mu = s / n
    if prior is not None and s_scale > 0:
        # S / N carries Laplace noise of variance 2 s_scale^2 / N^2; the histogram's own
        # estimate (`partition.cluster_bin_means`) has the variance of a value within its
        # bin. Weighted by the inverse variances: for a large cluster S / N decides; for a
        # small one at a small epsilon, whose S / N noise can exceed the whole [0, 1] range
        # (and clipped, sat every value on a bound), the histogram does.
        prior_mu, prior_var = prior
        var_s = 2.0 * s_scale * s_scale / (n * n)
        mu = (mu * prior_var + prior_mu * var_s) / np.maximum(prior_var + var_s, 1e-300)
    mu = np.clip(mu, 0.0, 1.0)
    cov = q / n[:, :, None] - mu[:, :, None] * mu[:, None, :]
    cov = (cov + np.swapaxes(cov, 1, 2)) / 2.0
    if q_scale > 0:
        v = (2.0 * q_scale * q_scale / (n * n))[:, :, None]
        keep = noise_shrinkage(cov, v)
        floor = np.minimum(np.sqrt(v), 0.25)  # 1/4: the largest variance on [0, 1]
        diag = np.eye(cov.shape[1], dtype=bool)
        variance = np.diagonal(cov, axis1=1, axis2=2)  # [m, d]
        resolved = variance >= RESOLVED_NOISE_SDS * floor[:, :, 0]
        keep = keep * (resolved[:, :, None] & resolved[:, None, :])
        cov = np.where(diag, np.maximum(cov, floor), cov * keep)
    if cov.shape[0] == 0 or cov.shape[1] == 0:
        return mu, cov, cov.copy()
    w, v = np.linalg.eigh(cov)
    w = np.maximum(w, 0.0)
    return mu, (v * w[:, None, :]) @ np.swapaxes(v, 1, 2), v * np.sqrt(w)[:, None, :]
