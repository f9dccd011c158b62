"""Fixtures shared by test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
