"""The noise of a DP k-means job, before and after: the preview of its expected errors and the
warnings its release earns.

Preview (`preview`, from public parameters and what the analyst states): the noise of each
noisy count (EUGkM: the row count, every level-1 and level-2 cell; LSH: the root, every tree
node, every leaf sum per coordinate; ldp: the noise per point), the grid or tree that `--rows`
gives, and the expected center error. A center's error depends on the data's shape and on
k-means itself, so it is measured, not guessed: the job's own code runs `PREVIEW_REPEATS` times
(fixed seeds) on synthetic data drawn under the stated assumption (k clusters of rows/k rows
each, their centers spread evenly along the diagonal of the bounds, Gaussian with a standard
deviation per feature of a quarter of the bounds' width unless `--expect-std` says otherwise,
clipped to the bounds: overlapping clusters, where k-means itself is least stable, so that real
data spread at least a sixth of its bounds does not do worse), and the error is the root mean square distance from each DP center to
its matched non-private k-means center of the same rows. At most `MAX_SIMULATED_ROWS` rows are
simulated (more rows only lower the error: the preview then says "at most").

After the job (`center_noise`, `release_warnings`: post-processing of the DP outputs only):
each center's cluster is the part of the released synopsis / core-set nearest to it; its noisy
count is the sum of their noisy weights, with the noise of that many cells (counts add up
independently); the center's std per coordinate is the delta method of a weighted mean,
sqrt(sum_j s^2 (x_j - c)^2) / W for cells of noise std s, plus the leaf sums' noise for LSH
(sigma_sum sqrt(cells) / W) and the points' own noise for ldp.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from leteo_fed.clustering.result import DPKMeansResult
from leteo_fed.errors import ConfigError
from leteo_fed.privacy.noise_gate import ReleaseWarning

PREVIEW_REPEATS = 5
MAX_SIMULATED_ROWS = 100_000
STD_FRACTION = 4  # the default spread: a quarter of the bounds' width per feature


def diagonal_centers(k: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The k centers the simulated clusters are drawn around: evenly on the bounds' diagonal."""
    t = (np.arange(k) + 0.5) / k
    return lo + t[:, None] * (hi - lo)


def synthetic_clusters(
    rows: int, k: int, lo: np.ndarray, hi: np.ndarray, std: np.ndarray, seed: int
) -> np.ndarray:
    """k Gaussian clusters of rows/k rows around `diagonal_centers`, clipped to the bounds."""
    rng = np.random.default_rng(seed)
    centers = diagonal_centers(k, lo, hi)
    label = np.arange(rows) % k
    x = centers[label] + rng.standard_normal((rows, lo.size)) * std
    return np.clip(x, lo, hi)


def center_error(released: np.ndarray, reference: np.ndarray) -> float:
    """RMS distance from each released center to its matched reference center (Hungarian)."""
    from scipy.optimize import linear_sum_assignment

    cost = ((released[:, None, :] - reference[None, :, :]) ** 2).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    return float(np.sqrt(cost[rows, cols].mean()))


def _fit(method: str, x: np.ndarray, k: int, epsilon: float, box, lsh, n_public, seed: int):
    if method == "eugkm":
        from leteo_fed.clustering.eugkm import eugkm_numpy

        return eugkm_numpy(x, k, epsilon, box[0], box[1], n_public=n_public, seed=seed)
    if method == "ldp":
        from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_numpy

        return ldp_kmeans_numpy(x, k, epsilon, box[0], box[1], seed=seed)
    from leteo_fed.clustering.lsh_coreset import lsh_numpy

    radius, center, delta = lsh
    return lsh_numpy(x, k, epsilon, radius, delta=delta, center=center, seed=seed)


