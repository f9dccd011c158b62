"""The site's own rules for taking part, checked before anything is read.

A refusal is a decline whose reason starts with the rule's name (`policy.columns: ...`), so the
analyst, the aggregator's log and the site's audit log all say which rule applied. Repeated
non-DP queries are counted from the audit log's `sent` events: what actually left the site.
`policy.analysts` needs the analyst the round request was verified to come from
(`owner_agent.authorization`); `policy.min_rows` is applied where the data is read
(`owner_agent.site_data`), the first moment the row count is known.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

from leteo_fed.config import ANY, OwnerPolicy
from leteo_fed.protocols.base import REPORTS
from leteo_fed.transport.rounds import Invitation


def _allowed(names: tuple[str, ...], name: str) -> bool:
    return ANY in names or name in names


def query_key(label: str, columns: list[str]) -> tuple[str, tuple[str, ...]]:
    """A query: what is computed (protocol and method) over which columns (label included)."""
    return label, tuple(sorted(columns))


def refusal(
    policy: OwnerPolicy,
    inv: Invitation,
    past: Callable[[], list[dict[str, Any]]],
    now: datetime | None = None,
) -> str:
    """'' if the policy lets this site take part, else the rule and why. `past` gives the audit
    log's events; it is read only when a rule needs the site's history."""
    columns = inv.protocol.columns(inv.spec)
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
            f"{max(others, 0)} other site(s); this site requires {policy.min_other_owners}"
        )
    charge = inv.protocol.charge(inv.spec, inv.dp)
    if charge is None:  # a release without differential privacy
        if not _allowed(policy.non_dp, inv.label):
            return f"policy.non_dp: {inv.label} results must be differentially private here"
        if policy.non_dp_repeats:
            return _repeats(policy, inv, columns, past(), now)
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


def _repeats(
    policy: OwnerPolicy,
    inv: Invitation,
    columns: list[str],
    past: list[dict[str, Any]],
    now: datetime | None,
) -> str:
    """Subset differencing: the same non-DP query run again (on other owner sets) would let the
    aggregator subtract releases; allow it only `non_dp_repeats` times per window. Counted per
    job (the rounds of one k-means job answer one signed request), this job excluded."""
    label = inv.label
    now = now or datetime.now(timezone.utc)
    since = now - timedelta(days=policy.non_dp_window_days)
    key = query_key(label, columns)
    jobs = {e.get("round_id"): e.get("job_id") for e in past if e.get("event") == "invitation"}
    answered: set[str] = set()
    for i, event in enumerate(past):
        if event.get("event") != "sent" or event.get("epsilon") is not None:
            continue
        if query_key(event.get("protocol", ""), list(event.get("columns", []))) != key:
            continue
        try:
            when = datetime.fromisoformat(event["time"])
        except (KeyError, ValueError):
            continue
        round_id = str(event.get("round_id") or f"#{i}")  # no round id: a job of its own
        job = str(jobs.get(round_id) or round_id)
        if when >= since and job != inv.job_id:
            answered.add(job)
    count = len(answered)
    if count >= policy.non_dp_repeats:
        return (
            f"policy.non_dp_repeats: this site already answered the same non-DP {label} query "
            f"on {', '.join(key[1])} {count} time(s) in the last "
            f"{policy.non_dp_window_days:g} days (limit {policy.non_dp_repeats})"
        )
    return ""
