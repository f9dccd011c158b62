"""The virtual owners' data: seeded synthetic rows, one CSV per owner, and the pooled rows.

Every row is one of three Gaussian cluster centres plus noise whose standard deviation grows
from 0.5 to 3 across the features, so the covariance's eigenvalues are well separated and the
principal components comparable with NumPy's to 1e-9. Values are written with 17 significant
digits: the file holds exactly the float the pooled reference uses.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

CLUSTERS = 3


def feature_names(d: int) -> list[str]:
    return [f"x{j:02d}" for j in range(d)]


def owner_blocks(owners: int, rows: int, d: int, seed: int) -> Iterator[np.ndarray]:
    """One (rows x d) block per owner, in site order, from one seeded generator."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(CLUSTERS, d))
    scales = np.linspace(0.5, 3.0, d)
    for _ in range(owners):
        labels = rng.integers(0, CLUSTERS, size=rows)
        yield centers[labels] + rng.normal(size=(rows, d)) * scales


def write_csv(path: Path, block: np.ndarray) -> None:
    names = feature_names(block.shape[1])
    lines = [",".join(names)]
    lines += [",".join(format(float(v), ".17g") for v in row) for row in block]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def write_owner_data(
    folder: Path, sites: list[str], rows: int, d: int, seed: int
) -> tuple[dict[str, Path], np.ndarray]:
    """Each site's CSV in `folder` (SITE.csv) and the pooled rows of all of them."""
    paths: dict[str, Path] = {}
    blocks = []
    for site, block in zip(sites, owner_blocks(len(sites), rows, d, seed), strict=True):
        paths[site] = folder / f"{site}.csv"
        write_csv(paths[site], block)
        blocks.append(block)
    return paths, np.vstack(blocks)


def site_ids(n: int) -> list[str]:
    width = max(4, len(str(n)))
    return [f"site-{i:0{width}d}" for i in range(1, n + 1)]
