"""The site's data as the protocols see it: one table read (from a file or, with the [sql] extra,
a database query), or statistics computed with Spark.

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

    @property
    def num_rows(self) -> int:
        return self._table.num_rows

    def describe(self, column: str) -> tuple[str, int]:
        """('numeric' or the column's type, its missing values: nulls and NaN)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        col = self._table.column(column)
        missing = col.null_count
        if pa.types.is_floating(col.type):
            missing += int(pc.sum(pc.is_nan(col)).as_py() or 0)
        numeric = pa.types.is_integer(col.type) or pa.types.is_floating(col.type)
        return ("numeric" if numeric else f"text ({col.type})"), missing


class LocalSite:
    """A site's configured data source (a local file, any Spark-readable URI, or a database)."""

    def __init__(self, site_id: str, data: DataSourceConfig, min_rows: int = 1) -> None:
        self.site_id = site_id
        self.data = data
        self.sql = data.sql  # a database source: read by this agent, numpy engine
        self.min_rows = min_rows  # policy.min_rows: fewer rows are never used
        if self.sql is not None:
            missing = [
                p for p in ("adbc_driver_manager", self.sql.driver) if not extras.installed(p)
            ]
            if missing:
                raise ConfigError(
                    f"data.url {self.sql.describe()} is read with ADBC: {extras.hint('sql')} "
                    f"(no module named {missing[0]!r})",
                    field="data.url",
                )
        elif (data.engine == "spark" or not self.is_local) and not extras.installed("pyspark"):
            raise ConfigError(
                f"data.path {data.path!r} with engine {data.engine!r} is read with Spark: "
                f"{extras.hint('spark')}",
                field="data.engine",
            )

    @property
    def is_local(self) -> bool:
        """Read by this agent itself: a local file or a database (not a Spark URI)."""
        return self.sql is not None or sources.is_local(self.data.path)

    @property
    def uses_spark(self) -> bool:
        if self.sql is not None:
            return False  # engine "spark" with a database is refused by the config
        if self.data.engine != "auto":
            return self.data.engine == "spark"
        if not self.is_local:
            return True
        return Path(self.data.path.removeprefix("file://")).stat().st_size > SPARK_AUTO_BYTES

    @property
    def file_name(self) -> str:
        if self.sql is not None:
            return self.sql.describe()
        return Path(self.data.path).name

    def column_names(self) -> list[str]:
        """The source's columns from its schema alone (a database: `LIMIT 0`); a remote file
        (read by Spark) gives none here."""
        if self.sql is not None:
            return self.sql.column_names()
        if not self.is_local:
            return []
        return sources.column_names(self.data.path, self.data.format)

    def missing_columns(self, columns: Sequence[str]) -> list[str]:
        """Columns a local file or the database query lacks; remote files are checked when
        read."""
        if not self.is_local:
            return []
        available = self.column_names()
        return [c for c in columns if c not in available]

    def read(self, columns: Sequence[str]) -> TableView:
        if self.sql is not None:
            table = self.sql.read_table(list(columns))
        else:
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
