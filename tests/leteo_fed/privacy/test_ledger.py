"""Per-owner privacy ledger (docs/dp-release.md): persistence, refusals that write nothing,
two-phase reserve/commit/release of Budget amounts, and concurrent charging from separate
processes."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
from pathlib import Path

import pytest

from leteo_fed.errors import (
    ConfigError,
    DataError,
    DuplicateError,
    LeteoError,
    NotFoundError,
    ProtocolError,
)
from leteo_fed.privacy import EPSILON_MAX, Balance, Budget, BudgetExceeded
from leteo_fed.privacy.ledger import LEDGER_FORMAT, PrivacyLedger, Spend


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    return tmp_path / "owner" / "ledger-wine.json"


def test_create_charge_and_persist(path: Path) -> None:
    led = PrivacyLedger(path, 2.0, 1e-5)
    assert path.exists() and led.remaining() == (2.0, 1e-5)
    doc = json.loads(path.read_text())
    assert doc["format"] == LEDGER_FORMAT and doc["spends"] == []
    s = led.charge("r1", "skellam", Budget(0.5, 1e-6), note="pca d=13")
    assert isinstance(s, Spend) and s.state == "committed" and s.settled == s.time
    assert (s.round_id, s.mechanism, s.epsilon, s.delta, s.note) == (
        "r1",
        "skellam",
        0.5,
        1e-6,
        "pca d=13",
    )
    assert s.time.endswith("+00:00")  # UTC
    led.charge("r2", "laplace", Budget(0.25, 0.0))

    again = PrivacyLedger(path, 2.0, 1e-5)  # a new process/instance sees the same ledger
    assert [h.round_id for h in again.history()] == ["r1", "r2"]
    assert again.history()[0] == s
    eps, delta = again.remaining()
    assert eps == pytest.approx(1.25) and delta == pytest.approx(9e-6)
    assert again.spent() == (pytest.approx(0.75), pytest.approx(1e-6))
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    # no temporary files left behind by the atomic writes
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".lock"]


def test_overspend_refused_without_writing(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    led.charge("r1", "skellam", Budget(0.7, 5e-7))
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    with pytest.raises(BudgetExceeded, match="epsilon") as err:
        led.charge("r2", "skellam", Budget(0.31, 0.0))
    assert isinstance(err.value, LeteoError) and err.value.field == "epsilon"
    with pytest.raises(BudgetExceeded, match="delta"):
        led.charge("r3", "skellam", Budget(0.1, 6e-7))
    with pytest.raises(BudgetExceeded):
        led.reserve("r4", "skellam", Budget(0.5, 0.0))
    assert path.read_bytes() == before and path.stat().st_mtime_ns == mtime
    assert not led.can_afford(Budget(0.31, 0.0)) and led.can_afford(Budget(0.3, 5e-7))
    led.charge("r5", "skellam", Budget(0.3, 5e-7))  # exactly the rest is allowed
    assert led.remaining() == (pytest.approx(0.0, abs=1e-15), pytest.approx(0.0, abs=1e-21))


def test_zero_delta_budget_refuses_any_delta(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 0.0)
    led.charge("r1", "laplace", Budget(0.5, 0.0))
    with pytest.raises(BudgetExceeded, match="delta"):
        led.charge("r2", "skellam", Budget(0.1, 1e-12))


def test_float_slack_only_absorbs_rounding(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    for i in range(10):  # 10 x 0.1 = 1.0 up to decimal->binary rounding: all accepted
        led.charge(f"r{i}", "skellam", Budget(0.1, 1e-7))
    with pytest.raises(BudgetExceeded):
        led.charge("r10", "skellam", Budget(1e-9, 0.0))  # far above the 1e-12 relative slack
    third = PrivacyLedger(path.with_name("b.json"), 1.0, 0.0)
    for i in range(3):
        third.charge(f"t{i}", "laplace", Budget(1 / 3, 0.0))
    with pytest.raises(BudgetExceeded):
        third.charge("t3", "laplace", Budget(1e-6, 0.0))


def test_duplicate_round_refused_without_writing(path: Path) -> None:
    led = PrivacyLedger(path, 5.0, 1e-5)
    led.charge("r1", "skellam", Budget(0.5, 0.0))
    before = path.read_bytes()
    with pytest.raises(DuplicateError, match="r1"):
        led.charge("r1", "skellam", Budget(0.1, 0.0))
    with pytest.raises(DuplicateError):
        led.reserve("r1", "skellam", Budget(0.1, 0.0))
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("eps", "delta", "field"),
    [
        (0.0, 0.0, "epsilon"),
        (-0.1, 0.0, "epsilon"),
        (float("nan"), 0.0, "epsilon"),
        (float("inf"), 0.0, "epsilon"),
        (True, 0.0, "epsilon"),
        ("0.5", 0.0, "epsilon"),
        (0.1, 1.0, "delta"),
        (0.1, -1e-9, "delta"),
        (0.1, float("nan"), "delta"),
    ],
)
def test_invalid_amounts_refused(path: Path, eps, delta, field: str) -> None:
    # an invalid amount cannot even be built as a Budget, so it never reaches the ledger
    with pytest.raises(DataError) as err:
        Budget(eps, delta)
    assert err.value.field == field


def test_charge_takes_a_budget_within_the_cap(path: Path) -> None:
    led = PrivacyLedger(path, 500.0, 1e-5)  # a total is a sum of releases: not capped
    before = path.read_bytes()
    for bad in ((0.5, 0.0), 0.5, None):  # the old (epsilon, delta) call shape is refused
        with pytest.raises(DataError) as err:
            led.charge("r1", "skellam", bad)  # type: ignore[arg-type]
        assert err.value.field == "budget"
    with pytest.raises(DataError) as err:  # one release above the one cap
        led.reserve("r1", "skellam", Budget(EPSILON_MAX * 1.01))
    assert err.value.field == "epsilon"
    with pytest.raises(DataError):
        led.can_afford(Budget(EPSILON_MAX * 2))
    assert path.read_bytes() == before
    led.charge("r1", "skellam", Budget(EPSILON_MAX))  # exactly the cap is allowed
    assert led.history()[0].budget == Budget(EPSILON_MAX)


def test_queries_return_balances(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    led.charge("r1", "laplace", Budget(1.0))
    left = led.remaining()
    assert isinstance(left, Balance) and left.epsilon == 0.0 and left.delta == 1e-6
    assert isinstance(led.spent(), Balance) and led.total == (1.0, 1e-6)
    assert not left.covers(Budget(1e-9)) and Balance(0.5, 0.0).covers(Budget(0.5))


def test_ledger_written_under_a_looser_cap_still_loads(path: Path) -> None:
    # the aggregator's DP plans once allowed epsilon up to 100 per round: a recorded spend is a
    # fact and must load, even though a new request that large is refused
    path.parent.mkdir(parents=True)
    doc = {
        "format": LEDGER_FORMAT,
        "epsilon_total": 200.0,
        "delta_total": 1e-6,
        "composition": "sequential",
        "spends": [
            {
                "round_id": "old",
                "mechanism": "skellam",
                "epsilon": 80.0,
                "delta": 1e-7,
                "time": "2024-01-01T00:00:00+00:00",
                "note": "",
                "state": "committed",
                "settled": "2024-01-01T00:00:00+00:00",
            }
        ],
    }
    path.write_text(json.dumps(doc))
    led = PrivacyLedger(path, 200.0, 1e-6)
    assert led.spent() == (80.0, 1e-7) and led.history()[0].epsilon == 80.0


def test_bad_round_or_mechanism_name(path: Path) -> None:
    led = PrivacyLedger(path, 5.0, 1e-5)
    with pytest.raises(DataError):
        led.charge("", "skellam", Budget(0.1, 0.0))
    with pytest.raises(DataError):
        led.charge("r1", "  ", Budget(0.1, 0.0))


def test_totals_mismatch_and_bad_totals(path: Path) -> None:
    PrivacyLedger(path, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="epsilon_total") as err:
        PrivacyLedger(path, 2.0, 1e-6)
    assert err.value.field == "epsilon_total"
    with pytest.raises(ConfigError, match="delta_total"):
        PrivacyLedger(path, 1.0, 1e-5)
    PrivacyLedger(path, 1.0, 0.000001)  # the same float spelled differently is fine
    for eps_total, delta_total in ((0.0, 1e-6), (float("inf"), 1e-6), (1.0, 1.0)):
        with pytest.raises(ConfigError):
            PrivacyLedger(path.with_name("other.json"), eps_total, delta_total)


def test_corrupt_file_is_refused(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid"):
        PrivacyLedger(path, 1.0, 1e-6)
    path.write_text(json.dumps({"format": "other"}))
    with pytest.raises(ConfigError, match="format"):
        PrivacyLedger(path, 1.0, 1e-6)
    doc = {
        "format": LEDGER_FORMAT,
        "epsilon_total": 1.0,
        "delta_total": 1e-6,
        "spends": [{"round_id": "r1", "mechanism": "x", "epsilon": -1}],
    }
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match="entry 0"):
        PrivacyLedger(path, 1.0, 1e-6)


def test_reserve_commit_release(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    r = led.reserve("r1", "skellam", Budget(0.6, 5e-7), note="k-means round 1")
    assert r.state == "reserved" and r.settled is None
    # a reservation counts against the budget at once
    assert led.remaining() == (pytest.approx(0.4), pytest.approx(5e-7))
    assert led.reserved() == (0.6, 5e-7) and led.spent() == (0.0, 0.0)
    with pytest.raises(BudgetExceeded):
        led.reserve("r2", "skellam", Budget(0.5, 0.0))

    c = led.commit("r1")
    assert c.state == "committed" and c.settled is not None and c.time == r.time
    assert led.spent() == (0.6, 5e-7) and led.reserved() == (0.0, 0.0)
    with pytest.raises(ProtocolError, match="committed"):
        led.commit("r1")
    with pytest.raises(ProtocolError):
        led.release("r1", share_left_owner=False)

    led.reserve("r2", "skellam", Budget(0.4, 0.0))
    # the noisy share was sent: release is refused, the budget stays held
    before = path.read_bytes()
    with pytest.raises(ProtocolError, match="commit it instead"):
        led.release("r2", share_left_owner=True)
    assert path.read_bytes() == before
    # the round failed before the share left the owner: release returns the budget
    rel = led.release("r2", share_left_owner=False)
    assert rel.state == "released"
    assert led.remaining()[0] == pytest.approx(0.4)
    assert [h.state for h in led.history()] == ["committed", "released"]
    with pytest.raises(DuplicateError):  # a round id is used once, even after release
        led.reserve("r2", "skellam", Budget(0.1, 0.0))
    with pytest.raises(NotFoundError):
        led.commit("nope")
    with pytest.raises(NotFoundError):
        led.release("nope", share_left_owner=False)
    # persistence of states across instances
    again = PrivacyLedger(path, 1.0, 1e-6)
    assert [(h.round_id, h.state) for h in again.history()] == [
        ("r1", "committed"),
        ("r2", "released"),
    ]


def _charge_worker(path: str, tag: str, n: int, barrier, results) -> None:
    """Runs in a spawned process: try n charges of 0.01; report how many were accepted."""
    led = PrivacyLedger(path, 1.0, 1e-6)
    barrier.wait()  # both processes start charging at the same moment
    ok = 0
    for i in range(n):
        try:
            led.charge(f"{tag}-{i}", "skellam", Budget(0.01, 1e-9))
            ok += 1
        except BudgetExceeded:
            pass
    results.put((tag, ok))


def test_concurrent_charging_never_exceeds_total(path: Path) -> None:
    PrivacyLedger(path, 1.0, 1e-6)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_charge_worker, args=(str(path), tag, 80, barrier, results))
        for tag in ("a", "b")
    ]
    for p in procs:
        p.start()
    accepted = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    # 160 attempts of 0.01 against a total of 1.0: exactly 100 accepted, never 101
    assert sum(accepted.values()) == 100
    history = PrivacyLedger(path, 1.0, 1e-6).history()
    assert len(history) == 100 and len({h.round_id for h in history}) == 100
    assert math.fsum(h.epsilon for h in history) <= 1.0 * (1 + 1e-12)
    # both processes got some of the budget (they really ran concurrently)
    assert min(accepted.values()) > 0
