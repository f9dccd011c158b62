"""Who holds the secret key this site's shares are encrypted under: one CSP, or the m holders of
a threshold key, any t of whom decrypt.

The agent asks the key's custody two things: the public key (the current one, or a round's by
key id), and, for a charged share whose round ended without a result, to close the round for
good and say whether the share can still be decrypted (`withdraw`). With one CSP its word
decides. With key holders no single one's does: the share can never be decrypted once at least
m - t + 1 holders attest they will never decrypt the round with it ("withdrawn", or
"not_included": decrypted without it), because each holder takes part in a round once and any
t holders include one of them (`combined_withdrawal`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc

from leteo_fed import defaults
from leteo_fed.config import OwnerConfig
from leteo_fed.crypto.paillier import PublicKey
from leteo_fed.crypto.threshold import ThresholdKey
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.messages import fetch_public_key
from leteo_fed.transport.threshold_keys import fetch_agreed_key

log = logging.getLogger("leteo.owner")

WITHDRAWN = "withdrawn"
NOT_INCLUDED = "not_included"  # the round was decrypted without this site's share
GIVEN_BACK = (WITHDRAWN, NOT_INCLUDED)  # the share can never be decrypted: the charge comes back
DECRYPTED, CLAIMED = "decrypted", "claimed"


@dataclass(frozen=True)
class Attestation:
    """The custody's answer to a withdrawal: `state` (GIVEN_BACK, "decrypted", "claimed", or
    "" when no answer decides) and `says`, what it attests in words, for the audit log."""

    state: str
    says: str


class KeyCustody(Protocol):
    def public_key(self, key_id: str = "") -> PublicKey: ...

    def withdraw(self, round_id: str) -> Attestation: ...

    def close(self) -> None: ...


class SingleCsp:
    """One CSP holds the whole secret key: its word decides."""

    def __init__(self, stub: Any, address: str, channel: grpc.Channel | None = None) -> None:
        """`stub`: a CryptoServiceProviderStub (or a stand-in with its calls); `channel`: closed
        by `close` (None: the caller owns the stub's channel)."""
        self._stub = stub
        self._address = address
        self._channel = channel

    def public_key(self, key_id: str = "") -> PublicKey:
        return fetch_public_key(self._stub, self._address, key_id)

    def withdraw(self, round_id: str) -> Attestation:
        try:
            reply = self._stub.WithdrawRound(
                pb.WithdrawRequest(round_id=round_id), timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS
            )
        except grpc.RpcError as exc:
            log.warning(
                "round %s: the CSP did not answer the withdrawal: %s",
                round_id,
                rpc_error_message(exc),
            )
            return Attestation("", f"the CSP did not answer: {rpc_error_message(exc)}")
        if reply.state == WITHDRAWN:
            return Attestation(
                WITHDRAWN, "the CSP attests it never decrypted the round and has closed it"
            )
        if reply.state == NOT_INCLUDED:
            return Attestation(
                NOT_INCLUDED, "the CSP attests it decrypted the round without this site's share"
            )
        return Attestation(reply.state, f"the CSP says it was {reply.state}")

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()


def combined_withdrawal(states: Mapping[str, str], holders: int, threshold: int) -> str:
    """What the key holders' answers (`states`: by holder, "" for none) say of one share:
    WITHDRAWN or NOT_INCLUDED once at least m - t + 1 of them gave it back, so that no t
    holders can decrypt it any more (NOT_INCLUDED when those answers alone decide it); else
    the most telling other answer: "decrypted", "claimed", or "" when none decides."""
    needed = holders - threshold + 1
    given = [s for s in states.values() if s in GIVEN_BACK]
    if len(given) >= needed:
        return NOT_INCLUDED if given.count(NOT_INCLUDED) >= needed else WITHDRAWN
    answered = set(states.values())
    for telling in (DECRYPTED, CLAIMED):
        if telling in answered:
            return telling
    return next((s for s in sorted(answered) if s and s not in GIVEN_BACK), "")


class KeyHolders:
    """The m holders of a threshold key, pinned by the site's configuration (`[keyholders]`):
    addresses and threshold."""

    def __init__(
        self,
        stubs: Mapping[str, Any],
        threshold: int,
        channels: Iterable[grpc.Channel] = (),
        timeout: float = defaults.PUBLIC_KEY_TIMEOUT_SECONDS,
    ) -> None:
        """`stubs`: a KeyHolderStub per holder, by address (all m of them); `channels`:
        closed by `close`; `timeout`: how long a key is waited for when no t holders agree."""
        self._stubs = dict(stubs)
        self.threshold = threshold
        self._channels = list(channels)
        self._timeout = timeout
        self._keys: dict[str, ThresholdKey] = {}

    @property
    def holders(self) -> int:
        return len(self._stubs)

    def public_key(self, key_id: str = "") -> PublicKey:
        """The key at least t holders return identically, with exactly the configured t and
        m (`threshold_keys`): fewer than t colluding holders cannot hand the site a key."""
        if key_id in self._keys:
            return self._keys[key_id].public
        key, _ = fetch_agreed_key(self._stubs, self.threshold, key_id, self._timeout)
        self._keys[key.key_id] = key
        return key.public

    def withdraw(self, round_id: str) -> Attestation:
        """Ask every holder at once; `combined_withdrawal` decides."""
        request = pb.WithdrawRequest(round_id=round_id)
        calls = {
            address: stub.WithdrawRound.future(request, timeout=defaults.CSP_OPEN_TIMEOUT_SECONDS)
            for address, stub in self._stubs.items()
        }
        states: dict[str, str] = {}
        said: list[str] = []
        for address, call in calls.items():
            try:
                states[address] = call.result().state
                said.append(f"{address}: {states[address] or 'no state'}")
            except grpc.RpcError as exc:
                states[address] = ""
                code = exc.code().name if hasattr(exc, "code") and exc.code() else "ERROR"
                said.append(f"{address}: no answer ({code})")
                log.warning(
                    "round %s: key holder at %s did not answer the withdrawal: %s",
                    round_id,
                    address,
                    rpc_error_message(exc),
                )
        state = combined_withdrawal(states, self.holders, self.threshold)
        answers = "; ".join(said)
        if state in GIVEN_BACK:
            closed = sum(1 for s in states.values() if s in GIVEN_BACK)
            return Attestation(
                state,
                f"the key holders attest the round can never be decrypted with this site's "
                f"share: {closed} of {self.holders} will not decrypt it with it, and any "
                f"{self.threshold} holders include one of them ({answers})",
            )
        if not state:
            log.warning("round %s: no decisive answer from the key holders: %s", round_id, answers)
        return Attestation(
            state,
            f"the key holders leave the round decryptable with this site's share: fewer than "
            f"{self.holders - self.threshold + 1} of {self.holders} closed it ({answers})",
        )

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


def open_custody(config: OwnerConfig) -> KeyCustody:
    """The custody the site's configuration names: `[keyholders]`, or `peers.csp`."""
    tls = config.tls
    if config.keyholders is not None:
        channels = {a: tls.channel(a, peer="keyholder") for a in config.keyholders.addresses}
        stubs = {a: pb_grpc.KeyHolderStub(c) for a, c in channels.items()}
        return KeyHolders(stubs, config.keyholders.threshold, channels.values())
    channel = tls.channel(config.csp, peer="csp")
    return SingleCsp(pb_grpc.CryptoServiceProviderStub(channel), config.csp, channel)
