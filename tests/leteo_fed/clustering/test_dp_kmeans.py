"""DP k-means (EUGkM grid synopsis, LSH core-set, LDP points): formulas, noise, refusals,
accuracy against non-private k-means, Spark = NumPy, and the CLI end to end.

Noise checks record every draw the run makes (a generator proxy) and compare the scale of each
draw with the budget split the method states; the empirical spread is checked against the
distribution's variance with a 5-sigma tolerance on the sample variance (stated per test).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from leteo_fed.clustering import eugkm, lsh_coreset
from leteo_fed.clustering.eugkm import eugkm_numpy, level1_grid, level2_grid
from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_numpy, ldp_rate
from leteo_fed.clustering.lloyd import (
    assign,
    kmeans_loss,
    kmeans_plus_plus,
    update,
    weighted_kmeans,
)
from leteo_fed.clustering.lsh_coreset import LshParams, lsh_numpy
from leteo_fed.clustering.noise import gaussian_sigma, gdp_mu
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.privacy.budget import EPSILON_MAX
from leteo_fed.privacy.mechanisms import Gaussian


def mixture(n: int, d: int, k: int, seed: int, spread: float = 0.03) -> np.ndarray:
    """k well-separated Gaussian blobs inside [-1, 1]^d."""
    r = np.random.default_rng(seed)
    mu = r.uniform(-0.7, 0.7, size=(k, d))
    return mu[r.integers(k, size=n)] + r.normal(0.0, spread, size=(n, d))


class RecordingRng:
    """A numpy Generator that remembers every laplace/normal draw (scale and values)."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.draws: list[tuple[str, float, np.ndarray]] = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        out = self._rng.laplace(loc, scale, size)
        self.draws.append(("laplace", float(scale), np.atleast_1d(out)))
        return out

    def normal(self, loc=0.0, scale=1.0, size=None):
        out = self._rng.normal(loc, scale, size)
        self.draws.append(("normal", float(scale), np.atleast_1d(out)))
        return out

    def __getattr__(self, name):
        return getattr(self._rng, name)


def assert_variance(sample: np.ndarray, variance: float, kurtosis: float) -> None:
    """Sample variance within 5 sigma of `variance`: sd(s²) = σ² sqrt((κ - 1)/m), κ the kurtosis
    (6 for Laplace, 3 for the Gaussian)."""
    m = sample.size
    tol = 5.0 * math.sqrt((kurtosis - 1.0) / m)
    assert abs(np.var(sample) / variance - 1.0) <= tol, (np.var(sample), variance, tol)


# --------------------------------------------------------------------------- lloyd helpers


def test_lloyd_helpers() -> None:
    x = np.array([[0.0, 0.0], [0.0, 1.0], [10.0, 0.0], [10.0, 2.0]])
    c = np.array([[0.0, 0.5], [10.0, 1.0], [50.0, 50.0]])
    lab = assign(x, c)
    assert lab.tolist() == [0, 0, 1, 1]
    sums = np.array([[0.0, 1.0], [20.0, 2.0], [0.0, 0.0]])
    new = update(sums, np.array([2.0, 2.0, 0.0]), c)
    assert np.allclose(new, [[0.0, 0.5], [10.0, 1.0], [50.0, 50.0]])  # empty keeps its center
    assert kmeans_loss(x, c) == pytest.approx((0.25 + 0.25 + 1.0 + 1.0) / 4)
    w = np.array([1.0, 1.0, 0.0, 0.0])
    assert kmeans_loss(x, c, w) == pytest.approx(0.25)
    seeds = kmeans_plus_plus(x, 2, np.random.default_rng(0), weights=w)
    assert all(any(np.array_equal(s, p) for p in x[:2]) for s in seeds)  # zero weight: never
    centers = weighted_kmeans(x, 2, np.random.default_rng(1))
    assert sorted(centers[:, 0].tolist()) == [0.0, 10.0]


# --------------------------------------------------------------------------- EUGkM formulas


@pytest.mark.parametrize(
    ("n", "eps", "d"),
    [(1_000, 1.0, 2), (100_000, 1.0, 2), (1_000_000, 0.5, 2), (50_000, 1.0, 3), (80_000, 2.0, 5)],
)
def test_level1_grid_is_the_seeds_formula(n: int, eps: float, d: int) -> None:
    big = (n * eps / 10.0) ** (2 * d / (2 + d))  # M1 = (N eps / c1)^(2d/(2+d))
    m1 = math.ceil(max(100 ** (1 / d), big ** (1 / d) / 4))  # values chosen off integers
    assert level1_grid(n, eps, d) == (pytest.approx(big), m1)


