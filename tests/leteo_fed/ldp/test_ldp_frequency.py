"""LDP frequency oracles: unbiasedness, exact variance, empirical ε-LDP, errata regressions.

Statistical checks use fixed seeds; each tolerance is derived from theory next to it. A band of
4 standard errors has two-sided probability ~6e-5 of failing for a correct mechanism, so with a
fixed seed a failure is a real discrepancy rather than bad luck.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from leteo_fed.errors import DataError
from leteo_fed.ldp import (
    FREQUENCY_MECHANISMS,
    HASH_PRIME,
    FrequencyOracle,
    hash_collision_probability,
    hash_params,
    make_oracle,
    optimal_theta,
    the_pq,
)

D = 8
PROBS = 0.5 ** np.arange(D) / (0.5 ** np.arange(D)).sum()  # skewed: 50%, 25%, ..., 0.4%


def _population(n: int) -> np.ndarray:
    """Deterministic skewed population: counts round(n * PROBS), last value takes the rest."""
    counts = np.round(n * PROBS).astype(int)
    counts[-1] = n - counts[:-1].sum()
    return np.repeat(np.arange(D), counts)


# ----------------------------------------------------------------------------- unbiasedness


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
@pytest.mark.parametrize("name", FREQUENCY_MECHANISMS)
def test_estimates_within_four_standard_errors(name: str, epsilon: float) -> None:
    rng = np.random.default_rng(20240501)
    values = rng.permutation(_population(50_000))
    true = np.bincount(values, minlength=D)
    oracle = make_oracle(name, epsilon, D)
    est = oracle.estimate(oracle.support(oracle.perturb(values, rng)), values.size)
    # Ê_v is a sum of 50,000 independent terms: normal, sd = std_error (plug-in exact variance)
    assert np.all(np.abs(est.counts - true) <= 4 * est.std_error), (est.counts, true)


@pytest.mark.parametrize("name", FREQUENCY_MECHANISMS)
def test_empirical_variance_matches_exact_formula(name: str) -> None:
    n, reps, eps = 2000, 200, 1.0
    rng = np.random.default_rng(7)
    values = _population(n)
    true = np.bincount(values, minlength=D).astype(float)
    oracle = make_oracle(name, eps, D)
    reports = oracle.perturb(np.tile(values, reps), rng)  # one vectorised call for all reps
    ests = [oracle.estimate(oracle.support(r), n) for r in np.split(reports, reps)]
    counts = np.array([e.counts for e in ests])
    if name == "she":
        exact = np.full(D, 8 * n / eps**2)
    else:  # Wang et al. 2017 exact variance with the TRUE counts
        p, q = oracle.p, oracle.q
        exact = n * q * (1 - q) / (p - q) ** 2 + true * (1 - p - q) / (p - q)
    # unbiased over reps: mean of R estimates has sd sqrt(exact / R)
    assert np.all(np.abs(counts.mean(axis=0) - true) <= 4 * np.sqrt(exact / reps))
    # sample variance of R = 200 normal draws: relative s.e. sqrt(2/(R-1)) ~ 0.10, so +-35% is
    # 3.5 s.e. (chi-square tails at 0.65 / 1.35: 4e-5 / 7e-4 per value)
    ratio = counts.var(axis=0, ddof=1) / exact
    assert np.all((ratio > 0.65) & (ratio < 1.35)), ratio
    # the plug-in variance (true count replaced by the estimate clipped to [0, n]) is close on
    # average; clipping biases it slightly upwards for rare values (seen: <= 2%), allow 5%
    plug_in = np.array([e.variance for e in ests]).mean(axis=0)
    assert np.allclose(plug_in, exact, rtol=0.05)


@pytest.mark.parametrize("name", FREQUENCY_MECHANISMS)
def test_support_is_additive_over_chunks(name: str) -> None:
    rng = np.random.default_rng(3)
    oracle = make_oracle(name, 1.5, D)
    reports = oracle.perturb(rng.integers(0, D, 3001), rng)
    chunks = sum(oracle.support(c) for c in np.array_split(reports, 7))
    assert np.allclose(chunks, oracle.support(reports), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", FREQUENCY_MECHANISMS)
def test_report_formats(name: str) -> None:
    rng = np.random.default_rng(0)
    oracle = make_oracle(name, 1.0, 5)
    r = oracle.perturb(np.array([0, 4, 2]), rng)
    expected = {
        "grr": (np.int32, (3,)),
        "sue": (np.uint8, (3, 5)),
        "oue": (np.uint8, (3, 5)),
        "the": (np.uint8, (3, 5)),
        "she": (np.float64, (3, 5)),
        "olh": (np.int64, (3, 2)),
    }[name]
    assert r.dtype == expected[0] and r.shape == expected[1]


# ----------------------------------------------------------------------------- empirical ε-LDP


def _output_codes(oracle: FrequencyOracle, reports: np.ndarray) -> np.ndarray:
    """Map each report to a discrete cell: a function of the output, so ratios stay <= e^ε."""
    d = oracle.d
    if reports.ndim == 1:  # GRR: the value itself
        return reports.astype(np.int64)
    if oracle.name == "she":  # each coordinate binned at 0 and 1: base-3 code
        bins = np.digitize(reports, [0.0, 1.0])
        return (bins * 3 ** np.arange(d)).sum(axis=1)
    if oracle.name == "olh":  # which domain values the report supports (d-bit pattern)
        a, b = hash_params(reports[:, 0])
        h = ((a[:, None] * np.arange(d) + b[:, None]) % HASH_PRIME) % oracle.g
        bits = (h == reports[:, 1:2]).astype(np.int64)
    else:  # bit vectors: full output vector (d <= 3)
        bits = reports.astype(np.int64)
    return (bits << np.arange(d)).sum(axis=1)


def _ldp_check(
    c1: np.ndarray, c2: np.ndarray, epsilon: float, z: float = 4.0
) -> tuple[bool, float]:
    """(passes, max observed ratio) for two output histograms with equal sample sizes.

    A cell violates ε-LDP when the LOWER confidence bound of its log-ratio exceeds ε:
    log(c1/c2) - z sqrt(1/c1 + 1/c2) > ε (delta method on binomial counts; 0.5 added to empty
    cells). Only cells with at least 50 outputs in total are judged. Equivalently, the observed
    ratio must be <= e^ε (1 + sampling tolerance).
    """
    worst, ok = 0.0, True
    for a, b in ((c1, c2), (c2, c1)):
        judged = a + b >= 50
        a_, b_ = np.maximum(a[judged], 0.5), np.maximum(b[judged], 0.5)
        log_ratio = np.log(a_ / b_)
        if np.any(log_ratio - z * np.sqrt(1 / a_ + 1 / b_) > epsilon):
            ok = False
        worst = max(worst, float(np.exp(log_ratio.max())))
    return ok, worst


def _histograms(oracle: FrequencyOracle, v1: int, v2: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    o1 = _output_codes(oracle, oracle.perturb(np.full(n, v1), rng))
    o2 = _output_codes(oracle, oracle.perturb(np.full(n, v2), rng))
    size = max(int(o1.max()), int(o2.max())) + 1
    return np.bincount(o1, minlength=size), np.bincount(o2, minlength=size)


@pytest.mark.parametrize("name", FREQUENCY_MECHANISMS)
def test_empirical_ldp_ratio(name: str) -> None:
    eps = 1.0
    oracle = make_oracle(name, eps, 3)
    c1, c2 = _histograms(oracle, 0, 1, 200_000, seed=11)
    ok, worst = _ldp_check(c1, c2, eps)
    assert ok, worst
    if name in ("grr", "sue", "oue", "she"):
        # these attain the bound on some cell (GRR p/q, UE p(1-q)/((1-p)q), SHE the cell
        # {x0 > 1, x1 < 0}): the observed max ratio is e^ε up to sampling error (~1-3%)
        assert worst > math.exp(eps) * 0.93


def test_ldp_check_detects_an_oracle_spending_twice_its_epsilon() -> None:
    # negative control: GRR run at 2ε but claiming ε must be caught
    eps = 1.0
    broken = dataclasses.replace(make_oracle("grr", 2 * eps, 3), epsilon=eps)
    c1, c2 = _histograms(broken, 0, 1, 200_000, seed=12)
    ok, worst = _ldp_check(c1, c2, broken.epsilon)
    assert not ok and worst > math.exp(1.5 * eps)


def test_ldp_check_detects_the_textbook_grr_replacement() -> None:
    # negative control: the textbook replacement randint(0, d-1) can return the truth and
    # never reports v - 1, so some output has ratio "infinite"
    eps, d, n = 1.0, 3, 200_000
    rng = np.random.default_rng(13)
    p = math.exp(eps) / (math.exp(eps) + d - 1)

    def book_de(v: int) -> np.ndarray:
        keep = rng.random(n) < p
        return np.where(keep, v, (v + rng.integers(0, d - 1, n)) % d)

    c1 = np.bincount(book_de(0), minlength=d)
    c2 = np.bincount(book_de(1), minlength=d)
    assert c1[2] == 0  # value 0 - 1 = 2 is never reported by holders of 0
    assert not _ldp_check(c1, c2, eps)[0]


# ----------------------------------------------------------------------------- errata, formulas


def test_grr_reports_every_other_value_uniformly() -> None:
    # regression (replacement uniform over the OTHER values): all users hold 0; each other value
    # gets n q (sd sqrt(n q (1-q)))
    n, d = 100_000, 5
    oracle = make_oracle("grr", 1.0, d)
    c = np.bincount(oracle.perturb(np.zeros(n, dtype=int), np.random.default_rng(5)), minlength=d)
    sd_q = math.sqrt(n * oracle.q * (1 - oracle.q))
    sd_p = math.sqrt(n * oracle.p * (1 - oracle.p))
    assert abs(c[0] - n * oracle.p) <= 4 * sd_p
    assert np.all(np.abs(c[1:] - n * oracle.q) <= 4 * sd_q)


def test_the_probabilities_match_simulation_including_book_counterexample() -> None:
    # the textbook's exp(+ε(1-θ)/2) sign error: at θ = 0.5, ε = 5 it gives p = 1 - ½e^{+5/4} < 0
    assert 1 - 0.5 * math.exp(5 / 2 * (1 - 0.5)) < 0
    rng = np.random.default_rng(9)
    n = 200_000
    for eps, theta in ((5.0, 0.5), (1.0, 0.75), (2.0, optimal_theta(2.0))):
        p, q = the_pq(eps, theta)
        assert 0 < q < p < 1
        oracle = make_oracle("the", eps, 2, theta=theta)
        bits = oracle.perturb(np.zeros(n, dtype=int), rng)
        for got, want in ((bits[:, 0].mean(), p), (bits[:, 1].mean(), q)):
            assert abs(got - want) <= 4 * math.sqrt(want * (1 - want) / n)


def test_default_theta_minimises_the_variance() -> None:
    for eps in (0.5, 1.0, 3.0, 8.0):
        th = make_oracle("the", eps, 4).theta
        assert th is not None and 0.5 < th < 1.0
        best = make_oracle("the", eps, 4).theoretical_variance_per_user()
        for other in np.linspace(0.05, 0.95, 19):
            assert best <= make_oracle("the", eps, 4, theta=other).theoretical_variance_per_user()


def test_planning_variances_match_the_published_table() -> None:
    # the usual comparison table of Var*/n at ε = 1 (DE with d = 14, THE with θ = 0.75)
    table = {"grr": 4.99, "sue": 3.92, "oue": 3.68, "she": 8.0, "the": 4.88}
    for name, want in table.items():
        theta = 0.75 if name == "the" else None
        got = make_oracle(name, 1.0, 14, theta=theta).theoretical_variance_per_user()
        assert got == pytest.approx(want, abs=0.006)


def test_privacy_ratios_are_exactly_e_epsilon() -> None:
    for eps in (0.3, 1.0, 4.0):
        grr, sue, oue = (make_oracle(m, eps, 6) for m in ("grr", "sue", "oue"))
        assert grr.p / grr.q == pytest.approx(math.exp(eps))
        for ue in (sue, oue):
            # p, q sit on the 2^-16 grid of 16-bit uniforms, rounded so the ratio never exceeds
            # e^eps; the loss is at most a relative 4 * 2^-16 / q (first order, q <= p)
            ratio = ue.p * (1 - ue.q) / ((1 - ue.p) * ue.q)
            assert ratio <= math.exp(eps)
            assert ratio >= math.exp(eps) * (1 - 4 * 2.0**-16 / ue.q)
            assert (ue.p * 2**16).is_integer() and (ue.q * 2**16).is_integer()


def test_olh_hash_family_and_defaults() -> None:
    oracle = make_oracle("olh", 2.0, 50)
    assert oracle.g == round(math.exp(2.0)) + 1
    for g in (2, 3, 8, 1000):
        assert hash_collision_probability(g) == pytest.approx(1 / g, rel=1e-6)
    # empirical collision rate of two fixed values over random seeds: binomial, 4 sd
    rng = np.random.default_rng(17)
    seeds = rng.integers(0, HASH_PRIME * (HASH_PRIME - 1), 200_000, dtype=np.int64)
    a, b = hash_params(seeds)
    assert a.min() >= 1 and a.max() < HASH_PRIME and b.min() >= 0 and b.max() < HASH_PRIME
    g = 5
    same = ((a * 3 + b) % HASH_PRIME) % g == ((a * 11 + b) % HASH_PRIME) % g
    assert abs(same.mean() - 1 / g) <= 4 * math.sqrt((1 / g) * (1 - 1 / g) / seeds.size)
    # huge ε: default g is capped so reports stay in int64
    assert make_oracle("olh", 50.0, 4).g == HASH_PRIME


# ----------------------------------------------------------------------------- consistency


def _norm_sub_iterative(e: np.ndarray, n: float) -> np.ndarray:
    x = e.astype(float).copy()
    for _ in range(100):
        pos = x > 0
        x[~pos] = 0.0
        x[pos] += (n - x[pos].sum()) / pos.sum()
        if np.all(x >= 0):
            return x
    raise AssertionError("did not converge")


def test_consistent_is_norm_sub() -> None:
    rng = np.random.default_rng(23)
    oracle = make_oracle("oue", 0.2, D)
    values = _population(2000)
    est = oracle.estimate(oracle.support(oracle.perturb(values, rng)), values.size)
    assert np.any(est.counts < 0)  # small n, small ε: some raw estimates are negative
    fixed = oracle.consistent(est)
    assert np.all(fixed >= 0) and fixed.sum() == pytest.approx(values.size)
    assert np.allclose(fixed, _norm_sub_iterative(est.counts, values.size))
    # already consistent estimates are left alone
    ok = dataclasses.replace(est, counts=np.bincount(values, minlength=D).astype(float))
    assert np.allclose(oracle.consistent(ok), ok.counts)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, 50.5, "x"])
def test_bad_epsilon_refused(bad: object) -> None:
    with pytest.raises(DataError) as exc:
        make_oracle("grr", bad, 4)  # type: ignore[arg-type]
    assert exc.value.field == "epsilon"


def test_parameter_validation() -> None:
    cases = [
        (lambda: make_oracle("rappor", 1.0, 4), "mechanism"),
        (lambda: make_oracle("grr", 1.0, 1), "d"),
        (lambda: make_oracle("the", 1.0, 4, theta=1.0), "theta"),
        (lambda: make_oracle("grr", 1.0, 4, theta=0.7), "theta"),
        (lambda: make_oracle("olh", 1.0, 4, g=1), "g"),
        (lambda: make_oracle("sue", 1.0, 4, g=3), "g"),
    ]
    for call, field in cases:
        with pytest.raises(DataError) as exc:
            call()
        assert exc.value.field == field


def test_out_of_domain_values_are_named() -> None:
    oracle = make_oracle("oue", 1.0, 4)
    rng = np.random.default_rng(0)
    with pytest.raises(DataError, match="value 7 is outside the domain") as exc:
        oracle.perturb(np.array([0, 1, 7, 9]), rng)
    assert exc.value.field == "values"
    with pytest.raises(DataError, match="-1"):
        oracle.perturb(np.array([-1, 2]), rng)
    with pytest.raises(DataError, match="not an integer"):
        oracle.perturb(np.array([0.5, 1.0]), rng)
    assert oracle.perturb(np.array([0.0, 3.0]), rng).shape == (2, 4)  # integral floats are fine


def test_malformed_reports_refused() -> None:
    grr = make_oracle("grr", 1.0, 4)
    oue = make_oracle("oue", 1.0, 4)
    olh = make_oracle("olh", 1.0, 4)
    for oracle, reports in (
        (grr, np.array([0, 4])),
        (grr, np.zeros((2, 4), dtype=int)),
        (oue, np.full((2, 4), 2, dtype=np.uint8)),
        (oue, np.zeros((2, 3), dtype=np.uint8)),
        (olh, np.array([[0, olh.g]])),
        (olh, np.array([[-1, 0]])),
    ):
        with pytest.raises(DataError) as exc:
            oracle.support(reports)
        assert exc.value.field == "reports"
    with pytest.raises(DataError):
        grr.estimate(np.zeros(3), 10)
    with pytest.raises(DataError):
        grr.estimate(np.zeros(4), -1)
