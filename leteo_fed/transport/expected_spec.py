"""The round an owner expects: rebuilt from the analyst's signed request, compared field by field.

A deviating aggregator could tell one owner a different encoding, class list or set of centers
than the others, swap a feature and a label, or drop the projection-only mode, and so make that
owner's statistics separable in the decrypted total. So nothing that shapes a share is taken on
the aggregator's word: the owner replays the aggregator's own planning (`protocol.plan`,
`expected_round`) from the signed request and the invited set, builds the RoundSpec an honest
aggregator would have sent, and refuses any round whose spec differs in any field, naming it.

Only what the aggregator must choose is taken from the relayed spec, each checked for what can
be checked: the round and job ids (their form, and one job per request: `authorization`), the
CSP key (fetched from the CSP by id), the deadline (no later than the request allows), the
invited set (by its Merkle root and size: this site proven among them by its membership proof,
exactly the owners the request names when it names any, at least the quorum), a
projection-only round's secret rotation (orthogonal, d x d), and k-means centers after the
first iteration (k x d, within the bound; `chosen_by_aggregator`). Whatever one owner cannot
check, the CSP does: every share statement carries `spec_digest` of the spec its owner received,
and the CSP decrypts only a round whose statements all carry the same digest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from leteo_fed.errors import AccessDenied, LeteoError
from leteo_fed.privacy.budget import Budget
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.round_types import RoundPlan
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import (
    common_from_proto,
    invitation_payload,
    membership_proof,
    request_from_proto,
    spec_to_proto,
)
from leteo_fed.transport.statements import shared_spec

MAX_CLOCK_SKEW_SECONDS = 300.0


class SpecMismatch(AccessDenied):
    """The relayed round is not the round the signed request defines; names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(f"spec: {message}")


def spec_differences(expected: Message, received: Message, prefix: str = "") -> list[str]:
    """Paths of the fields (`encoding.scale_bits`, `moments.groupings[0].classes`) whose values
    differ, walking the message descriptor recursively: a field added to the schema is compared
    without anyone listing it. Floats compare exactly (both sides compute them with the same
    code), so a NaN always differs."""
    out: list[str] = []
    for fd in expected.DESCRIPTOR.fields:
        name = prefix + fd.name
        a, b = getattr(expected, fd.name), getattr(received, fd.name)
        is_message = fd.type == FieldDescriptor.TYPE_MESSAGE
        if fd.is_repeated:
            if len(a) != len(b):
                out.append(name)
            elif is_message:
                for i, (x, y) in enumerate(zip(a, b, strict=True)):
                    out.extend(spec_differences(x, y, f"{name}[{i}]."))
            elif list(a) != list(b):
                out.append(name)
            continue
        if fd.has_presence and expected.HasField(fd.name) != received.HasField(fd.name):
            out.append(name)
        elif is_message:
            out.extend(spec_differences(a, b, name + "."))
        elif a != b or a != a:  # a != a: NaN
            out.append(name)
    return out


def round_index(round_id: str, job_id: str, protocol: FederatedProtocol) -> int:
    """Which round of its job `round_id` is: a single-round job's round id is its job id (or
    `<job>-r<attempt>` when run again); a multi-round job's is `<job>-it<index>`, or
    `<job>-it<index>-r<attempt>` once resumed."""
    if not protocol.multi_round:
        if re.fullmatch(re.escape(job_id) + r"(-r[1-9][0-9]{0,5})?", round_id) is None:
            raise SpecMismatch(f"round id {round_id!r} is not its job id {job_id!r}")
        return 1
    found = re.fullmatch(re.escape(job_id) + r"-it([1-9][0-9]{0,5})(-r[1-9][0-9]{0,5})?", round_id)
    if found is None:
        raise SpecMismatch(f"round id {round_id!r} is not an iteration of job {job_id!r}")
    return int(found.group(1))


@dataclass(frozen=True)
class ExpectedRound:
    """What an owner verified about a relayed round."""

    index: int  # which round of its job (1-based)
    max_rounds: int  # how many the signed request allows its job
    deadline_seconds: float  # the longest a round of the job may stay open
    plan: RoundPlan  # the round as the owner rebuilt it
    allowed: Budget | None  # the most the signed request lets its job charge this site


