"""The aggregator's side of m key holders, any t of whom decrypt (threshold Paillier).

open at every holder -> collect the owners' signed, masked shares -> every holder that opened
the round verifies and sums them itself and returns its partial decryptions of that sum with
one proof -> the aggregator checks each proof against the product of the shares it computed
itself, combines t valid answers into the masked sum's plaintexts -> removes the owners' masks
as with one CSP (`reveal.Revealer.unmask`).

Up to m - t holders may be down or lie: a holder whose answer does not verify is named (in the
log and the round's key-service timings) and left out. Once t valid answers are in, the others
get HOLDER_GRACE_SECONDS (so a late wrong one is still named), then are cancelled.

Projection-only rounds are refused: the combiner, the aggregator, would see the rotated
aggregate, whose rotation it knows.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from gmpy2 import mpz

from aggregator.rounds.reveal import Revealer, Share, rpc_failure, same_contributors, share_stream
from leteo_fed import defaults
from leteo_fed.crypto import threshold
from leteo_fed.crypto.paillier import PublicKey, bytes_to_int
from leteo_fed.crypto.threshold import ThresholdKey
from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import LeteoError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.round_types import ProjectionQuery, ProjectionReply
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import proof_from_proto
from leteo_fed.transport.statements import ciphertext_digest
from leteo_fed.transport.threshold_keys import HolderAnswer, fetch_agreed_key

log = logging.getLogger("leteo.aggregator")

VALID, WRONG, FAILED, CANCELLED = "valid", "wrong", "failed", "cancelled"
MAX_OPEN_ROUNDS = 4096  # rounds opened and not yet revealed that we remember the holders of
NO_PROJECTION = (
    "projection-only rounds cannot run with a threshold key: the aggregator combines the "
    "partial decryptions, so it would see the rotated aggregate, whose rotation it knows. "
    "Run the round with reveal=blinded"
)


@dataclass
class HolderReply:
    """How one holder answered a round's PartialDecrypt, once judged."""

    address: str
    verdict: str  # VALID, WRONG, FAILED or CANCELLED
    index: int = 0  # the index it answered as (or announced with its key); 0: unknown
    reason: str = ""  # why it is wrong, how it failed
    partials: list[int] | None = None  # VALID only
    error: LeteoError | None = None  # FAILED only: a refusal (ProtocolError) or an outage
    timings: dict[str, float] = field(default_factory=dict)

    def who(self) -> str:
        return holder_name(self.address, self.index)


def holder_name(address: str, index: int) -> str:
    return f"key holder {index} at {address}" if index else f"key holder at {address}"


# ---------------------------------------------------------------------- pure parts


def share_product(public: PublicKey, shares: Sequence[Share]) -> list[int]:
    """The homomorphic sum of the shares: their ciphertexts' product mod n^2, coordinate by
    coordinate. Every holder computes it too; their proofs are checked against ours."""
    n2 = mpz(public.n_square)
    product = [mpz(c) for c in shares[0].ciphertexts]
    for share in shares[1:]:
        product = [a * b % n2 for a, b in zip(product, share.ciphertexts, strict=True)]
    return [int(x) for x in product]


def check_reply(
    key: ThresholdKey,
    context: bytes,
    product: Sequence[int],
    shares: Sequence[Share],
    address: str,
    announced: int,
    batches: Sequence[pb.PartialDecryptionBatch],
) -> HolderReply:
    """Judge one holder's complete answer: VALID with its partial decryptions, or WRONG saying
    why. `announced`: the index it gave with its key (0: unknown)."""
    start = time.perf_counter()

    def wrong(index: int, reason: str, timings: dict[str, float] | None = None) -> HolderReply:
        return HolderReply(address, WRONG, index or announced, reason, timings=timings or {})

    if not batches:
        return wrong(0, "it sent no partial decryption")
    indices = {b.index for b in batches}
    index = batches[0].index
    if len(indices) != 1:
        return wrong(0, f"its batches name different holder indices {sorted(indices)}")
    if not 1 <= index <= key.holders:
        return wrong(0, f"it answered as holder {index}, not one of 1..{key.holders}")
    if announced and index != announced:
        return wrong(
            index, f"it answered as holder {index}, but gave its key as holder {announced}"
        )
    last = batches[-1]
    timings = {
        "partial_seconds": last.partial_seconds,
        "prove_seconds": last.prove_seconds,
        "verify_seconds": last.verify_seconds,
        "sum_seconds": last.sum_seconds,
    }
    partials = [bytes_to_int(p) for b in batches for p in b.partials]
    if len(partials) != len(product):
        return wrong(
            index, f"it sent {len(partials)} partial decryptions of {len(product)}", timings
        )
    if not same_contributors(last.contributors, list(shares)):
        return wrong(index, "it summed other shares than the ones sent", timings)
    width = key.public.ciphertext_bytes
    if last.sum_digest and last.sum_digest != ciphertext_digest(product, width):
        return wrong(index, "its sum is not the product of the shares sent", timings)
    ok = threshold.verify(key, index, product, partials, proof_from_proto(last), context)
    timings["check_seconds"] = time.perf_counter() - start
    if not ok:
        return wrong(index, "its proof does not verify: a partial decryption is wrong", timings)
    return HolderReply(address, VALID, index, partials=partials, timings=timings)


