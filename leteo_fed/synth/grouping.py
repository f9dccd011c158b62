"""Feature groups: a public list from the config, or computed under DP (budget counted).

Under DP: one Laplace release of (count, sum of x, upper triangle of sum of x x^T) over all
encoded dimensions, at L1 sensitivity 1 + W + W(W+1)/2 for W released columns (one record adds
1 to the count, at most W to the sum, at most W(W+1)/2 to the triangle). From it (post-
processing): the covariance matrix C of the encoded dimensions, a column association
A_ij = sqrt(RV_ij), RV_ij = ||C_ij||_F^2 / (||C_ii||_F ||C_jj||_F) (Escoufier's RV coefficient of
the two columns' blocks: |rho| for two numeric columns; a rare category's tiny, noise-dominated
variance cannot inflate it the way a largest per-dimension |rho| would), average-linkage clustering on 1 - A
(scipy), cut at `grouping_cut`; a group whose grid exceeds max_cells is split along its own
linkage until every group fits. Nothing here looks at the raw data except through that release.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.errors import ConfigError
from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.partition import cell_count
from leteo_fed.synth.statistics import Sums, laplace, upper


def moments_l1(n_columns: int) -> float:
    """L1 sensitivity of (count, sum x, upper(sum x x^T)) over all encoded dimensions."""
    return 1.0 + n_columns + n_columns * (n_columns + 1) / 2.0


def noisy_covariance(
    sums: Sums, n_columns: int, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    """The covariance matrix of the encoded dimensions from one Laplace release."""
    scale = float(1 << 16)
    count, s, q = sums
    d = s.shape[1]
    iu = upper(d)
    exact = np.concatenate([[float(count[0])], s[0] / scale, q[0][iu[0], iu[1]] / (scale * scale)])
    noisy = exact + np.asarray(laplace(epsilon, moments_l1(n_columns)).sample(exact.shape, rng))
    n = max(noisy[0], 1.0)
    mu = np.clip(noisy[1 : 1 + d] / n, 0.0, 1.0)
    sym = np.zeros((d, d))
    sym[iu[0], iu[1]] = noisy[1 + d :]
    sym[iu[1], iu[0]] = noisy[1 + d :]
    return sym / n - np.outer(mu, mu)


def association(cov: np.ndarray, columns: list[Column]) -> np.ndarray:
    """Column-level association sqrt(RV) in [0, 1] between the columns' covariance blocks."""
    spans, at = [], 0
    for c in columns:
        spans.append(slice(at, at + c.width))
        at += c.width
    norms = [max(float(np.linalg.norm(cov[si, si])), 1e-12) for si in spans]
    out = np.ones((len(columns), len(columns)))
    for i, si in enumerate(spans):
        for j, sj in enumerate(spans):
            if i != j:
                rv = float(np.linalg.norm(cov[si, sj]) ** 2) / (norms[i] * norms[j])
                out[i, j] = min(1.0, np.sqrt(max(rv, 0.0)))
    return out


def _split(
    members: list[int], dist: np.ndarray, columns: list[Column], cap: int
) -> list[list[int]]:
    """Split a group along its own average linkage until each part's grid fits the cap."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if cell_count([columns[i] for i in members]) <= cap:
        return [members]
    if len(members) == 1:
        c = columns[members[0]]
        raise ConfigError(
            f"column {c.name!r} alone spans {c.levels} grid cells, more than synthesize."
            f"max_cells = {cap}: lower its bins or raise max_cells",
            field="bins",
        )
    sub = dist[np.ix_(members, members)]
    labels = fcluster(linkage(squareform(sub, checks=False), "average"), 2, "maxclust")
    if len(set(labels.tolist())) < 2:  # ties: split off the last column
        labels = np.r_[np.ones(len(members) - 1, dtype=int), 2]
    out: list[list[int]] = []
    for lab in sorted(set(labels.tolist())):
        part = [m for m, lb in zip(members, labels.tolist(), strict=True) if lb == lab]
        out += _split(part, dist, columns, cap)
    return out


def dp_groups(assoc: np.ndarray, config: SynthConfig) -> list[list[str]]:
    """Groups from the association matrix: average linkage on 1 - A cut at grouping_cut."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    columns = list(config.columns)
    dist = np.clip(1.0 - assoc, 0.0, 1.0)
    np.fill_diagonal(dist, 0.0)
    if len(columns) == 1:
        labels = np.array([1])
    else:
        z = linkage(squareform(dist, checks=False), "average")
        labels = fcluster(z, config.grouping_cut, "distance")
    groups: list[list[int]] = []
    for lab in sorted(set(labels.tolist()), key=lambda v: labels.tolist().index(v)):
        members = [i for i, lb in enumerate(labels.tolist()) if lb == lab]
        groups += _split(members, dist, columns, config.max_cells)
    groups.sort(key=min)
    return [[columns[i].name for i in sorted(g)] for g in groups]
