"""The code base's shape, checked: no import cycles between modules, every protocol registered
and complete, and the layer contracts of pyproject.toml (also run by `make test` as
`lint-imports`)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from leteo_fed.protocols import registry
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.round_types import REPORTS, SECURE_SUM

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("leteo_fed", "aggregator", "owner_agent", "csp")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports anywhere (top level or inside functions)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "_pb2" not in p.name]
    modules = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            deps.update(t for t in targets if t in modules and t != name)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycles_between_modules():
    graph = _import_graph()
    assert len(graph) > 100  # the walk found the code base
    assert _cycles(graph) == []


# `leteo_fed.anonymize` by role, top to bottom: a module imports only from its own part or a lower
# layer, and the two engines never import each other (docstring of `leteo_fed/anonymize/`).
ANONYMIZE_LAYERS = (
    ("job",),
    ("engines",),
    ("audit", "planners", "inputs", "keys"),
    ("models", "output", "arrays"),
)


def test_anonymize_is_layered_by_role_and_its_engines_are_independent():
    graph = _import_graph()
    package = "leteo_fed.anonymize"
    layer = {part: i for i, parts in enumerate(ANONYMIZE_LAYERS) for part in parts}

    def part(module: str) -> str:
        return module[len(package) + 1 :].split(".")[0]

    modules = [m for m in graph if m.startswith(package + ".")]
    assert {part(m) for m in modules} == set(layer), "a new part of the package: give it a layer"
    wrong = []
    for module in modules:
        for dep in graph[module]:
            if not dep.startswith(package + ".") or part(dep) == part(module):
                continue
            if layer[part(dep)] <= layer[part(module)]:
                wrong.append(f"{module} -> {dep}")
    engines = f"{package}.engines."
    for a, b in (("local", "spark"), ("spark", "local")):
        wrong += [
            f"{m} -> {d}"
            for m in modules
            if m.startswith(f"{engines}{a}")
            for d in graph[m]
            if d.startswith(f"{engines}{b}")
        ]
    assert wrong == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_protocol_is_registered_under_its_payload_name_and_complete():
    """A protocol's request and spec are dataclasses whose fields are its proto payloads'."""
    from leteo_fed.proto import leteo_pb2 as pb

    protocols = registry.all_protocols()
    expected = {"moments", "kmeans", "ldp", "weighted_stats", "crosstab", "quantiles", "logreg"}
    expected |= {"naive_bayes"}
    assert {p.name for p in protocols} >= expected
    request_payloads = {f.name for f in pb.RoundRequest.DESCRIPTOR.oneofs_by_name["payload"].fields}
    spec_payloads = {f.name for f in pb.RoundSpec.DESCRIPTOR.oneofs_by_name["payload"].fields}
    assert request_payloads == spec_payloads == {p.name for p in protocols}
    for protocol in protocols:
        assert isinstance(protocol, FederatedProtocol) and protocol.kind in (SECURE_SUM, REPORTS)
        for dc, payload in (
            (protocol.request_type, pb.RoundRequest.DESCRIPTOR.fields_by_name[protocol.name]),
            (protocol.spec_type, pb.RoundSpec.DESCRIPTOR.fields_by_name[protocol.name]),
        ):
            wire = set(payload.message_type.fields_by_name)
            fields = {f.name for f in dataclasses.fields(dc)}
            assert fields <= wire, (protocol.name, dc.__name__, fields - wire)


def test_every_result_type_has_its_typed_message():
    """Results travel typed: each result dataclass is a RoundResult field of the same shape."""
    from leteo_fed.proto import leteo_pb2 as pb
    from leteo_fed.protocols.results import RESULT_TYPES

    registry.names()  # loads every protocol module and its result types
    oneof = {f.name: f for f in pb.RoundResult.DESCRIPTOR.oneofs_by_name["result"].fields}
    assert set(RESULT_TYPES) == set(oneof)
    for name, cls in RESULT_TYPES.items():
        wire = set(oneof[name].message_type.fields_by_name)
        fields = {f.name for f in dataclasses.fields(cls)}
        assert fields == wire, (name, fields ^ wire)


def test_every_protocol_plot_can_be_drawn_again_by_leteo_fed_result():
    """`leteo-fed result` draws the figure the command drew: a protocol naming a `plot_file`
    has an entry in its table, and the entry names a function that exists."""
    import importlib

    from leteo_fed.cli.jobs import PLOTTERS

    for protocol in registry.all_protocols():
        if protocol.plot_file is None:
            continue
        assert protocol.name in PLOTTERS, protocol.name
        module, function = PLOTTERS[protocol.name]
        assert callable(getattr(importlib.import_module(module), function))