def test_level1_grid_floor_is_100_cells() -> None:
    assert level1_grid(10, 1.0, 2)[1] == 10  # 100^(1/2) = 10 exactly, not 11
    assert level1_grid(10, 1.0, 3)[1] == 5  # ceil(4.64)
    assert eugkm.min_level1_cells(64) == 2**64


def test_level2_grid_is_the_seeds_formula() -> None:
    noisy = np.array([-30.0, 0.0, 3.0, 400.0, 12_345.6])
    eps, alpha, d = 1.0, 0.5, 2
    big, m2 = level2_grid(noisy, eps, alpha, d)
    for nn, b, m in zip(noisy, big, m2, strict=True):
        expect = (max(nn, 0.0) * (1 - alpha) * eps / 5.0) ** (2 * d / (2 + d))
        assert b == pytest.approx(expect)
        assert m == max(1, math.ceil(expect ** (1 / d)))
    assert m2.tolist()[:2] == [1, 1]  # negative N' is zeroed: the cell is not split


def test_eugkm_budget_split_and_noise_scales() -> None:
    """Draws in order: noisy N (Laplace 1/eps_n), level 1 (1/(alpha eps_g)), level 2
    (1/((1-alpha) eps_g)); the level draws' variance is 2 b² (Laplace kurtosis 6)."""
    x = mixture(5_000, 2, 3, seed=1)
    rng = RecordingRng(7)
    res = eugkm.fit(eugkm.NumpyGridCounter(x, -np.ones(2), np.ones(2)), 3, 2.0, -1, 1, rng=rng)
    eps_n = 0.05 * 2.0
    eps_g = 2.0 - eps_n
    (k0, s0, _), (k1, s1, v1), (k2, s2, v2) = rng.draws[:3]
    assert (k0, k1, k2) == ("laplace",) * 3
    assert s0 == pytest.approx(1 / eps_n)
    assert s1 == pytest.approx(1 / (0.5 * eps_g))
    assert s2 == pytest.approx(1 / (0.5 * eps_g))
    m1 = res.details["m1"]
    assert v1.size == m1**2 and v2.size == res.details["level2_cells"]
    assert_variance(v2, 2 * s2**2, kurtosis=6.0)
    b = res.budget
    total = b["noisy_count"]["epsilon"] + b["level1_counts"]["epsilon"]
    assert total + b["level2_counts"]["epsilon"] == pytest.approx(2.0)
    assert res.delta == 0.0
    # the grid sizes it used are the formulas' at the noisy N it released
    assert (res.details["M1"], m1) == level1_grid(res.details["n_noisy"], eps_g, 2)


def test_eugkm_public_n_spends_nothing_on_the_count() -> None:
    x = mixture(2_000, 2, 3, seed=2)
    rng = RecordingRng(3)
    res = eugkm.fit(
        eugkm.NumpyGridCounter(x, -np.ones(2), np.ones(2)), 3, 1.0, -1, 1, rng=rng, n_public=2000
    )
    assert rng.draws[0][1] == pytest.approx(1 / 0.5)  # level 1 at alpha * eps, eps_g = eps
    assert res.details["m1"] == level1_grid(2000, 1.0, 2)[1]


# --------------------------------------------------------------------------- LSH accounting


