"""The marginal-based synthesizer (`method = "marginals"`): its pieces and its releases."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from synth_cases import cli, rows, write_config, write_csv

from leteo_fed.synth.config import Column, SynthConfig, load
from leteo_fed.synth.marginals import noise_for, select_tree
from leteo_fed.synth.statistics import pair_counter, split_pairs


def marginals_config(folder: Path, epsilon: float = 1.0) -> Path:
    path = write_config(folder, epsilon=epsilon)
    path.write_text(
        path.read_text().replace("[synthesize]\n", '[synthesize]\nmethod = "marginals"\n')
    )
    return path


def test_pair_counter_counts_every_pair_per_class() -> None:
    g = np.random.default_rng(3)
    levels, n_classes = [3, 4, 2], 2
    block = np.column_stack(
        [g.integers(0, n_classes, 500), *[g.integers(0, lv, 500) for lv in levels]]
    )
    halves = pair_counter(levels, n_classes)(block[:200]) + pair_counter(levels, n_classes)(
        block[200:]
    )
    got = split_pairs(halves, levels, n_classes)
    for i, j in combinations(range(3), 2):
        want = np.zeros((n_classes, levels[i], levels[j]), dtype=np.int64)
        np.add.at(want, (block[:, 0], block[:, 1 + i], block[:, 1 + j]), 1)
        assert np.array_equal(got[(i, j)].reshape(want.shape), want)


def test_select_tree_is_a_spanning_tree_and_follows_the_scores() -> None:
    """Four columns, classes 1: pairs (0,1), (1,2), (2,3) carry all the dependence. At a huge
    epsilon the mechanism picks exactly them; at any epsilon it returns a spanning tree."""
    g = np.random.default_rng(5)
    x0 = g.integers(0, 3, 4000)
    x1 = (x0 + (g.random(4000) < 0.1)) % 3
    x2 = (x1 + (g.random(4000) < 0.1)) % 3
    x3 = (x2 + (g.random(4000) < 0.1)) % 3
    data = np.column_stack([np.zeros(4000, dtype=np.int64), x0, x1, x2, x3])
    pairs = {
        p: m.reshape(1, 3, 3)
        for p, m in split_pairs(pair_counter([3] * 4, 1)(data), [3] * 4, 1).items()
    }
    first = [pairs[(0, 1)].sum(axis=2), *[pairs[(0, i)].sum(axis=1) for i in (1, 2, 3)]]
    first = [f.astype(float) for f in first]
    assert sorted(select_tree(pairs, first, 0.0, 1e6, np.random.default_rng(0))) == [
        (0, 1),
        (1, 2),
        (2, 3),
    ]
    for seed in range(20):
        edges = select_tree(pairs, first, 0.0, 1e-3, np.random.default_rng(seed))
        assert len(edges) == 3
        reached = {0}
        for _ in range(3):
            reached |= {b for a, b in edges if a in reached} | {a for a, b in edges if b in reached}
        assert reached == {0, 1, 2, 3}


def test_the_tree_score_discounts_what_sparse_cells_show_on_their_own() -> None:
    """500 rows, a label of share 0.3: a (4 x 4) pair where b copies a 30% of the time, and an
    independent (10 x 10) pair. Sampling noise alone gives the 200 cells of the sparse pair an
    L1 distance from independence as large as the dependent pair's real one: over 50 seeded
    tables the raw score ranks the dependent pair first 28 times (measured: a coin). Less the
    Poisson null (`excess`), it ranks it first every time."""
    from leteo_fed.synth.marginals import excess
    from leteo_fed.synth.pair_tables import independent

    n, levels = 500, [4, 4, 10, 10]
    raw_first = excess_first = 0
    for seed in range(50):
        g = np.random.default_rng(seed)
        y = (g.random(n) < 0.3).astype(int)
        a = g.integers(0, 4, n)
        cols = [a, np.where(g.random(n) < 0.3, a, g.integers(0, 4, n))]
        cols += [g.integers(0, 10, n), g.integers(0, 10, n)]
        first = [
            np.stack([np.bincount(x[y == k], minlength=lv) for k in (0, 1)]).astype(float)
            for x, lv in zip(cols, levels, strict=True)
        ]

        tables = {}
        for i, j in ((0, 1), (2, 3)):
            tables[(i, j)] = np.zeros((2, levels[i], levels[j]))
            np.add.at(tables[(i, j)], (y, cols[i], cols[j]), 1)
        raw = {k: np.abs(t - independent(first, *k)).sum() for k, t in tables.items()}
        ex = {k: excess(t, first, 0.0, *k) for k, t in tables.items()}
        raw_first += raw[(0, 1)] > raw[(2, 3)]
        excess_first += ex[(0, 1)] > ex[(2, 3)]
    assert raw_first < 40
    assert excess_first == 50


def test_budget_spends_epsilon_exactly_once() -> None:
    cols = tuple(Column(f"x{i}", "numeric") for i in range(5))
    budget = noise_for(SynthConfig(cols, epsilon=0.9, label="y", classes=("a", "b")), 5).budget
    parts = [budget[k]["epsilon"] for k in ("one_way", "select", "two_way")]
    assert sum(parts) == pytest.approx(0.9)
    assert budget["one_way"]["l1_sensitivity"] == 5 and budget["two_way"]["l1_sensitivity"] == 4


def test_zcdp_budget_converts_to_the_asked_epsilon_delta() -> None:
    """delta > 0: Gaussian measurements and exponential mechanisms whose zCDP costs add up to
    the rho that converts to exactly (epsilon, delta); sigma = L2 / sqrt(2 rho_i) and each
    round's epsilon eps_r = sqrt(8 rho_select / rounds)."""
    import math

    from leteo_fed.privacy.mechanisms.rdp import DEFAULT_ALPHAS, rdp_to_dp

    cols = tuple(Column(f"x{i}", "numeric") for i in range(5))
    config = SynthConfig(cols, epsilon=1.0, delta=1e-9, method="marginals")
    noise = noise_for(config, 5)
    b = noise.budget
    spent = (
        5 / (2 * noise.first.variance) + 4 * noise.eps_round**2 / 8 + 4 / (2 * noise.pair.variance)  # type: ignore[union-attr]
    )
    assert spent == pytest.approx(b["rho"], rel=1e-9)
    eps, _ = rdp_to_dp(DEFAULT_ALPHAS * b["rho"], DEFAULT_ALPHAS, 1e-9)
    assert eps == pytest.approx(1.0, abs=2e-3)  # the rho is found on a finer grid of orders
    assert eps <= 1.0 + 1e-9 and math.isclose(b["delta"], 1e-9)


