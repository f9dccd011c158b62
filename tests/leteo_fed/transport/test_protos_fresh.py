"""The committed gRPC stubs must be exactly what scripts/gen_protos.py makes from protos/."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "leteo_fed" / "proto"


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "scripts" / "gen_protos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, list[Path]]:
    gen = load_generator()
    out = tmp_path_factory.mktemp("stubs")
    return gen, gen.generate(out)


def test_generator_writes_every_stub(generated) -> None:
    gen, paths = generated
    assert sorted(p.name for p in paths) == sorted(gen.STUBS)
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)


@pytest.mark.parametrize("name", ["leteo_pb2.py", "leteo_pb2.pyi", "leteo_pb2_grpc.py"])
def test_committed_stub_is_fresh(generated, name: str) -> None:
    _, paths = generated
    fresh = {p.name: p for p in paths}[name]
    committed = COMMITTED / name
    assert committed.is_file(), f"{committed} is missing: run `make protos`"
    assert committed.read_bytes() == fresh.read_bytes(), (
        f"leteo_fed/proto/{name} is stale relative to protos/: run `make protos`"
    )


def test_grpc_stub_uses_package_relative_import(generated) -> None:
    _, paths = generated
    text = {p.name: p for p in paths}["leteo_pb2_grpc.py"].read_text()
    assert "from . import leteo_pb2" in text
    assert "from leteo.v1 import" not in text
