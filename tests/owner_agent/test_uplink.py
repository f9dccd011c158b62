"""The outbound owner's reconnection schedule (pure function; the connection itself is tested
through real processes in tests/integration/test_outbound_owners.py)."""

from __future__ import annotations

import random

from leteo_fed import defaults
from owner_agent.uplink import FIRST_RETRY_SECONDS, next_delay


def test_backoff_doubles_to_its_cap_with_jitter_in_the_upper_half() -> None:
    rng = random.Random(5)
    delay, bases, waits = FIRST_RETRY_SECONDS, [], []
    for _ in range(12):
        base = delay
        wait, delay = next_delay(delay, rng)
        bases.append(base)
        waits.append(wait)
        assert 0.5 * min(base, defaults.RECONNECT_MAX_SECONDS) <= wait
        assert wait <= min(base, defaults.RECONNECT_MAX_SECONDS)
    assert bases[:4] == [0.2, 0.4, 0.8, 1.6]
    assert bases[-1] == defaults.RECONNECT_MAX_SECONDS  # capped: a site retries every <= 5 s
    assert len(set(waits)) == len(waits)  # jittered: sites do not come back in lockstep
