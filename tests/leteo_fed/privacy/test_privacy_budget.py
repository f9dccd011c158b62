"""The one budget type and the one epsilon/delta check of the privacy layer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import DataError
from leteo_fed.privacy import EPSILON_MAX, Balance, Budget, check_delta, check_epsilon

BAD_NUMBERS = [float("nan"), float("inf"), -float("inf"), True, False, "0.5", None, [0.1]]


# ----------------------------------------------------------------------------- check_epsilon


@pytest.mark.parametrize("value", [*BAD_NUMBERS, 0.0, -0.1, EPSILON_MAX * (1 + 1e-12), 1e6])
def test_check_epsilon_refuses_and_names_the_field(value) -> None:
    with pytest.raises(DataError, match="rate") as err:
        check_epsilon(value, "rate")
    assert err.value.field == "rate"


def test_check_epsilon_accepts_and_converts() -> None:
    assert check_epsilon(1) == 1.0 and isinstance(check_epsilon(1), float)
    assert check_epsilon(np.float32(0.5)) == 0.5
    assert check_epsilon(np.int64(3)) == 3.0
    assert check_epsilon(EPSILON_MAX) == EPSILON_MAX  # the cap itself is allowed
    assert check_epsilon(1e-300) == 1e-300


def test_one_cap_and_its_opt_outs() -> None:
    # e^EPSILON_MAX must stay far inside float64 (the LDP probabilities are computed from it)
    assert math.exp(EPSILON_MAX) < 1e30 < np.finfo(np.float64).max
    with pytest.raises(DataError, match=r"in \(0, 50\]"):
        check_epsilon(51.0)
    # sums of releases and geo rates per unit of distance are not capped
    assert check_epsilon(1000.0, capped=False) == 1000.0
    with pytest.raises(DataError, match="finite and > 0"):
        check_epsilon(math.inf, capped=False)
    assert check_epsilon(0.0, allow_zero=True) == 0.0
    for bad in (-1e-9, math.nan, True):
        with pytest.raises(DataError):
            check_epsilon(bad, allow_zero=True, capped=False)


# ----------------------------------------------------------------------------- check_delta


@pytest.mark.parametrize("value", [*BAD_NUMBERS, 0.0, -1e-12, 1.0, 1.5])
def test_check_delta_refuses_and_names_the_field(value) -> None:
    with pytest.raises(DataError, match=r"delta_total must be (a number|in \(0, 1\))") as err:
        check_delta(value, "delta_total")
    assert err.value.field == "delta_total"


def test_check_delta_zero_only_when_allowed() -> None:
    assert check_delta(0.0, allow_zero=True) == 0.0
    assert check_delta(1e-9) == 1e-9 and check_delta(np.float64(0.5)) == 0.5
    with pytest.raises(DataError, match=r"in \[0, 1\)"):
        check_delta(1.0, allow_zero=True)
    with pytest.raises(DataError, match=r"in \(0, 1\)"):
        check_delta(0.0)


# ----------------------------------------------------------------------------- Budget


@pytest.mark.parametrize(
    ("eps", "delta", "field"),
    [
        (0.0, 0.0, "epsilon"),
        (-1.0, 0.0, "epsilon"),
        (math.nan, 0.0, "epsilon"),
        (math.inf, 0.0, "epsilon"),
        (True, 0.0, "epsilon"),
        ("1", 0.0, "epsilon"),
        (1.0, -1e-9, "delta"),
        (1.0, 1.0, "delta"),
        (1.0, math.nan, "delta"),
        (1.0, False, "delta"),
    ],
)
def test_budget_refuses_invalid_amounts(eps, delta, field: str) -> None:
    with pytest.raises(DataError) as err:
        Budget(eps, delta)
    assert err.value.field == field


def test_budget_values_and_immutability() -> None:
    b = Budget(1)
    assert (b.epsilon, b.delta) == (1.0, 0.0) and isinstance(b.epsilon, float) and b.is_pure
    assert not Budget(1.0, 1e-6).is_pure
    with pytest.raises(AttributeError):
        b.epsilon = 2.0  # type: ignore[misc]
    assert Budget(2.0, 1e-6) == Budget(2, 0.000001) and hash(Budget(2.0)) == hash(Budget(2))
    # not capped: a composition of capped releases may exceed the cap of one release
    assert Budget(3 * EPSILON_MAX).epsilon == 150.0
    assert str(Budget(0.5, 1e-6)) == "(epsilon=0.5, delta=1e-06)"


def test_composition_split_and_times() -> None:
    a, b = Budget(0.1, 1e-7), Budget(0.2, 2e-7)
    assert a + b == Budget(math.fsum([0.1, 0.2]), math.fsum([1e-7, 2e-7]))
    assert Budget.compose([Budget(0.1)] * 10) == Budget(1.0)  # exactly rounded sum
    assert Budget(1.0, 1e-5).split(4) == Budget(0.25, 2.5e-6)
    assert Budget(0.25, 2.5e-6).times(4) == Budget(1.0, 1e-5)
    for bad in (0, -2, 2.0, True):
        with pytest.raises(DataError) as err:
            Budget(1.0).split(bad)
        assert err.value.field == "n"
    with pytest.raises(DataError, match="delta"):
        Budget(1.0, 0.6) + Budget(1.0, 0.6)  # a total delta >= 1 promises nothing
    assert Budget.compose(b for b in (a, b)) == a + b  # any iterable
    for bad in ([], [a, (0.1, 0.0)]):
        with pytest.raises(DataError):
            Budget.compose(bad)
    with pytest.raises(TypeError):
        Budget(1.0) + 1.0  # type: ignore[operator]


def test_fits_within_and_balance() -> None:
    total = Budget(1.0, 1e-6)
    assert Budget(1.0, 1e-6).fits_within(total)
    assert not Budget(1.0 + 1e-9, 0.0).fits_within(total)
    assert Budget(1.0 + 1e-13, 0.0).fits_within(total, rel_slack=1e-12)
    assert not Budget(0.5, 2e-6).fits_within(total)
    left = Balance(0.0, 1e-6)  # a Balance may be zero, and unpacks like a tuple
    eps, delta = left
    assert (eps, delta) == (0.0, 1e-6) and left == (0.0, 1e-6)
    assert not left.covers(Budget(1e-300)) and Balance(0.3, 0.0).covers(Budget(0.3))
