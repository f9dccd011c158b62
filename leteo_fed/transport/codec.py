"""Protocol dataclasses <-> protobuf messages, by field name.

Why generic: a protocol declares its request, spec and result as frozen dataclasses whose field
names match its proto messages; this module converts both ways, so adding a protocol needs no
hand-written converter and the protocol code never imports the stubs.

Rules: scalar fields copy as is; `tuple[...]` fields are repeated fields; `dict[str, ...]`
fields are map fields; a nested dataclass is a sub-message; a field typed `X | None` is an
`optional` (or message) field: None when absent, and a container typed `X | None` is None
when the repeated or map field is empty. A proto message with a single field stands for
that field's value where the dataclass holds a plain container (a row of a matrix as
`Vector { repeated double values }`, a map of maps as `map<string, Timing>`).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

from google.protobuf.message import Message

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols.results import to_dict as to_dict  # the JSON document of a dataclass


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


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _single_field(msg_desc: Any) -> str | None:
    """The field name of a one-field wrapper message, else None."""
    return msg_desc.fields[0].name if len(msg_desc.fields) == 1 else None


def _put(value: Any, target: Message) -> None:
    """Fill a message from a dataclass or, for a one-field wrapper, from a plain value."""
    if dataclasses.is_dataclass(value):
        to_proto(value, target)
        return
    name = _single_field(target.DESCRIPTOR)
    if name is None:
        raise ProtocolError(f"cannot put {type(value).__name__} into {type(target).__name__}")
    inner = target.DESCRIPTOR.fields_by_name[name]
    if inner.message_type is not None and inner.message_type.GetOptions().map_entry:
        getattr(target, name).update(value)
    else:
        getattr(target, name).extend(value)


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
        if desc.message_type is not None and desc.message_type.GetOptions().map_entry:
            value_desc = desc.message_type.fields_by_name["value"]
            for key, item in value.items():
                if value_desc.message_type is None:
                    target[key] = item
                else:
                    _put(item, target[key])
        elif desc.message_type is not None and desc.is_repeated:
            for item in value:
                _put(item, target.add())
        elif desc.message_type is not None:
            _put(value, target)
        elif desc.is_repeated:
            target.extend(value)
        else:
            setattr(msg, field.name, value)
    return msg


def _get(value: Message, tp: Any) -> Any:
    """The dataclass `tp` from a message, or a one-field wrapper's plain value."""
    tp, _ = _strip_optional(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_proto(value, tp)
    name = _single_field(value.DESCRIPTOR)
    if name is None:
        raise ProtocolError(f"cannot read {type(value).__name__} as {tp}")
    inner = getattr(value, name)
    if typing.get_origin(tp) is dict:
        return {k: _plain(v, _args(tp)[1]) for k, v in inner.items()}
    return tuple(inner)


def _plain(value: Any, tp: Any) -> Any:
    return _get(value, tp) if isinstance(value, Message) else value


def from_proto(msg: Message, cls: type) -> Any:
    """Build the dataclass `cls` from `msg`, field by field (see module docstring)."""
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        desc = msg.DESCRIPTOR.fields_by_name.get(field.name)
        if desc is None:
            raise ProtocolError(f"{type(msg).__name__} has no field {field.name!r}")
        tp, optional = _strip_optional(hints[field.name])
        if not desc.is_repeated and desc.has_presence and not msg.HasField(field.name):
            if optional:
                kwargs[field.name] = None
            continue  # the dataclass default applies
        value = getattr(msg, field.name)
        items: Any
        if desc.message_type is not None and desc.message_type.GetOptions().map_entry:
            items = {k: _plain(v, _args(tp)[1]) for k, v in value.items()}
        elif desc.is_repeated and desc.message_type is not None:
            items = tuple(_get(v, _args(tp)[0]) for v in value)
        elif desc.is_repeated:
            items = tuple(value)
        else:
            items = None
        if desc.is_repeated:  # an optional container field is None when empty
            kwargs[field.name] = None if optional and not items else items
        elif desc.message_type is not None:
            kwargs[field.name] = _get(value, tp)
        else:
            kwargs[field.name] = value
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:  # an absent sub-message the dataclass has no default for
        raise DataError(
            f"{type(msg).__name__} lacks {', '.join(missing)}",
            field=f"{msg.DESCRIPTOR.name}.{missing[0]}",
        )
    return cls(**kwargs)
