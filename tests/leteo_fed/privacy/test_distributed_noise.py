"""Skellam distributed noise (docs/dp-release.md): sampling, accounting, calibration, sensitivities.

Statistical tests use fixed seeds; every tolerance is derived from theory and stated next to it
(a 5-standard-error band has two-sided probability ~6e-7 of failing for a correct sampler, so
with a fixed seed a failure means a real discrepancy, not bad luck).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from scipy.stats import chisquare, skellam

from leteo_fed.errors import ConfigError, DataError, ProtocolError
from leteo_fed.privacy.distributed_noise import (
    DEFAULT_ALPHAS,
    Sensitivity,
    calibrate_mu,
    clip_rows,
    effective_mu,
    new_rng,
    rdp_to_dp,
    skellam_magnitude_bound,
)
from leteo_fed.privacy.mechanisms import Gaussian, Skellam
from leteo_fed.privacy.verify import add_owner_noise, verify_release

# ----------------------------------------------------------------------------- sampling


@pytest.mark.parametrize("mu", [0.3, 7.3, 1e11])
def test_skellam_mean_zero_variance_two_mu(mu: float) -> None:
    n = 400_000
    x = Skellam(mu).sample(n, np.random.default_rng(20240601))
    assert x.dtype == np.int64 and x.shape == (n,)
    var = 2 * mu
    # Mean: standard error sqrt(2 mu / n).
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    # Sample variance: Skellam cumulants are kappa_2 = kappa_4 = 2 mu, so the 4th central moment
    # is m4 = 2 mu + 3 (2 mu)^2 and Var(s^2) ~ (m4 - var^2)/n = (2 mu + 8 mu^2)/n.
    se_var = math.sqrt((2 * mu + 8 * mu * mu) / n)
    assert abs(x.astype(np.float64).var(ddof=1) - var) < 5 * se_var


def test_skellam_matches_exact_pmf() -> None:
    # Chi-square goodness of fit against scipy's Skellam pmf (an independent implementation).
    mu, n = 4.0, 200_000
    x = Skellam(mu).sample(n, np.random.default_rng(7))
    k = np.arange(-12, 13)  # |k| > 12 pooled into the two end bins
    p = skellam.pmf(k, mu, mu)
    p[0] += skellam.cdf(-13, mu, mu)
    p[-1] += skellam.sf(12, mu, mu)
    obs = np.array([np.sum(np.clip(x, -12, 12) == v) for v in k])
    # For a correct sampler the p-value is uniform; 1e-4 fails only on a real mismatch.
    assert chisquare(obs, n * p).pvalue > 1e-4


def test_sum_of_owner_shares_is_skellam_mu() -> None:
    mu, quorum, n = 10.0, 7, 200_000
    rng = np.random.default_rng(99)
    shares = [Skellam(mu).owner_share(quorum).sample(n, rng) for _ in range(quorum)]
    total = np.sum(shares, axis=0)
    # Each share alone has variance 2 mu / quorum; the sum has 2 mu (same 5-SE bands as above).
    assert abs(shares[0].var() - 2 * mu / quorum) < 5 * math.sqrt(
        (2 * mu / quorum + 8 * (mu / quorum) ** 2) / n
    )
    assert abs(total.mean()) < 5 * math.sqrt(2 * mu / n)
    assert abs(total.var(ddof=1) - 2 * mu) < 5 * math.sqrt((2 * mu + 8 * mu * mu) / n)
    # ... and is distributed exactly as Skellam(mu): chi-square against the exact pmf.
    k = np.arange(-15, 16)
    p = skellam.pmf(k, mu, mu)
    p[0] += skellam.cdf(-16, mu, mu)
    p[-1] += skellam.sf(15, mu, mu)
    obs = np.array([np.sum(np.clip(total, -15, 15) == v) for v in k])
    assert chisquare(obs, n * p).pvalue > 1e-4


def test_more_owners_than_quorum_only_adds_noise() -> None:
    mu, quorum, n_sub, n = 10.0, 4, 6, 200_000
    rng = np.random.default_rng(5)
    total = np.sum([Skellam(mu).owner_share(quorum).sample(n, rng) for _ in range(n_sub)], axis=0)
    assert effective_mu(mu, quorum, n_sub) == pytest.approx(15.0)
    expected = 2 * 15.0
    assert abs(total.var(ddof=1) - expected) < 5 * math.sqrt((2 * 15 + 8 * 15**2) / n)
    with pytest.raises(ProtocolError, match="quorum"):
        effective_mu(mu, quorum, quorum - 1)


def test_sampling_edge_cases() -> None:
    assert np.array_equal(Skellam(0.0).sample(5, np.random.default_rng(0)), np.zeros(5))
    for bad in (-1.0, float("nan"), float("inf"), True):
        with pytest.raises(ConfigError):
            Skellam(bad).sample(3)
    with pytest.raises(ConfigError):
        Skellam(10.0).owner_share(0).sample(3)
    # default generator: cryptographically seeded, so two calls differ
    a, b = new_rng().integers(0, 2**62, 4), new_rng().integers(0, 2**62, 4)
    assert not np.array_equal(a, b)
    assert Skellam(3.0).sample((2, 3)).shape == (2, 3)


def test_magnitude_bound() -> None:
    mu, n = 10.0, 200_000
    b = skellam_magnitude_bound(mu, 1, failure_prob=1e-3)
    # A Chernoff bound is conservative: above the Gaussian 1e-3 two-sided quantile (3.29 sigma).
    assert b > 3.29 * math.sqrt(2 * mu)
    x = Skellam(mu).sample(n, np.random.default_rng(11))
    # Exceedance frequency must stay below 1e-3 (its SE at n=2e5 is ~7e-5).
    assert np.mean(np.abs(x) > b) <= 1e-3
    # More coordinates or smaller failure probability -> larger bound.
    assert skellam_magnitude_bound(mu, 1000, 1e-3) > b
    assert skellam_magnitude_bound(mu, 1, 2.0**-64) > b
    # For a huge mu it approaches the Gaussian tail: sqrt(2 var log(2/p)).
    big = 1e11
    g = math.sqrt(2 * 2 * big * math.log(2 / 2.0**-64))
    assert g <= skellam_magnitude_bound(big, 1) <= 1.001 * g


# ----------------------------------------------------------------------------- accounting


def test_skellam_rdp_hand_values() -> None:
    # alpha=3, mu=2, D1=D2=1: 3/(4*2) + min((5*1 + 6)/(16*4), 3/(4*2)) = 0.375 + 11/64
    assert Skellam(2.0).rdp(3, Sensitivity(1.0, 1.0)) == pytest.approx(0.375 + 11 / 64, rel=1e-15)
    # alpha=2, mu=1, D1=4, D2=2: 2*4/4 + min((3*4 + 24)/16, 12/4) = 2 + 2.25
    assert Skellam(1.0).rdp(2, Sensitivity(4.0, 2.0)) == pytest.approx(4.25, rel=1e-15)
    # alpha=2, mu=1, D1=1, D2=1: 0.5 + min(9/16, 3/4) ... the min's first branch
    assert Skellam(1.0).rdp(2, Sensitivity(1.0, 1.0)) == pytest.approx(0.5 + 9 / 16, rel=1e-15)
    # alpha=100, mu=1, D1=D2=1: 25 + min(205/16, 0.75) -> second branch 0.75
    assert Skellam(1.0).rdp(100, Sensitivity(1.0, 1.0)) == pytest.approx(25.75, rel=1e-15)
    with pytest.raises(ConfigError):
        Skellam(1.0).rdp(2.5, Sensitivity(1.0, 1.0))  # integer orders only
    with pytest.raises(ConfigError):
        Skellam(1.0).rdp(1, Sensitivity(1.0, 1.0))


def test_rdp_to_dp_hand_computed() -> None:
    # One order alpha=10 with RDP 0.5 and delta=1e-5:
    #   standard: 0.5 + ln(1e5)/9 = 0.5 + 11.512925464970229/9 = 1.7792139405522477
    #   improved: standard + ln(0.9) - ln(10)/9
    #           = 1.7792139405522477 - 0.10536051565782628 - 0.2558427881104496
    #           = 1.4180106367839718
    eps, a = rdp_to_dp([0.5], [10], 1e-5, method="standard")
    assert (eps, a) == (pytest.approx(1.7792139405522477, rel=1e-13), 10.0)
    eps, a = rdp_to_dp([0.5], [10], 1e-5)
    assert eps == pytest.approx(1.4180106367839718, rel=1e-13)
    # Minimisation over orders: alpha=2 gives 0.1 + ln(1e5) = 11.61..., alpha=10 wins.
    eps, a = rdp_to_dp([0.1, 0.5], [2, 10], 1e-5, method="standard")
    assert a == 10.0 and eps == pytest.approx(1.7792139405522477, rel=1e-13)
    # Improved never exceeds standard.
    r = Gaussian(3.0).rdp(DEFAULT_ALPHAS, 1.0)
    assert rdp_to_dp(r, DEFAULT_ALPHAS, 1e-6)[0] < rdp_to_dp(r, DEFAULT_ALPHAS, 1e-6, "standard")[0]
    # epsilon and delta go through the privacy layer's one check: DataError naming the field
    with pytest.raises(DataError) as err:
        rdp_to_dp([0.5], [10], 0.0)
    assert err.value.field == "delta"
    with pytest.raises(ConfigError):
        rdp_to_dp([0.5], [10], 1e-5, method="nope")


def _skellam_logpmf(k: np.ndarray, mu: float) -> np.ndarray:
    """Exact log pmf of Skellam(mu) in log space: P(k) = sum_j Pois(j+|k|) Pois(j), no tail
    underflow (needed: the Renyi divergence at large alpha is driven by the tails)."""
    k = np.abs(np.asarray(k))[:, None]
    j = np.arange(0, int(mu + 40 * math.sqrt(mu) + 60))[None, :]
    lm = math.log(mu)
    terms = (j + k) * lm - gammaln(j + k + 1) + j * lm - gammaln(j + 1) - 2 * mu
    return logsumexp(terms, axis=1)


@pytest.mark.parametrize("mu", [1.0, 3.0, 20.0, 200.0])
def test_rdp_bound_dominates_exact_renyi_divergence(mu: float) -> None:
    # 1-D Skellam, shift D (so D1 = D2 = D): the exact D_alpha(Sk + D || Sk) computed by summation
    # must never exceed the paper's bound, and for large mu the bound must be tight (close to the
    # Gaussian value alpha D^2 / (4 mu) that the exact divergence also approaches).
    kmax = 1500
    k = np.arange(-kmax, kmax + 1)
    lq = _skellam_logpmf(k, mu)
    for shift in (1, 3):
        lp = _skellam_logpmf(k - shift, mu)
        for alpha in (2, 8, 32):
            terms = alpha * lp + (1 - alpha) * lq
            # the truncated tails are negligible (last terms are e^-1000 below the peak)
            assert max(terms[0], terms[-1]) < terms.max() - 200
            exact = logsumexp(terms) / (alpha - 1)
            bound = Skellam(mu).rdp(alpha, Sensitivity(shift, shift))
            assert exact <= bound * (1 + 1e-12)
            if mu >= 200:
                assert bound <= exact * 1.02


def test_calibrate_mu_meets_target_and_is_smallest() -> None:
    l1, l2 = 30.0, 10.0
    for eps in (0.25, 1.0, 4.0):
        for delta in (1e-9, 1e-6, 1e-3):
            mu = calibrate_mu(eps, delta, l1, l2)
            got = Skellam(mu).epsilon(Sensitivity(l1, l2), delta)
            assert got <= eps
            assert got == pytest.approx(eps, rel=1e-6)
            # 1e-6 less noise already breaks the target (bisection tolerance is 1e-10).
            assert Skellam(mu * (1 - 1e-6)).epsilon(Sensitivity(l1, l2), delta) > eps


def test_calibrate_mu_monotone() -> None:
    l1, l2 = 5.0, 3.0
    mus_eps = [calibrate_mu(e, 1e-6, l1, l2) for e in (0.1, 0.3, 1.0, 3.0, 10.0)]
    assert all(a > b for a, b in zip(mus_eps[:-1], mus_eps[1:], strict=True))
    mus_delta = [calibrate_mu(1.0, d, l1, l2) for d in (1e-12, 1e-8, 1e-5, 1e-2)]
    assert all(a > b for a, b in zip(mus_delta[:-1], mus_delta[1:], strict=True))
    # larger sensitivity -> more noise; k compositions -> more noise
    assert calibrate_mu(1.0, 1e-6, 10.0, 6.0) > calibrate_mu(1.0, 1e-6, l1, l2)
    assert calibrate_mu(1.0, 1e-6, l1, l2, compositions=5) > calibrate_mu(1.0, 1e-6, l1, l2)
    # the standard conversion is looser, so it needs more noise
    assert calibrate_mu(1.0, 1e-6, l1, l2, method="standard") > calibrate_mu(1.0, 1e-6, l1, l2)
    for eps, delta, field in ((0.0, 1e-6, "epsilon"), (1.0, 1.0, "delta"), (51.0, 1e-6, "epsilon")):
        with pytest.raises(DataError) as err:  # 51: above the one cap EPSILON_MAX = 50
            calibrate_mu(eps, delta, l1, l2)
        assert err.value.field == field


def test_gaussian_analytic_reference() -> None:
    # eps=0, sigma=D=1: delta = Phi(0.5) - Phi(-0.5) = 0.38292492254802624
    assert Gaussian(1.0).delta_at(0.0, 1.0) == pytest.approx(0.38292492254802624, rel=1e-12)
    sigma = 4.0
    eps = Gaussian(sigma).epsilon(1.0, 1e-5)
    assert Gaussian(sigma).delta_at(eps, 1.0) == pytest.approx(1e-5, rel=1e-8)


@pytest.mark.parametrize(("l1", "l2"), [(1000.0, 100.0), (1e5, 1e4)])
def test_skellam_accounting_approaches_gaussian_for_large_mu(l1: float, l2: float) -> None:
    # Skellam(mu) -> N(0, 2 mu) as mu grows, and the paper's RDP bound is the Gaussian RDP
    # alpha D2^2 / (2 sigma^2), sigma^2 = 2 mu, plus a correction O(D/mu^2). So, with the same
    # RDP -> DP conversion, Skellam's epsilon is >= the Gaussian-RDP epsilon and within 0.1% of it
    # when mu/D2^2 is moderate (here mu ~ 10 D2^2). Against the exact (Balle-Wang) Gaussian
    # epsilon it must not be smaller, and the RDP route loses under 10% at eps ~ 1, delta = 1e-6.
    delta = 1e-6
    mu = calibrate_mu(1.0, delta, l1, l2)
    sigma = math.sqrt(2 * mu)
    eps_sk = Skellam(mu).epsilon(Sensitivity(l1, l2), delta)
    eps_g_rdp = rdp_to_dp(Gaussian(sigma).rdp(DEFAULT_ALPHAS, l2), DEFAULT_ALPHAS, delta)[0]
    eps_g_exact = Gaussian(sigma).epsilon(l2, delta)
    assert eps_g_rdp <= eps_sk <= eps_g_rdp * 1.001
    assert eps_g_exact <= eps_sk <= eps_g_exact * 1.10


def test_small_mu_correction_is_visible() -> None:
    # At small mu (D2 = 1) the correction term is not negligible: the Skellam bound is strictly
    # above the Gaussian RDP value at the same variance.
    mu = calibrate_mu(1.0, 1e-6, 1.0, 1.0)
    sigma = math.sqrt(2 * mu)
    eps_g_rdp = rdp_to_dp(Gaussian(sigma).rdp(DEFAULT_ALPHAS, 1.0), DEFAULT_ALPHAS, 1e-6)[0]
    assert eps_g_rdp < 0.99 * Skellam(mu).epsilon(Sensitivity(1.0, 1.0), 1e-6)


# ----------------------------------------------------------------------------- clipping


def test_clip_rows() -> None:
    x = np.array([[0.3, 0.4], [3.0, 4.0], [0.0, 0.0], [-6.0, 8.0], [1.0, 0.0]])
    before = x.copy()
    y = clip_rows(x, 1.0)
    assert np.array_equal(x, before)  # input untouched
    norms = np.linalg.norm(y, axis=1)
    assert np.all(norms <= 1.0)
    np.testing.assert_array_equal(y[[0, 2, 4]], x[[0, 2, 4]])  # within the bound: unchanged
    np.testing.assert_allclose(y[1], [0.6, 0.8], rtol=1e-12)  # direction kept, norm C
    np.testing.assert_allclose(y[3], [-0.6, 0.8], rtol=1e-12)
    rng = np.random.default_rng(3)
    big = rng.normal(size=(10_000, 13)) * rng.exponential(5, size=(10_000, 1))
    assert np.all(np.linalg.norm(clip_rows(big, 2.5), axis=1) <= 2.5)
    with pytest.raises(DataError):
        clip_rows(np.array([[np.nan, 1.0]]), 1.0)
    with pytest.raises(DataError):
        clip_rows(np.ones(3), 1.0)
    with pytest.raises(ConfigError):
        clip_rows(x, 0.0)


# ----------------------------------------------------------------------------- owner-side check


def _round(**changes) -> tuple[SimpleNamespace, Sensitivity, int, int]:
    """A DP round announcing Skellam noise calibrated for (1, 1e-6) at this sensitivity, with an
    encoding that leaves exactly the room one owner's share needs."""
    sens = Sensitivity(30.0, 10.0)
    mu = calibrate_mu(1.0, 1e-6, sens.l1, sens.l2)
    dp = SimpleNamespace(mechanism="skellam", epsilon=1.0, delta=1e-6, mu=mu, quorum=3)
    for key, value in changes.items():
        setattr(dp, key, value)
    n_values = 50
    return dp, sens, n_values, skellam_magnitude_bound(mu / 3, n_values)