def valid_partials(replies: Iterable[HolderReply]) -> dict[int, list[int]]:
    """The verified partial decryptions by holder index (one per index)."""
    out: dict[int, list[int]] = {}
    for reply in replies:
        if reply.verdict == VALID and reply.partials is not None:
            out.setdefault(reply.index, reply.partials)
    return out


def shortfall(round_id: str, replies: Sequence[HolderReply], needed: int) -> LeteoError:
    """The error of a round with fewer than `needed` valid answers, naming every holder's:
    PeerUnavailable when the holders that failed for an outage could have made up the
    difference (the job waits for them and runs the round again), else ProtocolError."""
    valid = valid_partials(replies)
    parts = []
    for verdict, label in ((VALID, "valid"), (WRONG, "wrong"), (FAILED, "failed")):
        named = [r for r in replies if r.verdict == verdict]
        if named:
            said = [
                r.who() + (f" ({r.reason})" if r.reason and verdict != VALID else "") for r in named
            ]
            parts.append(f"{label}: " + ", ".join(said))
    outages = sum(
        1 for r in replies if r.verdict == FAILED and isinstance(r.error, PeerUnavailable)
    )
    message = (
        f"round {round_id} cannot be decrypted: {len(valid)} valid partial decryptions, the key "
        f"needs {needed}; " + "; ".join(parts)
    )
    if len(valid) + outages >= needed:
        return PeerUnavailable(message)
    return ProtocolError(message)


def holder_timings(replies: Sequence[HolderReply], used: Iterable[int]) -> dict[str, float]:
    """The round's key-service timings: each answering holder's own (holder_I_partial_seconds,
    ...), holder_I_rejected = 1 for a wrong one, counts by verdict, and the slowest of the
    holders combined for partial, prove, verify and sum seconds (the critical path)."""
    out: dict[str, float] = {}
    for verdict in (VALID, WRONG, FAILED, CANCELLED):
        out[f"holders_{verdict}"] = float(sum(1 for r in replies if r.verdict == verdict))
    combined_indices = set(used)
    for reply in replies:
        label = str(reply.index) if reply.index else f"at_{reply.address}"
        for name, seconds in reply.timings.items():
            out[f"holder_{label}_{name}"] = seconds
        if reply.verdict == WRONG:
            out[f"holder_{label}_rejected"] = 1.0
    combined = [r for r in replies if r.verdict == VALID and r.index in combined_indices]
    for name in ("partial_seconds", "prove_seconds", "verify_seconds", "sum_seconds"):
        out[name] = max((r.timings.get(name, 0.0) for r in combined), default=0.0)
    return out


# ---------------------------------------------------------------------- the holders, in parallel


def gather(
    addresses: Sequence[str],
    start: Callable[[str], Any],
    check: Callable[[str, list[pb.PartialDecryptionBatch]], HolderReply],
    needed: int,
    grace: float,
) -> list[HolderReply]:
    """Run every holder's call at once (`start(address)`: the streaming call, iterable and
    cancellable) and judge each answer (`check`) in its own thread. Once `needed` distinct
    holders answered validly, wait at most `grace` for the others, then cancel them."""
    finished: queue.Queue[HolderReply] = queue.Queue()
    calls: dict[str, Any] = {}
    lock = threading.Lock()
    stopped = threading.Event()

    def run(address: str) -> None:
        began = time.perf_counter()
        try:
            with lock:
                if stopped.is_set():
                    return
                call = calls[address] = start(address)
            batches = list(call)
        except grpc.RpcError as exc:
            if stopped.is_set():
                return
            error = rpc_failure(exc, "partial decryption", holder_name(address, 0))
            finished.put(HolderReply(address, FAILED, reason=rpc_error_message(exc), error=error))
            return
        except Exception as exc:  # a bug must not leave the round waiting for this holder
            log.exception("partial decryption at %s crashed", address)
            finished.put(HolderReply(address, FAILED, reason=type(exc).__name__))
            return
        try:
            reply = check(address, batches)
        except Exception as exc:  # an answer too malformed to judge is a wrong one
            if not isinstance(exc, LeteoError):
                log.exception("checking the answer of %s failed", address)
            reply = HolderReply(address, WRONG, reason=f"its answer cannot be checked: {exc}")
        reply.timings["round_trip_seconds"] = time.perf_counter() - began
        finished.put(reply)

    for address in addresses:
        threading.Thread(target=run, args=(address,), name=f"holder-{address}", daemon=True).start()
    replies: dict[str, HolderReply] = {}
    valid: set[int] = set()
    until: float | None = None
    while len(replies) < len(addresses):
        wait = None if until is None else max(0.0, until - time.monotonic())
        try:
            reply = finished.get(timeout=wait)
        except queue.Empty:
            break
        replies[reply.address] = reply
        if reply.verdict == VALID:
            valid.add(reply.index)
        if until is None and len(valid) >= needed:
            until = time.monotonic() + grace
    with lock:
        stopped.set()
        for address, call in calls.items():
            if address not in replies:
                call.cancel()
    for address in addresses:
        if address not in replies:
            reason = f"not waited for: {needed} valid answers were in"
            replies[address] = HolderReply(address, CANCELLED, reason=reason)
    return [replies[a] for a in addresses]


