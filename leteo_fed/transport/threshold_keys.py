"""Which threshold key m key holders agree on: the rule, and asking them all at once.

Every holder answers GetPublicKey with the threshold key and its own index. A key is taken only
when at least t holders return the identical key (modulus, t, m, v and every verification key).
The caller pins m, the number of holders it lists, and may pin t (an owner's data protection
officer does). As t > m / 2, no second key can gather t answers: fewer than t colluding holders
can neither pass off a key of their own nor one shared among themselves alone.

`agreed_key` and `require_agreed_key` are the rule, pure; `fetch_agreed_key` asks every holder
in parallel and stops as soon as the rule is met (a holder that is down delays nothing then).
"""

from __future__ import annotations

import hashlib
import queue
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from leteo_fed import defaults
from leteo_fed.crypto.threshold import ThresholdKey
from leteo_fed.errors import LeteoError, PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import threshold_key_from_proto

_KEY_ID = re.compile(r"[0-9a-f]{32}")  # paillier.key_id_of


@dataclass(frozen=True)
class HolderAnswer:
    """One holder's answer to GetPublicKey: its key and index, or why there is none."""

    address: str
    key: ThresholdKey | None = None
    index: int = 0
    problem: str = ""  # unreachable, refused, or an answer that is no threshold key

    def describe(self) -> str:
        if self.key is None:
            return f"{self.address}: {self.problem or 'no answer'}"
        return f"{self.address}: {describe_key(self.key)} as holder {self.index}"


def fingerprint(key: ThresholdKey) -> str:
    """A short digest of the whole threshold key: two keys with one modulus but other
    verification keys have the same key id and different fingerprints."""
    digest = hashlib.sha256(f"{key.public.n}|{key.threshold}|{key.holders}|{key.v}".encode())
    for value in key.verification:
        digest.update(f"|{value}".encode())
    return digest.hexdigest()[:12]


def describe_key(key: ThresholdKey) -> str:
    return f"key {key.key_id} ({key.threshold} of {key.holders}, fingerprint {fingerprint(key)})"


def _fits(key: ThresholdKey, holders: int, threshold: int | None, key_id: str) -> bool:
    return (
        key.holders == holders
        and (threshold is None or key.threshold == threshold)
        and (not key_id or key.key_id == key_id)
    )


def agreed_key(
    answers: Sequence[HolderAnswer], holders: int, threshold: int | None = None, key_id: str = ""
) -> ThresholdKey | None:
    """The key at least t of `answers` return identically, with m = `holders` (and t =
    `threshold`, the key `key_id`, when given); None while no key has that many."""
    groups: dict[ThresholdKey, set[str]] = {}
    for answer in answers:
        if answer.key is not None and _fits(answer.key, holders, threshold, key_id):
            groups.setdefault(answer.key, set()).add(answer.address)
    for key, addresses in groups.items():
        if len(addresses) >= key.threshold:
            return key
    return None


def require_agreed_key(
    answers: Sequence[HolderAnswer],
    holders: int,
    threshold: int | None = None,
    key_id: str = "",
    unanswered: Sequence[str] = (),
) -> ThresholdKey:
    """`agreed_key`, or an error naming what every holder answered: PeerUnavailable when the
    holders that did not answer (`unanswered` and answers with a problem) could still make up
    the agreement, ProtocolError when they could not (the holders disagree)."""
    key = agreed_key(answers, holders, threshold, key_id)
    if key is not None:
        return key
    fitting = [a for a in answers if a.key is not None and _fits(a.key, holders, threshold, key_id)]
    needed = threshold or max((a.key.threshold for a in fitting if a.key), default=holders // 2 + 1)
    counts: dict[ThresholdKey, int] = {}
    for a in fitting:
        if a.key is not None:
            counts[a.key] = counts.get(a.key, 0) + 1
    best = max(counts.values(), default=0)
    silent = len(unanswered) + sum(1 for a in answers if a.key is None)
    which = f"threshold key {key_id}" if key_id else "threshold key"
    pinned = f"{threshold} of {holders}" if threshold else f"any t of {holders}"
    said = [a.describe() for a in answers] + [f"{address}: no answer" for address in unanswered]
    message = (
        f"no {which} ({pinned}) is returned identically by {needed} of the {holders} key "
        f"holders (at most {best} agree): " + "; ".join(said)
    )
    if best + silent >= needed:
        raise PeerUnavailable(message)
    raise ProtocolError(message)


def answer_of(address: str, call: Any) -> HolderAnswer:
    """A finished GetPublicKey call (a grpc.Future) as an answer; never raises."""
    try:
        key, index = threshold_key_from_proto(call.result())
    except grpc.FutureCancelledError:
        return HolderAnswer(address, problem="not waited for")
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:  # waited for a connection in vain
            return HolderAnswer(address, problem="unreachable: no answer before the deadline")
        return HolderAnswer(address, problem=rpc_error_message(exc))
    except LeteoError as exc:
        return HolderAnswer(address, problem=f"answered no usable threshold key: {exc}")
    return HolderAnswer(address, key, index)


def fetch_agreed_key(
    stubs: Mapping[str, Any],
    threshold: int | None = None,
    key_id: str = "",
    timeout: float = defaults.PUBLIC_KEY_TIMEOUT_SECONDS,
    on_answer: Callable[[HolderAnswer], None] | None = None,
) -> tuple[ThresholdKey, list[HolderAnswer]]:
    """Ask every holder (`stubs`: KeyHolderStub by address; m = their number) for its key at
    once; return the agreed key and the answers seen by then, as soon as `agreed_key` holds.
    The calls still running are then cancelled, unless `on_answer` is given: it is called
    with every answer, those arriving later included (from gRPC's threads). Errors as
    `require_agreed_key`."""
    if key_id and not _KEY_ID.fullmatch(key_id):
        raise ProtocolError(f"{key_id[:40]!r} is not a key id (32 hex digits)")
    finished: queue.Queue[HolderAnswer] = queue.Queue()
    calls = {}
    request = pb.PublicKeyRequest(key_id=key_id)

    def done(address: str, call: Any) -> None:
        answer = answer_of(address, call)
        if on_answer is not None:
            on_answer(answer)
        finished.put(answer)

    for address, stub in stubs.items():
        call = stub.GetPublicKey.future(request, timeout=timeout, wait_for_ready=True)
        call.add_done_callback(lambda c, a=address: done(a, c))
        calls[address] = call
    answers: list[HolderAnswer] = []
    try:
        while len(answers) < len(calls):
            try:
                answers.append(finished.get(timeout=timeout + 5.0))
            except queue.Empty:
                break  # every call has a deadline: a safety net, not a path
            key = agreed_key(answers, len(stubs), threshold, key_id)
            if key is not None:
                return key, answers
    finally:
        for call in calls.values() if on_answer is None else ():
            call.cancel()  # no effect on a finished call
    seen = {a.address for a in answers}
    unanswered = [address for address in stubs if address not in seen]
    return require_agreed_key(answers, len(stubs), threshold, key_id, unanswered), answers
