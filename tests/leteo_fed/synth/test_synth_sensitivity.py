"""Brute-force check of every sensitivity the synthesizer's proof states (docs/synthetic-data.md).

On a small data set, each record is removed in turn and each of a set of extreme records is
added (add/remove neighbours); for every released vector we measure the L1 change and compare
it with the bound the Laplace noise is calibrated to: the grid histograms (1), each group's
per-cluster sums of x (w, its numeric columns) and of the upper triangle of x x^T (w(w+1)/2)
GIVEN the partition,
and the two releases of the DP grouping (the class sizes, 1; each pair's dependence score, the
utility of the noisy-max picks, less than 4). The extreme records reach the bounds, so the test also shows they
are tight (a looser calibration would not be caught
otherwise, a wrong one would).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from synth_cases import rows, write_config

from leteo_fed.synth.config import load
from leteo_fed.synth.encoding import SCALE, Encoded, encode_table
from leteo_fed.synth.local_engine import LocalAggregator
from leteo_fed.synth.model import budget_split
from leteo_fed.synth.pair_grouping import SCORE_SENSITIVITY, dependence_score
from leteo_fed.synth.pair_tables import exact_marginals
from leteo_fed.synth.partition import clusters_from_histogram, morton_order
from leteo_fed.synth.statistics import Sums, gram_l1, sum_l1, upper

EXTREMES = [  # records at the corners of the public domain (and beyond the bounds: clipped)
    {"a": "100", "b": "1", "c": "z", "d": "10", "y": "yes"},
    {"a": "250", "b": "7", "c": "x", "d": "99", "y": "no"},
    {"a": "0", "b": "-1", "c": "y", "d": "0", "y": "no"},
]


def _encode(data: list[dict[str, str]], config_path: Path) -> Encoded:
    table = pa.table({k: [r[k] for r in data] for k in data[0]})
    return encode_table(table, load(config_path))


def _subset(enc: Encoded, keep: np.ndarray) -> Encoded:
    return Encoded({k: v[keep] for k, v in enc.codes.items()}, enc.classes[keep], enc.clipped)


def _released(sums: Sums) -> tuple[np.ndarray, np.ndarray]:
    """The vectors that get noise: sums of x and the upper triangle of x x^T, on [0, 1]."""
    _, s, q = sums
    iu = upper(s.shape[1])
    return s / SCALE, q[:, iu[0], iu[1]] / (SCALE * SCALE)


def _neighbours(base: list[dict[str, str]], config: Path) -> list[Encoded]:
    enc = _encode(base, config)
    out = []
    for i in range(enc.rows):
        keep = np.ones(enc.rows, dtype=bool)
        keep[i] = False
        out.append(_subset(enc, keep))
    out += [_encode([*base, extra], config) for extra in EXTREMES]
    return out


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, str]]]:
    folder = tmp_path_factory.mktemp("sens")
    return write_config(folder, k=5), rows(40, seed=3)


def test_histogram_changes_by_at_most_one(case: tuple[Path, list[dict[str, str]]]) -> None:
    path, base = case
    config = load(path)
    agg = LocalAggregator(_encode(base, path), config)
    for names in config.groups or ():
        cols = [config.column(n) for n in names]
        h = agg.histogram(cols)
        changes = [
            np.abs(LocalAggregator(n, config).histogram(cols) - h).sum()
            for n in _neighbours(base, path)
        ]
        assert max(changes) == 1  # the bound, reached by every neighbour


def test_cluster_sums_within_bounds_given_the_partition(
    case: tuple[Path, list[dict[str, str]]],
) -> None:
    path, base = case
    config = load(path)
    agg = LocalAggregator(_encode(base, path), config)
    split = budget_split(config, [list(g) for g in config.groups or ()])
    for gi, names in enumerate(config.groups or ()):
        cols = [config.column(n) for n in names]
        numeric = [c for c in cols if c.kind == "numeric"]  # the moments cover these only
        w = len(numeric)
        assert split["groups"][gi]["sums"]["l1_sensitivity"] == sum_l1(w) == w
        assert split["groups"][gi]["covariance"]["l1_sensitivity"] == gram_l1(w)
        hist = agg.histogram(cols)
        noisy = hist + np.random.default_rng(gi).laplace(0, 1.0, hist.shape)
        order = morton_order(cols)
        key_of_cell = np.zeros_like(hist)
        n_keys = 0
        for c in range(hist.shape[0]):  # the partition is fixed: it comes from the noisy histogram
            cluster = clusters_from_histogram(noisy[c], order, config.k)
            key_of_cell[c] = cluster + n_keys
            n_keys += int(cluster.max()) + 1
        assert n_keys > 2  # several clusters: the record's own cluster is what changes
        s0, q0 = _released(agg.cluster_sums(cols, key_of_cell, n_keys, numeric))
        ds, dq = [], []
        for n in _neighbours(base, path):
            s1, q1 = _released(
                LocalAggregator(n, config).cluster_sums(cols, key_of_cell, n_keys, numeric)
            )
            ds.append(np.abs(s1 - s0).sum())
            dq.append(np.abs(q1 - q0).sum())
        assert max(ds) <= sum_l1(w) + 1e-9 and max(dq) <= gram_l1(w) + 1e-9
        assert max(ds) == pytest.approx(sum_l1(w)) and max(dq) == pytest.approx(gram_l1(w))


def test_grouping_releases_within_bound(case: tuple[Path, list[dict[str, str]]]) -> None:
    """G1 (the class sizes) moves by at most 1 in L1; every pair's dependence score (its
    per-class table against its own independence fit), the utility of G2's picks, by less
    than D = 4."""
    path, base = case
    config = replace(load(path), groups=None)
    split = budget_split(config, [[c.name] for c in config.columns])["grouping"]
    assert split["class_sizes"]["l1_sensitivity"] == 1.0
    assert split["pair_picks"]["sensitivity"] == SCORE_SENSITIVITY == 4.0

    def releases(enc: Encoded) -> tuple[np.ndarray, np.ndarray]:
        first, pairs = exact_marginals(LocalAggregator(enc, config), config)
        scores = np.array([dependence_score(pairs[k]) for k in sorted(pairs)])
        return first[0].sum(axis=1).astype(float), scores

    g1_0, s0 = releases(_encode(base, path))
    g1_changes, g2_changes = [], []
    for n in _neighbours(base, path):
        g1, s = releases(n)
        g1_changes.append(np.abs(g1 - g1_0).sum())
        g2_changes.append(np.abs(s - s0).max())
    assert max(g1_changes) == pytest.approx(1.0)
    assert max(g2_changes) < SCORE_SENSITIVITY
    assert max(g2_changes) > 1.0  # more than the table's own cell: the fit moves too
