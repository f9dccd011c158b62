"""Round requests and round specs on the wire: the payload names the protocol.

The analyst's RoundRequest and the owners' RoundSpec each carry a `payload` oneof whose field
name is the protocol's registry name; the payload converts to the protocol's own request or spec
dataclass by field name (`codec`). Nothing here knows any protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_plan import DpSpec
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.requests import Common, dp_request
from leteo_fed.protocols.results import RESULT_TYPES
from leteo_fed.protocols.round_types import RoundPlan
from leteo_fed.transport import membership
from leteo_fed.transport.codec import from_proto, to_dict, to_proto
from leteo_fed.transport.messages import encoding_from_proto, encoding_to_proto
from leteo_fed.transport.statements import spec_digest

MAX_ROUND_ID_CHARS = 128


def check_round_id(round_id: str) -> str:
    """A round id as the aggregator makes them (`pca-0123456789ab`, `kmeans-...-it3`): ASCII
    letters, digits, '-', '_' and '.', not starting with '.', at most 128 characters. Owners
    name files after it, so nothing else (no path separator, no '..') is accepted."""
    ok = (
        0 < len(round_id) <= MAX_ROUND_ID_CHARS
        and not round_id.startswith(".")
        and all(c.isascii() and (c.isalnum() or c in "-_.") for c in round_id)
    )
    if not ok:
        shown = round_id if len(round_id) <= 40 else round_id[:40] + "..."
        raise DataError(
            f"invalid round_id {shown!r}: use ASCII letters, digits, '-', '_' or '.', not "
            f"starting with '.', at most {MAX_ROUND_ID_CHARS} characters",
            field="round_id",
        )
    return round_id


def _payload(msg: Any) -> FederatedProtocol:
    name = msg.WhichOneof("payload")
    if name is None:
        raise DataError(
            f"the {type(msg).__name__} has no payload: name a protocol "
            f"({', '.join(registry.names())})",
            field="payload",
        )
    return registry.get(name)


# ------------------------------------------------------------------ analyst -> aggregator


def request_to_proto(
    protocol: str,
    request: Any,
    *,
    owners: tuple[str, ...] | list[str] = (),
    min_owners: int = 0,
    deadline_seconds: float = 0.0,
    scale_bits: int = 0,
    value_bound: float = 0.0,
    dp_epsilon: float | None = None,
    dp_delta: float | None = None,
    row_norm_bound: float | None = None,
    bounds: tuple[ColumnBounds, ...] = (),
) -> pb.RoundRequest:
    msg = pb.RoundRequest(
        bounds=[pb.ColumnBounds(column=b.column, lower=b.lower, upper=b.upper) for b in bounds],
        min_owners=min_owners,
        deadline_seconds=deadline_seconds,
        scale_bits=scale_bits,
        value_bound=value_bound,
    )
    for name, value in (
        ("dp_epsilon", dp_epsilon),
        ("dp_delta", dp_delta),
        ("row_norm_bound", row_norm_bound),
    ):
        if value is not None:
            setattr(msg, name, value)
    name_owners(msg, owners)
    to_proto(request, getattr(msg, protocol))
    return msg


def named_owners(owners: tuple[str, ...] | list[str]) -> list[str]:
    """The owners an analyst names, as the set the request commits to: sorted, distinct."""
    return sorted(set(owners))


def name_owners(msg: pb.RoundRequest, owners: tuple[str, ...] | list[str]) -> None:
    """Sign the named owners by their Merkle root and count (none named: every registered
    owner); the list itself goes beside the signed request (StartRoundRequest.owners)."""
    if owners:
        named = named_owners(owners)
        msg.owners_root = membership.root(named)
        msg.n_owners = len(named)
    else:
        msg.ClearField("owners_root")
        msg.ClearField("n_owners")


def check_named_owners(msg: pb.RoundRequest, owners: list[str]) -> list[str]:
    """The owner list sent beside a signed request, checked against the root it signs: the
    sorted, distinct list; DataError if the request names owners and the list is not them."""
    if not msg.owners_root and not msg.n_owners:
        if owners:
            raise DataError(
                "the request names no owners, but a list of owners came with it", field="owners"
            )
        return []
    named = named_owners(owners)
    if not named or len(named) != msg.n_owners or membership.root(named) != msg.owners_root:
        raise DataError(
            "the owners sent with the request are not the set its signature names",
            field="owners",
        )
    return named


def request_from_proto(msg: pb.RoundRequest) -> tuple[FederatedProtocol, Any]:
    """The protocol a request names and its payload as the protocol's request dataclass."""
    protocol = _payload(msg)
    if msg.bounds and not protocol.takes_bounds:
        raise DataError(
            f"{protocol.name} takes no per-column bounds (give row_norm_bound)", field="bounds"
        )
    return protocol, from_proto(getattr(msg, protocol.name), protocol.request_type)


