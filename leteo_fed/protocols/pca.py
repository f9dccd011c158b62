"""Federated PCA as pure functions the services call.

Owner n holds rows X^n and shares R^n = sum x x^T (upper triangle), V^n = sum x and Q^n = |X^n|.
R and V are encoded at scale 2^f, Q exactly. The aggregator recovers the integer totals and
computes the scatter matrix exactly in integer arithmetic,
    S = R - V V^T / Q = (Q R_int 2^f - V_int V_int^T) / (Q 2^(2f)),
so after the owners' float64 sums and the 2^-f fixed-point step, the only rounding is one
conversion per entry to float64: no cancellation error from subtracting V V^T / Q.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError
from leteo_fed.protocols import moments

PROTOCOL = "pca"


def n_values(d: int) -> int:
    return d * (d + 1) // 2 + d + 1


@dataclass(frozen=True)
class LocalStatistics:
    r: np.ndarray  # d x d, sum of x x^T
    v: np.ndarray  # d, sum of x
    q: int  # row count


def local_statistics(x: np.ndarray) -> LocalStatistics:
    x = np.asarray(x, dtype=np.float64)
    return LocalStatistics(r=x.T @ x, v=x.sum(axis=0), q=int(x.shape[0]))


def share_values(stats: LocalStatistics, enc: ShareEncoding) -> list[int]:
    """Encoded share: R upper triangle (row-major), then V, then Q."""
    return moments.encode_moments(
        as_moments(stats), enc.scale_bits, enc.data_bound, enc.max_rows_per_owner
    )


def as_moments(stats: LocalStatistics) -> moments.LocalMoments:
    """PCA statistics are the moments of one grouping with a single class."""
    return moments.LocalMoments(stats.r, [stats.v[None, :]], [np.array([stats.q], dtype=np.int64)])


@dataclass
class PcaResult:
    features: list[str]
    n_samples: int
    eigenvalues: list[float]
    components: list[list[float]]
    explained_variance_ratio: list[float]
    mean: list[float]
    standardized: bool
    all_eigenvalues: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "protocol": PROTOCOL,
            "features": self.features,
            "n_samples": self.n_samples,
            "eigenvalues": self.eigenvalues,
            "eigenvalue_normalization": (
                "correlation matrix" if self.standardized else "sample covariance, divisor n-1"
            ),
            "components": self.components,
            "explained_variance_ratio": self.explained_variance_ratio,
            "mean": self.mean,
            "standardized": self.standardized,
        }


def pca_from_scatter(
    scatter: np.ndarray,
    mean: np.ndarray,
    n_samples: int,
    features: Sequence[str],
    components: int,
    standardize: bool = False,
    psd_project: bool = False,
) -> PcaResult:
    """`psd_project` (DP rounds): negative eigenvalues of the noisy covariance are set to zero,
    a post-processing step that keeps explained-variance ratios meaningful."""
    d = scatter.shape[0]
    if not 1 <= components <= d:
        raise DataError(f"components must be in 1..{d}, got {components}")
    cov = scatter / (n_samples - 1)
    if standardize:
        sd = np.sqrt(np.diag(cov))
        if np.any(sd == 0):
            zero = [features[int(i)] for i in np.flatnonzero(sd == 0)]
            raise DataError(f"cannot standardize constant column(s): {', '.join(zero)}")
        cov = cov / np.outer(sd, sd)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    evals, evecs = evals[order], evecs[:, order]
    if psd_project:
        evals = np.maximum(evals, 0.0)
    evecs = orient_components(evecs)
    total = float(np.sum(evals))
    return PcaResult(
        features=list(features),
        n_samples=int(n_samples),
        eigenvalues=[float(v) for v in evals[:components]],
        components=[[float(c) for c in evecs[:, i]] for i in range(components)],
        explained_variance_ratio=[float(v / total) for v in evals[:components]],
        mean=[float(m) for m in mean],
        standardized=standardize,
        all_eigenvalues=[float(v) for v in evals],
    )


def orient_components(vectors: np.ndarray) -> np.ndarray:
    """Deterministic sign: the largest-magnitude weight of each component is positive."""
    idx = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[idx, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1
    return vectors * signs


def pca_from_moments(
    agg: moments.IntegerMoments,
    features: Sequence[str],
    components: int,
    standardize: bool = False,
    psd_project: bool = False,
) -> PcaResult:
    scatter = moments.total_scatter(agg)
    return pca_from_scatter(
        scatter, moments.mean(agg), agg.n, features, components, standardize, psd_project
    )


def reference_pca(x: np.ndarray, components: int, standardize: bool = False):
    """Centralized PCA on pooled rows with NumPy: the independent check for the protocol."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    centered = x - mean
    if standardize:
        centered = centered / centered.std(axis=0, ddof=1)
    cov = centered.T @ centered / (x.shape[0] - 1)
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    return evals[order][:components], orient_components(evecs[:, order])[:, :components], mean
