"""Federated k-means as pure functions the services call.

One iteration of a job: the aggregator publishes the current centers c_1..c_k; owner n assigns
each of its rows to the nearest center (squared Euclidean distance, ties to the lowest index) and
shares, for ALL k clusters (zero where it has no row), the sum S_j^n = sum of its rows in cluster j
(d values at scale 2^f) and the count N_j^n (at scale 2^count_scale_bits), k (d + 1) values in all.
The aggregator recovers the exact integer totals S_j, N_j and sets

    c_j' = S_j / (N_j 2^f)           (exact rational, one correctly rounded division per entry)
    c_j' = c_j    when N_j = 0        (an empty cluster keeps its previous center)

which is one Lloyd step on the pooled rows. It stops after T iterations or once no center moved
more than the tolerance (L2 norm), whichever comes first.

Differential privacy (optional): every owner clips each row to L2 norm <= C and adds its share of
Skellam noise to every encoded value (distributed noise, `leteo_fed.privacy.distributed_noise`).
One row changes exactly one cluster's sum (by at most C) and count (by 1), whatever the centers,
because a row's assignment depends only on the row and the public centers; `sensitivity` states
the bound. The job's (epsilon, delta) covers all T iterations together by Renyi composition: the
per-iteration Skellam noise is calibrated so that the RDP curves of T iterations, added (RDP
composes adaptively) and converted once at delta, give at most epsilon (`Skellam.calibrate(...,
compositions=T)`, by `iterative_protocol.IterativeSecureSumProtocol` at `sensitivity`). That needs far less noise than splitting the budget
into T (epsilon / T, delta / T) releases (basic composition; about 12x less variance at T = 20,
epsilon = 1, delta = 1e-6). An owner's ledger charges each iteration its Skellam event (RDP
ledger) or, under basic composition, the increment eps(m) - eps(m - 1) of the RDP bound of the
m iterations it took part in, so a job that stops early has spent exactly eps(t). Noisy counts are
rounded to whole rows; a cluster whose noisy count is below one keeps its previous center; every
new center is projected onto the ball of radius C (it contains every clipped row, hence the true
mean). Both steps are post-processing and cost no privacy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.packing import encode_fixed
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
)
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise

PROTOCOL = "kmeans"
METHOD = "federated-kmeans"
DEFAULT_SCALE_BITS = defaults.KMEANS_DEFAULT_SCALE_BITS
DP_DEFAULT_SCALE_BITS = defaults.KMEANS_DP_DEFAULT_SCALE_BITS
DEFAULT_VALUE_BOUND = defaults.DEFAULT_VALUE_BOUND
DEFAULT_ITERATIONS = defaults.KMEANS_DEFAULT_ITERATIONS
MAX_ITERATIONS = 1000


# --------------------------------------------------------------------------------------------
# encoding


def data_bound(value_bound: float, max_rows: int, scale_bits: int, count_scale_bits: int) -> int:
    """Largest |encoded value| of one owner: a cluster sum has |S_ji| <= rows * B (scaled), a
    count N_j <= rows (scaled); the noise of DP rounds comes on top (`ShareEncoding`)."""
    b = math.ceil(value_bound)
    return max(max_rows * b << scale_bits, max_rows << count_scale_bits, 1)


def encoding(
    scale_bits: int = DEFAULT_SCALE_BITS,
    value_bound: float = DEFAULT_VALUE_BOUND,
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER,
    max_owners: int = DEFAULT_MAX_OWNERS,
    count_scale_bits: int = 0,
    noise_bound: int = 0,
) -> ShareEncoding:
    """The share encoding of a k-means iteration; identical for all owners."""
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


def n_values(k: int, d: int) -> int:
    return k * (d + 1)


def encode_cluster_stats(sums: np.ndarray, counts: np.ndarray, enc: ShareEncoding) -> list[int]:
    """Per cluster j: S_j (d values, round(s 2^f)), then N_j 2^count_scale_bits.

    Refuses (EncodingError) any value beyond the per-owner bound and more rows than declared."""
    sums = np.asarray(sums, dtype=np.float64)
    counts = np.asarray(counts)
    k, d = sums.shape
    if counts.shape != (k,):
        raise EncodingError(f"{k} cluster sums but {counts.shape} counts")
    total = int(counts.sum())
    if total > enc.max_rows_per_owner:
        raise EncodingError(
            f"row count {total} exceeds max_rows_per_owner {enc.max_rows_per_owner}"
        )
    flat = encode_fixed(sums, enc.scale_bits, enc.data_bound, "per-cluster sum of x")
    out: list[int] = []
    for j in range(k):
        out.extend(flat[j * d : (j + 1) * d])
        out.append(int(counts[j]) << enc.count_scale_bits)
    return out


@dataclass(frozen=True)
class ClusterTotals:
    """Exact aggregate of one iteration: integer sums (k x d, scale 2^f) and whole-row counts."""

    sums: list[list[int]]
    counts: list[int]
    scale_bits: int

    @property
    def k(self) -> int:
        return len(self.counts)


def decode_totals(
    totals: Sequence[int], k: int, d: int, enc: ShareEncoding, noisy: bool = False
) -> ClusterTotals:
    """Signed integer totals -> per-cluster sums and counts. Counts are rounded to whole rows
    (DP rounds scale them); a negative count is a corrupted aggregate unless the round is noisy,
    where it is reported as 0."""
    if len(totals) != n_values(k, d):
        raise ProtocolError(f"expected {n_values(k, d)} totals, got {len(totals)}")
    sums, counts = [], []
    cs = enc.count_scale_bits
    for j in range(k):
        row = [int(v) for v in totals[j * (d + 1) : (j + 1) * (d + 1)]]
        sums.append(row[:d])
        count = row[d] if not cs else (row[d] + (1 << (cs - 1))) >> cs  # nearest whole row
        if count < 0 and not noisy:
            raise ProtocolError(f"negative count for cluster {j}: corrupted aggregate")
        counts.append(max(count, 0))  # a noisy count below zero means no rows (post-processing)
    return ClusterTotals(sums, counts, enc.scale_bits)


# --------------------------------------------------------------------------------------------
# one Lloyd step, owner side and aggregator side


def assign(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest center of every row (squared Euclidean distance computed as the sum
    of squared differences, not by expansion, so it has no cancellation; ties go to the lowest
    index). Each row's label depends only on that row and the centers."""
    x = np.asarray(x, dtype=np.float64)
    centers = np.asarray(centers, dtype=np.float64)
    n = x.shape[0]
    labels = np.empty(n, dtype=np.int64)
    step = max(1, (1 << 22) // max(1, centers.size))  # about 32 MiB of differences at a time
    for start in range(0, n, step):
        diff = x[start : start + step, None, :] - centers[None, :, :]
        labels[start : start + step] = np.argmin((diff * diff).sum(axis=2), axis=1)
    return labels


def cluster_stats(x: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(k x d sums, k counts) of the rows per cluster; zero for clusters without rows.

    Each cluster's sum is computed from that cluster's rows alone (in their original order), so
    adding or removing a row leaves every other cluster's sum bit-identical."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(k + 1))
    sorted_x = x[order]
    sums = np.zeros((k, x.shape[1]))
    for j in range(k):
        a, b = bounds[j], bounds[j + 1]
        if b > a:
            sums[j] = sorted_x[a:b].sum(axis=0)
    counts = np.diff(bounds).astype(np.int64)
    return sums, counts


@dataclass(frozen=True)
class CenterUpdate:
    centers: np.ndarray  # k x d
    counts: list[int]  # (noisy, in DP rounds) rows per cluster under the previous centers
    empty: list[int]  # clusters that kept their previous center
    shift: float  # max over clusters of the L2 distance moved


def update_centers(
    totals: ClusterTotals,
    previous: np.ndarray,
    min_count: int = 1,
    clip_norm: float | None = None,
) -> CenterUpdate:
    """New centers from exact totals: S_j / (N_j 2^f), one correctly rounded division per entry.
    A cluster with fewer than `min_count` rows (0 rows; in DP rounds a noisy count below one)
    keeps its previous center. With `clip_norm` (DP) every new center is projected onto the ball
    of that radius (post-processing)."""
    prev = np.asarray(previous, dtype=np.float64)
    k, d = prev.shape
    if totals.k != k or any(len(s) != d for s in totals.sums):
        raise ProtocolError(f"totals for {totals.k} clusters do not match {k} x {d} centers")
    new = prev.copy()
    empty = []
    f = totals.scale_bits
    for j in range(k):
        n = totals.counts[j]
        if n < min_count:
            empty.append(j)
            continue
        den = n << f
        new[j] = [s / den for s in totals.sums[j]]  # int / int: correctly rounded in Python
    if clip_norm is not None:
        new = project_to_ball(new, clip_norm)
    return CenterUpdate(new, list(totals.counts), empty, center_shift(prev, new))


def project_to_ball(centers: np.ndarray, radius: float) -> np.ndarray:
    norms = np.linalg.norm(centers, axis=1)
    scale = np.where(norms > radius, radius / np.maximum(norms, np.finfo(float).tiny), 1.0)
    return centers * scale[:, None]


def center_shift(old: np.ndarray, new: np.ndarray) -> float:
    """Largest L2 distance any center moved."""
    return float(np.max(np.linalg.norm(np.asarray(new) - np.asarray(old), axis=1)))


def inertia(x: np.ndarray, centers: np.ndarray) -> float:
    """Sum over rows of the squared distance to the nearest center (the k-means objective)."""
    labels = assign(x, centers)
    diff = np.asarray(x, dtype=np.float64) - np.asarray(centers)[labels]
    return float((diff * diff).sum())


# --------------------------------------------------------------------------------------------
# centralized reference (the demo's and the tests' Lloyd on the pooled rows)


@dataclass(frozen=True)
class LloydResult:
    centers: np.ndarray
    history: list[np.ndarray]  # centers after every iteration
    counts: list[list[int]]  # rows per cluster in every iteration
    shifts: list[float]
    converged: bool

    @property
    def iterations(self) -> int:
        return len(self.history)


def lloyd_step(x: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """One centralized Lloyd step on pooled rows (NumPy means); empty clusters keep their center."""
    labels = assign(x, centers)
    new = np.array(centers, dtype=np.float64, copy=True)
    counts = []
    for j in range(len(new)):
        rows = x[labels == j]
        counts.append(len(rows))
        if len(rows):
            new[j] = rows.mean(axis=0)
    return new, counts


def lloyd(x: np.ndarray, init: np.ndarray, iterations: int, tolerance: float = 0.0) -> LloydResult:
    """Centralized Lloyd iterations from `init`, with the federated job's stopping rule: at most
    `iterations` steps, stop after the first step in which no center moved more than
    `tolerance`."""
    x = np.asarray(x, dtype=np.float64)
    centers = np.array(init, dtype=np.float64, copy=True)
    history, counts, shifts = [], [], []
    converged = False
    for _ in range(iterations):
        new, n = lloyd_step(x, centers)
        shifts.append(center_shift(centers, new))
        history.append(new)
        counts.append(n)
        centers = new
        if shifts[-1] <= tolerance:
            converged = True
            break
    return LloydResult(centers, history, counts, shifts, converged)


# --------------------------------------------------------------------------------------------
# differential privacy


def sensitivity(
    row_norm_bound: float, scale_bits: int, d: int, k: int, count_scale_bits: int
) -> noise.Sensitivity:
    """L1/L2 sensitivity, in integer units, of one owner's k-means share when one row x with
    ||x||_2 <= C is added or removed (the centers are public and fixed for the iteration).

    The row lands in exactly one cluster j (its label depends on x and the centers only):
      S_j changes by x, encoded: L2 <= C F + sqrt(d), L1 <= sqrt(d) C F + d   (F = 2^f; the
          sqrt(d) and d are the rounding slack: |round(aF) - round(bF)| <= |a - b| F + 1);
      N_j changes by F_c = 2^count_scale_bits exactly.
    Every other cluster's rows are unchanged; `cluster_stats` sums them alone, so their sums are
    bit-identical, but we still allow each of their (k - 1) d encoded values a rounding slack of 1
    (the same conservative assumption as `sensitivities_for_scatter` with n_classes).
      L2 = sqrt((C F + sqrt(d))^2 + F_c^2 + (k - 1) d)
      L1 = sqrt(d) C F + d + F_c + (k - 1) d,  capped by min(L2^2, sqrt(k (d + 1)) L2)
    Neighbouring is add/remove-one-row; for replace-one, double both.
    """
    c = float(row_norm_bound)
    if not (math.isfinite(c) and c > 0):
        raise DataError(f"row_norm_bound must be a positive number, got {row_norm_bound}")
    f, fc = float(2**scale_bits), float(2**count_scale_bits)
    l2_v = c * f + math.sqrt(d)
    l1_v = math.sqrt(d) * c * f + d
    others = (k - 1) * d
    l2_sq = l2_v**2 + fc**2 + others
    l2 = math.sqrt(l2_sq)
    l1 = min(l1_v + fc + others, l2_sq, math.sqrt(n_values(k, d)) * l2)
    return noise.Sensitivity(l1=l1, l2=l2)


def split_budget(epsilon: float, delta: float, iterations: int) -> tuple[float, float]:
    """Even split of the job's (epsilon, delta) over T iterations (basic sequential composition:
    T releases that are each (epsilon / T, delta / T)-DP are together (epsilon, delta)-DP).
    No longer how jobs are calibrated (they compose by RDP); kept as the reference the RDP
    calibration is measured against."""
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise DataError(
            f"iterations must be an integer >= 1, got {iterations!r}", field="iterations"
        )
    return epsilon / iterations, delta / iterations


def dp_count_scale_bits(row_norm_bound: float, scale_bits: int, d: int) -> int:
    """Scale of the counts in DP rounds: 2^(f + w) with 2^w ~ C / d^(1/4), at least 2^f.

    Every encoded value gets the same integer noise (std s), so a count weighted by W = 2^(f + w)
    has noise s / W rows and a sum coordinate s / 2^f. To first order the error of a new center
    is (e_S - c e_N) / N with |c| <= C, so its squared size is proportional to
    (C^2 + W'^2)(d + C^2 / W'^2) (W' = W / 2^f; the first factor is the squared sensitivity that
    sets s), minimized at W'^2 = C^2 / sqrt(d). Rounded to a power of two, never below 1."""
    w = math.log2(row_norm_bound / d**0.25) if row_norm_bound > 0 else 0.0
    return scale_bits + max(0, round(w))


def noise_std(mu: float, quorum: int, n_shares: int, scale_bits: int) -> float:
    """Standard deviation of the aggregate noise per value in real units: pass the scale of sums
    for sum coordinates, the count scale for counts (in rows)."""
    return math.sqrt(2 * noise.effective_mu(mu, quorum, n_shares)) / 2**scale_bits
