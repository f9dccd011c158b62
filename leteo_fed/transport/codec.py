"""Protocol dataclasses <-> protobuf messages, by field name.

Why generic: a protocol declares its request and spec as frozen dataclasses whose field names
match its proto payload messages; this module converts both ways, so adding a protocol needs no
hand-written converter and the protocol code never imports the stubs.

Rules: scalar fields copy as is; `tuple[...]` fields are repeated fields; a nested dataclass is a
sub-message; a field typed `X | None` is an `optional` (or message) field: None when absent.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from google.protobuf.message import Message

from leteo_fed.errors import ProtocolError


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    """(X, True) for `X | None`, (tp, False) otherwise."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _item_type(tp: Any) -> Any:
    args = typing.get_args(tp)
    return args[0] if args else Any


def to_proto(obj: Any, msg: Message) -> Message:
    """Fill `msg` (a fresh message instance) from the dataclass `obj`; returns `msg`."""
    for field in dataclasses.fields(obj):
        value = getattr(obj, field.name)
        if value is None:
            continue
        desc = msg.DESCRIPTOR.fields_by_name.get(field.name)
        if desc is None:
            raise ProtocolError(f"{type(msg).__name__} has no field {field.name!r}")
        target = getattr(msg, field.name)
        repeated = desc.is_repeated
        if desc.message_type is not None and repeated:
            for item in value:
                to_proto(item, target.add())
        elif desc.message_type is not None:
            to_proto(value, target)
        elif repeated:
            target.extend(value)
        else:
            setattr(msg, field.name, value)
    return msg


def from_proto(msg: Message, cls: type) -> Any:
    """Build the dataclass `cls` from `msg`, field by field (see module docstring)."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        desc = msg.DESCRIPTOR.fields_by_name.get(field.name)
        if desc is None:
            raise ProtocolError(f"{type(msg).__name__} has no field {field.name!r}")
        tp, optional = _strip_optional(hints[field.name])
        repeated = desc.is_repeated
        if not repeated and desc.has_presence and not msg.HasField(field.name):
            if optional:
                kwargs[field.name] = None
            continue  # the dataclass default applies
        value = getattr(msg, field.name)
        if repeated and desc.message_type is not None:
            kwargs[field.name] = tuple(from_proto(v, _item_type(tp)) for v in value)
        elif repeated:
            kwargs[field.name] = tuple(value)
        elif desc.message_type is not None:
            kwargs[field.name] = from_proto(value, tp)
        else:
            kwargs[field.name] = value
    return cls(**kwargs)
