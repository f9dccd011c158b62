"""Feature groups: a public list from the config, or computed under DP (budget counted).

Under DP: one Laplace release of (count per class, sum of x, upper triangle of sum of x x^T) over all
encoded dimensions, at L1 sensitivity 1 + W + W(W+1)/2 for W released columns (one record adds
1 to the count, at most W to the sum, at most W(W+1)/2 to the triangle). From it (post-
processing): the covariance matrix C of the encoded dimensions, a column association
A_ij = sqrt(RV_ij), RV_ij = ||C_ij||_F^2 / (||C_ii||_F ||C_jj||_F) (Escoufier's RV coefficient of
the two columns' blocks: |rho| for two numeric columns; a rare category's tiny, noise-dominated
variance cannot inflate it the way a largest per-dimension |rho| would), average-linkage clustering on 1 - A
(scipy), cut at `grouping_cut`; a group whose grid exceeds max_cells is split along its own
linkage until every group fits. Nothing here looks at the raw data except through that release.

A group "fits" when its grid is at most max_cells AND its DP histogram can carry signal: with
the histogram's Laplace scale b = 1 / epsilon_hist (the group's share of the budget, as
`budget_split` will give it) and n the smallest noisy class count of the release (it releases
the count of each class instead of the total, at the same sensitivity), cells * b <= n, i.e. an
average cell of every class holds at least one noise scale of records.
Without that rule, five numeric Adult columns at 10 bins formed one 4,000-cell group whose
per-class histograms held more noise than records (10,867 noisy against 5,770 real rows): the
noise floor then removed every cell of the rare non-zero capital values and two synthetic
columns came out constant (issue 32). The rule reads only the release and public values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.partition import cell_count, check_cells
from leteo_fed.synth.statistics import Sums, laplace, upper


def moments_l1(n_columns: int) -> float:
    """L1 sensitivity of (count, sum x, upper(sum x x^T)) over all encoded dimensions."""
    return 1.0 + n_columns + n_columns * (n_columns + 1) / 2.0


def noisy_covariance(
    sums: Sums,
    class_counts: np.ndarray,
    n_columns: int,
    epsilon: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """(the covariance matrix of the encoded dimensions, the noisy record count of each class)
    from one Laplace release of (count per class, sum x, upper(sum x x^T)). A record adds 1 to
    one class's count, as it would to the total: the L1 sensitivity is `moments_l1`'s."""
    scale = float(1 << 16)
    _, s, q = sums
    d = s.shape[1]
    k = class_counts.shape[0]
    iu = upper(d)
    exact = np.concatenate(
        [class_counts.astype(float), s[0] / scale, q[0][iu[0], iu[1]] / (scale * scale)]
    )
    noisy = exact + np.asarray(laplace(epsilon, moments_l1(n_columns)).sample(exact.shape, rng))
    n = max(float(noisy[:k].sum()), 1.0)
    mu = np.clip(noisy[k : k + d] / n, 0.0, 1.0)
    sym = np.zeros((d, d))
    sym[iu[0], iu[1]] = noisy[k + d :]
    sym[iu[1], iu[0]] = noisy[k + d :]
    cov = sym / n - np.outer(mu, mu)
    return above_noise(cov, mu, moments_l1(n_columns) / epsilon / n), noisy[:k]


def above_noise(cov: np.ndarray, mu: np.ndarray, b: float) -> np.ndarray:
    """The covariance with every off-diagonal entry the noise alone could explain set to 0.

    Entry (i, j) is Q_ij / n - mu_i mu_j; its Laplace noise has scale at most
    b (1 + mu_i + mu_j), b = the release's scale / n. Of m such draws, the expected number
    whose magnitude exceeds their scale times ln m + 3 is e^-3 = 0.05, so an entry below that
    is dropped. Without it the grouping clustered on noise: on Adult at epsilon 1
    (grouping share 0.1, 14 columns: scale 1,200 / 15,081 rows = 0.08 per entry) nearly every
    real covariance of the scaled columns is smaller than its noise, and the groups it formed
    were chance pairs (age with foreign_worker on German credit). Post-processing."""
    d = cov.shape[0]
    m = max(d * (d - 1) // 2, 2)
    limit = b * (1.0 + mu[:, None] + mu[None, :]) * (np.log(m) + 3.0)
    keep = (np.abs(cov) > limit) | np.eye(d, dtype=bool)
    return np.where(keep, cov, 0.0)


def group_epsilon(config: SynthConfig, width: int, n_groups: int, total_width: int) -> float:
    """A group's epsilon: the rest after the grouping, split by columns or equally."""
    grouping = config.epsilon * config.grouping_share if config.groups is None else 0.0
    share = width / total_width if config.group_split == "dimension" else 1 / n_groups
    return (config.epsilon - grouping) * share