def common_from_proto(msg: pb.RoundRequest, n_invited: int) -> Common:
    def opt(name: str) -> float | None:
        return getattr(msg, name) if msg.HasField(name) else None

    return Common(
        n_invited=n_invited,
        min_owners=msg.min_owners,
        deadline_seconds=msg.deadline_seconds,
        scale_bits=msg.scale_bits,
        value_bound=msg.value_bound,
        dp=dp_request(
            opt("dp_epsilon"),
            opt("dp_delta"),
            opt("row_norm_bound"),
            tuple(ColumnBounds(b.column, b.lower, b.upper) for b in msg.bounds),
        ),
    )


def plan_request(msg: pb.RoundRequest, n_invited: int) -> tuple[FederatedProtocol, Any]:
    """What the aggregator plans for a request (for tools that want the plan without a round)."""
    protocol, request = request_from_proto(msg)
    return protocol, protocol.plan(request, common_from_proto(msg, n_invited))


# ------------------------------------------------------------------ results


def result_to_proto(result: Any) -> pb.RoundResult:
    """A protocol's result dataclass as the typed RoundResult (oneof named by its `wire`)."""
    msg = pb.RoundResult()
    to_proto(result, getattr(msg, result.wire))
    return msg


def result_from_proto(msg: pb.RoundResult) -> Any:
    """The result dataclass a RoundResult carries."""
    name = msg.WhichOneof("result")
    if name is None:
        raise ProtocolError("the round result is empty")
    registry.names()  # every protocol module (and its result types) is loaded
    cls = RESULT_TYPES.get(name)
    if cls is None:
        raise ProtocolError(f"unknown result type {name!r}")
    return from_proto(getattr(msg, name), cls)


def result_document(status: pb.RoundStatus) -> dict | None:
    """A round's result as the JSON document the CLI writes (None before it completes)."""
    if not status.HasField("result"):
        return None
    return to_dict(result_from_proto(status.result))


# ------------------------------------------------------------------ aggregator -> owners


def spec_to_proto(
    round_id: str,
    protocol: FederatedProtocol,
    plan: RoundPlan,
    key_id: str,
    deadline_unix: float,
    layout: SlotLayout | None,
    min_owners: int = 0,
    job_id: str = "",
    authorization: pb.Signed | None = None,
    invited_root: bytes = b"",
    n_invited: int = 0,
) -> pb.RoundSpec:
    """The spec every owner of the round shares; each owner's copy adds its own membership
    proof (`with_membership`)."""
    msg = pb.RoundSpec(
        round_id=round_id,
        protocol=plan.label,
        key_id=key_id,
        deadline_unix=deadline_unix,
        n_values=plan.n_values,
        min_owners=min_owners,
        job_id=job_id or round_id,
        invited_root=invited_root,
        n_invited=n_invited,
    )
    if authorization is not None:
        msg.authorization.CopyFrom(authorization)
    if plan.encoding is not None and layout is not None:
        msg.encoding.CopyFrom(encoding_to_proto(plan.encoding, layout))
        msg.n_ciphertexts = layout.n_ciphertexts(plan.n_values)
    if plan.dp is not None:
        to_proto(plan.dp, msg.dp)
    to_proto(plan.spec, getattr(msg, protocol.name))
    return msg


