"""Conformance of EVERY mechanism: central (privacy.mechanisms) and local (ldp.frequency/numeric).

Each test is parametrized over the registries themselves, so a mechanism added to a registry is
checked (or the coverage test fails until it has a case here). For every mechanism:

- unbiasedness: the mean of many samples / estimates lies within 5 standard errors of the truth,
  the standard error being derived from the mechanism's OWN variance formula;
- the variance formula: the sample variance agrees with the closed form within 5 standard errors
  of a sample variance (sqrt((mu4 - sigma^4)/N)), or within chi-square quantiles for the
  (normal) frequency estimates;
- privacy: an empirical check of the privacy map. LDP and pure central mechanisms: output
  histograms of two neighbouring inputs never show a likelihood ratio significantly above
  e^epsilon (any partition of the outputs is post-processing, so its cell ratios obey the
  bound). Approximate mechanisms: the hockey-stick divergence sup_S P(S) - e^eps Q(S), estimated
  from the mechanism's own samples with the exact likelihood ratio of the two shifted laws,
  stays within 5 standard errors of at most delta. Central maps are also checked to be monotone
  in the noise and inverted by `calibrate`.

Seeds are fixed. A 5-standard-error band fails with probability ~6e-7 (two-sided normal) for a
correct mechanism, so a failure means a real discrepancy, not bad luck. Negative controls show
each privacy check rejects a mechanism that claims half its epsilon (or has 80% of its noise).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from scipy.special import ive
from scipy.stats import chi2

from leteo_fed.ldp import frequency, numeric
from leteo_fed.privacy import Budget
from leteo_fed.privacy.mechanisms import (
    CENTRAL_MECHANISMS,
    Gaussian,
    Laplace,
    Sensitivity,
    Skellam,
)

Z = 5.0  # standard errors of every statistical band (two-sided failure ~6e-7)

# ============================================================================= central

SHIFT = 3.0  # 1-D neighbours differ by this much: L1 = L2 sensitivity
SENS = Sensitivity(SHIFT, SHIFT)
DELTA = 1e-3  # large enough that the hockey-stick divergence is measurable from 1e6 samples


def _skellam_log_ratio(m: Skellam, k: np.ndarray) -> np.ndarray:
    """log P(k) / P(k - shift) for Skellam(mu): P(k) = e^{-2 mu} I_|k|(2 mu) = ive(|k|, 2 mu)."""
    return np.log(ive(np.abs(k), 2 * m.mu)) - np.log(ive(np.abs(k - SHIFT), 2 * m.mu))


@dataclass(frozen=True)
class CentralCase:
    """How to drive one central mechanism at the 1-D sensitivity SHIFT."""

    calibrate: Callable[[Budget], Any]
    privacy_map: Callable[[Any, float], Budget]  # (mechanism, delta) -> its guarantee
    noise: Callable[[Any], float]  # the noise parameter (the map decreases in it)
    rebuild: Callable[[float], Any]  # noise parameter -> mechanism
    excess_m4: Callable[[Any], float]  # mu4 - sigma^4 of one sample: Var(s^2) ~ this / N
    log_ratio: Callable[[Any, np.ndarray], np.ndarray]  # log p(x) / p(x - SHIFT)


CENTRAL = {
    "skellam": CentralCase(
        calibrate=lambda b: Skellam.calibrate(b, SENS),
        privacy_map=lambda m, delta: m.privacy_map(SENS, delta),
        noise=lambda m: m.mu,
        rebuild=Skellam,
        # Skellam cumulants kappa_2 = kappa_4 = 2 mu: mu4 = 2 mu + 3 (2 mu)^2
        excess_m4=lambda m: 2 * m.mu + 8 * m.mu**2,
        log_ratio=_skellam_log_ratio,
    ),
    "laplace": CentralCase(
        calibrate=lambda b: Laplace.calibrate(b, SHIFT),
        privacy_map=lambda m, delta: m.privacy_map(SHIFT),
        noise=lambda m: m.scale,
        rebuild=Laplace,
        excess_m4=lambda m: 24 * m.scale**4 - (2 * m.scale**2) ** 2,  # mu4 = 24 b^4
        log_ratio=lambda m, x: (np.abs(x - SHIFT) - np.abs(x)) / m.scale,
    ),
    "gaussian": CentralCase(
        calibrate=lambda b: Gaussian.calibrate(b, SHIFT),
        privacy_map=lambda m, delta: m.privacy_map(SHIFT, delta),
        noise=lambda m: m.sigma,
        rebuild=Gaussian,
        excess_m4=lambda m: 2 * m.sigma**4,  # mu4 = 3 sigma^4
        log_ratio=lambda m, x: ((x - SHIFT) ** 2 - x**2) / (2 * m.sigma**2),
    ),
}


class CentralSuite:
    budget = Budget(1.0, DELTA)

    @staticmethod
    def mechanism(name: str) -> Any:
        return CENTRAL[name].calibrate(CentralSuite.budget)

    @staticmethod
    def unbiased(name: str) -> None:
        m, n = CentralSuite.mechanism(name), 400_000
        x = np.asarray(m.sample(n, np.random.default_rng(1)), dtype=np.float64)
        assert abs(x.mean()) <= Z * math.sqrt(m.variance / n)

    @staticmethod
    def variance(name: str) -> None:
        case, n = CENTRAL[name], 400_000
        m = CentralSuite.mechanism(name)
        x = np.asarray(m.sample(n, np.random.default_rng(2)), dtype=np.float64)
        assert abs(x.var(ddof=1) - m.variance) <= Z * math.sqrt(case.excess_m4(m) / n)

    @staticmethod
    def privacy(name: str, *, noise_factor: float = 1.0) -> bool:
        """Empirical check of the map of the calibrated mechanism (with `noise_factor` times its
        noise, for the negative control)."""
        case = CENTRAL[name]
        calibrated = CentralSuite.mechanism(name)
        claim = case.privacy_map(calibrated, DELTA)
        m = case.rebuild(case.noise(calibrated) * noise_factor)
        rng = np.random.default_rng(3)
        if claim.is_pure:  # density ratio bounded by e^eps: histogram test
            lim = 12 * case.noise(m)
            edges = np.linspace(-lim, lim + SHIFT, 61)
            x0 = np.clip(m.sample(400_000, rng), -lim, lim + SHIFT)
            x1 = np.clip(SHIFT + m.sample(400_000, rng), -lim, lim + SHIFT)
            return _ratio_test(
                np.histogram(x0, edges)[0], np.histogram(x1, edges)[0], claim.epsilon
            )
        # hockey-stick divergence from samples of M(0): E[(1 - e^{eps - L})_+], L the log ratio
        x = np.asarray(m.sample(1_000_000, rng), dtype=np.float64)
        terms = np.maximum(1.0 - np.exp(claim.epsilon - case.log_ratio(m, x)), 0.0)
        se = terms.std(ddof=1) / math.sqrt(x.size)
        return terms.mean() <= claim.delta + Z * se

    @staticmethod
    def privacy_map(name: str) -> None:
        """The map is monotone in the noise, and calibrate() inverts it (tightly)."""
        case = CENTRAL[name]
        for eps in (0.25, 1.0, 4.0):
            m = case.calibrate(Budget(eps, DELTA))
            got = case.privacy_map(m, DELTA)
            assert isinstance(got, Budget) and got.delta in (0.0, DELTA)
            assert eps * (1 - 1e-6) <= got.epsilon <= eps * (1 + 1e-9)
            # the least noise: 1e-6 less already breaks the budget
            less = case.rebuild(case.noise(m) * (1 - 1e-6))
            assert case.privacy_map(less, DELTA).epsilon > eps
        base = case.noise(case.calibrate(Budget(1.0, DELTA)))
        maps = [case.privacy_map(case.rebuild(base * f), DELTA).epsilon for f in (0.5, 1, 2, 4)]
        assert all(a > b for a, b in zip(maps[:-1], maps[1:], strict=True))


# ============================================================================= frequency oracles

FREQ_EPS, FREQ_D = 1.0, 4
FREQ_USERS, FREQ_REPS = 1_000, 400


@functools.cache
def _frequency_runs(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimated counts per repetition (R, d), true counts, exact variance per value).

    The exact variance is the oracle's own plug-in formula evaluated at the EXPECTED support,
    where the unbiased estimate equals the true counts: then plug-in = exact.
    """
    oracle = frequency.make_oracle(name, FREQ_EPS, FREQ_D)
    probs = 0.5 ** np.arange(FREQ_D)
    counts = np.round(FREQ_USERS * probs / probs.sum()).astype(int)
    counts[-1] = FREQ_USERS - counts[:-1].sum()
    values = np.repeat(np.arange(FREQ_D), counts)
    rng = np.random.default_rng(4)
    reports = oracle.perturb(np.tile(values, FREQ_REPS), rng)  # one vectorised call
    est = np.array(
        [
            oracle.estimate(oracle.support(r), FREQ_USERS).counts
            for r in np.split(reports, FREQ_REPS)
        ]
    )
    if np.isnan(oracle.p):  # SHE: the support is the sum of the noisy one-hot vectors
        expected = counts.astype(np.float64)
    else:
        expected = counts * oracle.p + (FREQ_USERS - counts) * oracle.q
    exact = oracle.estimate(expected, FREQ_USERS).variance
    return est, counts.astype(np.float64), exact