def preview(
    method: str,
    k: int,
    epsilon: float,
    d: int,
    rows: int | None,
    *,
    lo: Sequence[float] | np.ndarray | None = None,
    hi: Sequence[float] | np.ndarray | None = None,
    radius: float | None = None,
    center: Sequence[float] | np.ndarray | None = None,
    delta: float | None = None,
    n_public: int | None = None,
    expect_std: Sequence[float] | np.ndarray | None = None,
    repeats: int = PREVIEW_REPEATS,
) -> dict[str, Any]:
    """What the job's noise does, before any row is read (module docstring)."""
    from leteo_fed.clustering.lloyd import lloyd

    doc: dict[str, Any] = {"method": method, "k": k, "epsilon": epsilon, "features": d}
    if method == "lsh":
        from leteo_fed.clustering.lsh_coreset import DEFAULT_DELTA

        if radius is None:
            raise ConfigError("lsh needs a radius", field="radius")
        c = np.zeros(d) if center is None else np.broadcast_to(np.asarray(center, float), (d,))
        half = radius / math.sqrt(d)  # a box inside the ball
        lo_a, hi_a = c - half, c + half
        lsh = (radius, c, DEFAULT_DELTA if delta is None else delta)
    else:
        lo_a = np.broadcast_to(np.asarray(lo, float), (d,)).copy()
        hi_a = np.broadcast_to(np.asarray(hi, float), (d,)).copy()
        lsh = None
    doc.update(_count_noise(method, epsilon, d, rows, lo_a, hi_a, lsh, n_public))
    if rows is None:
        doc["assumption"] = "give --rows N for the grid or tree and the expected center error"
        return doc
    if expect_std is not None and len(expect_std):
        std = np.broadcast_to(np.asarray(expect_std, float), (d,)).copy()
        told = "your --expect-std"
    else:
        std = (hi_a - lo_a) / STD_FRACTION
        told = f"a quarter of the {'bounds' if lsh is None else 'ball'}' width"
    simulated = min(rows, MAX_SIMULATED_ROWS)
    errors = []
    for r in range(repeats):
        x = synthetic_clusters(simulated, k, lo_a, hi_a, std, seed=1000 + r)
        # the non-private optimum Lloyd reaches from the centers the rows were drawn around
        # (one run started near it, where restarts from k-means++ cost 3 runs from afar), to
        # within 1e-4 of the data's scale: far below any DP center's error
        truth = lloyd(x, diagonal_centers(k, lo_a, hi_a), tol=1e-4)[0]
        result = _fit(method, x, k, epsilon, (lo_a, hi_a), lsh, n_public, seed=r)
        errors.append(center_error(result.centers, truth))
    doc["center_error"] = float(np.sqrt(np.mean(np.square(errors))))
    doc["simulated_rows"] = simulated
    doc["assumption"] = (
        f"{rows} rows in {k} clusters of {rows // k} rows each, centers spread evenly along the "
        f"diagonal of the {'bounds' if lsh is None else 'ball'}, Gaussian with a standard "
        f"deviation per feature of {told} ({', '.join(f'{s:.3g}' for s in std)}); center "
        f"error: RMS distance to the non-private k-means centers over {repeats} simulated runs"
        + (f" of {simulated} rows (more rows: smaller error)" if simulated < rows else "")
    )
    return doc


def _count_noise(method, epsilon, d, rows, lo, hi, lsh, n_public) -> dict[str, Any]:
    """The std of every noisy count the job releases (public parameters and --rows)."""
    out: dict[str, Any] = {}
    if method == "eugkm":
        from leteo_fed.clustering.eugkm import EugkmParams, level1_grid

        ep = EugkmParams()
        eps_n = 0.0 if n_public is not None else ep.count_fraction * epsilon
        eps_g = epsilon - eps_n
        out["row_count_std"] = math.sqrt(2) / eps_n if eps_n else 0.0
        out["level1_cell_count_std"] = math.sqrt(2) / (ep.alpha * eps_g)
        out["level2_cell_count_std"] = math.sqrt(2) / ((1 - ep.alpha) * eps_g)
        if rows is not None:
            _, m1 = level1_grid(rows, eps_g, d, ep.c1)
            out["level1_cells"] = m1**d
    elif method == "lsh":
        from leteo_fed.clustering.lsh_coreset import LshParams, plan_tree
        from leteo_fed.clustering.noise import gdp_mu

        p = LshParams()
        radius, _, delta = lsh
        mu = gdp_mu(epsilon, delta)
        sigma_sum = radius / (mu * math.sqrt(1 - p.root_share - p.tree_share))
        out["row_count_std"] = 1 / (mu * math.sqrt(p.root_share))
        out["leaf_sum_std_per_feature"] = sigma_sum
        if rows is not None:
            plan = plan_tree(rows, 1, d, radius, sigma_sum, p)
            out["tree_levels"] = plan.depth
            out["node_count_std"] = math.sqrt(plan.depth) / (mu * math.sqrt(p.tree_share))
    else:
        from leteo_fed.clustering.ldp_kmeans import ldp_rate

        rate = ldp_rate(epsilon, lo, hi)
        out["point_noise_std_per_feature"] = math.sqrt(d + 1) / rate
    return out


