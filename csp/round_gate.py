"""What the CSP and every key holder check before they open anything, written once.

A round is announced by the aggregator (`open_round`: its key, its ciphertext count, its mode),
claimed at most once, durably, before anything of it is decrypted (`claim`: the decrypt-once
log), and its shares are verified and summed by this party itself (`verified_sum`: each owner's
signed statement, the invited set, the quorum, each share's digest); an owner may close a round
that was never opened here (`withdraw_round`). The CSP then decrypts the sum (csp/service.py);
a key holder partially decrypts it and proves it did so with its real share (csp/keyholder.py).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Generic

from csp.decrypt_log import FILE_NAME as DECRYPT_LOG
from csp.decrypt_log import DecryptLog
from csp.keys import Held, Ring
from csp.share_stream import read_and_sum
from csp.share_sum import summer_for
from leteo_fed.crypto.parallel import TaskPool
from leteo_fed.errors import DuplicateError, NotFoundError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.metrics import CspMetrics
from leteo_fed.transport.statements import RoundShares

log = logging.getLogger("leteo.csp")

MAX_CIPHERTEXTS_PER_ROUND = 1_000_000


@dataclass
class OpenedRound:
    n_ciphertexts: int  # per share
    opened_at: float
    mode: str = "blinded"
    used: bool = False
    key_id: str = ""  # the key the round was opened with: its shares are under it to the end


@dataclass
class Summed(Generic[Held]):
    """This party's own homomorphic sum of one round's verified shares."""

    ciphertexts: list[int]
    contributors: list[str]
    verify_seconds: float
    sum_seconds: float
    key: Held  # the round's key (or key share), which opens the sum


class RoundGate(Generic[Held]):
    """Rounds announced, claimed once, their shares verified and summed: the common part of
    the CSP's and a key holder's service."""

    modes: tuple[str, ...] = ("blinded",)
    party = "CSP"  # in messages: "the CSP decrypts once", "never opened at this key holder"

    def __init__(
        self,
        keys: Ring[Held],
        owners_ca: bytes | None,
        state_dir: Path | None,
        spark_threshold: int,
    ) -> None:
        self._keys: Ring[Held] = keys
        self._rounds: dict[str, OpenedRound] = {}
        self._lock = threading.Lock()
        self._owners_ca = owners_ca  # None only in insecure mode
        self._decrypted = DecryptLog(state_dir / DECRYPT_LOG if state_dir is not None else None)
        self.metrics = CspMetrics()
        # checking and multiplying large rounds' shares on every core (csp/share_sum.py); the
        # workers hold no key, they see what the aggregator relays anyway
        self._summing = TaskPool()
        self._spark_threshold = spark_threshold  # ciphertexts in a round from which Spark sums

    def close(self) -> None:
        self._keys.close()
        self._summing.close()

    def open_round(self, request: pb.CspRoundRequest, caller: str) -> pb.Ack:
        """Announce a round: its key (one this party still holds), ciphertexts per share and
        mode; refused if the round was ever used here."""
        try:  # any key still held: the current one, or an older one not yet retired
            self._keys.held(request.key_id)
        except NotFoundError as exc:
            raise NotFoundError(f"round {request.round_id}: {exc}") from exc
        if not request.round_id:
            raise ProtocolError("round_id is empty")
        if not 0 < request.n_ciphertexts <= MAX_CIPHERTEXTS_PER_ROUND:
            raise ProtocolError(f"n_ciphertexts must be in 1..{MAX_CIPHERTEXTS_PER_ROUND}")
        mode = request.mode or "blinded"
        if mode not in self.modes:
            raise ProtocolError(self.unknown_mode(mode))
        used = self._decrypted.state(request.round_id)
        if used is not None:
            raise DuplicateError(f"round {request.round_id} was already used here ({used})")
        with self._lock:
            if request.round_id in self._rounds:
                raise DuplicateError(f"round {request.round_id} is already open")
            self._rounds[request.round_id] = OpenedRound(
                request.n_ciphertexts, time.time(), mode, key_id=request.key_id
            )
        self.metrics.opened(mode)
        log.info(
            "round %s opened by %s: %d ciphertexts per share, key %s",
            request.round_id,
            caller,
            request.n_ciphertexts,
            request.key_id,
        )
        return pb.Ack(ok=True)

    def unknown_mode(self, mode: str) -> str:
        return f"unknown round mode {mode!r}; expected one of {self.modes}"

    def claim(self, round_id: str, mode: str, key_id: str | None = None) -> OpenedRound:
        """The round, marked used durably before anything of it is opened: no second request
        (nor a restart) can open it again."""
        with self._lock:
            entry = self._rounds.get(round_id)
            if entry is None:
                raise NotFoundError(f"round {round_id} was never opened at this {self.party}")
            if entry.mode != mode:
                raise ProtocolError(f"round {round_id} was opened for {entry.mode}, not {mode}")
            if key_id is not None and key_id != entry.key_id:
                raise ProtocolError(
                    f"round {round_id} was opened with key {entry.key_id}, not {key_id or '(none)'}"
                )
            if entry.used:
                raise DuplicateError(
                    f"round {round_id} was already decrypted; the {self.party} decrypts once"
                )
            entry.used = True  # claimed before decrypting: no second request can race in
        self._decrypted.claim(round_id, mode)
        return entry

    def verified_sum(
        self, round_id: str, entry: OpenedRound, request_iterator, invited: list[str]
    ) -> Summed[Held]:
        """The sum of a claimed round's verified shares; a refusal is recorded as final (the
        round was never decrypted and never will be), so its owners may restore their budget.
        `invited` comes from the aggregator: it must be the sorted, distinct set whose Merkle
        root every statement signed."""
        try:
            key = self._keys.held(entry.key_id)  # refused here (and settled) if retired since
            public = key.public
            width, n = public.ciphertext_bytes, entry.n_ciphertexts
            shares = RoundShares(round_id, public.key_id, n, entry.mode, list(invited))
            summer = summer_for(
                public.n, width, n * len(invited), self._summing, self._spark_threshold, round_id
            )
            try:
                summed = read_and_sum(round_id, request_iterator, shares, summer, self._owners_ca)
            finally:
                summer.close()
        except Exception as exc:
            self._decrypted.settle(round_id, decrypted=False, reason=str(exc))
            self.metrics.refused(exc)
            raise
        return Summed(
            summed.ciphertexts, summed.contributors, summed.verify_seconds, summed.sum_seconds, key
        )

    def settle_opened(self, round_id: str, contributors: list[str]) -> None:
        """Recorded once the round's sum was opened (decrypted or partially decrypted)."""
        self._decrypted.settle(round_id, decrypted=True, contributors=contributors)

    def withdraw_round(self, request: pb.WithdrawRequest, caller: str) -> pb.WithdrawReply:
        if not request.round_id:
            raise ProtocolError("round_id is empty")
        state = self._decrypted.withdraw(request.round_id, caller)
        log.info("round %s: withdrawal asked by %s: %s", request.round_id, caller, state)
        return pb.WithdrawReply(round_id=request.round_id, state=state)
