"""The status of a finished round as it is published to an owner: no per-owner list or map.

The analyst's GetRound keeps the full RoundStatus (who was invited, who submitted, who is
missing, the result's owners, declines and per-owner timings). Sent to every owner of a round
with thousands of sites, those lists make the round's bytes grow with the square of the number
of owners, and an owner uses none of them: it keeps the result and needs only whether its own
share was among those summed (`included`, which decides whether it restores a charged budget,
`owner_agent.withdrawal`). So each owner gets the counts and its own flag instead.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from leteo_fed.proto import leteo_pb2 as pb

# the fields of a result that name owners (lists of site ids, maps keyed by site id)
PER_OWNER_FIELDS = frozenset({"owners", "invited", "contributors", "declined", "missing"})


def strip_per_owner(msg: Message) -> None:
    """Clear, in place and at any depth, every field of `msg` that names owners. Walks the
    descriptor, so a result type added later is covered without listing it."""
    for fd in msg.DESCRIPTOR.fields:
        if fd.name in PER_OWNER_FIELDS:
            msg.ClearField(fd.name)
            continue
        if fd.type != FieldDescriptor.TYPE_MESSAGE:
            continue
        value = getattr(msg, fd.name)
        if fd.message_type.GetOptions().map_entry:
            entry_value = fd.message_type.fields_by_name["value"]
            if entry_value.type == FieldDescriptor.TYPE_MESSAGE:
                for item in value.values():
                    strip_per_owner(item)
        elif fd.is_repeated:
            for item in value:
                strip_per_owner(item)
        elif msg.HasField(fd.name):
            strip_per_owner(value)


def included(status: pb.RoundStatus, site_id: str) -> bool:
    """Whether `site_id`'s share is among those summed; True when none is listed (a failed
    round, or one that sums no shares), as owners read it before statuses were slim."""
    return not status.submitted or site_id in status.submitted


def owner_status(status: pb.RoundStatus, site_id: str) -> pb.RoundStatus:
    """What `site_id` is published of a round: its state, message, result without per-owner
    fields, the counts of invited and submitted owners, and whether it is included."""
    out = pb.RoundStatus(
        round_id=status.round_id,
        protocol=status.protocol,
        state=status.state,
        message=status.message,
        published=True,
        included=included(status, site_id),
        n_invited=len(status.invited),
        n_submitted=len(status.submitted),
    )
    if status.HasField("result"):
        out.result.CopyFrom(status.result)
        strip_per_owner(out.result)
    return out


def is_included(status: pb.RoundStatus, site_id: str) -> bool:
    """An owner's reading of a published status: the slim copy's flag, else the lists."""
    return status.included if status.published else included(status, site_id)