# ------------------------------------------------------------------ after the job


def _cell_noise(result: DPKMeansResult) -> tuple[float, float]:
    """(std of one synopsis weight, std per coordinate of one leaf sum or point)."""
    b = result.budget
    if result.method == "eugkm":
        return math.sqrt(2) * b["level2_counts"]["laplace_scale"], 0.0
    if result.method == "lsh":
        return b["tree_counts"]["gaussian_std"], b["leaf_sums"]["gaussian_std"]
    d = result.centers.shape[1]
    return 0.0, math.sqrt(d + 1) / b["rate_per_unit_distance"]


def center_noise(result: DPKMeansResult) -> list[dict[str, Any]]:
    """Per released center: its cluster's noisy count and that count's noise, the synopsis
    cells it holds, and the center's std per feature (module docstring). Empty when the job
    released no synopsis (ldp on Spark)."""
    pts = np.asarray(result.summary_points, dtype=np.float64)
    w = np.asarray(result.summary_weights, dtype=np.float64)
    centers = result.centers
    if pts.shape[0] == 0:
        return []
    s_count, s_point = _cell_noise(result)
    near = np.argmin(((pts[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2), axis=1)
    out = []
    for i, c in enumerate(centers):
        mine = near == i
        cells = int(mine.sum())
        weight = float(w[mine].sum())
        spread = ((pts[mine] - c) ** 2).sum(axis=0)  # per coordinate
        if weight > 0:
            var = s_count**2 * spread + s_point**2 * cells
            std = (np.sqrt(var) / weight).tolist()
        else:
            std = [math.inf] * centers.shape[1]
        out.append(
            {
                "center": i + 1,
                "noisy_count": weight,
                "count_std": s_count * math.sqrt(cells),
                "cells": cells,
                "center_std": std,
            }
        )
    return out


def release_warnings(
    result: DPKMeansResult,
    noise: list[dict[str, Any]],
    lo: Sequence[float] | None = None,
    hi: Sequence[float] | None = None,
) -> list[ReleaseWarning]:
    """A warning per center the noise buries: no synopsis survived; an empty cluster; a
    cluster whose noisy count is below its noise; a center outside the public bounds (eugkm,
    ldp) or ball (lsh)."""
    found: list[ReleaseWarning] = []
    if result.summary_points.shape[0] == 0 and result.method != "ldp":
        found.append(
            ReleaseWarning(
                "centers",
                "nothing of the synopsis survived the noise: the centers are random points of "
                "the bounds and say nothing about the data; raise epsilon or use fewer features",
            )
        )
        return found
    for item in noise:
        i, count, sd = item["center"], item["noisy_count"], item["count_std"]
        if item["cells"] == 0 or count <= 0:
            found.append(
                ReleaseWarning(
                    f"cluster {i}",
                    f"cluster {i} is empty: no part of the DP synopsis is nearest to its center, "
                    "which says nothing about the data; lower --k or raise epsilon",
                )
            )
        elif count < sd:
            found.append(
                ReleaseWarning(
                    f"cluster {i}",
                    f"cluster {i}'s noisy count ({count:.3g}) is below its noise ({sd:.3g}): "
                    "its center is mostly noise; lower --k or raise epsilon",
                )
            )
    centers = result.centers
    if result.method == "lsh":
        c = np.asarray(result.details["center"], dtype=np.float64)
        r = float(result.details["radius"])
        out = np.linalg.norm(centers - c, axis=1) > r * (1 + 1e-9)
        where = f"the public ball (radius {r:g})"
    elif lo is not None and hi is not None:
        lo_a, hi_a = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        out = np.any((centers < lo_a) | (centers > hi_a), axis=1)
        where = "the public bounds"
    else:
        out = np.zeros(len(centers), dtype=bool)
        where = ""
    for i in np.nonzero(out)[0]:
        found.append(
            ReleaseWarning(
                f"center {i + 1}",
                f"center {i + 1} lies outside {where}: no row can be there; the noise put it there",
            )
        )
    return found
