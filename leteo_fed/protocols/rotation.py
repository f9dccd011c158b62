"""Projection-only mode: a secret random rotation hides feature directions from the CSP.

The aggregator draws Omega uniformly (Haar) from the orthogonal group and gives it to the owners
only. Owners send the moments of rotated rows x' = Omega x, i.e. R' = Omega R Omega^T and
V_k' = Omega V_k (counts unchanged). Scatter matrices rotate the same way, S' = Omega S Omega^T,
and so do the ridge terms (rho I), so every method's generalized eigenvectors satisfy
w' = Omega w with unchanged eigenvalues. The CSP decrypts the rotated aggregate, solves the
eigenproblem and returns the top-k rotated directions; only the aggregator can map them back.

What the CSP learns: (R', V', M) for a uniformly random unknown Omega, i.e. exactly the
rotation-invariant functions of the aggregate: the row and class counts, the eigenvalues of R and
of the scatter matrices, the norms of the class sums and their angles with each other and with
R's eigenvectors. It learns no feature direction. The aggregator learns only the returned
directions and eigenvalues, never an aggregate.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols import discriminant, moments, pca
from leteo_fed.protocols.moments import Grouping

ORTHOGONALITY_TOLERANCE = 1e-9


def random_rotation(d: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """Haar-distributed orthogonal matrix: QR of a Gaussian matrix with the signs fixed."""
    rng = rng or np.random.default_rng(secrets.randbits(128))
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def rotation_from_wire(values: Sequence[float], d: int) -> np.ndarray:
    if len(values) != d * d:
        raise DataError(f"rotation has {len(values)} entries, expected {d}x{d}", field="rotation")
    omega = np.asarray(values, dtype=np.float64).reshape(d, d)
    if not np.all(np.isfinite(omega)):
        raise DataError("rotation has non-finite entries", field="rotation")
    error = np.max(np.abs(omega @ omega.T - np.eye(d)))
    if error > ORTHOGONALITY_TOLERANCE:
        raise DataError(f"rotation is not orthogonal (max deviation {error:.2e})", field="rotation")
    return omega


def rotate_moments(mom: moments.LocalMoments, omega: np.ndarray) -> moments.LocalMoments:
    """Moments of the rotated rows, from the moments of the rows (exact up to float rounding)."""
    return moments.LocalMoments(
        r=omega @ mom.r @ omega.T,
        v=[v @ omega.T for v in mom.v],
        m=[m.copy() for m in mom.m],
    )


def placeholder_groupings(classes_per_grouping: Sequence[int]) -> list[Grouping]:
    """The CSP never sees class names, only how many classes each grouping has."""
    if not classes_per_grouping:
        return [moments.ALL_ROWS]
    return [
        Grouping(f"label-{i}", tuple(str(c) for c in range(k)))
        for i, k in enumerate(classes_per_grouping)
    ]


def directions(
    agg: moments.IntegerMoments,
    method: str,
    groupings: Sequence[Grouping],
    components: int,
    ridge: discriminant.Ridge,
    noisy: bool = False,
) -> tuple[list[float], np.ndarray, list[float], dict]:
    """CSP side: (eigenvalues, k x d rotated directions, explained variance ratio, ridge)."""
    features = [f"x{i}" for i in range(agg.d)]
    if method == pca.PROTOCOL:
        res = pca.pca_from_moments(agg, features, components, psd_project=noisy)
        return res.eigenvalues, np.array(res.components), res.explained_variance_ratio, {}
    dis = discriminant.from_aggregate(agg, method, groupings, features, components, ridge)
    return dis.eigenvalues, np.array(dis.components), [], dis.ridge


def rotate_back(rotated: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Rows w'^T (k x d) -> w^T = w'^T Omega, signs fixed as everywhere else."""
    return pca.orient_components((rotated @ omega).T).T
