"""Persistent per-owner, per-dataset privacy ledger (docs/dp-release.md, "Accounting").

One JSON file per dataset holds the total epsilon and delta allowed and every spend: round id,
mechanism, epsilon, delta, time (UTC, ISO 8601), a note, its state, and its privacy event (its
RDP curve, `leteo_fed.privacy.accounting`). A request that would overspend is refused with
`BudgetExceeded` before anything is written (the file keeps its bytes).

Accountants
-----------
The file names the accountant of its current period:

- "rdp" (ledgers created from now on; `privacy.accountant`): the Renyi curves of every counted
  entry (reserved or committed) and of the request are added and converted once, at delta_total
  (`accounting.compose_epsilon`); the request is refused if that epsilon exceeds epsilon_total.
  An entry with no event (written before events were recorded) counts as an ApproxEvent: its
  epsilon and delta are added. `spent()` is that composed epsilon and, as delta, only the deltas
  of ApproxEvents (the rest of delta_total is the delta the conversion uses): the period's
  guarantee is (epsilon spent, delta_total).
- "basic" (`privacy.accountant = "basic"`, and every ledger written before accountants
  existed, `"composition": "sequential"`, until its period ends): epsilons and deltas add up.
  The rounds of one multi-round job (`job`) are charged the increments of their own RDP
  composition at the job's delta: round m of the job at this site costs eps(m) - eps(m - 1),
  the first one also the job's delta, so whatever rounds ran add up to a valid bound.

The accountant of a period is fixed when it starts: a changed `privacy.accountant` applies from
the next period (`new_period` returns both, the audit log records them).

Amounts are `Budget` objects (`leteo_fed.privacy.budget`): a charge or reservation takes one, and
its epsilon must be within the one cap `EPSILON_MAX` (it is a single release). The totals are not
capped: they are sums over many releases. `spent`, `reserved` and `remaining` return a `Balance`,
an (epsilon, delta) pair that may be zero.

States of an entry
------------------
- "committed": counted against the budget for good (`charge`, or `reserve` then `commit`).
- "reserved":  counted against the budget while a round is in flight (`reserve`).
- "released":  kept for the audit trail, no longer counted (`release`).
- "withdrawn": a committed spend whose round the CSP attests was never decrypted and now never
  will be (`withdraw`): the share left the site but nothing of it was ever revealed.

Two-phase use by an owner agent: `reserve` BEFORE the noisy share is computed and sent, `commit`
when the round completes. `release` is allowed ONLY if the noisy share never left the owner
(it was never encrypted-and-sent, nor written anywhere another party can read): once a share has
left, the owner cannot know whether the aggregate was decrypted, so the spend must be committed
even if the round then fails, unless the CSP (which alone can decrypt) closes the round for good
and attests it never decrypted it: then `withdraw` restores the budget. `release` makes the
caller say so (`share_left_owner=False`) and
refuses otherwise. A round id is used at most once per ledger, released or not.

Budget periods
--------------
A ledger counts one budget period (`period`: its number and when it started). `new_period`
archives the current file beside it, read-only (`NAME.period-N.json`), and starts period N+1
with nothing spent; with `period_days` a reservation or charge made once the period is that old
starts the new period first. Never while a round is in flight (a reservation). Renewing a budget
is a policy decision with a privacy cost: a person whose data is used in two periods is protected
at twice the total (docs/owner-config.md, "Budget periods").

Concurrency and durability
--------------------------
Every operation takes an exclusive `fcntl.flock` on "<file>.lock" next to the ledger, re-reads
the file, checks, and writes the new version atomically (temporary file, fsync, rename, then
fsync of the directory). Two processes charging at once are serialised, so the recorded total can
never exceed the budget; a reader always sees a complete old or new file.

Floating point
--------------
Amounts are stored as JSON floats (exact round-trip) and summed with `math.fsum`. A request is
refused if  spent + reserved + new > total * (1 + 1e-12): the 1e-12 relative slack only absorbs
decimal-to-binary rounding (e.g. ten charges of 0.1 against a total of 1.0); it is far below any
meaningful privacy difference. `remaining()` is floored at 0.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from leteo_fed.errors import ConfigError, DataError, DuplicateError, NotFoundError, ProtocolError
from leteo_fed.fileio import atomic_write_bytes
from leteo_fed.privacy import BudgetExceeded
from leteo_fed.privacy.accounting import (
    ApproxEvent,
    PrivacyEvent,
    approx,
    check_accountant,
    compose_epsilon,
    event_from_dict,
)
from leteo_fed.privacy.budget import Balance, Budget, check_delta, check_epsilon

LEDGER_FORMAT = "leteo-fed-privacy-ledger/1"
REL_SLACK = 1e-12
STATES = ("reserved", "committed", "released", "withdrawn")
NOTHING = Balance(0.0, 0.0)
LEGACY_ACCOUNTANT = "basic"  # a file without "accountant" was written with sequential adds
# what a refusal for budget tells the site's operator to do
BUDGET_COMMANDS = (
    "a site changes its budget with `leteo-fed owner budget set` or renews it with "
    "`leteo-fed owner budget new-period` (docs/owner-config.md, 'Budget periods')"
)


@dataclass(frozen=True)
class Spend:
    """One ledger entry."""

    round_id: str
    mechanism: str
    epsilon: float
    delta: float
    time: str  # when it was charged or reserved (UTC, ISO 8601)
    note: str
    state: str  # "reserved" | "committed" | "released" | "withdrawn"
    settled: str | None = None  # when it was committed or released (None while reserved)
    event: dict[str, Any] | None = None  # its privacy event (`accounting.PrivacyEvent.to_dict`)
    job: str = ""  # the multi-round job it belongs to ("" for a single release)

    @property
    def counted(self) -> bool:
        return self.state in ("reserved", "committed")

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def privacy_event(self) -> PrivacyEvent:
        """Its event; an entry without one is an ApproxEvent of its (epsilon, delta)."""
        if self.event is None:
            return ApproxEvent(self.epsilon, self.delta)
        return event_from_dict(self.event)


@dataclass(frozen=True)
class Period:
    """A budget period: its number (from 1) and when it started (UTC, ISO 8601)."""

    number: int
    started: str

    def age_days(self, now: datetime | None = None) -> float:
        start = datetime.fromisoformat(self.started)
        return ((now or datetime.now(timezone.utc)) - start).total_seconds() / 86400


@dataclass(frozen=True)
class ClosedPeriod:
    """What `new_period` archived: the period, when it ended, what it spent, where it is."""

    period: Period
    ended: str
    spent: Balance
    archive: Path
    reason: str
    accountant: str = LEGACY_ACCOUNTANT  # of the closed period
    next_accountant: str = LEGACY_ACCOUNTANT  # of the period that starts
    totals: Balance | None = None  # (epsilon_total, delta_total) of the closed period
    next_totals: Balance | None = None  # of the period that starts


@dataclass(frozen=True)
class TotalsChange:
    """What `set_totals` changed: the totals before and after, and what was already used."""

    old: Balance
    new: Balance
    used: Balance
    accountant: str


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _check_request(budget: Any) -> Budget:
    """A charge's amount: a Budget whose epsilon is within the cap of a single release."""
    if not isinstance(budget, Budget):
        raise DataError(
            f"a privacy charge takes a Budget(epsilon, delta), got {budget!r}", field="budget"
        )
    check_epsilon(budget.epsilon)
    return budget


