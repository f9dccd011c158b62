"""The analyst's authorization of a round, checked by the owner before anything is read.

The aggregator is run by the data user and may be malicious: it could claim another analyst,
change what was asked, or reuse one request for many jobs. So every RoundSpec relays the
analyst's signed RoundRequest, and the owner checks, with no network and nothing read:

- the signature, against the analysts' certificate authority (which the aggregator does not
  hold), and that the request is fresh (`policy.request_max_age_hours`, small clock skew);
- that the round IS the request: the owner rebuilds the whole RoundSpec an honest aggregator
  derives from the signed request and refuses any field that differs, naming it
  (`leteo_fed.transport.expected_spec`); the invited owners within the request's list;
- that one signed request serves exactly one job, and its rounds at this site together charge
  no more than the request's budget (a k-means job cannot run more iterations than it paid for).

Every refusal starts with `authorization:` (or `spec:`, naming the field) and says what is
wrong; the text is built from the round and the request only, never from the site's data. Without TLS nothing is
signed: the binding is still checked, but the analyst stays unknown.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from leteo_fed.errors import AccessDenied
from leteo_fed.privacy.budget import Budget
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport import signing
from leteo_fed.transport.expected_spec import ExpectedRound, check_spec
from leteo_fed.transport.rounds import Invitation

MAX_CLOCK_SKEW_SECONDS = 300.0  # a request dated later than this in the future is refused
BUDGET_SLACK = 1e-9  # relative: k-means splits epsilon into T parts that may not add up exactly


class AuthorizationError(AccessDenied):
    """The round is not what a verified analyst's request allows; the reason says why."""

    def __init__(self, message: str) -> None:
        super().__init__(f"authorization: {message}")


@dataclass(frozen=True)
class Authorization:
    """A verified round request: who signed it and what it asks."""

    analyst: str | None  # the signer's certificate name; None without TLS (nothing is signed)
    digest: str  # SHA-256 of the signed body, hex: the request's identity across rounds
    request: pb.RoundRequest


def verify_request(signed: pb.Signed | None, analysts_ca: bytes | None) -> Authorization:
    """The request relayed in a round, its signature verified against `analysts_ca` (None
    without TLS: the body is read unverified)."""
    if signed is None or not signed.body:
        raise AuthorizationError("the round carries no round request from an analyst")
    analyst = None
    if analysts_ca is not None:
        try:
            party = signing.verify(
                signed, signing.ROUND_REQUEST, analysts_ca, "analyst", "the round request"
            )
        except AccessDenied as exc:
            raise AuthorizationError(str(exc)) from exc
        analyst = party.name
    request = pb.RoundRequest()
    try:
        request.ParseFromString(signed.body)
    except DecodeError as exc:
        raise AuthorizationError("the signed body is not a round request") from exc
    return Authorization(analyst, hashlib.sha256(signed.body).hexdigest(), request)


def check_fresh(request: pb.RoundRequest, max_age_hours: float, now: float) -> None:
    """A request is valid `max_age_hours` from its signing: an old one cannot be replayed."""
    issued = request.issued_unix
    if not (math.isfinite(issued) and issued > 0):
        raise AuthorizationError("the request carries no time of signing")
    if issued > now + MAX_CLOCK_SKEW_SECONDS:
        raise AuthorizationError(
            f"the request is dated {issued - now:.0f} s in the future (clock skew allowed: "
            f"{MAX_CLOCK_SKEW_SECONDS:.0f} s)"
        )
    age = now - issued
    if age > max_age_hours * 3600:
        raise AuthorizationError(
            f"the request was signed {age / 3600:.1f} hours ago; this site accepts requests "
            f"up to {max_age_hours:g} hours old (policy.request_max_age_hours)"
        )


def check_binding(
    inv: Invitation, request: pb.RoundRequest, site_id: str, key_bits: int, now: float
) -> tuple[Budget | None, ExpectedRound]:
    """Refuse a round that is not exactly the one the request defines (`expected_spec`); the
    budget the request allows its job, and what was verified about the round."""
    if inv.message is None:
        raise AuthorizationError("the round's spec was not kept to check against the request")
    checked = check_spec(inv.message, request, key_bits, site_id, now)
    # implied by the spec's equality with the request; kept as a guard on the accounting
    _check_budget(inv.protocol.job_budget(inv.spec, inv.dp), checked.allowed)
    return checked.allowed, checked


