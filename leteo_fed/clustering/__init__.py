"""Differentially private k-means for the central (trusted curator) jobs, plus an LDP variant.

- `eugkm`: two-level adaptive grid synopsis (Su et al.), pure ε-DP, for low dimensions;
- `lsh_coreset`: private LSH core-set, (ε, δ)-DP, for any dimension;
- `ldp_kmeans`: k-means on n-dimensional-Laplace perturbed points, ε-LDP per row;
- `lloyd`: the plain (weighted) k-means helpers they share.

Each method has a NumPy reference (`*_numpy`) and a Spark path (`spark_*`) that keeps rows on the
executors. Spark modules are imported lazily, so the NumPy paths do not start a JVM.
"""

from __future__ import annotations

from leteo_fed.clustering.eugkm import EugkmParams, eugkm_numpy, level1_grid, level2_grid
from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_numpy
from leteo_fed.clustering.lloyd import (
    assign,
    kmeans_loss,
    kmeans_plus_plus,
    update,
    weighted_kmeans,
)
from leteo_fed.clustering.lsh_coreset import LshParams, lsh_numpy
from leteo_fed.clustering.result import DPKMeansResult

__all__ = [
    "DPKMeansResult",
    "EugkmParams",
    "LshParams",
    "assign",
    "eugkm_numpy",
    "kmeans_loss",
    "kmeans_plus_plus",
    "ldp_kmeans_numpy",
    "level1_grid",
    "level2_grid",
    "lsh_numpy",
    "update",
    "weighted_kmeans",
]
