"""An owner's read of its rows: a PostgreSQL query (ADBC) against the same rows in a CSV file.

A dev tool, not a test. It measures what an owner agent does at the start of a round, for each
source: read the round's columns into Arrow and turn them into the float64 matrix the protocols
use (`LocalSite.read(columns).matrix(columns)`), nothing else.

- Data: ``--rows`` rows (default 1,000,000) of ``--cols`` float64 columns (default 10), standard
  normal, seeded. Every source holds exactly these values, and every read is checked to give the
  identical matrix (bit for bit).
- CSV: written once with pyarrow (``pyarrow.csv.write_csv``) to a temporary folder; read by the
  existing file reader (`leteo_fed.data.sources.read_table` + `to_matrix`, multi-threaded
  pyarrow CSV parsing). The file is in the page cache after the first read.
- PostgreSQL: a server of its own, started as the test suite starts it
  (`tests/postgres_server.py`: pgserver's binaries, 127.0.0.1, SCRAM passwords, fsync off), the
  rows loaded with ADBC bulk ingest into a table ``rows`` (``double precision`` columns), then
  ``VACUUM ANALYZE``. Read by `leteo_fed.data.sql.SqlSource.read_table` with ``table = "rows"``:
  one connection (password from an environment variable, as an owner), ``SET
  default_transaction_read_only``, ``SELECT leteo_src."c0", ... FROM (SELECT * FROM "rows") AS
  leteo_src``, ``fetch_arrow_table`` (libpq binary COPY into Arrow, no Python row loop), and
  `to_matrix`. Server and client share the machine's cores.
- SQLite (for reference): the same rows in a file (ADBC ingest), read the same way.
- Timing: wall clock (``time.perf_counter``) of each read, ``--repeats`` times (default 5) after
  one untimed warm-up read per source; the report gives the median and the minimum. The
  1-minute load average is recorded before the runs.

    .venv/bin/python benchmarks/sql_source_bench.py                    # 1,000,000 x 10
    .venv/bin/python benchmarks/sql_source_bench.py --rows 100000 --repeats 3 --out /tmp/sqlb

Writes ``sql_source_bench.json`` to ``--out`` (default ``out/``) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leteo_fed.config import load_data_source  # noqa: E402
from leteo_fed.data import sources  # noqa: E402
from leteo_fed.fileio import atomic_write_json  # noqa: E402

PASSWORD_ENV = "LETEO_BENCH_DB_PASSWORD"


def make_rows(rows: int, cols: int, seed: int = 0) -> pa.Table:
    x = np.random.default_rng(seed).standard_normal((rows, cols))
    return pa.table({f"c{j}": x[:, j] for j in range(cols)})


def timed(read: Callable[[], np.ndarray], repeats: int, expected: np.ndarray) -> dict[str, Any]:
    got = read()  # warm-up (and the check)
    if got.shape != expected.shape or not np.array_equal(got, expected):
        raise SystemExit("a source did not give the rows it was loaded with")
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - start)
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "runs_s": seconds,
    }


def load_postgres(server: Any, table: pa.Table) -> tuple[str, str]:
    """The rows in a database `bench` owned by `bench`; (url, password)."""
    password = "bench-password"
    server.create_database("bench", "bench", password)
    with server.connect("bench", "bench", password) as conn, conn.cursor() as cur:
        cur.adbc_ingest("rows", table, mode="create")
        cur.execute("VACUUM ANALYZE rows")
    return server.url("bench", "bench"), password


def load_sqlite(path: Path, table: pa.Table) -> None:
    import adbc_driver_sqlite.dbapi as sqlite

    with sqlite.connect(str(path)) as conn, conn.cursor() as cur:
        cur.adbc_ingest("rows", table, mode="create")
        conn.commit()


def run(rows: int, cols: int, repeats: int, work: Path, server: Any = None) -> dict[str, Any]:
    """Every source's timings; starts (and stops) a PostgreSQL server unless given one."""
    table = make_rows(rows, cols)
    columns = table.column_names
    expected = np.column_stack([table.column(c).to_numpy() for c in columns])

    csv = work / "rows.csv"
    pacsv.write_csv(table, csv)
    report: dict[str, Any] = {
        "rows": rows,
        "cols": cols,
        "repeats": repeats,
        "csv_bytes": csv.stat().st_size,
    }
    report["csv"] = timed(
        lambda: sources.to_matrix(sources.read_table(str(csv), None, columns), columns),
        repeats,
        expected,
    )

    sqlite_db = work / "rows.db"
    load_sqlite(sqlite_db, table)
    lite = load_data_source({"url": f"sqlite:///{sqlite_db}", "table": "rows"}, work).sql
    assert lite is not None
    report["sqlite"] = timed(
        lambda: sources.to_matrix(lite.read_table(columns), columns), repeats, expected
    )

    own_server = server is None
    if own_server:
        sys.path.insert(0, str(ROOT / "tests"))
        from postgres_server import start_server

        server = start_server()
    try:
        url, password = load_postgres(server, table)
        os.environ[PASSWORD_ENV] = password
        pg = load_data_source({"url": url, "table": "rows", "password_env": PASSWORD_ENV}, work).sql
        assert pg is not None
        report["postgresql"] = timed(
            lambda: sources.to_matrix(pg.read_table(columns), columns), repeats, expected
        )
        report["postgresql_binaries"] = str(server.bin_dir)
    finally:
        os.environ.pop(PASSWORD_ENV, None)
        if own_server:
            server.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--cols", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "out")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="sql-bench-") as tmp:
        report = run(args.rows, args.cols, args.repeats, Path(tmp))
    report["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "load_1min_before": load,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(args.out / "sql_source_bench.json", report)
    print(f"{report['rows']:,} rows x {report['cols']} float64 columns, {args.repeats} reads each")
    print(f"{'source':<12} {'median (s)':>11} {'min (s)':>9}")
    for name in ("csv", "sqlite", "postgresql"):
        print(f"{name:<12} {report[name]['median_s']:>11.3f} {report[name]['min_s']:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
