"""Fixtures shared by test modules."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Every Spark driver the tests start (in this process or in a CLI subprocess, which inherits the
# environment) runs a short job on a few thousand rows. HotSpot's optimizing JIT compiler costs
# more CPU in such a JVM than it saves: a session's start and a small group-by took 34 CPU
# seconds with it and 18 without it (C1 only, serial GC), on 2 cores where the test workers
# compete for CPU. Deployments keep the JVM's defaults; `--engine spark` jobs on real data need C2.
JVM_TEST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_TEST_OPTIONS)
# The services and CLI commands the tests start are hundreds of short processes. OpenBLAS starts
# a thread per core in each at import (0.15 s of CPU for numpy's import alone on 2 cores), and
# the test workers already use every core; the matrices here are small.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


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
