"""Budget periods of the privacy ledger: archived read-only, never with a round in flight,
renewed by `period_days`, and every closed period in the site's audit log."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from leteo_fed.errors import ConfigError, ProtocolError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import PrivacyLedger


def _age(path, days: float) -> None:
    """Pretend the current period started `days` ago (the file is the only state)."""
    doc = json.loads(path.read_text())
    start = datetime.now(timezone.utc) - timedelta(days=days)
    doc["period"]["started"] = start.isoformat()
    path.write_text(json.dumps(doc))


def test_a_new_period_archives_the_old_one_read_only(tmp_path):
    path = tmp_path / "ledger.json"
    closed = []
    ledger = PrivacyLedger(path, 2.0, 1e-5, on_new_period=closed.append)
    ledger.charge("r1", "skellam", Budget(1.5, 1e-6))
    assert ledger.period().number == 1
    result = ledger.new_period("yearly renewal")
    assert closed == [result] and result.reason == "yearly renewal"
    assert result.spent.epsilon == 1.5 and result.period.number == 1
    assert result.archive == tmp_path / "ledger.period-1.json"
    assert result.archive.stat().st_mode & 0o777 == 0o400
    assert [s["round_id"] for s in json.loads(result.archive.read_text())["spends"]] == ["r1"]
    assert ledger.period().number == 2 and ledger.remaining().epsilon == 2.0
    ledger.charge("r2", "skellam", Budget(2.0, 0.0))  # the whole budget again


def test_no_new_period_while_a_round_is_in_flight(tmp_path):
    ledger = PrivacyLedger(tmp_path / "l.json", 2.0, 0.0)
    ledger.reserve("busy", "skellam", Budget(1.0, 0.0))
    before = (tmp_path / "l.json").read_bytes()
    with pytest.raises(ProtocolError, match="'busy' holds a reservation"):
        ledger.new_period()
    assert (tmp_path / "l.json").read_bytes() == before
    assert not (tmp_path / "l.period-1.json").exists()


def test_period_days_renews_the_budget_when_it_is_next_taken(tmp_path):
    path = tmp_path / "l.json"
    closed = []
    ledger = PrivacyLedger(path, 1.0, 0.0, period_days=30, on_new_period=closed.append)
    ledger.charge("r1", "skellam", Budget(1.0, 0.0))
    assert not ledger.can_afford(Budget(0.5, 0.0))  # spent, and the period is young
    _age(path, 29)
    assert not ledger.can_afford(Budget(0.5, 0.0)) and closed == []
    _age(path, 31)
    assert ledger.can_afford(Budget(0.5, 0.0))  # due: renewed before the answer
    assert [c.reason for c in closed] == ["privacy.period_days = 30"]
    ledger.charge("r2", "skellam", Budget(1.0, 0.0))
    assert ledger.period().number == 2
    _age(path, 40)
    ledger.reserve("r3", "skellam", Budget(0.5, 0.0))  # due again: renewed, then reserved
    assert ledger.period().number == 3 and len(closed) == 2
    _age(path, 40)
    assert ledger.renew_if_due() is None  # r3 is in flight: the period waits for it
    with pytest.raises(ConfigError, match="period_days"):
        PrivacyLedger(path, 1.0, 0.0, period_days=0)


def test_a_ledger_from_before_periods_is_period_1(tmp_path):
    path = tmp_path / "old.json"
    doc = {
        "format": "leteo-fed-privacy-ledger/1",
        "epsilon_total": 1.0,
        "delta_total": 0.0,
        "spends": [
            {
                "round_id": "r",
                "mechanism": "m",
                "epsilon": 0.5,
                "delta": 0.0,
                "time": "2026-01-02T03:04:05+00:00",
                "note": "",
                "state": "committed",
                "settled": "2026-01-02T03:04:05+00:00",
            }
        ],
    }
    path.write_text(json.dumps(doc))
    period = PrivacyLedger(path, 1.0, 0.0).period()
    assert period.number == 1 and period.started.startswith("2026-01-02")