def expected_spec(
    received: pb.RoundSpec, request: pb.RoundRequest, key_bits: int
) -> tuple[pb.RoundSpec, ExpectedRound]:
    """The RoundSpec an honest aggregator sends for `received`'s round of the job planned from
    `request`, with the aggregator's own choices (ids, key, deadline, invited owners, secret
    rotation, later centers) copied from `received`; SpecMismatch if it cannot be built."""
    try:
        protocol, payload = request_from_proto(request)
        common = common_from_proto(request, received.n_invited)
        plan: Any = protocol.plan(payload, common)
        allowed = protocol.request_budget(payload, common.dp)
    except LeteoError as exc:
        raise SpecMismatch(f"the signed request plans no valid round: {exc}") from exc
    name = received.WhichOneof("payload")
    if name != protocol.name:
        raise SpecMismatch(
            f"field 'payload' is {name or 'empty'}; the analyst asked for {protocol.name}"
        )
    job_id = received.job_id
    index = round_index(received.round_id, job_id, protocol)
    most = protocol.max_rounds(plan)
    if index > most:
        raise SpecMismatch(f"round {index} of a job the analyst allowed {most} round(s)")
    try:
        relayed = invitation_payload(received, protocol)
        # the invited ids shape no spec (only their number does, through `common`)
        rnd = protocol.expected_round(plan, job_id, [], index, relayed)
    except LeteoError as exc:
        raise SpecMismatch(f"the relayed round is not valid: {exc}") from exc
    layout = None
    if rnd.encoding is not None:
        if key_bits <= 0:
            raise SpecMismatch("field 'key_id' names no CSP key for an encrypted round")
        layout = rnd.encoding.layout(key_bits)
    spec = spec_to_proto(
        received.round_id,
        protocol,
        rnd,
        received.key_id if rnd.encoding is not None else "",
        received.deadline_unix,
        layout,
        plan.min_owners,
        job_id,
        received.authorization if received.HasField("authorization") else None,
        received.invited_root,
        received.n_invited,
    )
    return spec, ExpectedRound(index, most, plan.deadline_seconds, rnd, allowed)


def check_spec(
    received: pb.RoundSpec,
    request: pb.RoundRequest,
    key_bits: int,
    site_id: str,
    now: float,
) -> ExpectedRound:
    """Refuse (SpecMismatch, naming the field) a round that is not exactly the one the signed
    request defines for the invited owners it names."""
    check_invited(received, request, site_id)
    expected, checked = expected_spec(received, request, key_bits)
    if received.n_invited < expected.min_owners:
        raise SpecMismatch(
            f"field 'n_invited' names {received.n_invited} owner(s), fewer than the quorum of "
            f"{expected.min_owners}"
        )
    if received.deadline_unix > now + checked.deadline_seconds + MAX_CLOCK_SKEW_SECONDS:
        raise SpecMismatch("field 'deadline_unix' is later than the request's deadline allows")
    differ = spec_differences(expected, shared_spec(received))
    if differ:
        shown = ", ".join(f"'{f}'" for f in differ)
        what = f"field {shown} differs" if len(differ) == 1 else f"fields {shown} differ"
        raise SpecMismatch(f"{what} from the round the analyst's signed request defines")
    return checked


def check_invited(received: pb.RoundSpec, request: pb.RoundRequest, site_id: str) -> None:
    """This site is in the invited set the spec commits to (its membership proof verifies
    against `invited_root` and `n_invited`), and when the analyst named owners, the invited set
    is exactly the one the signed request names. Duplicates cannot hide in a root: the CSP
    recomputes it from the sorted, distinct list."""
    proof = membership_proof(received)
    if not membership.verify(site_id, proof, received.n_invited, received.invited_root):
        raise SpecMismatch(
            "field 'invited_root' does not include this site: its 'membership' proof does not "
            "verify against 'invited_root' and 'n_invited'"
        )
    named = (request.owners_root, request.n_owners)
    if any(named) and (received.invited_root, received.n_invited) != named:
        raise SpecMismatch(
            "field 'invited_root' is not the set of owners the analyst's request names"
        )
