"""`leteo-fed bench pca`: share, aggregation, decryption and eigendecomposition timings.

A thin command over the benchmark of a source checkout, `benchmarks/bench_pca_share.py` (not
installed with the package): the options come from :mod:`leteo_fed.bench` (argparse only); the
benchmark, which runs the owner agent's, the aggregator's and the CSP's own code and compares
with the `phe` library of the [bench] extra, is loaded when the command runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from leteo_fed import extras
from leteo_fed.cli.options import SubParsers, set_handler
from leteo_fed.errors import ConfigError

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_pca_share.py"


def add_parser(sub: SubParsers) -> None:
    from leteo_fed.bench import DESCRIPTION, add_pca_arguments

    bench = sub.add_parser("bench", help="benchmarks (PCA and DCA share costs)")
    p = bench.add_subparsers(dest="action", required=True, metavar="BENCH").add_parser(
        "pca",
        help="owner, aggregator, CSP and eigendecomposition times per feature count vs phe",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_pca_arguments(p)
    set_handler(p, run)


def benchmark_path(path: Path) -> Path:
    """The benchmark script; ConfigError outside a source checkout."""
    if not path.is_file():
        raise ConfigError(
            f"`leteo-fed bench` runs {path.parent.name}/{path.name} of a source checkout, "
            f"and this installation has none ({path} does not exist): run it from a clone of "
            "the repository (`make bench`)"
        )
    return path


def load_benchmark(path: Path | None = None) -> ModuleType:
    """The benchmark script as a module (loaded once per process)."""
    path = path or BENCHMARK
    name = "bench_pca_share"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, benchmark_path(path))
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def run(args: argparse.Namespace) -> int:
    benchmark_path(BENCHMARK)  # a checkout first: the extra alone would not make it run
    extras.require("phe")
    return load_benchmark().run_cli(args)
