"""The CSP's decrypt-once record survives a restart, and is private to the CSP."""

from __future__ import annotations

import stat

import pytest

from csp.decrypt_log import DecryptLog
from leteo_fed.errors import DuplicateError


def test_a_round_is_claimed_once_even_after_a_restart(tmp_path) -> None:
    path = tmp_path / "decrypted-rounds.jsonl"
    log = DecryptLog(path)
    log.claim("pca-1", "blinded")
    assert "pca-1" in log
    with pytest.raises(DuplicateError, match="already decrypted"):
        log.claim("pca-1", "blinded")
    restarted = DecryptLog(path)  # a new process reading the same file
    assert "pca-1" in restarted and "pca-2" not in restarted
    with pytest.raises(DuplicateError):
        restarted.claim("pca-1", "projection")
    restarted.claim("pca-2", "projection")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(path.read_text().splitlines()) == 2


def test_without_a_state_dir_the_record_is_in_memory(tmp_path) -> None:
    log = DecryptLog(None)
    log.claim("r", "blinded")
    with pytest.raises(DuplicateError):
        log.claim("r", "blinded")


def test_outcomes_and_withdrawals_survive_a_restart(tmp_path) -> None:
    path = tmp_path / "decrypted-rounds.jsonl"
    log = DecryptLog(path)
    log.claim("ok", "blinded")
    log.settle("ok", decrypted=True)
    log.claim("bad", "blinded")
    log.settle("bad", decrypted=False, reason="quorum")
    assert log.withdraw("ok", "site-1") == "decrypted"  # no budget back for a decrypted round
    assert log.withdraw("bad", "site-1") == "withdrawn"  # refused: never decrypted
    assert log.withdraw("never-seen", "site-2") == "withdrawn"  # closed before it was opened
    log.claim("running", "blinded")
    assert log.withdraw("running", "site-1") == "claimed"  # a decryption may be under way
    log.claim("two", "blinded")
    log.settle("two", decrypted=True, contributors=["site-1", "site-2"])
    assert log.withdraw("two", "site-1") == "decrypted"  # its share was summed
    assert log.withdraw("two", "site-3") == "not_included"  # decrypted without it: budget back
    again = DecryptLog(path)
    assert again.withdraw("two", "site-3") == "not_included"  # the signers are on disk
    assert again.state("ok") == "decrypted" and again.state("bad") == "refused"
    assert again.state("never-seen") == "withdrawn" and again.state("running") == "claimed"
    with pytest.raises(DuplicateError):  # a withdrawn round can never be decrypted
        again.claim("never-seen", "blinded")
