"""Plugin statistics found where their packages are installed (docs/plugins.md).

A plugin is a `SecureSumStatistic` registered under the entry-point group
`leteo_fed.statistics` of its package (`name = "module:Class"`); `installed` reads the group
once. A plugin that fails to load, is no statistic or has a malformed name is logged and left
out: one broken package must not stop a service. Its request and spec travel as canonical JSON
(`canonical_json`, `from_json`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import typing
from importlib.metadata import entry_points
from typing import Any

from leteo_fed.errors import DataError
from leteo_fed.protocols.results import to_dict
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import SecureSumStatistic

ENTRY_POINT_GROUP = "leteo_fed.statistics"

log = logging.getLogger(__name__)


def canonical_json(obj: Any) -> str:
    """One text per value: what the signature and the spec digest cover."""
    return json.dumps(to_dict(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)


def from_json(cls: type, text: str, what: str) -> Any:
    """A plugin's request or spec dataclass from its JSON (lists back to tuples)."""
    try:
        doc = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise DataError(f"the {what} is not JSON: {exc.msg}", field="params_json") from None
    if not isinstance(doc, dict):
        raise DataError(f"the {what} is not a JSON object", field="params_json")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(doc) - names)
    if unknown:
        raise DataError(f"the {what} has unknown field(s) {', '.join(unknown)}", field=unknown[0])
    values = {}
    for name, value in doc.items():
        if typing.get_origin(hints[name]) is tuple and isinstance(value, list):
            value = tuple(value)
        values[name] = value
    try:
        return cls(**values)
    except TypeError as exc:
        raise DataError(f"the {what} does not fit {cls.__name__}: {exc}") from None


class PluginProtocol(SecureSumProtocol):
    """A plugin statistic's adapter: the built-in one, remembering where it came from."""

    def __init__(self, statistic: SecureSumStatistic, distribution: str = "") -> None:
        super().__init__(statistic, plugin=True)
        self.distribution = distribution


_installed: dict[str, PluginProtocol] | None = None


def installed() -> dict[str, PluginProtocol]:
    """Every plugin statistic installed here, by name (entry points read once)."""
    global _installed
    if _installed is None:
        found: dict[str, PluginProtocol] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                statistic = ep.load()
                statistic = statistic() if isinstance(statistic, type) else statistic
            except Exception as exc:  # a broken plugin must not stop the service
                log.error("plugin statistic %s (%s) failed to load: %s", ep.name, ep.value, exc)
                continue
            if not isinstance(statistic, SecureSumStatistic):
                log.error("plugin %s is not a SecureSumStatistic; ignored", ep.value)
                continue
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,62}", str(getattr(statistic, "name", ""))):
                log.error("plugin %s: a statistic's name is [a-z][a-z0-9_]*; ignored", ep.value)
                continue
            dist = getattr(ep, "dist", None)
            found[statistic.name] = PluginProtocol(statistic, getattr(dist, "name", "") or "")
        _installed = found
    return _installed


def find(name: str, version: str) -> PluginProtocol:
    """The installed plugin `name` at exactly `version`; DataError naming what is missing.
    An owner's refusal goes to the aggregator as said: it names only what the round asks for,
    never which plugins or versions the site has installed."""
    plugin = installed().get(name)
    if plugin is None:
        raise DataError(f"statistic {name!r} is not installed here", field="statistic")
    if plugin.statistic.version != version:
        raise DataError(
            f"statistic {name!r} version {version} is not installed here (another version is)",
            field="statistic",
        )
    return plugin
