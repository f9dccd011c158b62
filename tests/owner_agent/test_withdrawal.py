"""An owner withdraws a DP charge only on the CSP's word that the round was never decrypted.

The ledger and the audit log are real files; the CSP stub is a stand-in for this one function's
unit test (the end-to-end path runs in tests/integration/test_malicious_aggregator.py)."""

from __future__ import annotations

import json
import time

import grpc
import pytest

from leteo_fed.errors import ProtocolError
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import PrivacyLedger
from leteo_fed.proto import leteo_pb2 as pb
from owner_agent.audit import AuditLog
from owner_agent.key_custody import SingleCsp
from owner_agent.withdrawal import Withdrawals

CSP = "csp:50051"


class Csp:
    def __init__(self, state: str = "withdrawn", fail: bool = False) -> None:
        self.state, self.fail, self.asked = state, fail, []

    def WithdrawRound(self, request, timeout):
        self.asked.append(request.round_id)
        if self.fail:
            raise grpc.RpcError("unreachable")
        return pb.WithdrawReply(round_id=request.round_id, state=self.state)


@pytest.fixture
def parts(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.json", 3.0, 1e-4)
    ledger.reserve("r1", "skellam", Budget(1.0, 1e-6))
    ledger.commit("r1")
    return ledger, AuditLog(tmp_path / "audit.jsonl", "site-1"), tmp_path


def state(ledger: PrivacyLedger, round_id: str) -> str:
    return next(s.state for s in ledger.history() if s.round_id == round_id)


def test_withdrawn_only_on_the_csps_word(parts) -> None:
    ledger, audit, tmp = parts
    assert (
        Withdrawals(ledger, SingleCsp(Csp("decrypted"), CSP), audit).withdraw("r1", "failed")
        == "decrypted"
    )
    assert state(ledger, "r1") == "committed"
    assert Withdrawals(ledger, SingleCsp(Csp(fail=True), CSP), audit).withdraw("r1", "failed") == ""
    assert state(ledger, "r1") == "committed"
    assert (
        Withdrawals(ledger, SingleCsp(Csp("withdrawn"), CSP), audit).withdraw("r1", "failed")
        == "withdrawn"
    )
    assert state(ledger, "r1") == "withdrawn"
    assert ledger.remaining().epsilon == pytest.approx(3.0)
    events = [json.loads(x) for x in (tmp / "audit.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["withdrawn"]
    # a second withdrawal (or one of a round never charged) asks nothing and changes nothing
    csp = Csp("withdrawn")
    assert Withdrawals(ledger, SingleCsp(csp, CSP), audit).withdraw("r1", "again") == ""
    assert Withdrawals(ledger, SingleCsp(csp, CSP), audit).withdraw("r9", "unknown") == ""
    assert csp.asked == []
    with pytest.raises(ProtocolError):  # the ledger itself refuses a non-committed withdrawal
        ledger.withdraw("r1")


def test_a_published_success_cancels_and_a_failure_withdraws(parts) -> None:
    ledger, audit, _ = parts
    csp = Csp("withdrawn")
    w = Withdrawals(ledger, SingleCsp(csp, CSP), audit)
    w.watch("r1", deadline_unix=time.time() + 3600)  # far away: only the result matters
    w.result("r1", "COMPLETED")
    time.sleep(0.2)
    assert csp.asked == [] and state(ledger, "r1") == "committed"
    w.result("r1", "FAILED")
    end = time.monotonic() + 5
    while state(ledger, "r1") != "withdrawn":
        assert time.monotonic() < end
        time.sleep(0.02)
    assert csp.asked == ["r1"]


def test_a_restarted_owner_asks_about_charged_rounds_left_without_a_result(parts) -> None:
    """The audit log of an earlier run: r1 charged and sent, deadline long past, no result.
    A new agent (new Withdrawals) asks the CSP at once and gets the charge back; a round with
    a COMPLETED result, or already withdrawn, is left alone."""
    ledger, audit, _ = parts
    for rid in ("r2", "r3"):
        ledger.reserve(rid, "skellam", Budget(0.5, 1e-6))
        ledger.commit(rid)
    past = time.time() - 10_000  # deadline + CSP timeout + grace are all behind us
    events = []
    for rid in ("r1", "r2", "r3"):
        events += [
            {"event": "invitation", "round_id": rid, "deadline_unix": past},
            {"event": "sent", "round_id": rid, "epsilon": 0.5},
        ]
    events.append({"event": "result", "round_id": "r2", "state": "COMPLETED"})
    csp = Csp("withdrawn")
    Withdrawals(ledger, SingleCsp(csp, CSP), audit).reconcile(events)
    end = time.monotonic() + 5
    while state(ledger, "r1") != "withdrawn" or state(ledger, "r3") != "withdrawn":
        assert time.monotonic() < end, csp.asked
        time.sleep(0.02)
    assert sorted(csp.asked) == ["r1", "r3"] and state(ledger, "r2") == "committed"


def test_a_restart_gives_back_a_reservation_whose_share_never_left(tmp_path) -> None:
    """The agent died between reserving a DP round's charge and committing it (the commit
    comes before any byte leaves): at the next start the reservation goes back to the budget,
    the audit log records it, and the analyst's request gets its budget back too."""
    from owner_agent.audit import read
    from owner_agent.authorization import SignedRequests

    ledger = PrivacyLedger(tmp_path / "ledger.json", 3.0, 1e-4)
    audit = AuditLog(tmp_path / "audit.jsonl", "site-1")
    audit.record("invitation", "r9", request_digest="d", job_id="r9", epsilon=1.0, delta=1e-6)
    audit.record("decision", "r9", accepted=True)
    ledger.reserve("r9", "skellam", Budget(1.0, 1e-6))
    assert ledger.remaining().epsilon == 2.0
    before = SignedRequests(read(audit.path))
    assert before.taken("d")[0] == 1.0  # the request's budget counted the round
    released = Withdrawals(ledger, SingleCsp(Csp(), CSP), audit).release_stale()
    assert released == ["r9"] and state(ledger, "r9") == "released"
    assert ledger.remaining().epsilon == 3.0
    events = read(audit.path)
    assert events[-1]["event"] == "failed" and events[-1]["released"] is True
    assert SignedRequests(events).taken("d")[0] == 0.0  # rebuilt from the log: given back


def test_a_charge_committed_without_a_sent_record_is_asked_about(parts) -> None:
    """The agent died between committing the charge and recording `sent` (or its upload broke
    off): the ledger, not the audit log, says what was charged; the CSP is asked."""
    ledger, audit, _ = parts  # r1 committed, nothing in the audit log
    csp = Csp("withdrawn")
    Withdrawals(ledger, SingleCsp(csp, CSP), audit).reconcile([], now=time.time())
    end = time.monotonic() + 5
    while state(ledger, "r1") != "withdrawn":
        assert time.monotonic() < end, csp.asked
        time.sleep(0.02)
    assert csp.asked == ["r1"]


def test_a_completed_round_without_this_sites_share_gives_the_charge_back(parts) -> None:
    """The share arrived too late, or the aggregator summed others: the published result does
    not list this site; the CSP, which recorded the decrypted round's signers, confirms it and
    the charge comes back. A result that lists the site keeps it."""
    ledger, audit, _ = parts
    Withdrawals(ledger, SingleCsp(Csp("not_included"), CSP), audit).result(
        "r1", "COMPLETED", wait=True, included=False
    )
    assert state(ledger, "r1") == "withdrawn"
    ledger.reserve("r2", "skellam", Budget(0.5, 1e-6))
    ledger.commit("r2")
    csp = Csp("not_included")
    Withdrawals(ledger, SingleCsp(csp, CSP), audit).result(
        "r2", "COMPLETED", wait=True, included=True
    )
    assert state(ledger, "r2") == "committed" and csp.asked == []
