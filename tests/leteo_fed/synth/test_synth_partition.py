"""The public grid's order and the cut into clusters (post-processing of the DP histogram)."""

from __future__ import annotations

import numpy as np

from leteo_fed.synth.config import Column
from leteo_fed.synth.generation import apportion
from leteo_fed.synth.partition import cell_ids, clusters_from_histogram, morton_order, strides


def _cols() -> list[Column]:
    return [
        Column("a", "numeric", 0, 1, bins=4),
        Column("c", "categorical", categories=("x", "y", "z")),
    ]


def test_morton_order_is_a_fixed_permutation_of_the_grid() -> None:
    cols = _cols()
    order = morton_order(cols)
    assert sorted(order.tolist()) == list(range(12))
    assert order.tolist() == morton_order(cols).tolist()
    # Z-order: cells (a, c) = (0,0), (1,0), (0,1), (1,1) come first (a's bit 0 is interleaved first)
    lv = [order // strides(cols)[0], order % 3]
    assert list(zip(lv[0][:4].tolist(), lv[1][:4].tolist(), strict=True)) == [
        (0, 0),
        (1, 0),
        (0, 1),
        (1, 1),
    ]
    assert cell_ids([np.array([3]), np.array([2])], cols).tolist() == [11]


def test_cut_reaches_k_and_merges_the_tail() -> None:
    order = np.arange(6)
    noisy = np.array([3.0, -2.0, 4.0, 10.0, 1.0, 2.0])  # clipped: 3, 0, 4, 10, 1, 2
    clusters = clusters_from_histogram(noisy, order, k=5)
    # 3+0+4 = 7 >= 5 closes cluster 0; 10 closes cluster 1; the tail 1+2 < 5 joins cluster 1
    assert clusters.tolist() == [0, 0, 0, 1, 1, 1]
    # nothing reaches k: one cluster holds every cell
    assert clusters_from_histogram(np.zeros(4), np.arange(4), k=5).tolist() == [0, 0, 0, 0]
    # walking in another order changes the partition, not the coverage
    rev = clusters_from_histogram(noisy, order[::-1], k=5)
    assert sorted(set(rev.tolist())) == [0, 1] and rev.shape == (6,)


def test_apportion_sums_to_the_total() -> None:
    got = apportion(10, np.array([1.0, 1.0, 1.0]))
    assert got.sum() == 10 and got.tolist() == [4, 3, 3]
    assert apportion(5, np.zeros(2)).tolist() == [3, 2]
    assert apportion(0, np.array([2.0])).tolist() == [0]
