"""The owner's audit log: one JSON line per event, so a site can show what it was asked and what
left it.

Events: `invitation` (what a round asked: protocol, columns, DP budget, its job, and the
analyst's signed request: who signed it and its SHA-256 digest), `decision` (accepted, or
declined with the reason), `sent` (what left the site: protocol, columns, how many ciphertexts
or reports and bytes, the budget charged), `failed` (a share that was not sent), `result`
(the published outcome) and `withdrawn` (a charge given back because the CSP attests it never
decrypted the round, see owner_agent/withdrawal.py), `budget_period` and `budget_change` (the
site's budget renewed or changed, owner_agent/budget_period.py) and `bounds_narrower` (a DP
request whose public bounds are narrower than the ones the site publishes: its values get
clipped). Once a round's analyst is verified, every later event of the round names it too. Each line is written whole with one append and flushed to disk, so a crash leaves
every earlier line intact; the file is created owner-only (0600).
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from leteo_fed.errors import ConfigError
from leteo_fed.transport.rounds import Invitation

EVENTS = (
    "invitation",
    "decision",
    "sent",
    "failed",
    "result",
    "withdrawn",
    "budget_period",
    "budget_change",
    "bounds_narrower",
)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def describe_invitation(inv: Invitation) -> dict[str, Any]:
    """What a round asks of this site, in the words of the audit log."""
    doc: dict[str, Any] = {
        "protocol": inv.label,
        "payload": inv.protocol.name,
        "columns": inv.protocol.columns(inv.spec),
        "deadline_unix": inv.deadline_unix,
        "job_id": inv.job_id,
    }
    charge = inv.protocol.charge(inv.spec, inv.dp)
    doc["epsilon"] = charge.epsilon if charge is not None else None
    doc["delta"] = charge.delta if charge is not None else None
    return doc


class AuditLog:
    def __init__(self, path: str | os.PathLike[str], site_id: str) -> None:
        self.path = Path(path)
        self.site_id = site_id
        self._lock = threading.Lock()
        self._context: dict[str, dict[str, Any]] = {}  # round -> facts every event repeats
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise ConfigError(f"cannot open the audit log {self.path}: {exc.strerror}") from None
        os.close(fd)

    def attach(self, round_id: str, **facts: Any) -> None:
        """Facts recorded with every later event of the round (the analyst who asked), so the
        code that records `sent` or `failed` need not know them; dropped with its `result`."""
        with self._lock:
            self._context.setdefault(round_id, {}).update(facts)

    def record(self, event: str, round_id: str, **facts: Any) -> None:
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        with self._lock:
            context = (
                self._context.pop(round_id, {})
                if event == "result"
                else self._context.get(round_id, {})
            )
        line = json.dumps(
            {
                "time": _now(),
                "site": self.site_id,
                "event": event,
                "round_id": round_id,
                **context,
                **facts,
            },
            sort_keys=False,
        )
        data = (line + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every event of an audit log (a torn last line, from a crash mid-write, is skipped)."""
    events = []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise ConfigError(f"no audit log at {path}: the agent has not run yet") from None
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def awaiting_results(events: list[dict[str, Any]]) -> OrderedDict[str, None]:
    """Rounds this site accepted and holds no result for, oldest first: what a reconnecting
    owner asks the aggregator about."""
    awaiting: OrderedDict[str, None] = OrderedDict()
    for e in events:
        kind, round_id = e.get("event"), str(e.get("round_id", ""))
        if kind == "decision" and e.get("accepted"):
            awaiting[round_id] = None
        elif kind in ("result", "withdrawn"):
            awaiting.pop(round_id, None)
    return awaiting


def results_received(events: list[dict[str, Any]]) -> set[str]:
    """Rounds whose result this site already recorded: a repeat is not recorded again."""
    return {str(e.get("round_id", "")) for e in events if e.get("event") == "result"}


def table(events: list[dict[str, Any]]) -> str:
    """The log as a table a person reads: one line per event."""
    rows = [("time", "round", "event", "details")]
    for e in events:
        rows.append(
            (e.get("time", "")[:19], e.get("round_id", ""), e.get("event", ""), _details(e))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    return "\n".join(out)


def _details(e: dict[str, Any]) -> str:
    kind = e.get("event")
    budget = ""
    if e.get("epsilon") is not None:
        budget = f"; epsilon {e['epsilon']:g}, delta {e.get('delta') or 0:g}"
    if kind == "invitation":
        who = f" for analyst {e['analyst']}" if e.get("analyst") else ""
        return f"{e.get('protocol')} on {', '.join(e.get('columns', []))}{budget}{who}"
    if kind == "decision":
        return "accepted" if e.get("accepted") else f"declined: {_why(e)}"
    if kind == "sent":
        what = (
            f"{e.get('n_reports')} reports"
            if e.get("n_reports") is not None
            else f"{e.get('n_ciphertexts')} ciphertexts"
        )
        return f"{what}, {e.get('bytes')} bytes, {e.get('protocol')}{budget}"
    if kind == "failed":
        return f"nothing sent: {_why(e)}"
    if kind == "result":
        return f"{e.get('state')}: {e.get('message')}"
    if kind == "withdrawn":
        return f"charge given back{budget}: {e.get('reason')}"
    if kind == "budget_period":
        return (
            f"period {e.get('period')} closed ({e.get('reason')}): epsilon "
            f"{e.get('epsilon_spent'):g}, delta {e.get('delta_spent'):g} spent; archived in "
            f"{e.get('archive')}"
        )
    return ""


def _why(e: dict[str, Any]) -> str:
    """The site's own reason: the detail that stayed here, else what the aggregator was told."""
    return str(e.get("detail") or e.get("reason"))