def histogram_epsilon(
    config: SynthConfig, columns: list[Column], n_groups: int, total_width: int
) -> float:
    """The group's histogram epsilon: its share, or the whole group's for categoricals only
    (their grid cell is the whole record: no moments are released)."""
    e = group_epsilon(config, len(columns), n_groups, total_width)
    numeric = any(c.kind == "numeric" for c in columns)
    return e * config.shares["histogram"] if numeric else e


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


Fits = Callable[[list[int]], bool]


def _split(
    members: list[int], dist: np.ndarray, columns: list[Column], fits: Fits
) -> list[list[int]]:
    """Split a group along its own average linkage until each part fits."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    if len(members) == 1 or fits(members):
        return [members]
    sub = dist[np.ix_(members, members)]
    labels = fcluster(linkage(squareform(sub, checks=False), "average"), 2, "maxclust")
    if len(set(labels.tolist())) < 2:  # ties: split off the last column
        labels = np.r_[np.ones(len(members) - 1, dtype=int), 2]
    out: list[list[int]] = []
    for lab in sorted(set(labels.tolist())):
        part = [m for m, lb in zip(members, labels.tolist(), strict=True) if lb == lab]
        out += _split(part, dist, columns, fits)
    return out


def signal_fits(
    config: SynthConfig, columns: list[Column], n_per_class: float, n_groups: int
) -> Fits:
    """The rule of the module docstring: cells <= max_cells and cells * b <= n per class."""
    total_width = len(columns)

    def fits(members: list[int]) -> bool:
        cols = [columns[i] for i in members]
        cells = cell_count(cols)
        eps = histogram_epsilon(config, cols, n_groups, total_width)
        return cells <= config.max_cells and cells <= max(n_per_class, 0.0) * eps

    return fits


def dp_groups(assoc: np.ndarray, config: SynthConfig, n_per_class: float) -> list[list[str]]:
    """Groups from the association matrix: average linkage on 1 - A cut at grouping_cut, each
    group split until it fits (module docstring). With an equal split the groups' budget
    depends on how many there are: split again until the count is stable (it only grows)."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from scipy.spatial.distance import squareform

    columns = list(config.columns)
    for c in columns:  # a single column over the cap is the config's error, not the data's
        check_cells([c], config.max_cells)
    dist = np.clip(1.0 - assoc, 0.0, 1.0)
    np.fill_diagonal(dist, 0.0)
    if len(columns) == 1:
        labels = [1]
    else:
        z = linkage(squareform(dist, checks=False), "average")
        labels = fcluster(z, config.grouping_cut, "distance").tolist()
    clusters = [
        [i for i, lb in enumerate(labels) if lb == lab]
        for lab in sorted(set(labels), key=labels.index)
    ]
    groups = clusters
    while True:
        fits = signal_fits(config, columns, n_per_class, len(groups))
        split = [part for members in groups for part in _split(members, dist, columns, fits)]
        if len(split) == len(groups):
            break
        groups = split
    groups.sort(key=min)
    return [[columns[i].name for i in sorted(g)] for g in groups]
