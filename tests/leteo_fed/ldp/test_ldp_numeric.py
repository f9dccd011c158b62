"""LDP numeric mechanisms: unbiasedness, closed-form variances, multi-dim wrappers, unit mapping.

Fixed seeds; tolerances are derived from theory next to each check (4 standard errors: a
correct mechanism fails with probability ~6e-5 per check, so a failure is a real discrepancy).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import DataError
from leteo_fed.ldp import (
    NUMERIC_MECHANISMS,
    default_k,
    duchi_multi_bound,
    from_unit,
    make_numeric,
    perturb_multi,
    to_unit,
)

T_VALUES = (-1.0, -0.3, 0.0, 0.8, 1.0)


def _check_mean_and_variance(x: np.ndarray, t: float | np.ndarray, var: float | np.ndarray) -> None:
    """Mean within 4 sd of t (sd = sqrt(var/N)); sample variance within 4 s.e. of var.

    The s.e. of a sample variance is sqrt((m4 - s^4)/N) with m4 the central fourth moment;
    estimating m4 from the same sample is accurate enough at N >= 1e5. That first-order term
    vanishes for a symmetric two-point output (Duchi at t = 0: s² = B² - x̄², x̄² ~ B² χ²₁/N), so
    20 var/N is added for the second-order term (negligible otherwise: 2e-4 relative at 1e5).
    """
    n = x.shape[0]
    mean = x.mean(axis=0)
    assert np.all(np.abs(mean - t) <= 4 * np.sqrt(var / n)), (mean, t)
    s2 = x.var(axis=0, ddof=1)
    m4 = ((x - mean) ** 4).mean(axis=0)
    tol = 4 * np.sqrt(np.maximum(m4 - s2**2, 0.0) / n) + 20 * var / n
    assert np.all(np.abs(s2 - var) <= tol), (s2, var)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("name", NUMERIC_MECHANISMS)
def test_one_dimensional_unbiased_with_closed_form_variance(name: str, epsilon: float) -> None:
    rng = np.random.default_rng(101)
    mech = make_numeric(name, epsilon)
    n = 100_000
    for t in T_VALUES:
        _check_mean_and_variance(mech.perturb(np.full(n, t), rng), t, mech.report_variance(t))


def test_closed_forms_are_the_published_formulas() -> None:
    for eps in (0.5, 1.0, 2.0, 5.0):
        e, h = math.exp(eps), math.exp(eps / 2)
        for t in (0.0, 0.4, 1.0):
            assert make_numeric("laplace", eps).report_variance(t) == pytest.approx(8 / eps**2)
            duchi = ((e + 1) / (e - 1)) ** 2 - t * t
            assert make_numeric("duchi", eps).report_variance(t) == pytest.approx(duchi)
            pm = t * t / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)
            assert make_numeric("pm", eps).report_variance(t) == pytest.approx(pm)
            hm = (h + 3) / (3 * h * (h - 1)) + (e + 1) ** 2 / (h * (e - 1) ** 2)  # HM, ε > ε*
            want = hm if eps > 0.61 else duchi
            assert make_numeric("hm", eps).report_variance(t) == pytest.approx(want)
    # the usual table of worst-case 1-D variances (Wang et al. ICDE 2019)
    table = {
        0.5: (32.0, 16.67, 21.22, 16.67),
        1.0: (8.0, 4.68, 5.22, 4.29),
        2.0: (2.0, 1.72, 1.23, 1.04),
        5.0: (0.32, 1.03, 0.13, 0.12),
    }
    for eps, row in table.items():
        for name, want in zip(NUMERIC_MECHANISMS, row, strict=True):
            assert make_numeric(name, eps).worst_case_variance() == pytest.approx(want, abs=0.006)


def test_pm_output_range_and_tail_choice() -> None:
    # with 50/50 tails (a textbook listing) the mean at ε = 1, t = 0.8 was 1.65; outputs lie in
    # [-C, C]
    eps, n = 1.0, 200_000
    c = (math.exp(eps / 2) + 1) / (math.exp(eps / 2) - 1)
    x = make_numeric("pm", eps).perturb(np.full(n, 0.8), np.random.default_rng(5))
    assert x.min() >= -c and x.max() <= c
    sd = math.sqrt(make_numeric("pm", eps).report_variance(0.8) / n)
    assert abs(x.mean() - 0.8) <= 4 * sd


def test_estimate_from_sums_and_standard_error_coverage() -> None:
    # heterogeneous population: reports are independent but not identically distributed; the
    # empirical SE must still cover: over R = 300 runs the 95% interval's coverage has binomial
    # sd sqrt(.95 * .05 / 300) = 0.013, and the SE is conservative, so require >= 0.90
    n, reps = 2000, 300
    rng = np.random.default_rng(77)
    t = np.clip(rng.normal(0.3, 0.4, n), -1, 1)
    for name in NUMERIC_MECHANISMS:
        mech = make_numeric(name, 1.0)
        reports = mech.perturb(np.tile(t, reps), rng).reshape(reps, n)
        hits, variances = 0, []
        for r in reports:
            total, total_sq = mech.sums(r)
            est = mech.estimate(total, total_sq, n)
            assert est.mean == pytest.approx(r.mean())
            assert est.std_error == pytest.approx(r.std(ddof=1) / math.sqrt(n))
            variances.append(est.variance)
            hits += abs(est.mean - t.mean()) <= 1.96 * est.std_error
        assert hits / reps >= 0.90, (name, hits / reps)
        # E[s²/n] = (mean_i Var(t*_i) + spread of t)/n <= (worst case + spread)/n; the average
        # of 300 runs is within ~1% of its expectation, allow 3%
        bound = (est.theoretical_worst_case_variance * n + t.var()) / n
        assert np.mean(variances) <= 1.03 * bound


def test_chunked_sums_add_up() -> None:
    rng = np.random.default_rng(8)
    mech = make_numeric("hm", 2.0)
    r = mech.perturb(rng.uniform(-1, 1, 1001), rng)
    parts = [mech.sums(c) for c in np.array_split(r, 4)]
    total, total_sq = mech.sums(r)
    assert sum(p[0] for p in parts) == pytest.approx(total)
    assert sum(p[1] for p in parts) == pytest.approx(total_sq)


# ----------------------------------------------------------------------------- multi-dimensional


def test_duchi_constant_makes_the_multi_dim_mechanism_unbiased() -> None:
    # exact: E[t*_j | v] = B v_j (2α - 1) E+, with E+ = E[mean agreement sign | T+] and
    # α = e^ε/(e^ε+1); unbiased iff C_d = 1/E+ (ties counted in T+ for even d)
    eps = 1.0
    b1 = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    for d in range(1, 13):
        ms = range(math.ceil(d / 2), d + 1)
        size = sum(math.comb(d, m) for m in ms)
        e_plus = sum(math.comb(d, m) * (2 * m - d) / d for m in ms) / size
        assert duchi_multi_bound(eps, d) / b1 == pytest.approx(1 / e_plus)


def _book_duchi_rejection(
    t: np.ndarray, eps: float, rng: np.random.Generator, *, ties_in_both: bool
) -> np.ndarray:
    """Independent reference: the textbook rejection sampler (ties_in_both=False is the
    textbook's strict ">")."""
    n, d = t.shape
    b = duchi_multi_bound(eps, d)
    v = np.where(rng.random((n, d)) < 0.5 + 0.5 * t, 1.0, -1.0)
    u = rng.random(n) < math.exp(eps) / (math.exp(eps) + 1)
    out = np.zeros_like(t)
    todo = np.arange(n)
    while todo.size:
        cand = np.where(rng.random((todo.size, d)) < 0.5, b, -b)
        dot = (cand * v[todo]).sum(axis=1)
        plus = dot >= 0 if ties_in_both else dot > 0
        ok = np.where(u[todo], plus, dot <= 0)
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return out


@pytest.mark.parametrize("d", [2, 3, 4])
def test_duchi_multi_dim_unbiased_and_matches_reference(d: int) -> None:
    eps, n = 1.0, 200_000
    rng = np.random.default_rng(31 + d)
    t_row = np.array([0.6, -0.3, 0.9, -1.0])[:d]
    t = np.tile(t_row, (n, 1))
    x = perturb_multi(t, eps, "duchi", rng)
    b = duchi_multi_bound(eps, d)
    assert np.allclose(np.abs(x), b)
    var = make_numeric("duchi", eps).report_variance(t_row, d=d)
    assert np.allclose(var, b * b - t_row**2)
    _check_mean_and_variance(x, t_row, var)
    ref = _book_duchi_rejection(t, eps, rng, ties_in_both=True)
    _check_mean_and_variance(ref, t_row, var)


def test_book_duchi_listing_is_biased_for_even_d() -> None:
    # negative control: a strict ">" for T+ sends all ties to T-; a published
    # simulation gave (2.51, -1.21) for t = (0.6, -0.3), d = 2, ε = 1
    n = 100_000
    t = np.tile([0.6, -0.3], (n, 1))
    x = _book_duchi_rejection(t, 1.0, np.random.default_rng(4), ties_in_both=False)
    sd = duchi_multi_bound(1.0, 2) / math.sqrt(n)
    assert np.all(np.abs(x.mean(axis=0) - [0.6, -0.3]) > 10 * sd)
    assert x.mean(axis=0) == pytest.approx([2.51, -1.21], abs=0.1)


@pytest.mark.parametrize("name", ["pm", "hm"])
def test_sampled_multi_dim_unbiased_without_replacement(name: str) -> None:
    # ε = 5, d = 3 gives k = 2 (sampling without replacement matters only for k >= 2); also a
    # forced k = 3
    n, d = 200_000, 3
    t_row = np.array([0.7, -0.4, 0.05])
    t = np.tile(t_row, (n, 1))
    rng = np.random.default_rng(41)
    for eps, k in ((5.0, None), (6.0, 3)):
        kk = default_k(eps, d) if k is None else k
        assert kk >= 2
        x = perturb_multi(t, eps, name, rng, k=k)
        assert np.all((x != 0).sum(axis=1) == kk)  # exactly k distinct attributes per user
        var = make_numeric(name, eps).report_variance(t_row, d=d, k=k)
        _check_mean_and_variance(x, t_row, var)


def test_laplace_multi_dim_scale() -> None:
    n, d, eps = 200_000, 3, 2.0
    t_row = np.array([-0.2, 0.5, 1.0])
    x = perturb_multi(np.tile(t_row, (n, 1)), eps, "laplace", np.random.default_rng(2))
    var = make_numeric("laplace", eps).report_variance(t_row, d=d)
    assert np.allclose(var, 8 * d * d / eps**2)  # Lap(2d/ε) per coordinate
    _check_mean_and_variance(x, t_row, var)


def test_multi_dim_estimate_arrays() -> None:
    mech = make_numeric("pm", 5.0)
    rng = np.random.default_rng(6)
    t = rng.uniform(-1, 1, (5000, 4))
    r = mech.perturb_multi(t, rng)
    est = mech.estimate(*mech.sums(r), t.shape[0], d=4)
    assert est.mean.shape == (4,) and est.std_error.shape == (4,)
    worst = mech.worst_case_variance(d=4) / t.shape[0]
    assert np.allclose(est.theoretical_worst_case_variance, worst)


# ----------------------------------------------------------------------------- unit mapping


def test_unit_mapping_round_trip_and_bounds() -> None:
    x = np.array([10.0, 15.0, 20.0])
    u = to_unit(x, 10.0, 20.0)
    assert np.allclose(u, [-1.0, 0.0, 1.0])
    assert from_unit(0.0, 10.0, 20.0) == pytest.approx(15.0)
    assert np.allclose(from_unit(u, 10.0, 20.0), x)
    mech = make_numeric("duchi", 1.0)
    rng = np.random.default_rng(1)
    r = mech.perturb(u, rng)
    est = mech.estimate(*mech.sums(r), 3).to_bounds(10.0, 20.0)
    assert est.mean == pytest.approx(from_unit(r.mean(), 10.0, 20.0))
    assert est.std_error == pytest.approx(5.0 * r.std(ddof=1) / math.sqrt(3))


def test_to_unit_refuses_out_of_bounds_with_counts() -> None:
    with pytest.raises(DataError, match=r"2 values below the lower bound 0\.0") as exc:
        to_unit(np.array([-1.0, -2.0, 0.5, 3.0]), 0.0, 1.0)
    assert "1 values above the upper bound 1.0" in str(exc.value)
    assert exc.value.field == "values"
    with pytest.raises(DataError, match="NaN"):
        to_unit(np.array([math.nan]), 0.0, 1.0)
    with pytest.raises(DataError) as exc:
        to_unit(np.array([0.5]), 1.0, 1.0)
    assert exc.value.field == "bounds"


def test_validation() -> None:
    rng = np.random.default_rng(0)
    for call, field in (
        (lambda: make_numeric("gauss", 1.0), "mechanism"),
        (lambda: make_numeric("pm", 0.0), "epsilon"),
        (lambda: make_numeric("pm", math.inf), "epsilon"),
        (lambda: make_numeric("pm", 1.0).perturb(np.array([0.0, 1.5]), rng), "values"),
        (lambda: perturb_multi(np.zeros((3, 2)), 1.0, "laplace", rng, k=1), "k"),
        (lambda: perturb_multi(np.zeros((3, 2)), 1.0, "pm", rng, k=3), "k"),
        (lambda: perturb_multi(np.zeros(3), 1.0, "pm", rng), "values"),
        (lambda: make_numeric("pm", 1.0).estimate(1.0, 1.0, 1), "n"),
    ):
        with pytest.raises(DataError) as exc:
            call()
        assert exc.value.field == field
