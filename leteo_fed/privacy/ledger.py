"""Persistent per-owner, per-dataset privacy ledger (docs/dp-release.md, "Accounting").

One JSON file per dataset holds the total epsilon and delta allowed and every spend: round id,
mechanism, epsilon, delta, time (UTC, ISO 8601), a note, and its state. Sequential composition:
spends add up. A request that would overspend is refused with `BudgetExceeded` before anything is
written (the file keeps its bytes).

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
from leteo_fed.privacy.budget import Balance, Budget, check_delta, check_epsilon

LEDGER_FORMAT = "leteo-fed-privacy-ledger/1"
REL_SLACK = 1e-12
STATES = ("reserved", "committed", "released", "withdrawn")


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

    @property
    def counted(self) -> bool:
        return self.state in ("reserved", "committed")

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)


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


def _check_text(value: Any, field: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DataError(f"{field} must be a non-empty string, got {value!r}", field=field)
    return value


class PrivacyLedger:
    """The privacy budget of one dataset at one owner, persisted in a JSON file at `path`.

    Creates the file if absent. If present, its totals must equal `epsilon_total` and
    `delta_total` exactly, else ConfigError naming the mismatch (a budget is never silently
    changed by a config edit).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        epsilon_total: float,
        delta_total: float,
        period_days: float | None = None,
        on_new_period: Callable[[ClosedPeriod], None] | None = None,
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
        self._period = Period(1, _now())
        try:
            # a total is a sum over many releases: not capped (see the module docstring)
            self._eps_total = check_epsilon(epsilon_total, "epsilon_total", capped=False)
            self._delta_total = check_delta(delta_total, "delta_total", allow_zero=True)
        except DataError as exc:
            raise ConfigError(str(exc), field=exc.field) from None
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

    @property
    def epsilon_total(self) -> float:
        return self._eps_total

    @property
    def delta_total(self) -> float:
        return self._delta_total

    @property
    def total(self) -> Balance:
        return Balance(self._eps_total, self._delta_total)

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
        for key, mine in (("epsilon_total", self._eps_total), ("delta_total", self._delta_total)):
            stored = doc.get(key)
            if isinstance(stored, bool) or not isinstance(stored, (int, float)):
                raise self._corrupt(f"{key} missing or not a number")
            if float(stored) != mine:
                raise ConfigError(
                    f"privacy ledger {self._path} records {key}={stored!r} but "
                    f"{mine!r} was configured; a budget cannot be changed on an existing ledger",
                    field=key,
                )
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
                )
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
            "composition": "sequential",
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

    @staticmethod
    def _used(spends: list[Spend], states: tuple[str, ...]) -> Balance:
        chosen = [s for s in spends if s.state in states]
        return Balance(math.fsum(s.epsilon for s in chosen), math.fsum(s.delta for s in chosen))

    def spent(self) -> Balance:
        """(epsilon, delta) committed."""
        with self._locked():
            return self._used(self._read(), ("committed",))

    def reserved(self) -> Balance:
        """(epsilon, delta) reserved by rounds still in flight."""
        with self._locked():
            return self._used(self._read(), ("reserved",))

    def remaining(self) -> Balance:
        """(epsilon, delta) still available: total - committed - reserved, floored at 0."""
        with self._locked():
            eps, delta = self._used(self._read(), ("reserved", "committed"))
        return Balance(max(self._eps_total - eps, 0.0), max(self._delta_total - delta, 0.0))

    def history(self) -> list[Spend]:
        """Every entry, in the order recorded (released ones included)."""
        with self._locked():
            return self._read()

    def can_afford(self, budget: Budget) -> bool:
        """Advisory check (a later `charge`/`reserve` re-checks under the lock); a period
        that is due is renewed first, so the answer is about the budget a round would get."""
        amount = _check_request(budget)
        self.renew_if_due()
        with self._locked():
            return self._overspend(self._read(), amount) is None

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

    def _overspend(self, spends: list[Spend], amount: Budget) -> str | None:
        used_eps, used_delta = self._used(spends, ("reserved", "committed"))
        eps, delta = amount.epsilon, amount.delta
        problems = []
        if math.fsum([used_eps, eps]) > self._eps_total * (1.0 + REL_SLACK):
            problems.append(
                f"epsilon {used_eps:.6g} used + {eps:.6g} requested > total {self._eps_total:.6g}"
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

    def new_period(self, reason: str = "asked for") -> ClosedPeriod:
        """Archive this period's ledger read-only beside it and start the next one with
        nothing spent. Refused (ProtocolError) while a round holds a reservation."""
        with self._locked():
            closed = self._close_period(self._read(), reason)
        if self._on_new_period is not None:
            self._on_new_period(closed)
        return closed

    def _close_period(self, spends: list[Spend], reason: str) -> ClosedPeriod:
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
        self._period = Period(period.number + 1, ended)
        self._write([])
        spent = self._used(spends, ("committed",))
        return ClosedPeriod(period, ended, spent, archive, reason)

    def _roll_if_due(self, spends: list[Spend]) -> tuple[list[Spend], ClosedPeriod | None]:
        """Under the lock: with `period_days`, a period that old is closed before budget is
        taken (unless a round is in flight: then the next request closes it)."""
        due = self._period_days is not None and self._period.age_days() >= self._period_days
        if not due or any(s.state == "reserved" for s in spends):
            return spends, None
        closed = self._close_period(spends, f"privacy.period_days = {self._period_days:g}")
        return [], closed

    def _add(self, round_id: str, mechanism: str, budget: Budget, note: str, state: str) -> Spend:
        round_id = _check_text(round_id, "round_id")
        mechanism = _check_text(mechanism, "mechanism")
        note = _check_text(note, "note", allow_empty=True)
        amount = _check_request(budget)
        closed = None
        try:
            with self._locked():
                spends, closed = self._roll_if_due(self._read())
                return self._append(spends, round_id, mechanism, amount, note, state)
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
    ) -> Spend:
        """Under the lock: the new entry, if the budget allows it."""
        if any(s.round_id == round_id for s in spends):
            raise DuplicateError(
                f"round {round_id!r} already has an entry in privacy ledger {self._path}",
                field="round_id",
            )
        problem = self._overspend(spends, amount)
        if problem:
            raise BudgetExceeded(
                f"privacy budget of {self._path} would be exceeded by round {round_id!r} "
                f"({mechanism}): {problem}",
                field="epsilon" if "epsilon" in problem else "delta",
            )
        now = _now()
        spend = Spend(
            round_id=round_id,
            mechanism=mechanism,
            epsilon=amount.epsilon,
            delta=amount.delta,
            time=now,
            note=note,
            state=state,
            settled=now if state == "committed" else None,
        )
        self._write([*spends, spend])
        return spend

    def charge(self, round_id: str, mechanism: str, budget: Budget, note: str = "") -> Spend:
        """Record a spend at once (reserve + commit). Refuses, without writing: an overspend
        (BudgetExceeded), a round id already in the ledger (DuplicateError), an amount that is
        not a Budget or whose epsilon is above EPSILON_MAX (DataError)."""
        return self._add(round_id, mechanism, budget, note, "committed")

    def reserve(self, round_id: str, mechanism: str, budget: Budget, note: str = "") -> Spend:
        """Hold budget for a round before its noisy share is computed; same checks as charge."""
        return self._add(round_id, mechanism, budget, note, "reserved")

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
    "ClosedPeriod",
    "Period",
    "REL_SLACK",
    "Balance",
    "Budget",
    "BudgetExceeded",
    "PrivacyLedger",
    "Spend",
]
