"""Budget back for a share that was charged but never revealed.

Once a DP share leaves the site its charge is committed: the site cannot know whether the sum
holding it was decrypted. The key's custody can (`owner_agent.key_custody`: the CSP, or enough of
a threshold key's holders). When a round this site paid for ends without a result (the
aggregator publishes a failure, or nothing arrives well after the deadline), the owner asks it
to close the round for good. If it attests the share can never be decrypted (the round was
refused, never reached, or decrypted without this share), nothing of the share was ever
revealed and the charge is withdrawn; otherwise the charge stays.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from leteo_fed import defaults
from leteo_fed.errors import NotFoundError
from leteo_fed.privacy.ledger import PrivacyLedger
from owner_agent.audit import AuditLog
from owner_agent.key_custody import GIVEN_BACK, KeyCustody

log = logging.getLogger("leteo.owner")


class Withdrawals:
    def __init__(
        self,
        ledger: PrivacyLedger | None,
        custody: KeyCustody,
        audit: AuditLog,
        on_withdrawn: Callable[[str], None] | None = None,
    ) -> None:
        self._ledger = ledger
        self._custody = custody  # the CSP, or the key holders
        self._audit = audit
        self._on_withdrawn = on_withdrawn  # e.g. the analyst's request gets the budget back
        self._timers: dict[str, threading.Timer] = {}
        self._lock = threading.Lock()

    def _charged(self, round_id: str) -> bool:
        if self._ledger is None:
            return False
        return any(
            s.round_id == round_id and s.state == "committed" for s in self._ledger.history()
        )

    def watch(self, round_id: str, deadline_unix: float, now: float | None = None) -> None:
        """After sending a charged share: if no result has come by the time the aggregator must
        have decrypted (deadline + CSP timeout + grace), close the round at the key's custody."""
        if not self._charged(round_id):
            return
        due = deadline_unix + defaults.CSP_TIMEOUT_SECONDS + defaults.WITHDRAW_GRACE_SECONDS
        timer = threading.Timer(max(0.0, due - (now or time.time())), self.withdraw)
        timer.args = (round_id, "no result arrived after the round's deadline")
        timer.daemon = True
        with self._lock:
            self._timers[round_id] = timer
        timer.start()

    def result(self, round_id: str, state: str, wait: bool = False, included: bool = True) -> None:
        """The aggregator published the round's end: a failure, or a result this site's share
        is not part of (`included` False: it is not among the owners summed), triggers the
        withdrawal now (before returning if `wait`: the next invitation then sees the budget
        back). The key custody's word decides, never the aggregator's."""
        with self._lock:
            timer = self._timers.pop(round_id, None)
        if timer is not None:
            timer.cancel()
        if (state != "COMPLETED" or not included) and self._charged(round_id):
            how = state.lower() or "without a result"
            how += "" if included else " without this site's share"
            args = (round_id, f"the round ended {how}")
            if wait:
                self.withdraw(*args)
                return
            threading.Thread(
                target=self.withdraw, args=args, name=f"withdraw-{round_id}", daemon=True
            ).start()

    def release_stale(self) -> list[str]:
        """At start-up, before any invitation is taken: a reservation left by an earlier run
        of this agent was never committed, so its share never started to leave the site (the
        charge is committed before the upload begins): it goes back to the budget, and the
        audit log says so. Returns the rounds released."""
        if self._ledger is None:
            return []
        stale = [s for s in self._ledger.history() if s.state == "reserved"]
        for spend in stale:
            self._ledger.release(spend.round_id, share_left_owner=False)
            self._audit.record(
                "failed",
                spend.round_id,
                reason="the agent stopped before the share left the site; the reserved charge "
                f"(epsilon {spend.epsilon:g}) went back to the budget",
                released=True,
            )
            log.info("round %s: reserved charge released at start-up", spend.round_id)
        return [s.round_id for s in stale]

    def reconcile(self, events: list[dict[str, Any]], now: float | None = None) -> None:
        """At start-up: every charge of an earlier run of this agent that is committed in the
        ledger but never met a completed result (sent, or whose upload broke off, or whose
        process died between the commit and the `sent` record) is watched again (its timer
        died with the process), or asked about now if its time is up: the ledger, not the
        audit log, says what was charged; the audit log says when each round's deadline was."""
        deadlines: dict[str, float] = {}
        finished: set[str] = set()
        for e in events:
            kind, round_id = e.get("event"), e.get("round_id", "")
            if kind == "invitation" and e.get("deadline_unix") is not None:
                deadlines[round_id] = float(e["deadline_unix"])
            elif kind == "withdrawn" or (
                kind == "result" and e.get("state") == "COMPLETED" and e.get("included", True)
            ):
                finished.add(round_id)
        if self._ledger is None:
            return
        committed = {s.round_id for s in self._ledger.history() if s.state == "committed"}
        for round_id in sorted(committed - finished):
            # no deadline on record: the round is long over or never was; ask the CSP now
            self.watch(round_id, deadlines.get(round_id, 0.0), now)

    def withdraw(self, round_id: str, why: str) -> str:
        """Ask the key's custody to close the round; withdraw the charge if it attests the
        share can never be decrypted."""
        with self._lock:
            self._timers.pop(round_id, None)
        if self._ledger is None or not self._charged(round_id):
            return ""
        attestation = self._custody.withdraw(round_id)
        if attestation.state not in GIVEN_BACK:
            if attestation.state:
                log.info("round %s: %s; the charge stays", round_id, attestation.says)
            return attestation.state
        try:
            spend = self._ledger.withdraw(round_id)
        except NotFoundError:  # its budget period was closed meanwhile: nothing to give back
            log.info("round %s: charged in an earlier budget period; nothing to withdraw", round_id)
            return attestation.state
        if self._on_withdrawn is not None:
            self._on_withdrawn(round_id)
        self._audit.record(
            "withdrawn",
            round_id,
            epsilon=spend.epsilon,
            delta=spend.delta,
            reason=f"{why}; {attestation.says}",
        )
        log.info(
            "round %s: charge of epsilon %g withdrawn (%s)",
            round_id,
            spend.epsilon,
            attestation.says,
        )
        return attestation.state