def with_membership(spec: pb.RoundSpec, proof: membership.Proof) -> pb.RoundSpec:
    """One owner's copy of the round's shared spec: the same spec and its membership proof."""
    out = pb.RoundSpec()
    out.CopyFrom(spec)
    out.membership.index = proof.index
    out.membership.siblings.extend(proof.siblings)
    return out


def member_copy(spec: pb.RoundSpec, sites: list[str], site_id: str) -> pb.RoundSpec:
    """`site_id`'s copy of a round's shared spec for the sorted, distinct `sites` (one round
    with many owners builds the tree once: `membership.levels`, `proof_from_levels`)."""
    return with_membership(spec, membership.prove(sites, site_id))


def membership_proof(spec: pb.RoundSpec) -> membership.Proof:
    return membership.Proof(spec.membership.index, tuple(spec.membership.siblings))


@dataclass(frozen=True)
class Invitation:
    """A RoundSpec as an owner reads it."""

    round_id: str
    label: str
    protocol: FederatedProtocol
    spec: Any  # the protocol's spec dataclass
    key_id: str
    deadline_unix: float
    n_values: int
    n_ciphertexts: int
    encoding: ShareEncoding | None
    layout: SlotLayout | None
    dp: DpSpec | None
    min_owners: int = 0  # the round's declared quorum
    invited_root: bytes = b""  # the Merkle root of the invited set (`membership`)
    n_invited: int = 0
    job_id: str = ""
    authorization: pb.Signed | None = None  # the analyst's signed request
    spec_digest: bytes = b""  # of the RoundSpec as received, signed in the share statement
    message: pb.RoundSpec | None = None  # the RoundSpec as received, checked against the request

    @property
    def share_encoding(self) -> tuple[ShareEncoding, SlotLayout]:
        """The encoding and layout of a secure-sum round (report rounds have none)."""
        if self.encoding is None or self.layout is None:
            raise ProtocolError(f"round {self.round_id} ({self.label}) has no share encoding")
        return self.encoding, self.layout


def invitation_payload(msg: pb.RoundSpec, protocol: FederatedProtocol) -> Any:
    """The spec's payload as the protocol's spec dataclass."""
    return from_proto(getattr(msg, protocol.name), protocol.spec_type)


def invitation_from_proto(msg: pb.RoundSpec, key_bits: int) -> Invitation:
    """Decode (and check the layout of) an invitation; ProtocolError/DataError if malformed."""
    check_round_id(msg.round_id)
    protocol = _payload(msg)
    spec = invitation_payload(msg, protocol)
    enc, layout = None, None
    if msg.HasField("encoding"):
        enc, layout = encoding_from_proto(msg.encoding, key_bits)
        if layout.n_ciphertexts(msg.n_values) != msg.n_ciphertexts:
            raise ProtocolError(
                f"round declares {msg.n_ciphertexts} ciphertexts for {msg.n_values} values"
            )
        if enc.max_owners < msg.n_invited:
            # slots sized for fewer shares than the CSP may sum would overflow into each other
            raise ProtocolError(
                f"the encoding's slots hold the sum of {enc.max_owners} shares, but "
                f"{msg.n_invited} owners are invited"
            )
    dp = from_proto(msg.dp, DpSpec) if msg.HasField("dp") else None
    if dp is not None and enc is not None and dp.quorum > msg.min_owners:
        # the CSP enforces the signed quorum (min_owners): fewer shares than the noise assumes
        # would release less noise than the owners accounted for
        raise ProtocolError(
            f"the DP noise is calibrated for {dp.quorum} shares but the round's quorum is "
            f"{msg.min_owners}"
        )
    return Invitation(
        round_id=msg.round_id,
        label=msg.protocol or protocol.name,
        protocol=protocol,
        spec=spec,
        key_id=msg.key_id,
        deadline_unix=msg.deadline_unix,
        n_values=msg.n_values,
        n_ciphertexts=msg.n_ciphertexts,
        encoding=enc,
        layout=layout,
        dp=dp,
        min_owners=msg.min_owners,
        invited_root=msg.invited_root,
        n_invited=msg.n_invited,
        job_id=msg.job_id or msg.round_id,
        authorization=msg.authorization if msg.HasField("authorization") else None,
        spec_digest=spec_digest(msg),
        message=msg,
    )
