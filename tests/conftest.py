"""Fixtures shared by test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

HEAVY_MARKERS = ("slow", "spark")  # multi-process deployments, Spark sessions and clusters


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files with a multi-process or Spark test run first, each file's tests still in their
    order. `make test` hands whole files to its workers in this order, so the long files start
    early and the many short ones fill in at the end, instead of one worker finishing a
    two-minute cluster test alone while the other waits."""
    heavy = {item.path for item in items if any(item.get_closest_marker(m) for m in HEAVY_MARKERS)}
    items.sort(key=lambda item: item.path not in heavy)  # stable: order kept within each group


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The process's embedded Spark session (JVM start-up is paid once per test run)."""
    from leteo_fed.data.spark_stats import get_spark

    yield get_spark()


@pytest.fixture(scope="session")
def postgres() -> Iterator[object]:
    """A PostgreSQL server of its own for the run (tests/postgres_server.py: pgserver's
    binaries, password authentication on 127.0.0.1, as `nobody` when the tests run as root),
    stopped and removed at the end."""
    pytest.importorskip("adbc_driver_postgresql", reason="needs the [sql] extra")
    from postgres_server import start_server

    server = start_server()
    try:
        yield server
    finally:
        server.stop()
