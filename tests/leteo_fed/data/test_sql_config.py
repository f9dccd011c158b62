"""`[data]` with a database: url, query or table, and a password that never sits in the TOML.

Every misuse is refused when the config is loaded, by a ConfigError naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from leteo_fed import extras
from leteo_fed.config import load_owner_config
from leteo_fed.data.sql import SqlSource, select_columns, table_reference
from leteo_fed.errors import ConfigError, DataError
from owner_agent.site_data import LocalSite

HEAD = """\
site_id = "site-1"

[peers]
aggregator = "aggregator:50052"
csp = "csp:50051"

[tls]
insecure = true

[data]
"""
PG = 'url = "postgresql://leteo@db.school.example:5432/sis"\n'
QUERY = 'query = "SELECT age, score, grade FROM students WHERE year = 2025"\n'
ENV = 'password_env = "SIS_DB_PASSWORD"\n'


def load(tmp_path: Path, data: str):
    path = tmp_path / "owner.toml"
    path.write_text(HEAD + data)
    return load_owner_config(path)


@pytest.fixture
def password(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SIS_DB_PASSWORD", "s3cret/with@odd:chars")
    return "s3cret/with@odd:chars"


def test_postgres_query_with_password_env(tmp_path, password):
    cfg = load(tmp_path, PG + QUERY + ENV + 'label_column = "grade"\n')
    sql = cfg.data.sql
    assert isinstance(sql, SqlSource) and cfg.data.path == ""
    assert sql.url == "postgresql://leteo@db.school.example:5432/sis"
    assert sql.dialect == "postgresql" and sql.driver == "adbc_driver_postgresql"
    assert sql.query == "SELECT age, score, grade FROM students WHERE year = 2025"
    assert sql.table is None and sql.password() == password
    assert cfg.data.label_column == "grade" and cfg.data.engine == "auto"
    assert password not in cfg.data.describe() and password not in repr(cfg.data)
    site = LocalSite("site-1", cfg.data)
    assert site.is_local and not site.uses_spark  # numpy engine, read by the agent itself
    assert (
        cfg.data.describe()
        == site.file_name
        == ("postgresql://leteo@db.school.example:5432/sis (query)")
    )


def test_table_and_password_file(tmp_path):
    secret = tmp_path / "secrets" / "sis"
    secret.parent.mkdir()
    secret.write_text("from-a-file\n")
    secret.chmod(0o600)
    cfg = load(tmp_path, PG + 'table = "school.students"\npassword_file = "secrets/sis"\n')
    sql = cfg.data.sql
    assert sql is not None and sql.table == "school.students" and sql.query is None
    assert sql.password_file == secret.resolve() and sql.password() == "from-a-file"
    assert sql.inner == 'SELECT * FROM "school"."students"'
    assert cfg.data.describe().endswith("(table school.students)")


def test_a_trailing_semicolon_is_dropped_and_columns_are_quoted(tmp_path, password):
    cfg = load(tmp_path, PG + 'query = """SELECT * FROM t -- all of it\n;  """\n' + ENV)
    assert cfg.data.sql is not None
    assert cfg.data.sql.query == "SELECT * FROM t -- all of it"
    sql = select_columns(cfg.data.sql.inner, ["age", 'we"ird col'])
    # the query sits on lines of its own: its trailing comment cannot swallow the alias
    assert sql == (
        'SELECT leteo_src."age", leteo_src."we""ird col" FROM (\n'
        "SELECT * FROM t -- all of it\n) AS leteo_src"
    )


def test_sqlite_paths_resolve_against_the_config_folder(tmp_path):
    cfg = load(tmp_path, 'url = "sqlite:///site.db"\ntable = "rows"\n')
    assert cfg.data.sql is not None
    assert cfg.data.sql.sqlite_path == (tmp_path / "site.db").resolve()
    assert cfg.data.sql.url == f"sqlite:///{(tmp_path / 'site.db').resolve()}"
    absolute = tmp_path / "elsewhere" / "x.db"
    cfg = load(tmp_path, f'url = "sqlite:///{absolute}"\ntable = "rows"\n')
    assert cfg.data.sql is not None and cfg.data.sql.sqlite_path == absolute
    assert cfg.data.sql.dialect == "sqlite" and cfg.data.sql.password() is None


def test_postgres_without_a_password_key_is_allowed(tmp_path):
    """Peer or certificate authentication, or libpq's own password file."""
    cfg = load(tmp_path, 'url = "postgresql:///sis?host=/var/run/postgresql"\n' + QUERY)
    assert cfg.data.sql is not None and cfg.data.sql.password() is None


def _private(tmp_path: Path, mode: int) -> Path:
    secret = tmp_path / "pw"
    secret.write_text("x\n")
    secret.chmod(mode)
    return secret