def test_lsh_gdp_split_and_noise_scales() -> None:
    """mu from (eps, delta) is exact for the analytic Gaussian; the shares of mu² add to 1; the
    tree's counts use sigma = sqrt(L)/mu_tree and the sums R/mu_sum (Gaussian kurtosis 3)."""
    eps, delta, radius = 1.0, 1e-6, 2.0
    mu = gdp_mu(eps, delta)
    assert Gaussian(1 / mu).delta_at(eps, 1.0) <= delta
    assert Gaussian(0.999 / mu).delta_at(eps, 1.0) > delta
    x = mixture(60_000, 8, 5, seed=3, spread=0.1)
    rng = RecordingRng(5)
    counter = lsh_coreset.NumpyTreeCounter(x, np.zeros(8), radius)
    res = lsh_coreset.fit(counter, 5, eps, radius, delta=delta, rng=rng)
    b, p = res.budget, LshParams()
    levels = b["tree_counts"]["levels"]
    assert b["mu"] == pytest.approx(mu)
    assert b["root_count"]["gaussian_std"] == pytest.approx(1 / (mu * math.sqrt(p.root_share)))
    sigma_count = math.sqrt(levels) / (mu * math.sqrt(p.tree_share))
    assert b["tree_counts"]["gaussian_std"] == pytest.approx(sigma_count)
    mu_sum = mu * math.sqrt(1 - p.root_share - p.tree_share)
    assert b["leaf_sums"]["gaussian_std"] == pytest.approx(radius / mu_sum)
    normals = [(s, v) for kind, s, v in rng.draws if kind == "normal"]
    tree = np.concatenate([v for s, v in normals[1:-1]])
    assert all(s == pytest.approx(sigma_count) for s, _ in normals[1:-1])
    assert tree.size == res.details["evaluated_nodes"]
    assert_variance(tree, sigma_count**2, kurtosis=3.0)
    assert normals[-1][0] == pytest.approx(radius / mu_sum)
    assert normals[-1][1].size == res.details["leaves"] * 8
    assert res.delta == delta


def test_gaussian_sigma_is_tight() -> None:
    s = gaussian_sigma(0.5, 1e-5, 3.0)
    assert Gaussian(s).delta_at(0.5, 3.0) <= 1e-5 < Gaussian(0.99 * s).delta_at(0.5, 3.0)


# --------------------------------------------------------------------------- refusals


# epsilon and delta go through the privacy layer's one check (DataError naming the field, one
# cap EPSILON_MAX = 50); the other parameters of a run are ConfigErrors
@pytest.mark.parametrize("eps", [0.0, -1.0, float("nan"), float("inf"), "x", True, 50.5])
def test_refuses_bad_epsilon(eps) -> None:
    x = mixture(100, 2, 2, 0)
    for call in (
        lambda: eugkm_numpy(x, 2, eps, -1, 1),
        lambda: lsh_numpy(x, 2, eps, 1.0),
        lambda: ldp_kmeans_numpy(x, 2, eps, -1, 1),
    ):
        with pytest.raises(DataError, match="epsilon") as err:
            call()
        assert err.value.field == "epsilon"


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, 2.0, float("nan")])
def test_refuses_bad_delta(delta) -> None:
    with pytest.raises(DataError, match=r"delta must be in \(0, 1\)") as err:
        lsh_numpy(mixture(100, 2, 2, 0), 2, 1.0, 1.0, delta=delta)
    assert err.value.field == "delta"


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_refuses_bad_k(k) -> None:
    with pytest.raises(ConfigError, match="k must be"):
        eugkm_numpy(mixture(100, 2, 2, 0), k, 1.0, -1, 1)


def test_refuses_bad_bounds_radius_and_dimension() -> None:
    x = mixture(100, 2, 2, 0)
    with pytest.raises(ConfigError, match="feature 1 has lo=1 >= hi=1") as err:
        eugkm_numpy(x, 2, 1.0, [0, 1], [1, 1])
    assert err.value.field == "bounds"
    with pytest.raises(ConfigError, match="bounds must be finite"):
        eugkm_numpy(x, 2, 1.0, -np.inf, 1)
    with pytest.raises(ConfigError, match="lo < hi"):
        ldp_kmeans_numpy(x, 2, 1.0, 1, -1)
    for radius in (0.0, -2.0, float("nan")):
        with pytest.raises(ConfigError, match="radius must be finite and > 0"):
            lsh_numpy(x, 2, 1.0, radius)
    with pytest.raises(ConfigError, match="suits low-dimensional data") as err:
        eugkm_numpy(np.zeros((10, 64)), 2, 1.0, 0, 16)  # 2^64 cells: refused before counting
    assert err.value.field == "features"
    with pytest.raises(DataError, match="NaN"):
        eugkm_numpy(np.array([[0.0, np.nan]]), 2, 1.0, -1, 1)


def test_points_outside_the_bounds_and_ball_are_clipped() -> None:
    """A far outlier cannot drag a center out of the public box / ball."""
    x = mixture(20_000, 2, 3, seed=4)
    x[:50] = 1e6
    e = eugkm_numpy(x, 3, 5.0, -1, 1, seed=1)
    assert np.all(np.abs(e.centers) <= 1.0)
    r = lsh_numpy(x, 3, 5.0, 1.5, seed=1)
    assert np.all(np.linalg.norm(r.centers, axis=1) <= 1.5 + 1e-9)


