"""The ledger's accountants: RDP composition of every entry's curve, basic composition (also for
ledgers written before accountants existed, until their period ends), multi-round jobs, and
changing a period's totals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from leteo_fed.errors import ConfigError
from leteo_fed.privacy import Budget, BudgetExceeded
from leteo_fed.privacy.accounting import (
    ApproxEvent,
    GaussianEvent,
    PureEvent,
    SkellamEvent,
    compose_epsilon,
)
from leteo_fed.privacy.ledger import LEDGER_FORMAT, PrivacyLedger
from leteo_fed.privacy.mechanisms import Gaussian, Skellam

ALONE = Budget(0.1, 1e-7)  # what each release of the example is, alone


@pytest.fixture()
def path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.json"


def _gaussian_release() -> GaussianEvent:
    """A Gaussian release calibrated to be exactly (0.1, 1e-7)-DP alone (sensitivity 1)."""
    return GaussianEvent(Gaussian.calibrate(ALONE, 1.0).sigma)


def _fill(led: PrivacyLedger, event, reads: list[int]) -> int:
    """Releases until the ledger refuses one; each 'reads data' only after its reservation."""
    n = 0
    while True:
        try:
            led.reserve(f"r{n}", "gaussian", ALONE, event=event)
        except BudgetExceeded as exc:
            assert "leteo-fed owner budget set" in str(exc)  # the refusal names the command
            return n
        reads.append(n)  # the (mock) data read happens only once the budget is held
        led.commit(f"r{n}")
        n += 1


def test_rdp_accepts_at_least_five_times_more_releases_than_basic(tmp_path: Path) -> None:
    event = _gaussian_release()
    # exactly (0.1, 1e-7)-DP alone by its analytic map; its RDP curve alone says a bit more
    assert Gaussian(event.noise_multiplier).epsilon(1.0, 1e-7) == pytest.approx(0.1, rel=1e-6)
    assert event.epsilon(1e-7) >= 0.1
    basic_reads: list[int] = []
    rdp_reads: list[int] = []
    basic = _fill(
        PrivacyLedger(tmp_path / "b.json", 1.0, 1e-6, accountant="basic"), event, basic_reads
    )
    rdp = _fill(PrivacyLedger(tmp_path / "r.json", 1.0, 1e-6, accountant="rdp"), event, rdp_reads)
    # the refused release read nothing: one read per accepted release, none for the refusal
    assert basic_reads == list(range(basic)) and rdp_reads == list(range(rdp))
    assert basic == 10
    assert rdp >= 5 * basic
    # the same with Skellam releases calibrated to (0.1, 1e-7) at a secure sum's sensitivity
    sens = (40.0, 20.0)
    mu = Skellam.calibrate(ALONE, sens).mu
    sk = _fill(PrivacyLedger(tmp_path / "s.json", 1.0, 1e-6), SkellamEvent(mu, *sens), [])
    assert sk >= 5 * basic


def test_rdp_spent_is_the_composition_and_refusal_writes_nothing(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    event = _gaussian_release()
    for i in range(30):
        led.charge(f"r{i}", "gaussian", ALONE, event=event)
    spent = led.spent()
    assert spent.epsilon == pytest.approx(compose_epsilon([event.times(30)], 1e-6), rel=1e-12)
    assert spent.epsilon < 30 * 0.1 and spent.delta == 0.0
    assert led.remaining().epsilon == pytest.approx(1.0 - spent.epsilon)
    led.reserve("x", "gaussian", ALONE, event=event)
    assert led.reserved().epsilon > 0
    led.release("x", share_left_owner=False)
    # further: this and 1000 more releases cannot fit
    before = path.read_bytes()
    assert not led.can_afford(ALONE, event, further=1000)
    assert "1000 more" in (led.shortfall(ALONE, event, further=1000) or "")
    with pytest.raises(BudgetExceeded):
        led.reserve("big", "gaussian", ALONE, event=event, further=1000)
    assert path.read_bytes() == before
    doc = json.loads(path.read_text())
    assert doc["accountant"] == "rdp" and doc["spends"][0]["event"]["kind"] == "gaussian"
    # entries without an event are ApproxEvents: epsilons and deltas add on top
    led.charge("old-style", "skellam", Budget(0.05, 1e-7))
    assert led.spent().delta == pytest.approx(1e-7)
    expected = compose_epsilon([event.times(30), ApproxEvent(0.05, 1e-7)], 1e-6)
    assert led.spent().epsilon == pytest.approx(expected, rel=1e-12)


def test_pure_ldp_releases_under_rdp(path: Path) -> None:
    led = PrivacyLedger(path, 2.0, 1e-6)
    n = 0
    while led.can_afford(Budget(0.1), PureEvent(0.1)):
        led.charge(f"l{n}", "ldp", Budget(0.1), event=PureEvent(0.1))
        n += 1
    assert n > 20  # basic composition would stop at 20


def test_legacy_ledger_stays_basic_until_its_period_ends(path: Path) -> None:
    doc = {
        "format": LEDGER_FORMAT,
        "epsilon_total": 1.0,
        "delta_total": 1e-6,
        "composition": "sequential",
        "period": {"number": 1, "started": "2024-01-01T00:00:00+00:00"},
        "spends": [
            {
                "round_id": "old",
                "mechanism": "skellam",
                "epsilon": 0.5,
                "delta": 1e-7,
                "time": "2024-01-01T00:00:00+00:00",
                "note": "",
                "state": "committed",
                "settled": "2024-01-01T00:00:00+00:00",
            }
        ],
    }
    path.write_text(json.dumps(doc))
    heard = []
    led = PrivacyLedger(path, 1.0, 1e-6, accountant="rdp", on_new_period=heard.append)
    assert led.accountant == "basic" and led.configured_accountant == "rdp"
    assert led.spent() == (0.5, 1e-7)
    event = _gaussian_release()
    for i in range(5):
        led.charge(f"b{i}", "gaussian", ALONE, event=event)
    assert led.spent().epsilon == pytest.approx(1.0)  # basic: 0.5 + 5 x 0.1
    assert not led.can_afford(ALONE, event)
    closed = led.new_period("renewed")
    assert (closed.accountant, closed.next_accountant) == ("basic", "rdp") and heard == [closed]
    assert led.accountant == "rdp" and json.loads(path.read_text())["accountant"] == "rdp"


def test_basic_ledger_charges_a_jobs_rounds_their_rdp_increments(path: Path) -> None:
    led = PrivacyLedger(path, 10.0, 1e-5, accountant="basic")
    sens = (100.0, 50.0)
    job_budget = Budget(1.0, 1e-6)
    mu = Skellam.calibrate(job_budget, sens, compositions=20).mu
    ev = SkellamEvent(mu, *sens)
    assert led.can_afford(job_budget, ev, job="kmeans:j1", further=19)
    # the site takes part in rounds 2, 5 and 9 only: charged as its 1st, 2nd and 3rd round
    for r in (2, 5, 9):
        led.charge(f"j1-it{r}", "skellam", job_budget, event=ev, job="kmeans:j1")
    three = Skellam(mu).epsilon(sens, 1e-6, compositions=3)
    assert led.spent().epsilon == pytest.approx(three, rel=1e-9)
    assert led.spent().delta == pytest.approx(1e-6)  # the job's delta once
    entries = led.history()
    assert entries[0].delta == 1e-6 and entries[1].delta == 0.0
    # all 20 rounds add up to the job's signed epsilon (calibrated for 20 compositions)
    for r in range(10, 27):
        led.charge(f"j1-it{r}", "skellam", job_budget, event=ev, job="kmeans:j1")
    assert led.spent().epsilon == pytest.approx(
        Skellam(mu).epsilon(sens, 1e-6, compositions=20), rel=1e-9
    )
    assert led.spent().epsilon <= 1.0 * (1 + 1e-9)


def test_set_totals_raises_lowers_and_refuses_below_spent(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    led.charge("a", "laplace", Budget(0.4), event=PureEvent(0.4))
    change = led.set_totals(2.0, 1e-6)
    assert change.old == (1.0, 1e-6) and change.new == (2.0, 1e-6)
    assert PrivacyLedger(path, 2.0, 1e-6).remaining().epsilon == pytest.approx(1.6, rel=1e-4)
    led.set_totals(0.5, 1e-6)  # lowering to above what is used
    with pytest.raises(BudgetExceeded, match="cannot be lowered"):
        led.set_totals(0.3, 1e-6)
    assert led.total == (0.5, 1e-6) and json.loads(path.read_text())["epsilon_total"] == 0.5
    with pytest.raises(ConfigError):
        led.set_totals(math.inf, 1e-6)


def test_mismatch_names_the_budget_command(path: Path) -> None:
    PrivacyLedger(path, 1.0, 1e-6)
    with pytest.raises(ConfigError, match="leteo-fed owner budget set"):
        PrivacyLedger(path, 2.0, 1e-6)


def test_new_period_with_new_totals(path: Path) -> None:
    led = PrivacyLedger(path, 1.0, 1e-6)
    led.charge("a", "laplace", Budget(0.4), event=PureEvent(0.4))
    closed = led.new_period("renew", totals=(3.0, 1e-6))
    assert closed.totals == (1.0, 1e-6) and closed.next_totals == (3.0, 1e-6)
    assert PrivacyLedger(path, 3.0, 1e-6).remaining() == (3.0, 1e-6)


def test_unknown_accountant_is_refused(path: Path) -> None:
    with pytest.raises(ConfigError, match="accountant"):
        PrivacyLedger(path, 1.0, 1e-6, accountant="moments")


def test_rdp_never_counts_more_than_adding_epsilons(path: Path) -> None:
    """One Gaussian release, exactly (0.1, 1e-7)-DP alone, in a ledger whose delta is that
    1e-7: converting its Renyi curve at 1e-7 gives more than its exact 0.1, so the ledger keeps
    the entries' epsilons added (both are valid bounds of the same release); with many
    releases the composition is far below the sum."""
    from leteo_fed.privacy.accounting import compose_epsilon

    event = _gaussian_release()
    led = PrivacyLedger(path, 10.0, 1e-7, accountant="rdp")
    led.charge("g", "gaussian", ALONE, event=event)
    assert compose_epsilon([event], 1e-7) > ALONE.epsilon * 1.05  # the curve alone is looser
    assert led.spent().epsilon == pytest.approx(ALONE.epsilon)  # the sum is kept
    # releases of epsilon 0.1 (LDP at a small epsilon): basic composition takes 99 more in
    # the 9.9 left; their Renyi curves compose to far less
    n = 0
    while n < 1000 and led.can_afford(Budget(0.1), PureEvent(0.1)):
        led.charge(f"s{n}", "ldp", Budget(0.1), event=PureEvent(0.1))
        n += 1
    assert n > 99, n
