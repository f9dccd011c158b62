"""At large epsilon the synthetic table reproduces the real means, covariances and frequencies.

Why it should, and how close (the tolerances below): with no noise, each cluster's Gaussian has
exactly its records' mean and covariance on the encoded [0, 1] scale, so the mixture over a
class's clusters has exactly the class's mean and covariance within each group, and a one-hot
block's mean is the cluster's category frequencies, which the renormalized sampling reproduces
in expectation. What remains:

* sampling: the mean of n synthetic rows has sd sqrt(var / n); a sample covariance has sd
  sqrt((var_a var_b + cov_ab^2) / n); a frequency p has sd sqrt(p (1 - p) / n). We allow 5 sd;
* noise: at epsilon = 50 the sums' noise moves a mean by far less than that (checked below);
  the covariance noise of a cluster has Frobenius norm about sqrt(2) d b_Q / N (b_Q its Laplace
  scale, N >= k), and the PSD repair moves a matrix by at most its most negative eigenvalue,
  so by at most that norm: the covariance tolerance adds sqrt(2) d b_Q / k (+ the same again
  for the unrepaired noise itself).

The data are chosen so that decoding's clipping to the bounds is negligible (values 3+ sd
inside them). Fixed seeds.
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
