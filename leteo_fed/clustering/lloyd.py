"""Plain (weighted) Lloyd iterations and k-means++ seeding as small pure NumPy functions.

Shared by the DP k-means methods (which run them on a DP synopsis or core-set, so nothing here
touches private data in those uses) and usable by a federated k-means, whose rounds are exactly
`assign` at the owners, a secure sum of the per-cluster sums and counts, then `update`.
"""

from __future__ import annotations

import numpy as np

CHUNK_ROWS = 65_536  # rows per distance block: bounds memory at CHUNK_ROWS x k float64


def _sq_distances(x: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """||x - c||² for every row and center, as ||x||² - 2 x.c + ||c||² floored at 0.

    The products go through einsum, not BLAS: these n x d by d x k products are skinny, and a
    multi-threaded BLAS spends more time synchronizing threads than computing on them (10x
    slower measured on a loaded 2-core host); einsum is single-threaded and deterministic.
    """
    d2 = (
        np.einsum("ij,ij->i", x, x)[:, None]
        - 2.0 * np.einsum("ij,kj->ik", x, centers)
        + np.einsum("ij,ij->i", centers, centers)[None, :]
    )
    return np.maximum(d2, 0.0)


def assign_with_distances(points: np.ndarray, centers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the nearest center, squared distance to it) per row, in blocks of CHUNK_ROWS."""
    x = np.asarray(points, dtype=np.float64)
    c = np.asarray(centers, dtype=np.float64)
    labels = np.empty(x.shape[0], dtype=np.int64)
    best = np.empty(x.shape[0])
    for start in range(0, x.shape[0], CHUNK_ROWS):
        d2 = _sq_distances(x[start : start + CHUNK_ROWS], c)
        lab = np.argmin(d2, axis=1)
        labels[start : start + CHUNK_ROWS] = lab
        best[start : start + CHUNK_ROWS] = d2[np.arange(d2.shape[0]), lab]
    return labels, best


def assign(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Index of the nearest center (squared Euclidean distance; ties go to the lowest index)."""
    return assign_with_distances(points, centers)[0]


def cluster_sums(
    points: np.ndarray, labels: np.ndarray, k: int, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(k x d per-cluster weighted sums, k weighted counts): what a Lloyd round aggregates."""
    x = np.asarray(points, dtype=np.float64)
    w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    counts = np.bincount(labels, weights=w, minlength=k)
    sums = np.empty((k, x.shape[1]))
    for j in range(x.shape[1]):  # O(n) per feature; memory O(k d), not O(k n)
        sums[:, j] = np.bincount(labels, weights=w * x[:, j], minlength=k)
    return sums, counts


def update(sums: np.ndarray, counts: np.ndarray, old_centers: np.ndarray) -> np.ndarray:
    """New centers sums / counts; a cluster with count <= 0 keeps its old center.

    Keeping the old center (rather than re-seeding it from the data) means an empty cluster costs
    no extra data access, which matters when sums and counts are noisy or aggregated securely.
    """
    s = np.asarray(sums, dtype=np.float64)
    c = np.asarray(counts, dtype=np.float64)
    old = np.asarray(old_centers, dtype=np.float64)
    ok = c > 0
    new = old.copy()
    new[ok] = s[ok] / c[ok, None]
    return new


def kmeans_loss(
    points: np.ndarray, centers: np.ndarray, weights: np.ndarray | None = None
) -> float:
    """Normalized k-means loss: (weighted) mean squared distance to the nearest center."""
    _, d2 = assign_with_distances(points, centers)
    if weights is None:
        return float(d2.mean())
    w = np.asarray(weights, dtype=np.float64)
    return float(np.dot(w, d2) / w.sum())


def kmeans_plus_plus(
    points: np.ndarray, k: int, rng: np.random.Generator, weights: np.ndarray | None = None
) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii 2007), each draw proportional to w · D².

    With fewer than k points of positive weight-distance, the remaining centers are drawn
    proportionally to the weights alone (so duplicates can occur; Lloyd then leaves them be).
    """
    x = np.asarray(points, dtype=np.float64)
    w = np.ones(x.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if x.shape[0] == 0 or not np.any(w > 0):
        raise ValueError("k-means++ needs at least one point of positive weight")
    w = np.maximum(w, 0.0)
    centers = np.empty((k, x.shape[1]))
    first = rng.choice(x.shape[0], p=w / w.sum())
    centers[0] = x[first]
    d2 = _sq_distances(x, centers[:1])[:, 0]
    for i in range(1, k):
        p = w * d2
        total = p.sum()
        idx = (
            rng.choice(x.shape[0], p=p / total)
            if total > 0
            else rng.choice(x.shape[0], p=w / w.sum())
        )
        centers[i] = x[idx]
        d2 = np.minimum(d2, _sq_distances(x, centers[i : i + 1])[:, 0])
    return centers


def lloyd(
    points: np.ndarray,
    centers: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    max_iter: int = 100,
    tol: float = 1e-7,
) -> tuple[np.ndarray, float]:
    """Weighted Lloyd iterations from `centers` until the centers move less than tol (relative
    to the data's scale) or max_iter; returns (centers, weighted mean squared distance)."""
    x = np.asarray(points, dtype=np.float64)
    c = np.asarray(centers, dtype=np.float64).copy()
    k = c.shape[0]
    scale = max(float(np.max(np.abs(x))) if x.size else 1.0, 1e-300)
    for _ in range(max_iter):
        labels = assign(x, c)
        sums, counts = cluster_sums(x, labels, k, weights)
        new = update(sums, counts, c)
        moved = float(np.max(np.abs(new - c)))
        c = new
        if moved <= tol * scale:
            break
    return c, kmeans_loss(x, c, weights)


def weighted_kmeans(
    points: np.ndarray,
    k: int,
    rng: np.random.Generator,
    weights: np.ndarray | None = None,
    *,
    n_init: int = 5,
    max_iter: int = 100,
) -> np.ndarray:
    """Best of n_init runs of k-means++ then Lloyd, by weighted loss on the given points."""
    best, best_loss = None, np.inf
    for _ in range(n_init):
        c, loss = lloyd(
            points, kmeans_plus_plus(points, k, rng, weights), weights, max_iter=max_iter
        )
        if loss < best_loss:
            best, best_loss = c, loss
    assert best is not None
    return best