# --------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("seed", [0, 1])
def test_eugkm_and_lsh_near_nonprivate_at_large_epsilon(seed: int) -> None:
    """Well-separated mixture at eps = 10: both within 25% of non-private k-means, and far below
    the trivial one-center baseline."""
    x = mixture(30_000, 2, 4, seed=seed)
    trivial = kmeans_loss(x, x.mean(axis=0, keepdims=True))
    best = kmeans_loss(x, weighted_kmeans(x, 4, np.random.default_rng(0)))
    e = kmeans_loss(x, eugkm_numpy(x, 4, 10.0, -1, 1, seed=seed).centers)
    x6 = mixture(30_000, 6, 4, seed=seed)
    best6 = kmeans_loss(x6, weighted_kmeans(x6, 4, np.random.default_rng(0)))
    r = kmeans_loss(x6, lsh_numpy(x6, 4, 10.0, math.sqrt(6), seed=seed).centers)
    assert e <= 1.25 * best and e < 0.05 * trivial
    assert r <= 1.25 * best6


def test_eugkm_coarse_restarts_lose_nothing() -> None:
    """Restarts on the per-level-1-cell summary, then Lloyd on the full synopsis: same synopsis,
    loss within 5% of restarts on the full synopsis."""
    from leteo_fed.clustering.eugkm import EugkmParams

    x = mixture(30_000, 3, 6, seed=8, spread=0.08)
    full = eugkm_numpy(x, 6, 1.0, -1, 1, seed=2, params=EugkmParams(coarse_above=10**9))
    fast = eugkm_numpy(x, 6, 1.0, -1, 1, seed=2, params=EugkmParams(coarse_above=100))
    assert fast.details["coarse_restarts"] and not full.details["coarse_restarts"]
    assert np.array_equal(fast.summary_weights, full.summary_weights)
    assert kmeans_loss(x, fast.centers) <= 1.05 * kmeans_loss(x, full.centers)


def test_ldp_kmeans_is_epsilon_ldp_and_useful_at_large_epsilon() -> None:
    lo, hi = -np.ones(2), np.ones(2)
    assert ldp_rate(1.0, lo, hi) == pytest.approx(1 / math.sqrt(8))  # eps / box diameter
    x = mixture(20_000, 2, 3, seed=5)
    res = ldp_kmeans_numpy(x, 3, EPSILON_MAX, lo, hi, seed=2)  # the largest epsilon allowed
    trivial = kmeans_loss(x, x.mean(axis=0, keepdims=True))
    assert kmeans_loss(x, res.centers) < 0.1 * trivial
    assert np.all(np.abs(res.summary_points) <= 1.0)  # remapped into the box


# --------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def blobs() -> np.ndarray:
    x = mixture(6_000, 3, 4, seed=9, spread=0.05)
    x[:3] = [5.0, -7.0, 0.0]  # outside the bounds and the ball
    return x


@pytest.fixture(scope="module")
def blobs_df(spark, blobs):
    return spark.createDataFrame(pa.table({f"c{i}": blobs[:, i] for i in range(3)}))


@pytest.mark.spark
def test_spark_eugkm_equals_numpy(blobs, blobs_df) -> None:
    """Same cells (same IEEE arithmetic in SQL), same noise order: identical synopsis."""
    from leteo_fed.clustering.spark_eugkm import eugkm_spark

    a = eugkm_numpy(blobs, 4, 1.0, -1, 1, seed=11)
    b = eugkm_spark(blobs_df, 4, 1.0, -1, 1, seed=11)
    assert a.details == b.details
    assert np.array_equal(a.summary_weights, b.summary_weights)
    assert np.array_equal(a.summary_points, b.summary_points)
    assert np.array_equal(a.centers, b.centers)


@pytest.mark.spark
def test_spark_lsh_equals_numpy_up_to_summation_order(blobs, blobs_df) -> None:
    from leteo_fed.clustering.spark_lsh import lsh_spark

    a = lsh_numpy(blobs, 4, 1.0, 1.5, seed=12)
    b = lsh_spark(blobs_df, 4, 1.0, 1.5, seed=12)
    assert a.details == b.details  # same tree: identical counts and noise
    assert np.array_equal(a.summary_weights, b.summary_weights)
    assert np.allclose(a.summary_points, b.summary_points, rtol=0, atol=1e-12)
    assert np.allclose(a.centers, b.centers, rtol=0, atol=1e-9)