def test_verify_release_accepts_an_honest_round() -> None:
    verify_release(*_round())
    verify_release(*_round(epsilon=1.0 - 1e-7))  # recomputation slack: 1e-6 relative


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mechanism": "gaussian"}, "unknown DP mechanism 'gaussian'"),
        ({"quorum": 1}, "no noise or a quorum below 2"),
        ({"mu": 0.0}, "no noise or a quorum below 2"),
        ({"mu": float("nan")}, "no noise or a quorum below 2"),
        ({"epsilon": 0.5}, r"the round's noise gives epsilon 1, more than the announced 0.5"),
        ({"delta": 0.0}, "DP parameters are not valid: delta"),
        ({"epsilon": 60.0}, r"not valid: epsilon must be finite and in \(0, 50\]"),
    ],
)
def test_verify_release_refuses(changes: dict, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        verify_release(*_round(**changes))


def test_verify_release_refuses_an_encoding_without_room_for_the_noise() -> None:
    dp, sens, n_values, room = _round()
    with pytest.raises(ProtocolError, match="leaves no room for the DP noise"):
        verify_release(dp, sens, n_values, room - 1)
    with pytest.raises(ProtocolError, match="leaves no room"):  # more values need more room
        verify_release(dp, sens, 100 * n_values, room)


def test_add_owner_noise_is_one_share_of_skellam() -> None:
    dp = SimpleNamespace(mu=30.0, quorum=3)
    big = 2**70  # encoded shares can exceed int64: the values stay Python ints
    values = [big + i for i in range(100_000)]
    noisy = add_owner_noise(values, dp)
    assert len(noisy) == len(values) and all(type(v) is int for v in noisy[:10])
    z = np.array([a - b for a, b in zip(noisy, values, strict=True)], dtype=np.float64)
    # Skellam(mu / quorum) = Skellam(10): mean 0, variance 20 (5-SE bands as above)
    n, m = z.size, dp.mu / dp.quorum
    assert abs(z.mean()) < 5 * math.sqrt(2 * m / n)
    assert abs(z.var(ddof=1) - 2 * m) < 5 * math.sqrt((2 * m + 8 * m * m) / n)
    with pytest.raises(ConfigError):
        add_owner_noise([1, 2], SimpleNamespace(mu=0.0, quorum=3))  # an owner never adds nothing


def test_noise_too_large_to_sample_names_the_parameters_that_fix_it():
    """A sensitivity no epsilon can cover with samplable noise: the analyst is told which
    parameter to change (public bounds first), not only that mu would exceed 1e18; the CLI
    shows each as its flag (cli/flags.py)."""
    with pytest.raises(DataError) as err:
        calibrate_mu(1.0, 1e-6, 1e12, 1e12)
    assert "needs mu > 1e+18" in str(err.value)
    for name in ("`bounds`", "row_norm_bound", "scale_bits", "dp_epsilon"):
        assert name in str(err.value)
    assert err.value.field == "row_norm_bound"