def _check_budget(spent: Budget | None, allowed: Budget | None) -> None:
    """DP exactly when the analyst asked for it, and no more budget than it authorized."""
    if allowed is None:
        if spent is not None:
            raise AuthorizationError(
                f"the round charges epsilon {spent.epsilon:g}, delta {spent.delta:g}, but the "
                "analyst asked for no differentially private release"
            )
        return
    if spent is None:
        raise AuthorizationError(
            f"the analyst asked for a differentially private release (epsilon "
            f"{allowed.epsilon:g}); the round adds no noise"
        )
    if not spent.fits_within(allowed, rel_slack=BUDGET_SLACK):
        raise AuthorizationError(
            f"the round's job charges epsilon {spent.epsilon:g}, delta {spent.delta:g}; the "
            f"analyst authorized at most epsilon {allowed.epsilon:g}, delta {allowed.delta:g}"
        )


class SignedRequests:
    """What each signed request served at this site: its one job and the budget its accepted
    rounds took. Rebuilt from the audit log, so a restart forgets nothing."""

    def __init__(self, events: Iterable[dict[str, Any]] = ()) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, str] = {}  # request digest -> the job it serves
        self._spent: dict[str, list[float]] = {}  # request digest -> [epsilon, delta] taken
        self._rounds: dict[str, tuple[str, float, float]] = {}  # round -> (digest, eps, delta)
        invited: dict[str, tuple[str, float, float]] = {}
        for e in events:
            digest, round_id = e.get("request_digest"), str(e.get("round_id", ""))
            if e.get("event") == "invitation" and digest:
                self._jobs.setdefault(digest, str(e.get("job_id") or round_id))
                invited[round_id] = (digest, e.get("epsilon") or 0.0, e.get("delta") or 0.0)
            elif e.get("event") == "decision" and e.get("accepted") and round_id in invited:
                self._take(round_id, *invited[round_id])
            elif e.get("event") == "withdrawn" or (
                e.get("event") == "failed" and e.get("released")
            ):
                self.release(round_id)  # nothing was revealed: the budget came back

    def admit(
        self, auth: Authorization, inv: Invitation, allowed: Budget | None, charge: Budget | None
    ) -> None:
        """Bind the request to this round's job and reserve the round's charge against the
        request's budget; AuthorizationError if the request served another job or is spent."""
        with self._lock:
            job = self._jobs.setdefault(auth.digest, inv.job_id)
            if job != inv.job_id:
                raise AuthorizationError(
                    f"replayed authorization: the analyst's request already served job {job}, "
                    f"not {inv.job_id}"
                )
            if charge is None or allowed is None:
                return
            eps, delta = self._spent.get(auth.digest, [0.0, 0.0])
            total = Budget(eps + charge.epsilon, delta + charge.delta)
            if not total.fits_within(allowed, rel_slack=BUDGET_SLACK):
                raise AuthorizationError(
                    f"the analyst's request allows its job epsilon {allowed.epsilon:g}, delta "
                    f"{allowed.delta:g} at this site; its rounds here already took epsilon "
                    f"{eps:g}, delta {delta:g}"
                )
            self._take(inv.round_id, auth.digest, charge.epsilon, charge.delta)

    def taken(self, digest: str) -> tuple[float, float]:
        """(epsilon, delta) the request's rounds took at this site so far."""
        with self._lock:
            eps, delta = self._spent.get(digest, [0.0, 0.0])
            return eps, delta

    def release(self, round_id: str) -> None:
        """A round declined after `admit` (its charge was never taken), or withdrawn (the
        CSP attests it never decrypted the round)."""
        with self._lock:
            taken = self._rounds.pop(round_id, None)
            if taken is not None:
                spent = self._spent[taken[0]]
                spent[0] -= taken[1]
                spent[1] -= taken[2]

    def _take(self, round_id: str, digest: str, epsilon: float, delta: float) -> None:
        spent = self._spent.setdefault(digest, [0.0, 0.0])
        spent[0] += epsilon
        spent[1] += delta
        self._rounds[round_id] = (digest, epsilon, delta)


def authorize(
    inv: Invitation,
    auth: Authorization,
    site_id: str,
    max_age_hours: float,
    requests: SignedRequests,
    now: float,
    key_bits: int = 0,
) -> ExpectedRound:
    """Every check of a verified request against the round, then its one-job binding."""
    check_fresh(auth.request, max_age_hours, now)
    allowed, checked = check_binding(inv, auth.request, site_id, key_bits, now)
    requests.admit(auth, inv, allowed, inv.protocol.charge(inv.spec, inv.dp))
    return checked
