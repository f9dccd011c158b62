"""The statistic test kit fails a declaration that breaks its promises (each check can fail),
and passes an honest one: a kit that passes everything would let a plugin under-noise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from leteo_fed.protocols.correlation import CorrelationRequest, CorrelationStatistic
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import Block
from leteo_fed.testing.statistic_kit import (
    check_bounds,
    check_round_trip,
    check_sensitivity,
    check_statistic,
)

RNG = np.random.default_rng(11)
X = RNG.normal(size=(90, 3)) @ RNG.normal(size=(3, 3)) + 2.0
SITES = [{f"c{j}": X[i, j] for j in range(3)} for i in np.array_split(np.arange(90), 3)]
REQUEST = CorrelationRequest(features=("c0", "c1", "c2"))


def _corrcoef(pooled):
    return {"correlation": np.corrcoef(np.column_stack([pooled[f"c{j}"] for j in range(3)]).T)}


def test_an_honest_statistic_passes_with_its_reference():
    check_statistic(CorrelationStatistic(), REQUEST, SITES, reference=_corrcoef)


def _scaled(block_name: str, **factors: float):
    """The correlation statistic with one block's promise made smaller."""

    class Understated(CorrelationStatistic):
        def blocks(self, spec, bound):
            out = []
            for b in super().blocks(spec, bound):
                if b.name == block_name:
                    b = dataclasses.replace(b, **{k: getattr(b, k) * f for k, f in factors.items()})
                out.append(b)
            return tuple(out)

    return Understated()


def test_an_understated_sensitivity_is_caught():
    protocol = SecureSumProtocol(_scaled("products", l2=0.5))
    with pytest.raises(AssertionError, match="block 'products': removing row"):
        check_sensitivity(protocol, REQUEST, SITES[0])


def test_an_understated_row_bound_is_caught():
    protocol = SecureSumProtocol(_scaled("products", row_bound=0.5))
    with pytest.raises(AssertionError, match="more than its declared row_bound"):
        check_bounds(protocol, REQUEST, SITES)


class NotAdditive(CorrelationStatistic):
    """Sends each site's mean instead of its sum: the round trip differs from pooled rows."""

    def sums(self, spec, rows):
        out = dict(super().sums(spec, rows))
        out["sums"] = out["sums"] / rows.n
        return out


def test_a_statistic_whose_sites_do_not_add_up_is_caught():
    with pytest.raises(AssertionError, match="sites summed vs pooled rows"):
        check_round_trip(SecureSumProtocol(NotAdditive()), REQUEST, SITES)


def test_a_wrong_reference_is_caught():
    def wrong(pooled):
        return {"correlation": np.eye(3)}

    with pytest.raises(AssertionError, match="vs your reference"):
        check_round_trip(SecureSumProtocol(CorrelationStatistic()), REQUEST, SITES, reference=wrong)


def test_a_block_with_a_negative_promise_is_refused():
    with pytest.raises(Exception, match="l2 must be finite and >= 0"):
        Block("x", 1, 1.0, 1.0, -1.0)