def test_method_and_shares_are_checked(tmp_path: Path) -> None:
    path = marginals_config(tmp_path)
    assert load(path).method == "marginals"
    text = path.read_text()
    path.write_text(text.replace('method = "marginals"', 'method = "pgm"'))
    rc, _, err = cli("--input", "x.csv", "--config", str(path), "--out", str(tmp_path / "o"))
    assert rc == 2 and "synthesize.method must be one of" in err
    path.write_text(
        text.replace("[synthesize]\n", "[synthesize]\nmarginal_shares = { select = 1 }\n")
    )
    rc, _, err = cli("--input", "x.csv", "--config", str(path), "--out", str(tmp_path / "o"))
    assert rc == 2 and "marginal_shares must set exactly" in err


def test_release_end_to_end_and_reproducible(tmp_path: Path) -> None:
    """The CLI writes a table of the config's columns on their public domains, its report
    names the method, the tree and a budget that sums to epsilon, and the same seed gives the
    same bytes."""
    data = write_csv(tmp_path / "data.csv", rows(3000, seed=11))
    config = marginals_config(tmp_path)
    outs = []
    for name in ("one", "two"):
        out = tmp_path / name
        rc, stdout, err = cli(
            "--input", str(data), "--config", str(config), "--out", str(out), "--seed", "5"
        )
        assert rc == 0, err
        assert "method marginals" in stdout and "a DP tree of 3 2-way marginals" in stdout
        outs.append(out)
    a, b = ((o / "synthetic.csv").read_bytes() for o in outs)
    assert a == b
    report = json.loads((outs[0] / "report.json").read_text())
    assert report["method"] == "marginals" and report["k"] is None
    assert len(report["tree"]["edges"]) == 3
    spent = sum(report["budget"][k]["epsilon"] for k in ("one_way", "select", "two_way"))
    assert spent == pytest.approx(1.0)
    lines = a.decode().splitlines()
    assert lines[0] == "a,b,c,d,y"
    body = [line.split(",") for line in lines[1:]]
    assert 2700 < len(body) < 3300  # the fitted total: 3,000 plus noise of scale about 4
    assert {r[2] for r in body} <= {"x", "y", "z"} and {r[4] for r in body} <= {"no", "yes"}
    assert all(0 <= int(r[0]) <= 100 and -1 <= float(r[1]) <= 1 for r in body)


def test_high_epsilon_release_keeps_the_dependences(tmp_path: Path) -> None:
    """At epsilon 50 (Laplace scale 4 / 16.7 = 0.24 per count: negligible against 20,000 rows) the
    release reproduces the data's 2-way structure on the grid: P(y = yes) and P(c = x) within
    0.02 of the real shares, and the dependence of c on d (c = x exactly when d < 3) kept."""
    raw = rows(20000, seed=13)
    data = write_csv(tmp_path / "data.csv", raw)
    out = tmp_path / "out"
    rc, _, err = cli(
        "--input", str(data), "--config", str(marginals_config(tmp_path, 50.0)),
        "--out", str(out), "--seed", "3",
    )  # fmt: skip
    assert rc == 0, err
    lines = (out / "synthetic.csv").read_text().splitlines()[1:]
    syn = [line.split(",") for line in lines]
    real_yes = np.mean([r["y"] == "yes" for r in raw])
    real_x = np.mean([r["c"] == "x" for r in raw])
    assert abs(np.mean([r[4] == "yes" for r in syn]) - real_yes) < 0.02
    assert abs(np.mean([r[2] == "x" for r in syn]) - real_x) < 0.02
    # d has 2 bins ([0, 5), [5, 10]): in the real data c = x only in the first bin
    second_bin_x = np.mean([r[2] == "x" for r in syn if float(r[3]) >= 5])
    assert second_bin_x < 0.02


def test_delta_mode_release_and_its_refusal(tmp_path: Path) -> None:
    """delta > 0 runs the marginal method in zCDP and says so; micro-aggregation refuses it."""
    data = write_csv(tmp_path / "data.csv", rows(1500, seed=12))
    config = marginals_config(tmp_path)
    config.write_text(config.read_text().replace("[synthesize]\n", "[synthesize]\ndelta = 1e-9\n"))
    out = tmp_path / "out"
    rc, stdout, err = cli("--input", str(data), "--config", str(config), "--out", str(out))
    assert rc == 0, err
    assert "delta 1e-09, method marginals" in stdout
    report = json.loads((out / "report.json").read_text())
    assert report["delta"] == 1e-9 and "(1, 1e-09)-differential privacy" in report["guarantee"]
    assert report["budget"]["rho"] > 0
    config.write_text(config.read_text().replace('method = "marginals"', ""))
    rc, _, err = cli("--input", str(data), "--config", str(config), "--out", str(tmp_path / "x"))
    assert rc == 2 and 'delta > 0 needs method = "marginals"' in err
    assert not (tmp_path / "x").exists()
