"""A site's privacy ledger with its budget periods, and the audit event each period leaves.

Both the agent and `leteo-fed owner budget new-period` open the ledger here, so a period closed
by either (by hand, or because `privacy.period_days` elapsed) is recorded the same way in the
site's audit log: which period, when it started and ended, what it spent, where it is archived.
"""

from __future__ import annotations

from leteo_fed.config import OwnerConfig
from leteo_fed.privacy.ledger import ClosedPeriod, PrivacyLedger
from owner_agent.audit import AuditLog


def record_closed(audit: AuditLog, closed: ClosedPeriod) -> None:
    audit.record(
        "budget_period",
        "",
        period=closed.period.number,
        started=closed.period.started,
        ended=closed.ended,
        epsilon_spent=closed.spent.epsilon,
        delta_spent=closed.spent.delta,
        archive=str(closed.archive),
        reason=closed.reason,
    )


def open_ledger(config: OwnerConfig, audit: AuditLog) -> PrivacyLedger | None:
    """The site's ledger (None without [privacy]); closed periods go to `audit`."""
    privacy = config.privacy
    if privacy is None:
        return None
    return PrivacyLedger(
        privacy.ledger,
        privacy.epsilon_total,
        privacy.delta_total,
        period_days=privacy.period_days,
        on_new_period=lambda closed: record_closed(audit, closed),
    )


def audit_log(config: OwnerConfig) -> AuditLog:
    return AuditLog(config.audit_log or f"audit-{config.site_id}.jsonl", config.site_id)
