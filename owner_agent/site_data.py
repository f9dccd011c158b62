"""The site's data as the protocols see it: one table read, or statistics computed with Spark.

`policy.min_rows` is enforced here, where every protocol's rows are read: the count is known
exactly, before any statistic is computed, noised or encrypted, and no extra pass over the data
is made to learn it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from leteo_fed import extras
from leteo_fed.config import SPARK_AUTO_BYTES, DataSourceConfig
from leteo_fed.data import sources
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.protocols import moments
from owner_agent.policy import min_rows_refusal

log = logging.getLogger("leteo.owner")


class TableView:
    """Rows read once; columns as a float matrix or as label strings."""

    def __init__(self, table) -> None:
        self._table = table

    def matrix(self, columns: Sequence[str]) -> np.ndarray:
        return sources.to_matrix(self._table, columns)

    def labels(self, column: str) -> list[str]:
        return sources.label_strings(self._table, column)


class LocalSite:
    """A site's configured data source (a local file, or any Spark-readable URI)."""

    def __init__(self, site_id: str, data: DataSourceConfig, min_rows: int = 1) -> None:
        self.site_id = site_id
        self.data = data
        self.min_rows = min_rows  # policy.min_rows: fewer rows are never used
        if (data.engine == "spark" or not self.is_local) and not extras.installed("pyspark"):
            raise ConfigError(
                f"data.path {data.path!r} with engine {data.engine!r} is read with Spark: "
                f"{extras.hint('spark')}",
                field="data.engine",
            )

    @property
    def is_local(self) -> bool:
        return sources.is_local(self.data.path)

    @property
    def uses_spark(self) -> bool:
        if self.data.engine != "auto":
            return self.data.engine == "spark"
        if not self.is_local:
            return True
        return Path(self.data.path.removeprefix("file://")).stat().st_size > SPARK_AUTO_BYTES

    @property
    def file_name(self) -> str:
        return Path(self.data.path).name

    def missing_columns(self, columns: Sequence[str]) -> list[str]:
        """Columns a local file lacks (remote sources are checked when read)."""
        if not self.is_local:
            return []
        available = sources.column_names(self.data.path, self.data.format)
        return [c for c in columns if c not in available]

    def read(self, columns: Sequence[str]) -> TableView:
        table = sources.read_table(self.data.path, self.data.format, list(columns))
        self._require_rows(table.num_rows)
        return TableView(table)

    def _require_rows(self, rows: int) -> None:
        reason = min_rows_refusal(self.min_rows, rows)
        if reason:
            log.warning("site %s has %d rows, fewer than policy.min_rows", self.site_id, rows)
            raise DataError(reason, rule="policy.min_rows")

    def spark_moments(
        self, features: Sequence[str], groupings: Sequence[moments.Grouping], value_bound: float
    ) -> moments.LocalMoments:
        if not extras.installed("pyspark"):  # engine "auto" on a file past the threshold
            raise DataError(
                f"{self.data.path} is too large for the numpy engine: {extras.hint('spark')}"
            )
        from leteo_fed.data import spark_stats  # the [spark] extra, only when configured

        log.info("computing statistics with Spark over %s", self.data.path)
        mom = spark_stats.spark_local_moments(
            self.data.path,
            list(features),
            list(groupings) or [moments.ALL_ROWS],
            self.data.format,
            value_bound,
        )
        self._require_rows(int(mom.m[0].sum()))  # every row is counted in the first grouping
        return mom