@pytest.mark.parametrize(
    ("data", "needle", "field"),
    [
        (PG + 'path = "a.csv"\n' + QUERY + ENV, "not both", "data.url"),
        ("", "missing required key 'data.path'", "data.path"),
        (PG + ENV, "exactly one of 'data.query'", "data.query"),
        (PG + QUERY + 'table = "students"\n' + ENV, "not both", "data.table"),
        (PG + 'table = "students; DROP TABLE x"\n' + ENV, "table name", "data.table"),
        (PG + 'table = "a.b.c"\n' + ENV, "table name", "data.table"),
        (PG + 'table = "1st"\n' + ENV, "table name", "data.table"),
        (PG + 'query = "  ;  "\n' + ENV, "non-empty", "data.query"),
        (PG + "query = 3\n" + ENV, "non-empty string", "data.query"),
        (
            'url = "postgresql://leteo:hunter2@db:5432/sis"\n' + QUERY,
            "carries a password",
            "data.url",
        ),
        ('url = "postgresql://leteo:@db:5432/sis"\n' + QUERY, "carries a password", "data.url"),
        (
            'url = "postgresql://leteo@db/sis?password=hunter2"\n' + QUERY,
            "carries a password",
            "data.url",
        ),
        ('url = "mysql://leteo@db/sis"\n' + QUERY, "postgresql://", "data.url"),
        ('url = "students.db"\n' + QUERY, "schemeless", "data.url"),
        ('url = "sqlite://host/x.db"\n' + QUERY, "sqlite:///", "data.url"),
        ('url = "sqlite:///"\n' + QUERY, "sqlite:///", "data.url"),
        ('url = "sqlite:///x.db"\n' + QUERY + ENV, "SQLite has no password", "data.password_env"),
        (PG + QUERY + 'password_env = "LETEO_TEST_UNSET_VARIABLE"\n', "not set", "data.password_env"),
        (PG + QUERY + ENV + 'password_file = "pw"\n', "not both", "data.password_file"),
        (PG + QUERY + 'password_file = "absent"\n', "absent", "data.password_file"),
        (PG + QUERY + ENV + 'format = "csv"\n', "data.format", "data.format"),
        (PG + QUERY + ENV + 'engine = "spark"\n', "numpy engine", "data.engine"),
        ('path = "a.csv"\n' + QUERY, "needs 'data.url'", "data.query"),
        ('path = "a.csv"\n' + ENV, "needs 'data.url'", "data.password_env"),
        ('path = "a.csv"\ntable = "t"\n', "needs 'data.url'", "data.table"),
        (PG + QUERY + ENV + 'passwd_env = "X"\n', "unknown key 'data.passwd_env'", "data.passwd_env"),
    ],
    ids=[
        "path-and-url",
        "neither-path-nor-url",
        "neither-query-nor-table",
        "query-and-table",
        "table-injection",
        "table-three-parts",
        "table-leading-digit",
        "query-only-semicolon",
        "query-not-string",
        "password-in-url",
        "empty-password-in-url",
        "password-in-url-options",
        "unknown-scheme",
        "no-scheme",
        "sqlite-with-host",
        "sqlite-without-file",
        "sqlite-with-password",
        "password-env-unset",
        "both-password-keys",
        "password-file-missing",
        "format-with-url",
        "spark-with-url",
        "query-without-url",
        "password-without-url",
        "table-without-url",
        "unknown-data-key",
    ],
)  # fmt: skip
def test_each_misuse_names_its_key(tmp_path, password, data, needle, field):
    _private(tmp_path, 0o600)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, data)
    assert needle in str(info.value)
    assert info.value.field == field
    assert "hunter2" not in str(info.value)  # a refused URL is not echoed with its password


def test_password_env_set_but_empty_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SIS_DB_PASSWORD", "")
    with pytest.raises(ConfigError, match="not set") as info:
        load(tmp_path, PG + QUERY + ENV)
    assert info.value.field == "data.password_env"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644])
def test_password_file_readable_by_group_or_others_is_refused(tmp_path, mode):
    """Refused (as the project's key files are), not merely warned about: chmod 600 it."""
    _private(tmp_path, mode)
    with pytest.raises(ConfigError, match="chmod 600") as info:
        load(tmp_path, PG + QUERY + 'password_file = "pw"\n')
    assert info.value.field == "data.password_file"


def test_password_file_empty_or_a_folder_is_refused(tmp_path):
    _private(tmp_path, 0o600).write_text("")
    with pytest.raises(ConfigError, match="empty"):
        load(tmp_path, PG + QUERY + 'password_file = "pw"\n')
    (tmp_path / "dir").mkdir(mode=0o700)
    with pytest.raises(ConfigError, match="not a regular file"):
        load(tmp_path, PG + QUERY + 'password_file = "dir"\n')


def test_the_password_file_is_read_at_each_connection(tmp_path):
    """A rotated password is picked up without restarting the agent."""
    secret = _private(tmp_path, 0o600)
    cfg = load(tmp_path, PG + QUERY + 'password_file = "pw"\n')
    assert cfg.data.sql is not None and cfg.data.sql.password() == "x"
    secret.write_text("rotated\n")
    assert cfg.data.sql.password() == "rotated"


def test_a_missing_sql_extra_names_it(tmp_path, password, monkeypatch):
    cfg = load(tmp_path, PG + QUERY + ENV)
    real = extras.installed
    monkeypatch.setattr(extras, "installed", lambda p: False if p.startswith("adbc_") else real(p))
    with pytest.raises(ConfigError) as info:
        LocalSite("site-1", cfg.data)
    assert "pip install 'leteo-fed[sql]'" in str(info.value)
    assert info.value.field == "data.url"
    assert extras.EXTRA_OF["adbc_driver_postgresql"] == "sql"


def test_table_names_and_column_names_are_quoted():
    assert table_reference("students") == '"students"'
    assert table_reference("s_1.t$2") == '"s_1"."t$2"'
    for bad in ("", "a b", 'a"b', "a;b", "a.", ".a", "a--b"):
        with pytest.raises(ConfigError):
            table_reference(bad)
    with pytest.raises(DataError):
        select_columns("SELECT 1", ["a\0b"])
