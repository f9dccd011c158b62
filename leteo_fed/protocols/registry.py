"""Every federated protocol by its payload name: what the services dispatch through.

Protocol modules in this package register themselves with `register`; `get` and `names` import
the package's modules once, so adding a protocol is adding its module (no list to edit here).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading

from leteo_fed.errors import DataError
from leteo_fed.protocols.interface import FederatedProtocol

_PROTOCOLS: dict[str, FederatedProtocol] = {}
_loaded = False
_lock = threading.Lock()


def register(protocol: FederatedProtocol) -> FederatedProtocol:
    if protocol.name in _PROTOCOLS and type(_PROTOCOLS[protocol.name]) is not type(protocol):
        raise RuntimeError(f"two protocols named {protocol.name!r}")
    _PROTOCOLS[protocol.name] = protocol
    return protocol


def _load() -> None:
    global _loaded
    with _lock:
        if _loaded:
            return
        import leteo_fed.protocols as package

        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package.__name__}.{info.name}")
        _loaded = True


def get(name: str) -> FederatedProtocol:
    _load()
    protocol = _PROTOCOLS.get(name)
    if protocol is None:
        raise DataError(
            f"unknown protocol {name!r}; expected one of {', '.join(names())}", field="payload"
        )
    return protocol


def for_request(request: object) -> FederatedProtocol:
    """The protocol whose request dataclass `request` is (what the analyst's client runs); a
    plugin statistic's request runs through the `statistic` payload (`plugins`)."""
    _load()
    for protocol in _PROTOCOLS.values():
        if type(request) is protocol.request_type:
            return protocol
    from leteo_fed.protocols import plugin_loader

    if any(type(request) is p.request_type for p in plugin_loader.installed().values()):
        return get("statistic")  # the `plugins` module's dispatch
    raise DataError(
        f"{type(request).__name__} is no protocol's request; expected one of "
        f"{', '.join(sorted(p.request_type.__name__ for p in _PROTOCOLS.values()))}",
        field="payload",
    )


def names() -> list[str]:
    _load()
    return sorted(_PROTOCOLS)


def statistics() -> list:
    """Every declared secure-sum statistic's adapter: the built-in ones, then the installed
    plugins (`plugin_loader.installed`), each with its own command and request type."""
    from leteo_fed.protocols import plugin_loader
    from leteo_fed.protocols.secure_sum import SecureSumProtocol

    _load()
    built_in = [p for p in all_protocols() if isinstance(p, SecureSumProtocol)]
    taken = {p.name for p in built_in}
    extra = [p for n, p in sorted(plugin_loader.installed().items()) if n not in taken]
    return built_in + extra


def all_protocols() -> list[FederatedProtocol]:
    _load()
    return [_PROTOCOLS[n] for n in sorted(_PROTOCOLS)]