def _frequency_cells(oracle: frequency.FrequencyOracle, reports: np.ndarray) -> np.ndarray:
    """A discrete cell per report (a function of the output, so cell ratios obey e^eps)."""
    d = oracle.d
    if reports.ndim == 1:  # a reported value
        return reports.astype(np.int64)
    if reports.dtype.kind == "f":  # real-valued coordinates: each binned at 0 and 1
        return (np.digitize(reports, [0.0, 1.0]) * 3 ** np.arange(d)).sum(axis=1)
    if oracle.g is not None:  # hashed report: the set of values it supports
        a, b = frequency.hash_params(reports[:, 0])
        h = ((a[:, None] * np.arange(d) + b[:, None]) % frequency.HASH_PRIME) % oracle.g
        bits = (h == reports[:, 1:2]).astype(np.int64)
    else:  # bit vectors
        bits = reports.astype(np.int64)
    return (bits << np.arange(d)).sum(axis=1)


class FrequencySuite:
    @staticmethod
    def unbiased(name: str) -> None:
        est, true, exact = _frequency_runs(name)
        # mean of R independent unbiased estimates: standard error sqrt(exact / R)
        assert np.all(np.abs(est.mean(axis=0) - true) <= Z * np.sqrt(exact / FREQ_REPS))

    @staticmethod
    def variance(name: str) -> None:
        est, _, exact = _frequency_runs(name)
        # each estimate is a sum of 1000 independent terms, close to normal, so
        # (R - 1) s^2 / sigma^2 ~ chi-square(R - 1); two-sided 6e-7 per value, like Z = 5
        stat = (FREQ_REPS - 1) * est.var(axis=0, ddof=1) / exact
        lo, hi = chi2.ppf(3e-7, FREQ_REPS - 1), chi2.isf(3e-7, FREQ_REPS - 1)
        assert np.all((stat > lo) & (stat < hi)), stat / (FREQ_REPS - 1)

    @staticmethod
    def privacy(name: str, *, claim_factor: float = 1.0) -> bool:
        oracle = frequency.make_oracle(name, FREQ_EPS, 3)
        rng, n = np.random.default_rng(5), 200_000
        c0 = _frequency_cells(oracle, oracle.perturb(np.zeros(n, dtype=int), rng))
        c1 = _frequency_cells(oracle, oracle.perturb(np.ones(n, dtype=int), rng))
        size = int(max(c0.max(), c1.max())) + 1
        eps = oracle.privacy_map().epsilon * claim_factor
        return _ratio_test(np.bincount(c0, minlength=size), np.bincount(c1, minlength=size), eps)

    @staticmethod
    def privacy_map(name: str) -> None:
        got = frequency.make_oracle(name, FREQ_EPS, FREQ_D).privacy_map()
        # computed from the sampler's probabilities: equal to the requested epsilon, or a hair
        # below it for unary encodings (their p, q are rounded to the 2^-16 grid of their
        # 16-bit uniforms, which lowers the ratio by at most a relative 4 * 2^-16 / q; q >= 0.26
        # at epsilon 1, so by at most 2.4e-4)
        assert isinstance(got, Budget) and got.is_pure
        assert FREQ_EPS - 2.4e-4 <= got.epsilon <= FREQ_EPS * (1 + 1e-12)


