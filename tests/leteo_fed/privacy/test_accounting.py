"""Our RDP accountant against Google's dp-accounting on the same event sequences.

Where the methods coincide (same Renyi orders, same improved conversion: Gaussian, Laplace and
randomized response have exact curves in both) our epsilon must be within 1% of dp-accounting's
RdpAccountant, run on OUR order grid so that the grids do not differ (with its default grid,
1.1..10.9, 11..63, 128..1024, the figures differ by the grid only). It must never be below the
PLDAccountant's figure: the PLD is the (pessimistically discretized) privacy loss distribution,
near the true epsilon, which no valid bound can undercut.

Skellam: dp-accounting has no Skellam event. Its Gaussian-equivalent (sigma^2 = 2 mu, the same
L2 sensitivity) has RDP alpha D2^2 / (4 mu), the first term of the Agarwal-Kairouz-Liu bound; so
ours must be >= the Gaussian-equivalent's RDP figure, and within 1% of it when mu >> D2^2 (the
correction term vanishes like 1/mu relative to it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import DataError
from leteo_fed.privacy.accounting import (
    ORDERS,
    ApproxEvent,
    GaussianEvent,
    LaplaceEvent,
    PureEvent,
    SkellamEvent,
    compose_epsilon,
    event_from_dict,
)
from leteo_fed.privacy.mechanisms import Gaussian, Skellam

dpa = pytest.importorskip("dp_accounting")
from dp_accounting.pld import PLDAccountant  # noqa: E402
from dp_accounting.rdp import RdpAccountant  # noqa: E402

NR = dpa.NeighboringRelation


def _theirs(events: list, delta: float, relation=NR.ADD_OR_REMOVE_ONE) -> tuple[float, float]:
    """(RDP, PLD) epsilon of dp-accounting for the events, composed one by one (its PLD
    accountant ignores the count of a self-composed randomized response)."""
    rdp = RdpAccountant(orders=[float(a) for a in ORDERS], neighboring_relation=relation)
    pld = PLDAccountant(relation)
    for e in events:
        rdp.compose(e)
        pld.compose(e)
    return rdp.get_epsilon(delta), pld.get_epsilon(delta)


def _rr(eps: float):
    """Binary randomized response that is exactly eps-DP (replace-one neighbours)."""
    return dpa.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(eps)), 2)


def _close(ours: float, rdp: float, pld: float) -> None:
    assert ours == pytest.approx(rdp, rel=0.01)
    assert ours >= pld


def test_gaussian_repeated_matches_the_issue_figures() -> None:
    # noise multiplier 10, delta 1e-6: 20 releases cost about 2.1 by RDP (the issue's figure)
    ours = compose_epsilon([GaussianEvent(10.0, count=20)], 1e-6)
    rdp, pld = _theirs([dpa.GaussianDpEvent(10.0)] * 20, 1e-6)
    _close(ours, rdp, pld)
    assert 2.0 < ours < 2.2
    # basic composition of each release's own epsilon at delta / 20 is far worse
    alone = Gaussian(10.0).epsilon(1.0, 1e-6 / 20)
    assert 20 * alone > 4 * ours


@pytest.mark.parametrize(("z", "k", "delta"), [(1.0, 1, 1e-5), (3.0, 50, 1e-6), (30.0, 200, 1e-8)])
def test_gaussian_grid(z: float, k: int, delta: float) -> None:
    ours = compose_epsilon([GaussianEvent(z, count=k)], delta)
    _close(ours, *_theirs([dpa.GaussianDpEvent(z)] * k, delta))


@pytest.mark.parametrize(("eps", "k"), [(0.1, 50), (0.5, 10), (1.0, 3)])
def test_laplace_is_mironov_prop_6(eps: float, k: int) -> None:
    ours = compose_epsilon([LaplaceEvent(eps, count=k)], 1e-6)
    _close(ours, *_theirs([dpa.LaplaceDpEvent(1.0 / eps)] * k, 1e-6))
    assert ours <= k * eps  # never worse than basic composition of pure releases


@pytest.mark.parametrize(("eps", "k"), [(0.1, 100), (0.5, 30), (2.0, 5)])
def test_pure_event_is_the_randomized_response_curve(eps: float, k: int) -> None:
    ours = compose_epsilon([PureEvent(eps, count=k)], 1e-6)
    _close(ours, *_theirs([_rr(eps)] * k, 1e-6, NR.REPLACE_ONE))
    curve = PureEvent(eps).curve(ORDERS)
    assert np.all(curve <= np.minimum(eps, ORDERS * eps * eps / 2) + 1e-15)
    assert np.all(np.diff(curve) >= -1e-15)  # Renyi divergence is non-decreasing in alpha


def test_mixture_of_gaussian_and_laplace() -> None:
    ours = compose_epsilon([GaussianEvent(5.0, count=10), LaplaceEvent(0.2, count=5)], 1e-6)
    theirs = _theirs([dpa.GaussianDpEvent(5.0)] * 10 + [dpa.LaplaceDpEvent(5.0)] * 5, 1e-6)
    _close(ours, *theirs)


def test_skellam_against_its_gaussian_equivalent() -> None:
    l2, l1 = 1500.0, 9000.0
    for z, k, within in ((10.0, 20, 0.01), (2.0, 5, 0.01), (0.5, 3, None)):
        mu = (z * l2) ** 2 / 2.0  # sigma^2 = 2 mu = (z l2)^2
        ours = compose_epsilon([SkellamEvent(mu, l1, l2, count=k)], 1e-6)
        rdp, pld = _theirs([dpa.GaussianDpEvent(z)] * k, 1e-6)
        assert ours >= rdp and ours >= pld
        if within is not None:
            assert ours == pytest.approx(rdp, rel=within)
        # the mechanism's own map (integer orders) agrees
        assert ours <= Skellam(mu).epsilon((l1, l2), 1e-6, compositions=k) * (1 + 1e-12)


def test_approx_events_add_epsilon_and_take_delta() -> None:
    g = GaussianEvent(10.0, count=20)
    base = compose_epsilon([g], 1e-6 - 2e-7)
    both = compose_epsilon([g, ApproxEvent(0.3, 1e-7, count=2)], 1e-6)
    assert both == pytest.approx(base + 0.6, rel=1e-12)
    assert compose_epsilon([ApproxEvent(0.3, 1e-6, count=2)], 1e-6) == math.inf
    assert compose_epsilon([ApproxEvent(0.3, 0.0, count=2)], 0.0) == pytest.approx(0.6)
    # pure events compose at delta 0 by adding up; a Gaussian cannot meet delta 0
    assert compose_epsilon([PureEvent(0.4, count=3)], 0.0) == pytest.approx(1.2)
    assert compose_epsilon([GaussianEvent(1.0)], 0.0) == math.inf
    assert compose_epsilon([], 1e-6) == 0.0


def test_events_round_trip_through_json_and_times() -> None:
    for e in (
        SkellamEvent(1e6, 30.0, 20.0, count=3),
        GaussianEvent(2.5),
        LaplaceEvent(0.3, count=4),
        PureEvent(1.2),
        ApproxEvent(0.5, 1e-7),
    ):
        assert event_from_dict(e.to_dict()) == e
        assert np.allclose(e.times(5).rdp(), 5 * e.rdp())
    with pytest.raises(DataError):
        event_from_dict({"kind": "nope"})
    with pytest.raises(DataError):
        event_from_dict({"kind": "gaussian", "sigma": 1.0})
    with pytest.raises(DataError):
        GaussianEvent(0.0)
    with pytest.raises(DataError):
        PureEvent(1.0, count=0)


def test_skellam_fractional_orders_use_the_next_integer() -> None:
    e = SkellamEvent(1e4, 10.0, 5.0)
    frac = ORDERS[np.rint(ORDERS) != ORDERS]
    assert np.array_equal(e.curve(frac), e.curve(np.ceil(frac)))
