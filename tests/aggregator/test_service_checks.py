"""What the aggregator checks of owners' and analysts' fields before using them (found by
tests/fuzz/): an owner's address, an upload's timings, how long GetRound may block, how many
columns a request may name."""

from __future__ import annotations

import math

import pytest

from aggregator.service import _wait_seconds, check_address, timings_from_header
from leteo_fed import defaults
from leteo_fed.errors import DataError


@pytest.mark.parametrize(
    "address", ["site-1:50061", "127.0.0.1:1", "[::1]:65535", "owner_2.example.org:443"]
)
def test_addresses_an_owner_advertises(address: str) -> None:
    check_address(address)


@pytest.mark.parametrize(
    "address",
    ["", ":", "host", "host:", ":80", "h:0", "h:65536", "h:8O", "h:٣", "a b:1", "::1:80", "é:1"],
)
def test_addresses_no_one_can_dial_are_refused(address: str) -> None:
    with pytest.raises(DataError, match="address must be host:port") as err:
        check_address(address)
    assert err.value.field == "address"


def test_timings_are_finite_named_durations() -> None:
    assert timings_from_header({"encrypt_seconds": 0.5}) == {"encrypt_seconds": 0.5}
    for bad in ({"x": math.nan}, {"x": math.inf}, {"x": -1.0}, {"": 1.0}, {"n" * 65: 1.0}):
        with pytest.raises(DataError, match="timing") as err:
            timings_from_header(bad)
        assert err.value.field == "timings"
    with pytest.raises(DataError, match="more than"):
        timings_from_header({f"t{i}": 1.0 for i in range(33)})


class _Context:
    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining

    def time_remaining(self) -> float | None:
        return self.remaining


def test_get_round_waits_less_than_the_callers_deadline() -> None:
    assert _wait_seconds(math.inf, _Context(None)) == defaults.MAX_WAIT_SECONDS
    assert _wait_seconds(math.inf, _Context(10.0)) == pytest.approx(9.0)
    assert _wait_seconds(3.0, _Context(10.0)) == 3.0
    assert _wait_seconds(-5.0, _Context(10.0)) == 0.0
    assert _wait_seconds(5.0, _Context(0.1)) == 0.0
    with pytest.raises(DataError, match="wait_seconds"):
        _wait_seconds(math.nan, _Context(10.0))


def test_a_request_names_at_most_max_features_columns() -> None:
    from leteo_fed.protocols.requests import check_features

    most = tuple(f"f{i}" for i in range(defaults.MAX_FEATURES))
    assert check_features(most, "analyse") == most
    with pytest.raises(DataError, match="at most") as err:
        check_features((*most, "one-more"), "analyse")
    assert err.value.field == "features"
