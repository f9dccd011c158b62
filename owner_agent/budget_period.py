"""A site's privacy ledger with its budget periods, and the audit events budget changes leave.

Both the agent and `leteo-fed owner budget` open the ledger here, so a period closed by either
(by hand, or because `privacy.period_days` elapsed) is recorded the same way in the site's audit
log: which period, when it started and ended, what it spent, under which accountant, where it is
archived, the totals before and after. `set_totals` is the one path that raises or lowers a
budget: it changes the ledger and the config's [privacy] totals together and records who, when,
the old and new totals and why (`budget_change`).
"""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path

import tomllib

from leteo_fed.config import OwnerConfig
from leteo_fed.errors import ConfigError
from leteo_fed.fileio import atomic_write_bytes
from leteo_fed.privacy.ledger import ClosedPeriod, PrivacyLedger, TotalsChange
from owner_agent.audit import AuditLog


def operator() -> str:
    """Who runs the command (the OS user), for the audit log."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


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
        accountant=closed.accountant,
        next_accountant=closed.next_accountant,
        epsilon_total=closed.totals.epsilon if closed.totals else None,
        delta_total=closed.totals.delta if closed.totals else None,
        next_epsilon_total=closed.next_totals.epsilon if closed.next_totals else None,
        next_delta_total=closed.next_totals.delta if closed.next_totals else None,
        by=operator(),
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
        accountant=privacy.accountant,
    )


def stored_totals(path: Path) -> tuple[float, float]:
    """The (epsilon_total, delta_total) a ledger file records (ConfigError if unreadable)."""
    try:
        doc = json.loads(path.read_bytes())
        return float(doc["epsilon_total"]), float(doc["delta_total"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the totals of privacy ledger {path}: {exc}") from None


def open_as_recorded(config: OwnerConfig, audit: AuditLog) -> PrivacyLedger:
    """The site's ledger opened with the totals its file records (a config edited since is no
    obstacle: the budget command reconciles them)."""
    privacy = config.privacy
    if privacy is None:
        raise ConfigError("this site has no [privacy] section: no budget", field="privacy")
    eps, delta = (
        stored_totals(privacy.ledger)
        if privacy.ledger.exists()
        else (privacy.epsilon_total, privacy.delta_total)
    )
    return PrivacyLedger(
        privacy.ledger,
        eps,
        delta,
        period_days=privacy.period_days,
        on_new_period=lambda closed: record_closed(audit, closed),
        accountant=privacy.accountant,
    )


_NUMBER_LINE = r"^(?P<key>{key})(?P<eq>\s*=\s*)(?P<value>[^#\n]*?)(?P<tail>\s*(#.*)?)$"


def with_totals(text: str, epsilon_total: float, delta_total: float) -> str:
    """The owner config `text` with [privacy] epsilon_total and delta_total set (comments and
    everything else kept); ConfigError if it has no [privacy] table."""
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, line in enumerate(lines) if re.match(r"^\s*\[privacy\]\s*(#.*)?$", line)), None
    )
    if start is None:
        raise ConfigError("the config has no [privacy] table", field="privacy")
    end = next(
        (i for i in range(start + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines)
    )
    values = {"epsilon_total": repr(float(epsilon_total)), "delta_total": repr(float(delta_total))}
    for key, value in values.items():
        pattern = re.compile(_NUMBER_LINE.format(key=key))
        for i in range(start + 1, end):
            m = pattern.match(lines[i].rstrip("\n"))
            if m:
                newline = "\n" if lines[i].endswith("\n") else ""
                lines[i] = f"{m['key']}{m['eq']}{value}{m['tail']}{newline}"
                break
        else:
            lines.insert(start + 1, f"{key} = {value}\n")
            end += 1
    out = "".join(lines)
    parsed = tomllib.loads(out).get("privacy", {})
    if (parsed.get("epsilon_total"), parsed.get("delta_total", 0.0)) != (
        float(epsilon_total),
        float(delta_total),
    ):
        raise ConfigError("could not rewrite the config's [privacy] totals", field="privacy")
    return out


def set_totals(
    config_path: Path,
    config: OwnerConfig,
    audit: AuditLog,
    epsilon_total: float,
    delta_total: float,
    reason: str,
) -> TotalsChange:
    """Raise or lower the site's budget: the ledger's totals for this period and the config's,
    together (the config is restored if the ledger refuses), recorded in the audit log."""
    text = config_path.read_text(encoding="utf-8")
    new_text = with_totals(text, epsilon_total, delta_total)
    ledger = open_as_recorded(config, audit)
    change = ledger.set_totals(epsilon_total, delta_total)  # refuses below what is used
    try:
        atomic_write_bytes(
            config_path, new_text.encode("utf-8"), mode=config_path.stat().st_mode & 0o777
        )
    except BaseException:
        ledger.set_totals(*change.old)  # put the ledger back as the config still says
        raise
    audit.record(
        "budget_change",
        "",
        by=operator(),
        reason=reason,
        epsilon_total_old=change.old.epsilon,
        delta_total_old=change.old.delta,
        epsilon_total_new=change.new.epsilon,
        delta_total_new=change.new.delta,
        epsilon_used=change.used.epsilon,
        delta_used=change.used.delta,
        accountant=change.accountant,
        ledger=str(ledger.path),
        config=str(config_path),
    )
    return change


def audit_log(config: OwnerConfig) -> AuditLog:
    return AuditLog(config.audit_log or f"audit-{config.site_id}.jsonl", config.site_id)
