"""A site's rows straight from an SQL database (PostgreSQL, SQLite), read into Arrow.

The ADBC drivers of the [sql] extra hand back Arrow columns: no row goes through a Python loop.
A round reads only the columns it needs, from the configured query or table wrapped as a
subquery (``SELECT leteo_src."a", leteo_src."b" FROM (<query>) AS leteo_src``), once per round.
The columns are qualified by the alias because SQLite takes an unknown double-quoted name for a
string literal; qualified, a missing column is an error in both databases.

The password never sits in the config file or the URL: it comes from an environment variable
or from a file that only its owner may read, and it is read again at each connection.
"""

from __future__ import annotations

import importlib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit, urlunsplit

from leteo_fed import extras
from leteo_fed.errors import ConfigError, DataError

if TYPE_CHECKING:  # Arrow is loaded when a database is read, not by every agent that starts
    import pyarrow as pa

POSTGRESQL, SQLITE = "postgresql", "sqlite"
SCHEMES = {"postgresql": POSTGRESQL, "postgres": POSTGRESQL, "sqlite": SQLITE}
DRIVERS = {POSTGRESQL: "adbc_driver_postgresql", SQLITE: "adbc_driver_sqlite"}
ALIAS = "leteo_src"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_SQLITE_BATCH_ROWS = 1 << 30  # one batch: SQLite column types are inferred from every row


def quote_identifier(name: str) -> str:
    """A double-quoted SQL identifier (PostgreSQL and SQLite): any name, no injection."""
    if not name or "\0" in name:
        raise DataError(f"column name {name!r} cannot be used in SQL", field=name or None)
    return '"' + name.replace('"', '""') + '"'


def table_reference(table: str) -> str:
    """`schema.table` or `table`, each part checked as a plain identifier and quoted."""
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.match(p) for p in parts):
        raise ConfigError(
            f"'data.table' must be a table name (letters, digits, _ and $, not starting with a "
            f"digit; optionally schema.table), got {table!r}; use data.query for anything else",
            field="data.table",
        )
    return ".".join(quote_identifier(p) for p in parts)


def select_columns(inner: str, columns: Sequence[str]) -> str:
    """The round's read: only `columns`, from the source query as a subquery."""
    names = ", ".join(f"{ALIAS}.{quote_identifier(c)}" for c in columns)
    return f"SELECT {names} FROM (\n{inner}\n) AS {ALIAS}"


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"'data.{key}' must be a non-empty string", field=f"data.{key}")
    return value


@dataclass(frozen=True)
class SqlSource:
    """A validated `[data]` database source (`sql_source` builds it from the config keys)."""

    url: str  # carries no password
    query: str | None = None
    table: str | None = None
    password_env: str | None = None
    password_file: Path | None = None

    @property
    def dialect(self) -> str:
        return SCHEMES[urlsplit(self.url).scheme.lower()]

    @property
    def driver(self) -> str:
        return DRIVERS[self.dialect]

    @property
    def sqlite_path(self) -> Path:
        """`sqlite:///rel.db` (relative to the config) or `sqlite:////abs.db`: resolved by
        `sql_source`, so the URL's path is absolute here."""
        return Path(urlsplit(self.url).path[1:])

    @property
    def inner(self) -> str:
        """The source rows: the configured query, or every column of the table."""
        if self.table is not None:
            return f"SELECT * FROM {table_reference(self.table)}"
        return str(self.query)

    def describe(self) -> str:
        """For logs and the site's own refusal details (no password is ever in the URL)."""
        what = f"table {self.table}" if self.table is not None else "query"
        return f"{self.url} ({what})"

    # ---------------------------------------------------------------- secrets

    def password(self) -> str | None:
        if self.password_env is not None:
            value = os.environ.get(self.password_env, "")
            if not value:
                raise ConfigError(
                    f"data.password_env names {self.password_env}, which is not set (or empty) "
                    "in the owner agent's environment",
                    field="data.password_env",
                )
            return value
        if self.password_file is not None:
            return read_password_file(self.password_file)
        return None  # the database needs none (or libpq finds it: PGPASSFILE, a client cert)

    # ---------------------------------------------------------------- reading

    def connect(self, password: str | None = None) -> Any:
        """A DBAPI connection of the ADBC driver, read-only where the database allows it
        (`password`: from `password()`, read once per connection)."""
        try:
            driver = importlib.import_module(f"{self.driver}.dbapi")
        except ImportError as exc:
            raise ConfigError(
                f"data.url {self.describe()} is read with ADBC: {extras.hint('sql')} "
                f"(no module named {self.driver!r})",
                field="data.url",
            ) from exc
        if self.dialect == SQLITE:
            path = self.sqlite_path
            if not path.is_file():
                raise DataError(f"database file not found: {path}", field="url")
            return driver.connect(f"file:{quote(str(path))}?mode=ro")
        conn = driver.connect(_with_password(self.url, password), autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("SET default_transaction_read_only = on")
        except BaseException:
            conn.close()
            raise
        return conn

    def _fetch(self, sql: str) -> pa.Table:
        error = _driver_error()
        password = self.password()
        try:
            with self.connect(password) as conn, conn.cursor() as cur:
                if self.dialect == SQLITE:
                    cur.adbc_statement.set_options(
                        **{"adbc.sqlite.query.batch_rows": str(_SQLITE_BATCH_ROWS)}
                    )
                cur.execute(sql)
                return cur.fetch_arrow_table()
        except error as exc:
            message = str(exc).strip()
            if password:  # libpq does not echo it; should a driver ever do, it stays hidden
                for form in (password, quote(password, safe="")):
                    message = message.replace(form, "***")
            raise DataError(f"cannot read {self.describe()}: {message}") from exc

    def column_names(self) -> list[str]:
        """The source's columns, from its schema alone (`LIMIT 0`: no row is read)."""
        return list(
            self._fetch(f"SELECT * FROM (\n{self.inner}\n) AS {ALIAS} LIMIT 0").schema.names
        )

    def read_table(self, columns: Sequence[str]) -> pa.Table:
        """The source's rows, only `columns`, typed by the database (numeric as float64)."""
        wanted = list(dict.fromkeys(columns))
        if not wanted:
            raise DataError("a round must read at least one column")
        try:
            table = self._fetch(select_columns(self.inner, wanted))
        except DataError:
            available = self.column_names()
            missing = [c for c in wanted if c not in available]
            if missing:
                raise DataError(
                    f"column '{missing[0]}' is not in {self.describe()} "
                    f"(columns: {', '.join(available)})",
                    field=missing[0],
                ) from None
            raise
        return _numeric_as_float(table)


def _driver_error() -> type[BaseException]:
    try:
        from adbc_driver_manager import Error
    except ImportError as exc:
        raise ConfigError(
            f"database sources are read with ADBC: {extras.hint('sql')}", field="data.url"
        ) from exc
    return Error


def _with_password(url: str, password: str | None) -> str:
    """The connection URI with the password as a libpq option: in memory only, never logged."""
    if password is None:
        return url
    parts = urlsplit(url)
    option = f"password={quote(password, safe='')}"
    return urlunsplit(parts._replace(query=f"{parts.query}&{option}" if parts.query else option))


def _numeric_as_float(table: pa.Table) -> pa.Table:
    """PostgreSQL `numeric` comes as text (an opaque extension type): parsed to float64, in
    Arrow. Decimal types likewise. Every other type is left for `sources.to_matrix` to judge."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, field in enumerate(table.schema):
        meta = field.metadata or {}
        column = table.column(i)
        if meta.get(b"POSTGRESQL:type") == b"numeric":
            if isinstance(field.type, pa.BaseExtensionType):
                column = pa.chunked_array(
                    [chunk.storage for chunk in column.chunks], type=field.type.storage_type
                )
        elif not pa.types.is_decimal(field.type):
            continue
        try:
            values = pc.cast(column, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(
                f"column '{field.name}' is not numeric ({exc})", field=field.name, rule="values"
            ) from exc
        table = table.set_column(i, pa.field(field.name, pa.float64()), values)
    return table


def read_password_file(path: Path) -> str:
    """The file's first line; refused unless only its owner may read it (chmod 600)."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(
            f"data.password_file {path}: {exc.strerror}", field="data.password_file"
        ) from exc
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"data.password_file {path} is not a regular file", field="data.password_file"
        )
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(
            f"data.password_file {path} is accessible by group or others (mode "
            f"{stat.S_IMODE(mode):03o}); run: chmod 600 {path}",
            field="data.password_file",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read data.password_file {path}: {exc}", field="data.password_file"
        ) from exc
    password = text.splitlines()[0] if text else ""
    if not password:
        raise ConfigError(f"data.password_file {path} is empty", field="data.password_file")
    return password


