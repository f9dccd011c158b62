"""The site's own rules for taking part, checked before anything is read.

A refusal is a decline whose reason starts with the rule's name (`policy.columns: ...`), so the
analyst, the aggregator's log and the site's audit log all say which rule applied. Its text is
built from the round and the policy only. Non-DP releases are counted from the audit log's
`sent` events (what actually left the site), refusals for the site's data from its `decision`
and `failed` events (`owner_agent.refusals`).
`policy.analysts` needs the analyst the round request was verified to come from
(`owner_agent.authorization`); `policy.min_rows` is applied where the data is read
(`owner_agent.site_data`), the first moment the row count is known.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from leteo_fed.config import ANY, OwnerPolicy
from leteo_fed.errors import ProtocolError
from leteo_fed.protocols.round_types import REPORTS
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import Invitation


def _allowed(names: tuple[str, ...], name: str) -> bool:
    return ANY in names or name in names


def release_owners(inv: Invitation) -> str | None:
    """The set of owners whose shares a round's total sums, as the hex Merkle root of the
    invited set (`leteo_fed.transport.membership`; it fixes the set and its size, so equal roots
    are equal sets): known only when the quorum is every invited owner (else the aggregator
    picks which shares are summed); None: unknown."""
    known = inv.invited_root and inv.n_invited and inv.min_owners >= inv.n_invited
    return inv.invited_root.hex() if known else None


def _event_owners(event: dict[str, Any]) -> str | None:
    """The owner set a `sent` event recorded: its root, or (events written before rounds named
    their invited set by root) the root of the list it kept."""
    if event.get("owners_root"):
        return str(event["owners_root"])
    listed = event.get("owners")
    if not listed:
        return None
    try:
        return membership.root(sorted(set(listed))).hex()
    except ProtocolError:
        return None


def release_facts(inv: Invitation) -> dict[str, Any]:
    """What the audit log's `sent` event records for the differencing rule."""
    return {
        "owners_root": release_owners(inv),
        "chosen_by_aggregator": inv.protocol.chosen_by_aggregator(inv.spec),
    }


def refusal(
    policy: OwnerPolicy,
    inv: Invitation,
    past: Callable[[], list[dict[str, Any]]],
    now: datetime | None = None,
    analyst: str | None = None,
) -> str:
    """'' if the policy lets this site take part, else the rule and why. `past` gives the audit
    log's events; it is read only when a rule needs the site's history."""
    columns = inv.protocol.columns(inv.spec)
    if getattr(inv.protocol, "plugin", False) and inv.label not in policy.protocols:
        return (
            f"policy.protocols: {inv.label} is a plugin statistic; this site takes part only "
            f'if policy.protocols names it ("*" does not cover plugins)'
        )
    if not _allowed(policy.protocols, inv.label):
        return f"policy.protocols: this site does not take part in {inv.label} rounds"
    if not policy.columns:
        return (
            "policy.columns: this site has not said which of its columns may be shared; list "
            'the shareable columns in policy.columns of its config ("*" for all)'
        )
    for column in columns:
        if not _allowed(policy.columns, column):
            return f"policy.columns: column '{column}' may not be used"
    others = inv.min_owners - 1
    # other shares hide this site's only in a secure sum; every LDP report is private on its own
    if inv.protocol.kind != REPORTS and others < policy.min_other_owners:
        return (
            f"policy.min_other_owners: the round's quorum of {inv.min_owners} includes "
            f"{max(others, 0)} other site(s); this site requires {policy.min_other_owners} "
            f"(--min-owners {policy.min_other_owners + 1} or more)"
        )
    charge = inv.protocol.charge(inv.spec, inv.dp)
    if charge is None and not _allowed(policy.non_dp, inv.label):  # a release without DP
        return (
            f"policy.non_dp: {inv.label} results must be differentially private here "
            "(add --dp-epsilon, and --row-norm-bound where the command takes one)"
        )
    history: list[dict[str, Any]] | None = None
    if policy.data_refusals:
        history = past()
        reason = _data_refusals(policy, analyst, history, now)
        if reason:
            return reason
    if charge is None and policy.non_dp_repeats:
        return _differencing(policy, inv, columns, past() if history is None else history, now)
    return ""


def analyst_refusal(policy: OwnerPolicy, analyst: str | None) -> str:
    """'' if `analyst` (the verified signer of the round request; None without TLS, where
    nobody is authenticated) may start rounds that include this site, else why not."""
    if ANY in policy.analysts:
        return ""
    if analyst is None:
        return (
            "policy.analysts: the round request is not signed (the deployment runs without "
            "TLS), so this site cannot tell which analyst asks"
        )
    if analyst not in policy.analysts:
        return f"policy.analysts: analyst '{analyst}' may not start rounds that include this site"
    return ""


def min_rows_refusal(minimum: int, rows: int) -> str:
    """'' if a table of `rows` rows may be used. The reason does not say how many rows the site
    has: a decline reaches the aggregator."""
    if rows >= minimum:
        return ""
    return (
        f"policy.min_rows: this site takes part only with at least {minimum} rows in the data "
        "a round reads"
    )


def _recent(
    policy: OwnerPolicy, past: list[dict[str, Any]], now: datetime | None
) -> list[dict[str, Any]]:
    """The audit events of the policy's window."""
    since = (now or datetime.now(timezone.utc)) - timedelta(days=policy.non_dp_window_days)
    out = []
    for event in past:
        try:
            if datetime.fromisoformat(event["time"]) >= since:
                out.append(event)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _differencing(
    policy: OwnerPolicy,
    inv: Invitation,
    columns: list[str],
    past: list[dict[str, Any]],
    now: datetime | None,
) -> str:
    """Differencing counted by what is released. Two non-DP totals that share a column, over
    different sets of owners, can be subtracted to isolate the owners in one set and not the
    other, whatever protocol, label, job or column set carried them. So every earlier non-DP
    release (a `sent` event, one per round) that touches a column of this round counts, unless
    both summed exactly the same known set of owners and neither depends on values the
    aggregator chose (k-means centers after the first iteration, which can isolate one row).
    This round is refused once `non_dp_repeats` such releases fall within the window."""
    mine, owners = set(columns), release_owners(inv)
    chosen = inv.protocol.chosen_by_aggregator(inv.spec)
    count = 0
    for event in _recent(policy, past, now):
        if event.get("event") != "sent" or event.get("epsilon") is not None:
            continue
        if not mine & set(event.get("columns") or []):
            continue
        theirs = _event_owners(event)
        same = owners is not None and theirs is not None and theirs == owners
        if chosen or event.get("chosen_by_aggregator") or not same:
            count += 1
    if count >= policy.non_dp_repeats:
        return (
            "policy.non_dp_repeats: another non-DP release of these columns over a different "
            f"set of owners would exceed this site's limit of {policy.non_dp_repeats} in "
            f"{policy.non_dp_window_days:g} days"
        )
    return ""


def _data_refusals(
    policy: OwnerPolicy, analyst: str | None, past: list[dict[str, Any]], now: datetime | None
) -> str:
    """A refusal for the site's data says one bit about it (a value beyond a bound, too few
    rows): an analyst gets at most `data_refusals` of them per window, then nothing more."""
    count = sum(
        1
        for e in _recent(policy, past, now)
        if e.get("data_dependent") and e.get("analyst") == analyst
    )
    if count >= policy.data_refusals:
        return (
            f"policy.data_refusals: this analyst's rounds met {policy.data_refusals} refusal(s) "
            f"for this site's data in {policy.non_dp_window_days:g} days, the most it allows"
        )
    return ""