# ============================================================================= numeric (means)

NUM_EPS, NUM_N = 1.0, 100_000
T_VALUES = (-1.0, -0.3, 0.5, 1.0)
T_ROW = np.array([0.7, -0.4, 0.05])  # a 3-D record for perturb_multi


def _numeric_samples(name: str, seed: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(reports (N, k), true values (k,), closed-form variance (k,)) for 1-D inputs and for
    3-D records."""
    mech = numeric.make_numeric(name, NUM_EPS)
    rng = np.random.default_rng(seed)
    out = []
    for t in T_VALUES:
        x = mech.perturb(np.full(NUM_N, t), rng)[:, None]
        out.append((x, np.array([t]), np.atleast_1d(mech.report_variance(t))))
    x = mech.perturb_multi(np.tile(T_ROW, (NUM_N, 1)), rng)
    out.append((x, T_ROW, np.asarray(mech.report_variance(T_ROW, d=T_ROW.size))))
    return out


class NumericSuite:
    @staticmethod
    def unbiased(name: str) -> None:
        for x, t, var in _numeric_samples(name, 6):
            assert np.all(np.abs(x.mean(axis=0) - t) <= Z * np.sqrt(var / NUM_N)), (t, var)

    @staticmethod
    def variance(name: str) -> None:
        for x, t, var in _numeric_samples(name, 7):
            s2 = x.var(axis=0, ddof=1)
            m4 = ((x - x.mean(axis=0)) ** 4).mean(axis=0)
            # first-order s.e. of a sample variance, sqrt((mu4 - sigma^4)/N), with mu4 estimated
            # from the sample; it vanishes for a symmetric two-point output (Duchi at t = 0,
            # where s^2 = B^2 - mean^2 and mean^2 ~ B^2 chi2_1 / N), so 20 var / N is added for
            # the second-order term (2e-4 relative at N = 1e5: negligible otherwise)
            tol = Z * np.sqrt(np.maximum(m4 - s2**2, 0.0) / NUM_N) + 20 * var / NUM_N
            assert np.all(np.abs(s2 - var) <= tol), (t, s2, var)

    @staticmethod
    def privacy(name: str, *, claim_factor: float = 1.0) -> bool:
        mech = numeric.make_numeric(name, NUM_EPS)
        rng, n = np.random.default_rng(8), 200_000
        lim = 1.0 + 20.0 / NUM_EPS  # beyond every bounded output (C, B ~ 4/eps, 2/eps)
        edges = np.linspace(-lim, lim, 61)
        # the two most distant inputs; outputs clipped and binned (post-processing)
        h0 = np.histogram(np.clip(mech.perturb(np.full(n, -1.0), rng), -lim, lim), edges)[0]
        h1 = np.histogram(np.clip(mech.perturb(np.full(n, 1.0), rng), -lim, lim), edges)[0]
        return _ratio_test(h0, h1, mech.privacy_map().epsilon * claim_factor)

    @staticmethod
    def privacy_map(name: str) -> None:
        assert numeric.make_numeric(name, NUM_EPS).privacy_map() == Budget(NUM_EPS, 0.0)


# ============================================================================= shared


def _ratio_test(c1: np.ndarray, c2: np.ndarray, epsilon: float) -> bool:
    """True unless some cell's likelihood ratio is significantly above e^epsilon.

    For two histograms of equal sample sizes, a cell fails when the LOWER bound of its
    log-ratio, log(a/b) - Z sqrt(1/a + 1/b) (delta method on binomial counts, 0.5 added to empty
    cells), exceeds epsilon. Only cells with at least 50 outputs in total are judged.
    """
    for a, b in ((c1, c2), (c2, c1)):
        judged = a + b >= 50
        a_, b_ = np.maximum(a[judged], 0.5), np.maximum(b[judged], 0.5)
        if np.any(np.log(a_ / b_) - Z * np.sqrt(1 / a_ + 1 / b_) > epsilon):
            return False
    return True


SUITES = {"central": CentralSuite, "frequency": FrequencySuite, "numeric": NumericSuite}
ALL_MECHANISMS = [
    *(f"central:{n}" for n in CENTRAL_MECHANISMS),
    *(f"frequency:{n}" for n in frequency.ORACLES),
    *(f"numeric:{n}" for n in numeric.MECHANISMS),
]


def _suite(mechanism: str) -> tuple[Any, str]:
    kind, name = mechanism.split(":")
    return SUITES[kind], name


def test_every_registered_mechanism_has_a_case() -> None:
    assert set(CENTRAL) == set(CENTRAL_MECHANISMS)
    assert tuple(frequency.ORACLES) == frequency.FREQUENCY_MECHANISMS
    assert tuple(numeric.MECHANISMS) == numeric.NUMERIC_MECHANISMS
    assert len(ALL_MECHANISMS) == 3 + 6 + 4
    for name, cls in frequency.ORACLES.items():  # make_oracle builds the registered class
        assert type(frequency.make_oracle(name, 1.0, 4)) is cls and cls.name == name
    for name, cls in numeric.MECHANISMS.items():
        assert type(numeric.make_numeric(name, 1.0)) is cls and cls.name == name


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_unbiased(mechanism: str) -> None:
    suite, name = _suite(mechanism)
    suite.unbiased(name)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_variance_matches_closed_form(mechanism: str) -> None:
    suite, name = _suite(mechanism)
    suite.variance(name)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_empirical_privacy(mechanism: str) -> None:
    suite, name = _suite(mechanism)
    assert suite.privacy(name)


@pytest.mark.parametrize("mechanism", ALL_MECHANISMS)
def test_privacy_map(mechanism: str) -> None:
    suite, name = _suite(mechanism)
    suite.privacy_map(name)


@pytest.mark.parametrize(
    "mechanism",
    ["frequency:grr", "frequency:sue", "frequency:oue", "numeric:duchi", "numeric:pm"],
)
def test_ldp_privacy_check_rejects_half_the_epsilon(mechanism: str) -> None:
    """Negative control: these attain e^epsilon on some cell, so claiming epsilon/2 fails."""
    suite, name = _suite(mechanism)
    assert not suite.privacy(name, claim_factor=0.5)


@pytest.mark.parametrize("name", ["laplace", "gaussian"])
def test_central_privacy_check_rejects_too_little_noise(name: str) -> None:
    """Negative control: 80% of the calibrated noise no longer meets the calibrated map."""
    assert not CentralSuite.privacy(name, noise_factor=0.8)