@pytest.mark.spark
def test_spark_synopsis_through_mllib(blobs, blobs_df) -> None:
    """MLlib has its own random stream: compare losses, not centers."""
    from leteo_fed.clustering.spark_eugkm import eugkm_spark

    a = eugkm_numpy(blobs, 4, 4.0, -1, 1, seed=13)
    b = eugkm_spark(blobs_df, 4, 4.0, -1, 1, seed=13, mllib_threshold=0)
    assert np.array_equal(a.summary_weights, b.summary_weights)
    la, lb = kmeans_loss(blobs[3:], a.centers), kmeans_loss(blobs[3:], b.centers)
    assert lb <= 1.1 * la + 1e-4


@pytest.mark.spark
def test_spark_ldp_perturbation_matches_numpy_statistically(blobs, blobs_df) -> None:
    """Different random streams, same law: per-coordinate means of the perturbed rows agree
    within 5 standard errors (noise std per coordinate from the nD-Laplace radius law, at most
    sqrt(m (m + 1)) / (rate sqrt(m)) before remapping)."""
    from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_spark, perturb_points, perturb_spark

    lo, hi = -np.ones(3), np.ones(3)
    z_np = perturb_points(blobs, 20.0, lo, hi, np.random.default_rng(1))
    z_sp = np.array(perturb_spark(blobs_df, 20.0, lo, hi, seed=1).collect())  # test-size data
    assert z_sp.shape == blobs.shape and np.all(np.abs(z_sp) <= 1.0)
    sd = math.sqrt(3 * 4) / ldp_rate(20.0, lo, hi) / math.sqrt(3)
    se = sd * math.sqrt(2.0 / blobs.shape[0])
    assert np.all(np.abs(z_np.mean(axis=0) - z_sp.mean(axis=0)) <= 5 * se)
    res = ldp_kmeans_spark(blobs_df, 4, EPSILON_MAX, lo, hi, seed=3, n_init=2)
    trivial = kmeans_loss(blobs[3:], blobs[3:].mean(axis=0, keepdims=True))
    assert kmeans_loss(blobs[3:], res.centers) < 0.3 * trivial


# --------------------------------------------------------------------------- CLI


def _write_csv(path: Path, x: np.ndarray) -> None:
    table = pa.table({"a": x[:, 0], "b": x[:, 1], "name": [f"p{i}" for i in range(len(x))]})
    pacsv.write_csv(table, path)


@pytest.mark.spark
def test_cli_end_to_end(tmp_path: Path, spark) -> None:
    from leteo_fed.cli.main import main

    x = mixture(3_000, 2, 3, seed=21)
    data = tmp_path / "blobs.csv"
    _write_csv(data, x)
    out = tmp_path / "res" / "run"  # created, parents included
    argv = ["dp-kmeans", "--data", str(data), "--k", "3", "--epsilon", "2", "--method", "eugkm"]
    rc = main([*argv, "--bounds=-1,1", "--seed", "4", "--out", str(out), "--evaluate-loss"])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "dp_kmeans.json",
        "dp_kmeans.png",
        "report.html",
        "report.json",
    ]
    doc = json.loads((out / "dp_kmeans.json").read_text())
    assert doc["features"] == ["a", "b"]  # every numeric column; 'name' is text
    assert doc["method"] == "eugkm" and doc["k"] == 3 and doc["delta"] == 0.0
    assert np.array(doc["centers"]).shape == (3, 2)
    assert doc["bounds"] == {"lo": [-1.0, -1.0], "hi": [1.0, 1.0]}
    assert "NOT differentially private" in doc["nonprivate_evaluation"]["warning"]
    best = kmeans_loss(x, weighted_kmeans(x, 3, np.random.default_rng(0)))
    assert doc["nonprivate_evaluation"]["loss"] == pytest.approx(
        kmeans_loss(x, np.array(doc["centers"])), rel=1e-9
    )
    assert doc["nonprivate_evaluation"]["loss"] < 3 * best + 1e-3
    assert (out / "dp_kmeans.png").stat().st_size > 1000
    assert doc["plot"] == str(out / "dp_kmeans.png")
    assert set(doc["timings"]) >= {"read_s", "fit_s", "total_s"}

    lsh_args = ["--method", "lsh", "--radius", "1.5", "--features", "b,a", "--out", str(out)]
    assert main([*argv[:-2], *lsh_args]) == 0  # a second run replaces the first one's files
    assert sorted(p.name for p in out.iterdir()) == [
        "dp_kmeans.json",
        "dp_kmeans.png",
        "report.html",
        "report.json",
    ]
    doc2 = json.loads((out / "dp_kmeans.json").read_text())
    assert doc2["features"] == ["b", "a"] and doc2["delta"] == 1e-6
    assert "nonprivate_evaluation" not in doc2  # the default output never holds the loss


