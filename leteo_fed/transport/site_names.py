"""Sites named in one line: a message about a thousand owners names a few and counts the rest
(the full lists are in the round's status and the logs' own records)."""

from __future__ import annotations

from collections.abc import Sequence

MANY_SITES = 6  # sites one message names one by one; more are counted


def name_sites(sites: Sequence[str], shown: int = MANY_SITES - 1) -> str:
    if len(sites) <= shown + 1:
        return ", ".join(sites)
    return f"{', '.join(sites[:shown])} and {len(sites) - shown} more"
