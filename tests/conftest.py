"""Fixtures shared by test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The process's embedded Spark session (JVM start-up is paid once per test run)."""
    from leteo_fed.data.spark_stats import get_spark

    yield get_spark()
