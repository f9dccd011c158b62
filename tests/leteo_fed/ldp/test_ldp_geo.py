"""Geo-indistinguishability: planar / n-D Laplace radius laws, directions, box handling.

Fixed seeds. Distribution checks are Kolmogorov-Smirnov tests against the exact CDFs, required
to have p > 1e-3 (a correct sampler fails with probability 1e-3; with the fixed seed a failure is
a real discrepancy). Mean checks use 4 standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from leteo_fed.errors import DataError
from leteo_fed.ldp import (
    nd_laplace,
    planar_laplace,
    planar_radius_cdf,
    remap_to_box,
    resample_in_box,
)

N = 20_000


def test_planar_radius_has_the_lambert_cdf() -> None:
    eps = 0.5
    rng = np.random.default_rng(2024)
    x = rng.uniform(-10, 10, (N, 2))
    z = planar_laplace(x, eps, rng)
    r = np.linalg.norm(z - x, axis=1)
    # C_ε(r) = 1 - (1 + εr) e^{-εr}, which is also the Gamma(2, 1/ε) CDF
    assert stats.kstest(r, lambda s: planar_radius_cdf(s, eps)).pvalue > 1e-3
    assert stats.kstest(r, stats.gamma(2, scale=1 / eps).cdf).pvalue > 1e-3
    angles = np.arctan2(z[:, 1] - x[:, 1], z[:, 0] - x[:, 0])
    assert stats.kstest(angles, stats.uniform(-math.pi, 2 * math.pi).cdf).pvalue > 1e-3
    assert planar_radius_cdf(0.0, eps) == 0.0
    assert planar_radius_cdf(2.0, eps) == pytest.approx(1 - 2 * math.exp(-1))


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_nd_radius_is_gamma_and_directions_uniform(m: int) -> None:
    eps = 2.0
    rng = np.random.default_rng(100 + m)
    x = rng.normal(size=(N, m))
    noise = nd_laplace(x, eps, rng) - x
    r = np.linalg.norm(noise, axis=1)
    assert stats.kstest(r, stats.gamma(m, scale=1 / eps).cdf).pvalue > 1e-3
    u = noise / r[:, None]
    # each coordinate of a uniform unit vector has mean 0 and variance 1/m
    assert np.all(np.abs(u.mean(axis=0)) <= 4 * math.sqrt(1 / (m * N)))


def test_planar_and_nd_agree_in_two_dimensions() -> None:
    rng = np.random.default_rng(5)
    x = np.zeros((N, 2))
    a = np.linalg.norm(planar_laplace(x, 1.0, rng), axis=1)
    b = np.linalg.norm(nd_laplace(x, 1.0, rng), axis=1)
    assert stats.ks_2samp(a, b).pvalue > 1e-3


def test_geo_indistinguishability_density_ratio() -> None:
    # the density ratio is bounded by e^{ε ||x - x'||}; half-planes {z_0 > s} for x = (1, 0)
    # vs x' = (0, 0) approach the bound as s grows: the log-ratio's lower 4-s.e. bound <= ε
    eps, n = 1.0, 200_000
    rng = np.random.default_rng(6)
    z1 = planar_laplace(np.tile([1.0, 0.0], (n, 1)), eps, rng)
    z0 = planar_laplace(np.zeros((n, 2)), eps, rng)
    for s in (1.0, 2.0, 3.0):
        c1, c0 = (z1[:, 0] > s).sum(), (z0[:, 0] > s).sum()
        se = math.sqrt(1 / c1 + 1 / c0)  # delta-method s.e. of the log-ratio
        assert math.log(c1 / c0) - 4 * se <= eps


def test_remap_to_box_clips_to_nearest_point() -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(0, 1, (N, 2))
    z = planar_laplace(x, 2.0, rng)
    lo, hi = np.array([0.0, 0.0]), np.array([1.0, 1.0])
    y = remap_to_box(z, lo, hi)
    assert np.all((y >= lo) & (y <= hi))
    inside = np.all((z >= lo) & (z <= hi), axis=1)
    assert (~inside).any() and np.array_equal(y[inside], z[inside])
    assert np.array_equal(remap_to_box(np.array([[2.0, -3.0]]), 0.0, 1.0), [[1.0, 0.0]])


def test_resample_in_box_stays_inside_and_matches_law_in_a_large_box() -> None:
    rng = np.random.default_rng(8)
    x = rng.uniform(0, 1, (5000, 3))
    z = resample_in_box(x, 1.0, 0.0, 1.0, rng)
    assert np.all((z >= 0.0) & (z <= 1.0))
    # in a box that is huge relative to 1/ε almost no draw is redrawn: radius law unchanged
    c = np.zeros((N, 2))
    zz = resample_in_box(c, 1.0, -50.0, 50.0, rng)
    r = np.linalg.norm(zz, axis=1)
    assert stats.kstest(r, lambda s: planar_radius_cdf(s, 1.0)).pvalue > 1e-3
    with pytest.raises(DataError, match="1 input points lie outside") as exc:
        resample_in_box(np.array([[0.5, 0.5], [2.0, 0.5]]), 1.0, 0.0, 1.0, rng)
    assert exc.value.field == "points"


def test_resample_in_box_costs_more_than_epsilon_but_at_most_twice() -> None:
    # 1-D, box [0, 1], ε = 1, inputs 0 and δ = 0.5: conditioning on the box multiplies the
    # Laplace ratio e^{εδ} by P_δ(B)/P_0(B) (docstring proof), exact value for the cell [0, w]:
    eps, delta, w, n = 1.0, 0.5, 0.05, 200_000
    p0 = 0.5 * (1 - math.exp(-eps))
    pd = 1 - 0.5 * math.exp(-eps * delta) - 0.5 * math.exp(-eps * (1 - delta))
    q0 = 0.5 * (1 - math.exp(-eps * w)) / p0
    qd = 0.5 * (math.exp(-eps * (delta - w)) - math.exp(-eps * delta)) / pd
    exact = q0 / qd
    assert math.exp(eps * delta) * 1.1 < exact < math.exp(2 * eps * delta)
    rng = np.random.default_rng(9)
    a = resample_in_box(np.zeros((n, 1)), eps, 0.0, 1.0, rng)[:, 0]
    b = resample_in_box(np.full((n, 1), delta), eps, 0.0, 1.0, rng)[:, 0]
    ca, cb = (a <= w).sum(), (b <= w).sum()
    assert abs(math.log(ca / cb) - math.log(exact)) <= 4 * math.sqrt(1 / ca + 1 / cb)


def test_validation() -> None:
    rng = np.random.default_rng(0)
    for call, field in (
        (lambda: planar_laplace(np.zeros((3, 3)), 1.0, rng), "points"),
        (lambda: planar_laplace(np.array([[0.0, math.nan]]), 1.0, rng), "points"),
        (lambda: nd_laplace(np.zeros((3, 2)), 0.0, rng), "epsilon"),
        (lambda: nd_laplace(np.zeros((3, 2)), math.inf, rng), "epsilon"),
        (lambda: remap_to_box(np.zeros((3, 2)), 1.0, 0.0), "bounds"),
    ):
        with pytest.raises(DataError) as exc:
            call()
        assert exc.value.field == field