def _check_url(url: str, base: Path) -> str:
    """The URL with a relative SQLite path made absolute; refuses a password in it."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(
            "'data.url' must be postgresql://user@host:port/database or sqlite:///file.db, "
            f"got a {scheme + '://' if scheme else 'schemeless'} URL",
            field="data.url",
        )
    query = {k.lower() for k in parse_qs(parts.query, keep_blank_values=True)}
    if parts.password is not None or "password" in query:
        raise ConfigError(
            "'data.url' carries a password; take it out of the URL and give "
            "data.password_env (an environment variable) or data.password_file instead",
            field="data.url",
        )
    if SCHEMES[scheme] == POSTGRESQL:
        return url
    if parts.netloc or parts.query or not parts.path.removeprefix("/"):
        raise ConfigError(
            "'data.url' for SQLite is sqlite:///relative/file.db (to the config's folder) or "
            "sqlite:////absolute/file.db, without host or options",
            field="data.url",
        )
    path = (base / parts.path[1:]).resolve()  # an absolute path stays as it is
    return f"sqlite:///{path}"


def sql_source(doc: dict[str, Any], base: Path) -> SqlSource:
    """The `[data]` keys of a database source, each misuse refused naming its key."""
    url = _check_url(_text(doc["url"], "url"), base)
    has_query, has_table = "query" in doc, "table" in doc
    if has_query == has_table:
        raise ConfigError(
            "with 'data.url' give exactly one of 'data.query' (an SQL SELECT) or 'data.table'"
            + (", not both" if has_query else ""),
            field="data.table" if has_query else "data.query",
        )
    query = table = None
    if has_query:
        query = _text(doc["query"], "query").strip().rstrip(";").strip()
        if not query:
            raise ConfigError("'data.query' must be a non-empty string", field="data.query")
    else:
        table = _text(doc["table"], "table").strip()
        table_reference(table)
    env = _text(doc["password_env"], "password_env") if "password_env" in doc else None
    file = _text(doc["password_file"], "password_file") if "password_file" in doc else None
    if env is not None and file is not None:
        raise ConfigError(
            "give 'data.password_env' or 'data.password_file', not both",
            field="data.password_file",
        )
    source = SqlSource(
        url, query, table, env, (base / file).resolve() if file is not None else None
    )
    if source.dialect == SQLITE and (env is not None or file is not None):
        key = "password_env" if env is not None else "password_file"
        raise ConfigError(f"SQLite has no password: remove 'data.{key}'", field=f"data.{key}")
    source.password()  # the variable is set, the file exists and is private: now, not mid-round
    return source