class ThresholdSecureSum(Revealer):
    """The aggregator's side of the key holders: `SecureSum`'s interface, the key shared."""

    def __init__(
        self,
        channels: Mapping[str, grpc.Channel],
        transcript: Path | None,
        grace: float = defaults.HOLDER_GRACE_SECONDS,
    ) -> None:
        """`channels`: one per key holder, by address (every holder of the key: its m)."""
        from leteo_fed.proto import leteo_pb2_grpc as pb_grpc

        super().__init__(transcript)
        if len(channels) < 2:
            raise ProtocolError(
                f"a threshold key needs at least 2 key holders, got {len(channels)}"
            )
        self._channels = dict(channels)
        self._stubs = {a: pb_grpc.KeyHolderStub(c) for a, c in self._channels.items()}
        self._grace = grace
        self._keys: dict[str, ThresholdKey] = {}  # agreed keys seen so far, by key id
        # (key, address) -> the index the holder gave with that key, late answers included
        self._indices: dict[tuple[ThresholdKey, str], int] = {}
        self._opened: dict[str, set[str]] = {}  # round id -> holders that opened it

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def check_mode(self, mode: str) -> None:
        super().check_mode(mode)
        if mode == "projection":
            raise ProtocolError(NO_PROJECTION)

    # ------------------------------------------------------------------ the key

    def public_key(self, key_id: str = "") -> PublicKey:
        """The key at least t holders return identically (`threshold_keys`): the current key,
        asked at every round opening, or with `key_id` that key."""
        return self.threshold_key(key_id).public

    def threshold_key(self, key_id: str = "") -> ThresholdKey:
        if key_id:
            with self._lock:
                known = self._keys.get(key_id)
            if known is not None:
                return known
        key, answers = fetch_agreed_key(self._stubs, key_id=key_id, on_answer=self._remember)
        with self._lock:
            key = self._keys.setdefault(key.key_id, key)
        for answer in answers:
            if answer.key is not None and answer.key != key:
                log.warning(
                    "key holder at %s answered another key: %s", answer.address, answer.describe()
                )
        return key

    def _remember(self, answer: HolderAnswer) -> None:
        """A holder's index, by the key it answered (a holder whose key answer came after the
        agreement is named by its index too when it fails)."""
        if answer.key is not None:
            with self._lock:
                self._indices[(answer.key, answer.address)] = answer.index

    # ------------------------------------------------------------------ rounds

    def open(self, round_id: str, key_id: str, n_ciphertexts: int, mode: str) -> None:
        """Open the round at every holder at once; it needs t opened. Once t have, the others
        get the grace period; one that opens later still takes part."""
        self.check_mode(mode)
        key = self.threshold_key(key_id)
        request = pb.CspRoundRequest(
            round_id=round_id, key_id=key_id, n_ciphertexts=n_ciphertexts, mode=mode
        )
        opened: set[str] = set()
        failed: dict[str, LeteoError] = {}
        changed = threading.Condition()
        with self._lock:
            self._opened[round_id] = opened
            while len(self._opened) > MAX_OPEN_ROUNDS:  # rounds that failed before a reveal
                self._opened.pop(next(iter(self._opened)))

        def done(address: str, call: Any) -> None:
            try:
                call.result()
            except grpc.FutureCancelledError:
                return
            except grpc.RpcError as exc:
                error = rpc_failure(exc, "opening the round", holder_name(address, 0))
                with changed:
                    failed[address] = error
                    changed.notify_all()
                return
            with self._lock:  # also late, after the grace: the holder takes part in the reveal
                opened.add(address)
            with changed:
                changed.notify_all()

        for address, stub in self._stubs.items():
            # no wait_for_ready: a holder that is down is one of the m - t the key does without
            call = stub.OpenRound.future(request, timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS)
            call.add_done_callback(lambda c, a=address: done(a, c))
        until: float | None = None
        with changed:
            while len(opened) + len(failed) < len(self._stubs):
                if until is None and len(opened) >= key.threshold:
                    until = time.monotonic() + self._grace
                wait = None if until is None else until - time.monotonic()
                if wait is not None and wait <= 0:
                    break
                changed.wait(wait if wait is not None else 1.0)
            problems = sorted(failed.items())
        with self._lock:
            count = len(opened)
            names = sorted(opened)
        if count >= key.threshold:
            for address, error in problems:
                log.warning(
                    "round %s: key holder at %s did not open it: %s", round_id, address, error
                )
            return
        with self._lock:
            self._opened.pop(round_id, None)
        said = [f"{a}: {e}" for a, e in problems]
        message = (
            f"only {count} of the {len(self._stubs)} key holders opened round {round_id}, the "
            f"key needs {key.threshold}; opened: {', '.join(names) or 'none'}; " + "; ".join(said)
        )
        outages = sum(1 for _, e in problems if isinstance(e, PeerUnavailable))
        if count + outages >= key.threshold:
            raise PeerUnavailable(message)
        raise ProtocolError(message)

    def reveal(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        n_values: int,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> tuple[list[int], dict[str, float]]:
        """Every holder that opened the round sums and partially decrypts; t verified answers
        are combined; we remove the owners' masks: (signed integer totals, the holders'
        timings)."""
        plaintexts, holders = self.decrypt_sum(
            round_id, public.key_id, shares, layout.n_ciphertexts(n_values), timings, invited
        )
        totals = self.unmask(round_id, plaintexts, shares, n_values, layout, timings)
        return totals, holders

    def decrypt_sum(
        self,
        round_id: str,
        key_id: str,
        shares: list[Share],
        n_ciphertexts: int,
        timings: dict[str, float],
        invited: list[str],
    ) -> tuple[list[int], dict[str, float]]:
        """The plaintexts of the shares' sum, from t verified partial decryptions, and the
        holders' timings (`holder_timings`)."""
        key = self.threshold_key(key_id)
        with self._lock:
            holders = sorted(self._opened.pop(round_id, set()))
            announced = {a: self._indices.get((key, a), 0) for a in holders}
        if len(holders) < key.threshold:
            raise ProtocolError(
                f"round {round_id} was opened at {len(holders)} key holders, the key needs "
                f"{key.threshold}"
            )
        start = time.perf_counter()
        product = share_product(key.public, shares)
        timings["product_seconds"] = time.perf_counter() - start
        header = pb.CspRoundRequest(
            round_id=round_id,
            key_id=key.key_id,
            n_ciphertexts=n_ciphertexts,
            invited=sorted(invited),  # each holder checks it against every signed root
        )
        width = key.public.ciphertext_bytes
        context = threshold.proof_context(round_id, key.key_id)

        def call(address: str) -> Any:
            stream = share_stream(pb.DecryptChunk, header, shares, width)
            return self._stubs[address].PartialDecrypt(stream, timeout=defaults.CSP_TIMEOUT_SECONDS)

        def check(address: str, batches: list[pb.PartialDecryptionBatch]) -> HolderReply:
            return check_reply(key, context, product, shares, address, announced[address], batches)

        start = time.perf_counter()
        replies = gather(holders, call, check, key.threshold, self._grace)
        timings["holder_round_trip_seconds"] = time.perf_counter() - start
        for reply in replies:
            reply.index = reply.index or announced[reply.address]  # who failed, by index too
        replies.sort(key=lambda r: (r.index or key.holders + 1, r.address))
        timings["verify_proofs_seconds"] = sum(r.timings.get("check_seconds", 0.0) for r in replies)
        for reply in replies:
            if reply.verdict == WRONG:
                log.warning(
                    "round %s: %s answered wrongly, left out: %s",
                    round_id,
                    reply.who(),
                    reply.reason,
                )
            elif reply.verdict == FAILED:
                log.warning("round %s: %s failed: %s", round_id, reply.who(), reply.reason)
        valid = valid_partials(replies)
        if len(valid) < key.threshold:
            raise shortfall(round_id, replies, key.threshold)
        start = time.perf_counter()
        used = sorted(valid)[: key.threshold]
        plaintexts = threshold.combine(key, {i: valid[i] for i in used})
        timings["combine_seconds"] = time.perf_counter() - start
        return plaintexts, holder_timings(replies, used)

    def project(
        self,
        round_id: str,
        public: PublicKey,
        shares: list[Share],
        query: ProjectionQuery,
        encoding: ShareEncoding,
        layout: SlotLayout,
        timings: dict[str, float],
        invited: list[str],
    ) -> ProjectionReply:
        raise ProtocolError(NO_PROJECTION)
