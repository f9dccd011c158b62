"""At large epsilon the synthetic table reproduces the real frequencies, means and covariances.

Why it should, and how close (the tolerances below):

* cells: a generated row's grid cell is drawn in proportion to the clipped noisy cell counts,
  so every categorical frequency and every numeric bin frequency is the real one up to
  sampling, sd sqrt(p (1 - p) / n), plus the histogram noise (at epsilon 50, 10 for each
  group's histogram: Laplace scale 0.1 per cell, noise floor 0.1 ln(cells) < 0.5 rows,
  negligible). We allow 5 sd.
* numerics: within a cluster the values come from its Gaussian (exact mean and covariance
  without noise) moved into the drawn cell's bin by the Gaussian copula. The mean of n rows
  has sampling sd sqrt(var / n); the in-bin placement adds a bias that we do not bound by
  theory (it is a fraction of a bin width, 1/8 here); the means test allows 5 sd + 1e-3 of the
  range and records how far the draws land.
* covariances: sampling sd sqrt((var_a var_b + cov_ab^2) / n), 5 sd; the covariance noise of a
  cluster has Frobenius norm about sqrt(2) d b_Q / N (b_Q its Laplace scale, N >= k), and the
  PSD repair moves a matrix by at most its most negative eigenvalue, so by at most that norm:
  the tolerance adds twice sqrt(2) d b_Q / k.

The data are chosen so that the clipping to the bounds is negligible (values 3+ sd inside
them). Fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from leteo_fed.synth.config import parse
from leteo_fed.synth.encoding import SCALE, encode_table
from leteo_fed.synth.generation import generate
from leteo_fed.synth.local_engine import LocalAggregator
from leteo_fed.synth.model import build

N = 20_000
K = 400
DOC = {
    "synthesize": {
        "epsilon": 50.0,
        "k": K,
        "bins": 8,
        "groups": [["a", "b"], ["c", "d"]],
        "label": "y",
        "classes": ["no", "yes"],
    },
    "column": [
        {"name": "a", "type": "numeric", "lo": 0, "hi": 100},
        {"name": "b", "type": "numeric", "lo": -1, "hi": 1},
        {"name": "c", "type": "categorical", "categories": ["x", "y", "z"]},
        {"name": "d", "type": "numeric", "lo": 0, "hi": 10},
    ],
}


def _data(seed: int) -> pa.Table:
    g = np.random.default_rng(seed)
    a = g.normal(50, 12, N)
    b = (a - 50) / 100 + g.normal(0, 0.1, N)
    d = g.uniform(0, 10, N)
    c = np.where(d < 3, "x", np.where(g.random(N) < 0.7, "y", "z"))
    y = np.where(a + g.normal(0, 10, N) > 55, "yes", "no")
    return pa.table({"a": a, "b": b, "c": c, "d": d, "y": y})


def _encoded(table: pa.Table) -> dict[str, np.ndarray]:
    """The columns on the encoded [0, 1] scale (c as its one-hot block)."""
    cfg = parse(DOC)
    enc = encode_table(table, cfg)
    out = {n: enc.codes[n] / SCALE for n in ("a", "b", "d")}
    for i, cat in enumerate(("x", "y", "z")):
        out[f"c={cat}"] = (enc.codes["c"] == i).astype(float)
    return out


@pytest.fixture(scope="module")
def real_and_synthetic() -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    cfg = parse(DOC)
    table = _data(seed=5)
    model = build(LocalAggregator(encode_table(table, cfg), cfg), cfg, seed=9)
    synthetic = generate(model, cfg, seed=9, rows=None)
    assert abs(synthetic.num_rows - N) < 50  # the noisy class sizes, at epsilon 50
    return _encoded(table), _encoded(synthetic)


def test_means_and_frequencies(
    real_and_synthetic: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
) -> None:
    real, syn = real_and_synthetic
    for name, x in real.items():
        tol = 5 * np.sqrt(x.var() / N) + 1e-3  # 1e-3: far above the sums' noise at eps 50
        assert abs(syn[name].mean() - x.mean()) < tol, (name, syn[name].mean(), x.mean(), tol)


def test_bin_frequencies(
    real_and_synthetic: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
) -> None:
    real, syn = real_and_synthetic
    for name in ("a", "b", "d"):
        rb = np.minimum((real[name] * 8).astype(int), 7)
        sb = np.minimum((syn[name] * 8).astype(int), 7)
        for v in range(8):
            p = (rb == v).mean()
            assert abs((sb == v).mean() - p) < 5 * np.sqrt(p * (1 - p) / N) + 1e-3, (name, v)


def test_covariances_within_groups(
    real_and_synthetic: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
) -> None:
    real, syn = real_and_synthetic
    # group {a, b}: w = 2, its covariance epsilon 50 * 2/4 * 0.3, Laplace scale w(w+1)/2 / eps
    b_q = 3 / (50 * 0.5 * 0.3)
    noise = 2 * np.sqrt(2) * 2 * b_q / K
    for u, v in (("a", "a"), ("a", "b"), ("b", "b"), ("d", "c=x"), ("d", "d")):
        cr = np.cov(real[u], real[v])[0, 1]
        cs = np.cov(syn[u], syn[v])[0, 1]
        sd = np.sqrt((real[u].var() * real[v].var() + cr**2) / N)
        assert abs(cs - cr) < 5 * sd + noise, (u, v, cs, cr, 5 * sd + noise)
    assert np.corrcoef(real["a"], real["b"])[0, 1] > 0.5  # a real dependence, reproduced


def test_groups_are_independent_given_the_class(
    real_and_synthetic: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
) -> None:
    """Across groups the only link is the class: a and d, independent in the data, stay so."""
    _, syn = real_and_synthetic
    assert abs(np.corrcoef(syn["a"], syn["d"])[0, 1]) < 5 / np.sqrt(N)


def test_class_size_noise_matches_its_prediction() -> None:
    """The released class size weights the groups' unclipped noisy histogram totals by the
    inverse of their variances v_g = cells_g 2 b_g^2 (b_g = 1 / eps_histogram), so its error
    has variance 1 / sum_g (1 / v_g), below the plain mean's sum_g v_g / G^2.
    Over R seeds the sample variance of the error has relative sd at most sqrt((2 + 3) / R)
    (excess kurtosis of a Laplace sum <= 3); we allow 4 of them."""
    doc = {**DOC, "synthesize": {**DOC["synthesize"], "epsilon": 1.0, "k": 50}}
    cfg = parse(doc)
    table = _data(seed=6).slice(0, 300)
    agg = LocalAggregator(encode_table(table, cfg), cfg)
    truth = float((np.asarray(table.column("y").to_pylist()) == "no").sum())
    runs = 1500
    errors = np.array([build(agg, cfg, seed=s).class_sizes[0] - truth for s in range(runs)])
    model = build(agg, cfg, seed=0)
    cells = [8 * 8, 3 * 8]  # {a, b} and {c, d} grids at bins = 8
    b = [1 / g["histogram"]["epsilon"] for g in model.budget["groups"]]
    v = [n * 2 * bb * bb for n, bb in zip(cells, b, strict=True)]
    predicted = 1 / sum(1 / x for x in v)
    assert predicted < sum(v) / 4  # the weighting helps here: the grids differ
    # the clip at 0 of a class size only matters far below 300 rows: the error is the noise
    assert abs(errors.var() / predicted - 1) < 4 * np.sqrt(5 / runs), (errors.var(), predicted)
    assert abs(errors.mean()) < 4 * np.sqrt(predicted / runs)  # unbiased


def test_an_unresolved_variance_is_floored_not_a_point_mass() -> None:
    """A cluster whose noisy variance is below the noise's standard deviation sqrt(v) on that
    entry, v = 2 q_scale^2 / N^2, gets the variance sqrt(v) (not 0, which stacked every row on
    the noisy mean); a variance well above it is kept as it is."""
    from leteo_fed.synth.statistics import gaussian_model

    n, q_scale = 1000.0, 20.0
    floor = np.sqrt(2 * q_scale**2 / n**2)
    counts = np.array([n, n])
    s = np.array([[10.0], [500.0]])  # means 0.01 and 0.5
    q = np.array([[[0.05]], [[n * (0.25 + 0.04)]]])  # variances 0.01^2 - ... < 0, and 0.04
    _, cov, factor = gaussian_model(counts, s, q, q_scale)
    assert cov[0, 0, 0] == pytest.approx(floor)
    assert cov[1, 0, 0] == pytest.approx(0.04)
    assert abs(factor[0, 0, 0]) > 0  # the draws spread


def test_a_correlation_between_unresolved_variances_is_dropped_not_made_one() -> None:
    """Issue 32: two numeric columns of one cell, real variances well below the noise on Q and
    a noisy cross moment of two noise standard deviations. Before, the variances were raised to
    the floor, the cross term kept 3/4 of itself and the PSD repair made the correlation 1.
    The released covariance now has no correlation there; where both variances are measured
    (ten noise standard deviations up), the same cross moment is kept, shrunk as before."""
    from leteo_fed.synth.statistics import RESOLVED_NOISE_SDS, gaussian_model

    n, q_scale = 7685.0, 60.0
    sd = np.sqrt(2 * q_scale**2 / n**2)  # the noise's standard deviation on a Q / N entry
    mu = np.array([0.1, 0.4])
    cross = 2 * sd
    small = np.array([[0.003, cross], [cross, 0.0013]])  # both below RESOLVED_NOISE_SDS * sd
    large = np.array([[10 * sd, cross], [cross, 10 * sd]])
    assert small.diagonal().max() < RESOLVED_NOISE_SDS * sd < large.diagonal().min()
    q = np.stack([n * (c + np.outer(mu, mu)) for c in (small, large)])
    s = np.stack([n * mu, n * mu])
    _, cov, _ = gaussian_model(np.array([n, n]), s, q, q_scale)
    assert cov[0, 0, 1] == 0.0 and cov[0, 0, 0] == pytest.approx(sd)
    assert cov[1, 0, 1] == pytest.approx(cross * 0.75)  # 1 - v / c^2 at c = 2 sd
    rho = cov[1, 0, 1] / np.sqrt(cov[1, 0, 0] * cov[1, 1, 1])
    assert 0 < rho < 1


def test_a_zero_inflated_column_at_equal_bins_is_no_false_predictor() -> None:
    """Issue 32: Adult's capital-gain at 10 equal bins (no zero bin), each column its own
    group, epsilon 1. 96% of one class and 80% of the other are 0, all in the first bin. The
    synthetic values of that bin must spread in both classes: a point mass at one class's
    noisy mean let a classifier call every real 0 the other class. Checked over 5 seeds: no
    class's first-bin values are a single value."""
    g = np.random.default_rng(3)
    n = 8000
    y = np.where(g.random(n) < 0.25, "yes", "no")
    zero = g.random(n) < np.where(y == "yes", 0.8, 0.96)
    gain = np.where(zero, 0.0, np.minimum(g.exponential(8000, n), 99999.0))
    age = g.uniform(17, 90, n)
    table = pa.table({"gain": gain, "age": age, "y": y})
    doc = {
        "synthesize": {
            "epsilon": 1.0,
            "k": 20,
            "bins": 10,
            "groups": [["gain"], ["age"]],
            "label": "y",
            "classes": ["no", "yes"],
        },
        "column": [
            {"name": "gain", "type": "numeric", "lo": 0, "hi": 99999},
            {"name": "age", "type": "numeric", "lo": 17, "hi": 90},
        ],
    }
    cfg = parse(doc)
    agg = LocalAggregator(encode_table(table, cfg), cfg)
    for seed in range(5):
        syn = generate(build(agg, cfg, seed=seed), cfg, seed=seed, rows=None)
        values = np.asarray(syn.column("gain").to_pylist(), dtype=float)
        labels = np.asarray(syn.column("y").to_pylist())
        for cls in ("no", "yes"):
            first_bin = values[(labels == cls) & (values < 9999.9)]
            assert np.unique(first_bin).size > 10, (seed, cls, np.unique(first_bin)[:5])