@pytest.mark.spark
def test_cli_charges_a_ledger_and_refuses_an_overspend(tmp_path: Path, spark, capsys) -> None:
    """Run 1 commits its epsilon; run 2 would overspend and is refused before reading; a run
    refused on its data (unknown feature) gives its reservation back."""
    from leteo_fed.cli.main import main
    from leteo_fed.privacy.ledger import PrivacyLedger

    data = tmp_path / "d.csv"
    _write_csv(data, mixture(400, 2, 2, 5))
    ledger = tmp_path / "ledger.json"
    base = ["dp-kmeans", "--data", str(data), "--k", "2", "--method", "eugkm", "--bounds=-1,1"]
    charge = ["--ledger", str(ledger), "--ledger-epsilon", "1.5"]
    out = tmp_path / "c1"
    assert main([*base, "--epsilon", "1", *charge, "--out", str(out)]) == 0
    assert (out / "dp_kmeans.json").exists()
    book = PrivacyLedger(ledger, 1.5, 0.0)
    assert book.spent() == (1.0, 0.0) and book.reserved() == (0.0, 0.0)

    out2 = tmp_path / "c2"
    assert main([*base, "--epsilon", "1", *charge, "--out", str(out2)]) == 2
    assert "would be exceeded" in capsys.readouterr().err
    assert not out2.exists()

    bad = [*base, "--epsilon", "0.5", "--features", "a,zz", *charge, "--out", str(out2)]
    assert main(bad) == 2
    assert book.spent() == (1.0, 0.0) and book.reserved() == (0.0, 0.0)
    assert [s.state for s in book.history()] == ["committed", "released"]
    assert not out2.exists()