def _check_further(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DataError(f"further must be an integer >= 0, got {value!r}", field="further")
    return value


def _check_totals(epsilon_total: Any, delta_total: Any) -> tuple[float, float]:
    try:
        return (
            check_epsilon(epsilon_total, "epsilon_total", capped=False),
            check_delta(delta_total, "delta_total", allow_zero=True),
        )
    except DataError as exc:
        raise ConfigError(str(exc), field=exc.field) from None


def _check_text(value: Any, field: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DataError(f"{field} must be a non-empty string, got {value!r}", field=field)
    return value


class PrivacyLedger:
    """The privacy budget of one dataset at one owner, persisted in a JSON file at `path`.

    Creates the file if absent. If present, its totals must equal `epsilon_total` and
    `delta_total` exactly, else ConfigError naming the mismatch and the command that changes a
    budget (it is never silently changed by a config edit).

    `accountant` ("rdp" or "basic") is the one configured: a new ledger and every new period
    use it; the current period keeps the one its file names (`accountant`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        epsilon_total: float,
        delta_total: float,
        period_days: float | None = None,
        on_new_period: Callable[[ClosedPeriod], None] | None = None,
        accountant: str = "rdp",
    ):
        """`period_days`: start a new budget period once the current one is this old (checked
        when budget is taken); `on_new_period` hears of every period closed (the audit log)."""
        if period_days is not None and not (0 < period_days < math.inf):
            raise ConfigError(
                f"'privacy.period_days' must be a positive number, got {period_days!r}",
                field="privacy.period_days",
            )
        self._period_days = period_days
        self._on_new_period = on_new_period
        self._configured = check_accountant(accountant)
        self._accountant = self._configured  # the current period's (read from the file)
        self._period = Period(1, _now())
        self._revision = -1  # of the totals (`set_totals`); -1 until the file is first read
        # a total is a sum over many releases: not capped (see the module docstring)
        self._eps_total, self._delta_total = _check_totals(epsilon_total, delta_total)
        self._path = Path(path)
        self._lock_path = self._path.with_name(self._path.name + ".lock")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            if self._path.exists():
                self._read()  # validates format and totals
            else:
                self._write([])

    # ---------------------------------------------------------------- properties

    @property
    def path(self) -> Path:
        return self._path

    def _fresh(self) -> None:
        """Re-read the file (totals the budget command changed are taken)."""
        with self._locked():
            self._read()

    @property
    def epsilon_total(self) -> float:
        self._fresh()
        return self._eps_total

    @property
    def delta_total(self) -> float:
        self._fresh()
        return self._delta_total

    @property
    def total(self) -> Balance:
        self._fresh()
        return self._totals()

    def _totals(self) -> Balance:
        return Balance(self._eps_total, self._delta_total)

    @property
    def accountant(self) -> str:
        """The accountant of the current period ("rdp" or "basic")."""
        with self._locked():
            self._read()
            return self._accountant

    @property
    def configured_accountant(self) -> str:
        """The accountant configured: the next period's."""
        return self._configured

    # ---------------------------------------------------------------- file handling

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def _corrupt(self, why: str) -> ConfigError:
        return ConfigError(f"privacy ledger {self._path} is not valid: {why}", field="ledger")

    def _read(self) -> list[Spend]:
        try:
            doc = json.loads(self._path.read_bytes())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise self._corrupt(f"cannot read JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != LEDGER_FORMAT:
            raise self._corrupt(f"expected format {LEDGER_FORMAT!r}")
        revision = doc.get("totals_revision", 0)
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise self._corrupt("'totals_revision' must be an integer >= 0")
        if 0 <= self._revision < revision:
            # `set_totals` (the budget command) changed them since this process opened the
            # ledger: a running agent takes the new totals (the config was changed with them)
            try:
                self._eps_total, self._delta_total = _check_totals(
                    doc.get("epsilon_total"), doc.get("delta_total")
                )
            except ConfigError as exc:
                raise self._corrupt(str(exc)) from None
        self._revision = revision
        for key, mine in (("epsilon_total", self._eps_total), ("delta_total", self._delta_total)):
            stored = doc.get(key)
            if isinstance(stored, bool) or not isinstance(stored, (int, float)):
                raise self._corrupt(f"{key} missing or not a number")
            if float(stored) != mine:
                raise ConfigError(
                    f"privacy ledger {self._path} records {key}={stored!r} but "
                    f"{mine!r} was configured; a budget is not changed by editing the config: "
                    "run `leteo-fed owner budget set --config FILE --epsilon-total E "
                    "[--delta-total D] --reason TEXT` (it updates the ledger and the config "
                    "together, audited), or `leteo-fed owner budget new-period` to renew it",
                    field=key,
                )
        accountant = doc.get("accountant", LEGACY_ACCOUNTANT)
        if accountant not in ("rdp", "basic"):
            raise self._corrupt(f"unknown accountant {accountant!r}")
        self._accountant = accountant
        raw = doc.get("spends")
        if not isinstance(raw, list):
            raise self._corrupt("'spends' must be a list")
        first = raw[0].get("time") if raw and isinstance(raw[0], dict) else None
        # a ledger written before periods existed: one period, since its first spend
        period = doc.get("period", {"number": 1, "started": first or _now()})
        try:
            self._period = Period(int(period["number"]), _check_text(period["started"], "started"))
            datetime.fromisoformat(self._period.started)
        except (KeyError, TypeError, ValueError, DataError) as exc:
            raise self._corrupt(f"'period' must hold a number and a start time ({exc})") from None
        spends, seen = [], set()
        for i, item in enumerate(raw):
            try:
                # a recorded spend is a fact, not a request: validated as a Budget but not
                # capped, so a ledger written under an older, looser cap still loads
                amount = Budget(item["epsilon"], item["delta"])
                s = Spend(
                    round_id=_check_text(item["round_id"], "round_id"),
                    mechanism=_check_text(item["mechanism"], "mechanism"),
                    epsilon=amount.epsilon,
                    delta=amount.delta,
                    time=_check_text(item["time"], "time"),
                    note=_check_text(item.get("note", ""), "note", allow_empty=True),
                    state=item["state"],
                    settled=item.get("settled"),
                    event=item.get("event"),
                    job=_check_text(item.get("job", ""), "job", allow_empty=True),
                )
                if s.event is not None:
                    event_from_dict(s.event)  # validates it
            except (KeyError, TypeError, DataError) as exc:
                raise self._corrupt(f"entry {i}: {exc}") from None
            if s.state not in STATES:
                raise self._corrupt(f"entry {i}: unknown state {s.state!r}")
            if not (s.settled is None or isinstance(s.settled, str)):
                raise self._corrupt(f"entry {i}: 'settled' must be a time string or null")
            if s.round_id in seen:
                raise self._corrupt(f"round id {s.round_id!r} appears twice")
            seen.add(s.round_id)
            spends.append(s)
        return spends

    def _write(self, spends: list[Spend]) -> None:
        doc = {
            "format": LEDGER_FORMAT,
            "epsilon_total": self._eps_total,
            "delta_total": self._delta_total,
            "totals_revision": max(self._revision, 0),
            "accountant": self._accountant,
            "composition": "sequential" if self._accountant == "basic" else "renyi",
            "period": asdict(self._period),
            "spends": [asdict(s) for s in spends],
        }
        data = (json.dumps(doc, indent=2, allow_nan=False) + "\n").encode()
        atomic_write_bytes(self._path, data, mode=0o600)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename itself durable
        finally:
            os.close(dir_fd)

    # ---------------------------------------------------------------- queries

    def _used(self, spends: list[Spend], states: tuple[str, ...]) -> Balance:
        """What the entries in `states` use under the current period's accountant."""
        chosen = [s for s in spends if s.state in states]
        if self._accountant == "basic":
            return Balance(math.fsum(s.epsilon for s in chosen), math.fsum(s.delta for s in chosen))
        return self._rdp_used(chosen)

    def _rdp_used(
        self,
        chosen: list[Spend],
        new: PrivacyEvent | None = None,
        new_basic: Balance = NOTHING,
    ) -> Balance:
        """RDP: the composed epsilon at delta_total and the ApproxEvents' deltas; or, when
        adding the entries' own (epsilon, delta) up is tighter (a few pure-DP LDP releases
        beside curved ones), that sum. Both are valid bounds of the same releases, so the
        smaller one is: the Renyi accountant never counts more than basic composition."""
        events = [s.privacy_event for s in chosen] + ([new] if new is not None else [])
        if not events:
            return Balance(0.0, 0.0)
        fixed = math.fsum(e.count * e.delta for e in events if isinstance(e, ApproxEvent))
        composed = Balance(compose_epsilon(events, self._delta_total), fixed)
        basic = Balance(
            math.fsum([*(s.epsilon for s in chosen), new_basic.epsilon]),
            math.fsum([*(s.delta for s in chosen), new_basic.delta]),
        )
        if (
            basic.delta <= self._delta_total * (1.0 + REL_SLACK)
            and basic.epsilon < composed.epsilon
        ):
            return basic
        return composed

    def spent(self) -> Balance:
        """(epsilon, delta) committed, under the current period's accountant (rdp: the composed
        epsilon at delta_total, and the deltas of releases known only as (epsilon, delta))."""
        with self._locked():
            return self._used(self._read(), ("committed",))

    def reserved(self) -> Balance:
        """(epsilon, delta) reserved by rounds still in flight (rdp: what they add to the
        composition of the committed ones)."""
        with self._locked():
            spends = self._read()
            both = self._used(spends, ("reserved", "committed"))
            done = self._used(spends, ("committed",))
        return Balance(max(both.epsilon - done.epsilon, 0.0), max(both.delta - done.delta, 0.0))

    def remaining(self) -> Balance:
        """(epsilon, delta) still available: total - (committed and reserved, composed under
        the accountant), floored at 0."""
        with self._locked():
            eps, delta = self._used(self._read(), ("reserved", "committed"))
        return Balance(max(self._eps_total - eps, 0.0), max(self._delta_total - delta, 0.0))

    def history(self) -> list[Spend]:
        """Every entry, in the order recorded (released ones included)."""
        with self._locked():
            return self._read()

    def can_afford(
        self,
        budget: Budget,
        event: PrivacyEvent | None = None,
        *,
        job: str = "",
        further: int = 0,
    ) -> bool:
        """Advisory check (a later `charge`/`reserve` re-checks under the lock); a period
        that is due is renewed first, so the answer is about the budget a round would get.
        `further`: that many more identical releases must fit too (a job's later rounds)."""
        return self.shortfall(budget, event, job=job, further=further) is None

    def shortfall(
        self,
        budget: Budget,
        event: PrivacyEvent | None = None,
        *,
        job: str = "",
        further: int = 0,
    ) -> str | None:
        """None if the release (and `further` identical ones) fits; else why not."""
        amount = _check_request(budget)
        further = _check_further(further)
        self.renew_if_due()
        with self._locked():
            return self._overspend(self._read(), amount, event, job, further)

    def renew_if_due(self) -> ClosedPeriod | None:
        """With `period_days`: close the current period if it is that old (and no round is
        in flight); the closed period, or None."""
        if self._period_days is None:
            return None
        with self._locked():
            _, closed = self._roll_if_due(self._read())
        if closed is not None and self._on_new_period is not None:
            self._on_new_period(closed)
        return closed

    # ---------------------------------------------------------------- spending

    def _charge_of(
        self, spends: list[Spend], amount: Budget, event: PrivacyEvent | None, job: str, n: int
    ) -> Balance:
        """What n releases add under basic composition: `amount` each, or for a job's rounds
        with an event, the increment of the job's RDP composition at the job's delta (that
        delta charged by the job's first counted round at this site)."""
        if not job or event is None:
            return Balance(amount.epsilon * n, amount.delta * n)
        prior = [s.privacy_event for s in spends if s.counted and s.job == job]
        before = compose_epsilon(prior, amount.delta) if prior else 0.0
        after = compose_epsilon([*prior, event.times(n)], amount.delta)
        # never 0: an entry's epsilon is a Budget's (a round adds at least the smallest float)
        return Balance(max(after - before, math.ulp(0.0)), 0.0 if prior else amount.delta)

    def _overspend(
        self,
        spends: list[Spend],
        amount: Budget,
        event: PrivacyEvent | None = None,
        job: str = "",
        further: int = 0,
    ) -> str | None:
        n = 1 + further
        what = f" (this and {further} more release(s) of the job)" if further else ""
        if self._accountant == "rdp":
            counted = [s for s in spends if s.counted]
            new = (event if event is not None else approx(amount)).times(n)
            used = self._rdp_used(counted)
            after = self._rdp_used(counted, new, self._charge_of(spends, amount, event, job, n))
            problems = []
            if not after.epsilon <= self._eps_total * (1.0 + REL_SLACK):
                problems.append(
                    f"epsilon {used.epsilon:.6g} used + {after.epsilon - used.epsilon:.6g} "
                    f"requested{what} > total {self._eps_total:.6g} (Renyi composition at "
                    f"delta {self._delta_total:.6g})"
                )
            if after.delta > self._delta_total * (1.0 + REL_SLACK):
                problems.append(
                    f"delta {used.delta:.6g} used + {after.delta - used.delta:.6g} "
                    f"requested > total {self._delta_total:.6g}"
                )
            return "; ".join(problems) or None
        used_eps, used_delta = self._used(spends, ("reserved", "committed"))
        eps, delta = self._charge_of(spends, amount, event, job, n)
        problems = []
        if math.fsum([used_eps, eps]) > self._eps_total * (1.0 + REL_SLACK):
            problems.append(
                f"epsilon {used_eps:.6g} used + {eps:.6g} requested{what} > total "
                f"{self._eps_total:.6g} (basic composition)"
            )
        if math.fsum([used_delta, delta]) > self._delta_total * (1.0 + REL_SLACK):
            problems.append(
                f"delta {used_delta:.6g} used + {delta:.6g} requested > total "
                f"{self._delta_total:.6g}"
            )
        return "; ".join(problems) or None

    # ---------------------------------------------------------------- periods

    def period(self) -> Period:
        with self._locked():
            self._read()
            return self._period

    def new_period(
        self, reason: str = "asked for", totals: tuple[float, float] | None = None
    ) -> ClosedPeriod:
        """Archive this period's ledger read-only beside it and start the next one with
        nothing spent, under the configured accountant and, with `totals`, with those
        (epsilon_total, delta_total). Refused (ProtocolError) while a round holds a
        reservation."""
        new_totals = _check_totals(*totals) if totals is not None else None
        with self._locked():
            closed = self._close_period(self._read(), reason, new_totals)
        if self._on_new_period is not None:
            self._on_new_period(closed)
        return closed

    def set_totals(self, epsilon_total: float, delta_total: float) -> TotalsChange:
        """Raise or lower this period's totals (the `leteo-fed owner budget set` command).
        Refused (BudgetExceeded) below what the counted entries already use under the
        period's accountant: a release that happened cannot be undone."""
        eps, delta = _check_totals(epsilon_total, delta_total)
        with self._locked():
            spends = self._read()
            old, revision = self._totals(), self._revision
            self._eps_total, self._delta_total = eps, delta
            try:
                used = self._used(spends, ("reserved", "committed"))
                if used.epsilon > eps * (1.0 + REL_SLACK) or used.delta > delta * (1.0 + REL_SLACK):
                    raise BudgetExceeded(
                        f"privacy ledger {self._path} already uses epsilon {used.epsilon:.6g}, "
                        f"delta {used.delta:.6g} this period ({self._accountant} accountant): "
                        f"its totals cannot be lowered to epsilon {eps:g}, delta {delta:g}",
                        field="epsilon_total",
                    )
                self._revision = max(self._revision, 0) + 1
                self._write(spends)
            except BaseException:
                self._eps_total, self._delta_total = old
                self._revision = revision
                raise
        return TotalsChange(old, self._totals(), used, self._accountant)

    def _close_period(
        self,
        spends: list[Spend],
        reason: str,
        new_totals: tuple[float, float] | None = None,
    ) -> ClosedPeriod:
        """Under the lock, with the spends just read."""
        busy = [s.round_id for s in spends if s.state == "reserved"]
        if busy:
            raise ProtocolError(
                f"round {busy[0]!r} holds a reservation in {self._path}: a new budget period "
                "starts once it has settled",
                field="round_id",
            )
        period = self._period
        archive = self._path.with_name(f"{self._path.stem}.period-{period.number}.json")
        if archive.exists():
            raise self._corrupt(f"{archive} exists already: period {period.number} was archived")
        atomic_write_bytes(archive, self._path.read_bytes(), mode=0o400)
        ended = _now()
        spent = self._used(spends, ("committed",))
        closed_with, old_totals = self._accountant, self._totals()
        self._period = Period(period.number + 1, ended)
        self._accountant = self._configured
        if new_totals is not None and new_totals != (self._eps_total, self._delta_total):
            self._eps_total, self._delta_total = new_totals
            self._revision = max(self._revision, 0) + 1
        self._write([])
        return ClosedPeriod(
            period,
            ended,
            spent,
            archive,
            reason,
            closed_with,
            self._accountant,
            old_totals,
            self._totals(),
        )

    def _roll_if_due(self, spends: list[Spend]) -> tuple[list[Spend], ClosedPeriod | None]:
        """Under the lock: with `period_days`, a period that old is closed before budget is
        taken (unless a round is in flight: then the next request closes it)."""
        due = self._period_days is not None and self._period.age_days() >= self._period_days
        if not due or any(s.state == "reserved" for s in spends):
            return spends, None
        closed = self._close_period(spends, f"privacy.period_days = {self._period_days:g}")
        return [], closed

    def _add(
        self,
        round_id: str,
        mechanism: str,
        budget: Budget,
        note: str,
        state: str,
        event: PrivacyEvent | None,
        job: str,
        further: int,
    ) -> Spend:
        round_id = _check_text(round_id, "round_id")
        mechanism = _check_text(mechanism, "mechanism")
        note = _check_text(note, "note", allow_empty=True)
        job = _check_text(job, "job", allow_empty=True)
        amount = _check_request(budget)
        further = _check_further(further)
        if event is not None and not isinstance(event, PrivacyEvent):
            raise DataError(f"event must be a PrivacyEvent, got {event!r}", field="event")
        closed = None
        try:
            with self._locked():
                spends, closed = self._roll_if_due(self._read())
                return self._append(
                    spends, round_id, mechanism, amount, note, state, event, job, further
                )
        finally:
            if closed is not None and self._on_new_period is not None:
                self._on_new_period(closed)

    def _append(
        self,
        spends: list[Spend],
        round_id: str,
        mechanism: str,
        amount: Budget,
        note: str,
        state: str,
        event: PrivacyEvent | None = None,
        job: str = "",
        further: int = 0,
    ) -> Spend:
        """Under the lock: the new entry, if the budget allows it."""
        if any(s.round_id == round_id for s in spends):
            raise DuplicateError(
                f"round {round_id!r} already has an entry in privacy ledger {self._path}",
                field="round_id",
            )
        problem = self._overspend(spends, amount, event, job, further)
        if problem:
            raise BudgetExceeded(
                f"privacy budget of {self._path} would be exceeded by round {round_id!r} "
                f"({mechanism}): {problem}; {BUDGET_COMMANDS}",
                field="epsilon" if "epsilon" in problem else "delta",
            )
        now = _now()
        # the entry's epsilon and delta: what it costs under basic composition (the audit
        # trail's figure under either accountant); its event is what the rdp accountant adds
        charged = self._charge_of(spends, amount, event, job, 1)
        spend = Spend(
            round_id=round_id,
            mechanism=mechanism,
            epsilon=charged.epsilon,
            delta=charged.delta,
            time=now,
            note=note,
            state=state,
            settled=now if state == "committed" else None,
            event=event.to_dict() if event is not None else None,
            job=job,
        )
        self._write([*spends, spend])
        return spend

    def charge(
        self,
        round_id: str,
        mechanism: str,
        budget: Budget,
        note: str = "",
        *,
        event: PrivacyEvent | None = None,
        job: str = "",
        further: int = 0,
    ) -> Spend:
        """Record a spend at once (reserve + commit). `budget`: its (epsilon, delta) alone (a
        job's rounds: the job's delta); `event`: its RDP curve (None: an ApproxEvent of
        `budget`); `job`: the multi-round job it is a round of; `further`: that many later
        identical releases must fit as well. Refuses, without writing: an overspend
        (BudgetExceeded), a round id already in the ledger (DuplicateError), an amount that is
        not a Budget or whose epsilon is above EPSILON_MAX (DataError)."""
        return self._add(round_id, mechanism, budget, note, "committed", event, job, further)

    def reserve(
        self,
        round_id: str,
        mechanism: str,
        budget: Budget,
        note: str = "",
        *,
        event: PrivacyEvent | None = None,
        job: str = "",
        further: int = 0,
    ) -> Spend:
        """Hold budget for a round before its noisy share is computed; same checks as charge."""
        return self._add(round_id, mechanism, budget, note, "reserved", event, job, further)

    def _settle(self, round_id: str, new_state: str, from_state: str = "reserved") -> Spend:
        with self._locked():
            spends = self._read()
            i = next((j for j, e in enumerate(spends) if e.round_id == round_id), None)
            if i is None:
                raise NotFoundError(
                    f"round {round_id!r} has no reservation in privacy ledger {self._path}",
                    field="round_id",
                )
            s = spends[i]
            if s.state != from_state:
                raise ProtocolError(
                    f"round {round_id!r} is {s.state}, not {from_state}; it cannot be {new_state}",
                    field="round_id",
                )
            settled = Spend(**{**asdict(s), "state": new_state, "settled": _now()})
            spends[i] = settled
            self._write(spends)
            return settled

    def commit(self, round_id: str) -> Spend:
        """Make a reservation final (the round completed, or its share left the owner)."""
        return self._settle(_check_text(round_id, "round_id"), "committed")

    def release(self, round_id: str, *, share_left_owner: bool) -> Spend:
        """Return a reservation to the budget. Allowed only if the noisy share never left the
        owner (`share_left_owner=False`); otherwise refused (ProtocolError): commit it instead."""
        round_id = _check_text(round_id, "round_id")
        if share_left_owner is not False:
            raise ProtocolError(
                f"round {round_id!r}: a reservation whose noisy share left the owner cannot be "
                "released (the share may have been decrypted); commit it instead",
                field="round_id",
            )
        return self._settle(round_id, "released")

    def withdraw(self, round_id: str) -> Spend:
        """Restore a committed spend. Only for a round the CSP attested it never decrypted and
        closed for good (its `WithdrawRound` answered 'withdrawn'); nothing else may call it."""
        return self._settle(_check_text(round_id, "round_id"), "withdrawn", "committed")


__all__ = [
    "LEDGER_FORMAT",
    "BUDGET_COMMANDS",
    "ClosedPeriod",
    "Period",
    "TotalsChange",
    "REL_SLACK",
    "Balance",
    "Budget",
    "BudgetExceeded",
    "PrivacyLedger",
    "Spend",
]
