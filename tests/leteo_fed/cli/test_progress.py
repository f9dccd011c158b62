"""The analyst's live progress: one line per change in a log, declines once with their rule."""

from __future__ import annotations

import io

from leteo_fed.cli.progress import ProgressPrinter, describe
from leteo_fed.proto import leteo_pb2 as pb


def _status(submitted: list[str], declined: dict[str, str], phase: str = "collecting"):
    status = pb.RoundStatus(round_id="kmeans-abc", protocol="kmeans", state="OPEN")
    status.message = "iteration 3 of 10 open (kmeans-abc-it3)"
    status.progress.CopyFrom(
        pb.JobProgress(
            round_id="kmeans-abc-it3",
            round=3,
            rounds=10,
            phase=phase,
            invited=["s1", "s2", "s3"],
            accepted=["s1", "s2"],
            declined=declined,
            submitted=submitted,
            quorum=2,
            previous="iteration 2 of 10 done with 3 owner(s); max center shift 0.25",
        )
    )
    return status


def test_a_line_says_round_phase_owners_and_shares_versus_quorum():
    line = describe(_status(["s1"], {}))
    assert line.startswith("kmeans-abc round 3 of 10 collecting")
    assert "owners 2/3 accepted, 0 declined" in line and "shares 1/2 needed" in line
    assert "max center shift 0.25" in line  # how the previous iteration ended


def test_in_a_log_each_change_is_one_line_and_each_decline_is_told_once():
    out = io.StringIO()
    printer = ProgressPrinter(out)
    rule = "policy.columns: column 'x' may not be used"
    for status in (
        _status([], {}),
        _status([], {}),  # nothing changed: no new line
        _status(["s1"], {"s3": rule}),
        _status(["s1", "s2"], {"s3": rule}, phase="decrypting"),
    ):
        printer.tick(status)
    printer.done()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4, lines
    assert sum(f"s3 declined: {rule}" in line for line in lines) == 1
    assert "decrypting" in lines[-1] and "shares 2/2" in lines[-1]
