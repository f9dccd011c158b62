"""Reading a site's rows from SQLite (a file made here with the stdlib) and from a real
PostgreSQL server (the session's `postgres` fixture), through the owner agent's `LocalSite`:
typed columns, NULLs refused naming the column as for files, only the round's columns read,
table or query, `policy.min_rows`, the columns a round may miss."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from leteo_fed.config import load_data_source
from leteo_fed.data import sources
from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.errors import ConfigError, DataError
from owner_agent.site_data import LocalSite

pytest.importorskip("adbc_driver_sqlite", reason="needs the [sql] extra")

ROWS = [  # age INTEGER, score REAL, grade TEXT, note TEXT (never read by a round)
    (14, 12.5, "A", "x"),
    (15, 9.0, "B", "y"),
    (16, 15.25, "A", "z"),
    (17, 11.0, "C", "w"),
]


def make_sqlite(path: Path, rows=ROWS) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE students (age INTEGER, score REAL, grade TEXT, note TEXT)")
        conn.executemany("INSERT INTO students VALUES (?, ?, ?, ?)", rows)
    conn.close()
    return path


def sqlite_site(tmp_path: Path, min_rows: int = 1, **keys: str) -> LocalSite:
    doc = {"url": f"sqlite:///{tmp_path / 'site.db'}", **keys}
    if "query" not in doc and "table" not in doc:
        doc["table"] = "students"
    return LocalSite("site-1", load_data_source(doc, tmp_path), min_rows=min_rows)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return make_sqlite(tmp_path / "site.db")


def test_typed_columns_and_labels(db, tmp_path):
    site = sqlite_site(tmp_path)
    view = site.read(["age", "score", "grade"])
    np.testing.assert_array_equal(
        view.matrix(["age", "score"]), [[14, 12.5], [15, 9.0], [16, 15.25], [17, 11.0]]
    )
    assert view.labels("grade") == ["A", "B", "A", "C"]
    with pytest.raises(DataError, match="column 'grade' is not numeric") as err:
        view.matrix(["grade"])
    assert err.value.rule == "values"


def test_only_the_rounds_columns_are_read(db, tmp_path, monkeypatch):
    site = sqlite_site(tmp_path)
    table = site.sql.read_table(["score", "age", "score"])  # type: ignore[union-attr]
    assert table.column_names == ["score", "age"]
    assert table.schema.field("age").type == pa.int64()
    assert table.schema.field("score").type == pa.float64()


def test_table_and_query_read_the_same_rows(db, tmp_path):
    by_table = sqlite_site(tmp_path).read(["age", "score"]).matrix(["age", "score"])
    by_query = sqlite_site(
        tmp_path, query="SELECT note, score, age FROM students ORDER BY rowid;"
    ).read(["age", "score"])
    np.testing.assert_array_equal(by_query.matrix(["age", "score"]), by_table)
    older = sqlite_site(tmp_path, query="SELECT age AS years, score FROM students WHERE age > 15")
    assert older.missing_columns(["years", "score", "age"]) == ["age"]
    np.testing.assert_array_equal(older.read(["years"]).matrix(["years"]), [[16], [17]])


def test_null_is_refused_naming_the_column_as_in_a_file(tmp_path):
    """NULL becomes NaN, exactly as an empty CSV cell, and the same check names the column;
    a NULL label is a missing label."""
    rows = [(14, 12.5, "A", "x"), (15, None, "B", "y"), (16, 1.0, None, "z")]
    make_sqlite(tmp_path / "site.db", rows)
    csv = tmp_path / "same.csv"
    pacsv.write_csv(pa.table({"age": [14, 15, 16], "score": [12.5, None, 1.0]}), csv)
    errors = []
    for site in (
        sqlite_site(tmp_path),
        LocalSite("site-1", load_data_source({"path": str(csv)}, tmp_path)),
    ):
        x = site.read(["age", "score"]).matrix(["age", "score"])
        with pytest.raises(DataError) as err:
            check_finite_and_bounded(x, ["age", "score"], 100.0)
        errors.append((str(err.value), err.value.field, err.value.rule))
    assert errors[0] == errors[1]
    assert errors[0] == (
        "column 'score' has 1 missing, NaN or infinite value(s)",
        "score",
        "values",
    )
    with pytest.raises(DataError, match="label column 'grade' has 1 missing value"):
        sqlite_site(tmp_path).read(["grade"]).labels("grade")


def test_mixed_sqlite_storage_classes_are_typed_from_every_row(tmp_path):
    """SQLite types each value: integers then a real in one column give float64 (the column
    type is inferred over all rows, not the first batch); text among numbers is refused."""
    rows = [(i, float(i), "A", "n") for i in range(3000)]
    with sqlite3.connect(tmp_path / "site.db") as conn:
        conn.execute("CREATE TABLE students (age, score, grade, note)")
        conn.executemany("INSERT INTO students VALUES (?, ?, ?, ?)", rows)
        conn.execute("INSERT INTO students VALUES (2.5, 'high', 'B', 'n')")
    conn.close()
    view = sqlite_site(tmp_path).read(["age", "score"])
    ages = view.matrix(["age"])[:, 0]
    assert ages.shape == (3001,) and ages[-1] == 2.5
    with pytest.raises(DataError, match="column 'score' is not numeric"):
        view.matrix(["score"])


def test_missing_columns_and_min_rows(db, tmp_path):
    site = sqlite_site(tmp_path, min_rows=5)
    assert site.missing_columns(["age", "height", "grade"]) == ["height"]
    with pytest.raises(DataError) as err:  # a column absent from the query, as for a file
        site.read(["age", "height"])
    assert str(err.value).startswith("column 'height' is not in sqlite:///")
    assert err.value.field == "height"
    with pytest.raises(DataError, match="policy.min_rows") as err:
        site.read(["age"])
    assert err.value.rule == "policy.min_rows" and "4" not in str(err.value)
    assert len(sqlite_site(tmp_path, min_rows=4).read(["age"]).matrix(["age"])) == 4


def test_sqlite_is_opened_read_only_and_must_exist(db, tmp_path):
    site = sqlite_site(tmp_path, query="SELECT age FROM students")
    assert site.sql is not None
    with (
        site.sql.connect() as conn,
        conn.cursor() as cur,
        pytest.raises(Exception, match="readonly"),
    ):
        cur.execute("DELETE FROM students")
    assert len(site.read(["age"]).matrix(["age"])) == 4
    db.unlink()
    with pytest.raises(DataError, match="database file not found"):
        site.read(["age"])
    assert not db.exists()  # not created by the attempt


def test_bad_sql_is_a_data_error_naming_the_source(db, tmp_path):
    site = sqlite_site(tmp_path, query="SELECT age FROM no_such_table")
    with pytest.raises(DataError, match="cannot read sqlite:///.*no such table"):
        site.missing_columns(["age"])


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture(scope="module")
def school(postgres):
    """A database `school` owned by `teacher`, with typed columns and one NULL."""
    postgres.create_database("school", "teacher", "t-pass")
    with postgres.connect("school", "teacher", "t-pass") as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE students (id serial, age int2, credits int4, big int8, score float8, "
            "ratio float4, fee numeric(10,2), grade text, late boolean, year int4)"
        )
        cur.execute(
            "INSERT INTO students (age, credits, big, score, ratio, fee, grade, late, year) "
            "VALUES (14, 30, 5000000000, 12.5, 0.5, 100.25, 'A', false, 2025), "
            "(15, 28, 1, 9.0, 0.25, 99.50, 'B', true, 2025), "
            "(16, NULL, 2, 15.25, 0.75, 0.01, 'A', false, 2025), "
            "(17, 31, 3, 11.0, 1.0, 7, 'C', false, 2024)"
        )
    return postgres


def pg_site(server, tmp_path, monkeypatch, min_rows: int = 1, **keys: str) -> LocalSite:
    monkeypatch.setenv("SCHOOL_DB_PASSWORD", "t-pass")
    doc = {"url": server.url("school", "teacher"), "password_env": "SCHOOL_DB_PASSWORD", **keys}
    if "query" not in doc and "table" not in doc:
        doc["table"] = "students"
    return LocalSite("site-1", load_data_source(doc, tmp_path), min_rows=min_rows)


def test_postgres_typed_columns(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch, query="SELECT * FROM students ORDER BY id")
    cols = ["age", "big", "score", "ratio", "fee"]
    view = site.read([*cols, "grade"])
    np.testing.assert_array_equal(
        view.matrix(cols),
        [
            [14, 5e9, 12.5, 0.5, 100.25],
            [15, 1, 9.0, 0.25, 99.5],
            [16, 2, 15.25, 0.75, 0.01],
            [17, 3, 11.0, 1.0, 7.0],
        ],
    )  # int2/int8/float4 as numbers, numeric parsed to float64 (in Arrow)
    assert view.labels("grade") == ["A", "B", "A", "C"]
    for name, kind in (("grade", "string"), ("late", "bool")):
        with pytest.raises(DataError, match=f"column '{name}' is not numeric .*{kind}"):
            site.read([name]).matrix([name])


def test_postgres_null_refused_and_query_filters(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch)
    x = site.read(["age", "credits"]).matrix(["age", "credits"])
    with pytest.raises(DataError, match="column 'credits' has 1 missing") as err:
        check_finite_and_bounded(x, ["age", "credits"], 100.0)
    assert err.value.field == "credits"
    this_year = pg_site(
        school,
        tmp_path,
        monkeypatch,
        query="SELECT age, credits FROM students WHERE year = 2025 AND credits IS NOT NULL",
    )
    assert sorted(this_year.read(["age"]).matrix(["age"])[:, 0]) == [14, 15]
    assert this_year.missing_columns(["age", "score"]) == ["score"]
    assert this_year.sql is not None and this_year.sql.column_names() == ["age", "credits"]


def test_postgres_min_rows_and_missing_column(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch, min_rows=5)
    with pytest.raises(DataError, match="policy.min_rows"):
        site.read(["age"])
    with pytest.raises(DataError, match="column 'height' is not in postgresql://") as err:
        site.read(["height"])
    assert err.value.field == "height"


def test_postgres_session_is_read_only(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch)
    assert site.sql is not None
    with (
        site.sql.connect(site.sql.password()) as conn,
        conn.cursor() as cur,
        pytest.raises(Exception, match="read-only transaction"),
    ):
        cur.execute("DELETE FROM students")
    assert len(site.read(["age"]).matrix(["age"])) == 4


def test_postgres_wrong_password_never_shows_it(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch)
    monkeypatch.setenv("SCHOOL_DB_PASSWORD", "wrong-and-secret")
    with pytest.raises(DataError, match="password authentication failed") as err:
        site.read(["age"])
    assert "wrong-and-secret" not in str(err.value)
    monkeypatch.delenv("SCHOOL_DB_PASSWORD")
    with pytest.raises(ConfigError, match="not set") as err:
        site.read(["age"])
    assert err.value.field == "data.password_env"


def test_csv_and_postgres_give_the_same_matrix(school, tmp_path, monkeypatch):
    site = pg_site(school, tmp_path, monkeypatch, query="SELECT * FROM students ORDER BY id")
    csv = tmp_path / "same.csv"
    pacsv.write_csv(pa.table({"age": [14, 15, 16, 17], "score": [12.5, 9.0, 15.25, 11.0]}), csv)
    np.testing.assert_array_equal(
        site.read(["score", "age"]).matrix(["score", "age"]),
        sources.read_matrix(str(csv), ["score", "age"]),
    )