@pytest.mark.spark
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--features", "a,zz"], "feature 'zz' is not in the data"),
        (["--features", "name"], "feature 'name' is not numeric"),
    ],
)
def test_cli_refuses_bad_features(tmp_path: Path, spark, capsys, extra, message) -> None:
    from leteo_fed.cli.main import main

    data = tmp_path / "d.csv"
    _write_csv(data, mixture(50, 2, 2, 0))
    out = tmp_path / "c"
    argv = ["dp-kmeans", "--data", str(data), "--k", "2", "--epsilon", "1", "--method", "eugkm"]
    assert main([*argv, "--bounds=-1,1", *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # not even the folder


def test_cli_refuses_an_out_folder_on_or_around_the_input(tmp_path: Path, capsys) -> None:
    """--out is a folder: its files may not replace the input, nor land in an input folder;
    refused before anything is read or written."""
    from leteo_fed.cli.main import main

    res = tmp_path / "res"
    res.mkdir()
    data = res / "dp_kmeans.png"  # an odd name for a CSV, but the command must not clobber it
    _write_csv(data, mixture(20, 2, 2, 0))
    pool = tmp_path / "pool"  # a Parquet folder
    pool.mkdir()
    pacsv.write_csv(pa.table({"a": [0.0], "b": [1.0]}), pool / "part.csv")
    base = ["dp-kmeans", "--k", "2", "--epsilon", "1", "--method", "eugkm", "--bounds=-1,1"]
    cases = [
        (["--data", str(data), "--format", "csv", "--out", str(res)], "would overwrite the input"),
        (["--data", str(pool), "--out", str(pool)], "or inside it"),
        (["--data", str(pool), "--out", str(pool / "res")], "or inside it"),
        (["--data", str(pool), "--out", str(pool / "part.csv")], "is a file"),
    ]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for argv, message in cases:
        assert main([*base, *argv]) == 2, argv
        assert message in capsys.readouterr().err, argv
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "eugkm", "--epsilon", "0", "--bounds", "0,1"], "epsilon must be finite"),
        (["--method", "lsh", "--epsilon", "1", "--radius", "1", "--delta", "1"], "delta"),
        (["--method", "eugkm", "--epsilon", "1", "--bounds", "2,1"], "lo < hi"),
        (["--method", "lsh", "--epsilon", "1", "--radius", "-1"], "radius must be"),
        (["--method", "lsh", "--epsilon", "1"], "needs --radius"),
        (["--method", "eugkm", "--epsilon", "1", "--bounds", "0,1", "--delta", "1e-5"], "pure"),
    ],
)
def test_cli_refuses_parameters_in_a_separate_process(tmp_path: Path, extra, message) -> None:
    """As deployed: `python -m leteo_fed`, one readable line, exit 2, nothing written; refused
    before Spark starts (so these run without a JVM)."""
    out = tmp_path / "c"
    argv = ["dp-kmeans", "--data", str(tmp_path / "none.csv"), "--k", "2", *extra]
    proc = subprocess.run(
        [sys.executable, "-m", "leteo_fed", *argv, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()


# --------------------------------------------------------------------------- engines


def _cli_json(argv: list[str]) -> dict:
    from leteo_fed.cli.main import main

    out = Path(argv[argv.index("--out") + 1])
    assert main(argv) == 0
    return json.loads((out / "dp_kmeans.json").read_text())


@pytest.mark.spark
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_cli_engines_release_the_same_centers(tmp_path: Path, spark, fmt: str) -> None:
    """Same seed: eugkm identical on both engines, lsh equal to rounding (sums in another order);
    the same features are picked (an id column of integers is numeric, 'name' is text)."""
    x = mixture(2_500, 2, 3, seed=31)
    x[5, 0] = np.nan  # dropped on both engines
    table = pa.table({"a": x[:, 0], "b": x[:, 1], "name": [f"p{i}" for i in range(len(x))]})
    data = tmp_path / f"d.{fmt}"
    if fmt == "csv":
        pacsv.write_csv(table, data)
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, data)
    base = ["dp-kmeans", "--data", str(data), "--k", "3", "--epsilon", "1", "--seed", "8"]
    docs = {}
    for engine in ("local", "spark"):
        eug = [*base, "--method", "eugkm", "--bounds=-1,1", "--engine", engine, "--evaluate-loss"]
        lsh = [*base, "--method", "lsh", "--radius", "1.5", "--engine", engine]
        docs[engine] = (
            _cli_json([*eug, "--out", str(tmp_path / f"e-{engine}")]),
            _cli_json([*lsh, "--out", str(tmp_path / f"l-{engine}")]),
        )
        assert docs[engine][0]["engine"]["used"] == engine
    (e_local, l_local), (e_spark, l_spark) = docs["local"], docs["spark"]
    assert e_local["features"] == e_spark["features"] == ["a", "b"]
    assert e_local["centers"] == e_spark["centers"] and e_local["details"] == e_spark["details"]
    assert e_local["nonprivate_evaluation"]["rows"] == e_spark["nonprivate_evaluation"]["rows"]
    assert e_local["nonprivate_evaluation"]["loss"] == pytest.approx(
        e_spark["nonprivate_evaluation"]["loss"], rel=1e-12
    )
    assert l_local["details"] == l_spark["details"]
    np.testing.assert_allclose(l_local["centers"], l_spark["centers"], rtol=0, atol=1e-9)


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["local", "spark"])
def test_cli_engines_refuse_bad_features_alike(tmp_path: Path, spark, capsys, engine) -> None:
    from leteo_fed.cli.main import main

    data = tmp_path / "d.csv"
    _write_csv(data, mixture(50, 2, 2, 0))
    out = tmp_path / "c"
    argv = ["dp-kmeans", "--data", str(data), "--k", "2", "--epsilon", "1", "--method", "eugkm"]
    argv += ["--bounds=-1,1", "--engine", engine, "--out", str(out)]
    assert main([*argv, "--features", "name"]) == 2
    assert "feature 'name' is not numeric (it holds text)" in capsys.readouterr().err
    assert main([*argv, "--features", "a,zz"]) == 2
    assert "feature 'zz' is not in the data; available columns: 'a', 'b', 'name'" in (
        capsys.readouterr().err
    )
    assert not out.exists()
