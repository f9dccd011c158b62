"""The two engines of `leteo-fed anonymize` release the same table and report the same measures.

Each case runs the CLI twice on the same input and config, with `--engine local` and `--engine
spark`, and compares what was written: CSV releases byte for byte, Parquet releases column by
column (types included), and every measured section of the reports. Cases cover Mondrian with
l-diversity (all three variants) and t-closeness (ordered, equal, hierarchical) plus
pseudonyms, TDS with suppression, a Parquet input with typed columns and awkward strings, and
`auto`'s choice. The typing of CSV columns in a Parquet release (issue 13, item 5) is checked on
both engines.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from job_cases import EDU, cli, rows, write_csv, write_job

pytestmark = pytest.mark.spark

MEASURED = ("rows", "classes", "privacy", "information_loss", "algorithm_stats", "identifiers")


def _run_both(folder: Path, data: Path, config: Path, release_format: str) -> dict[str, Any]:
    """Run both engines, each into its own --out folder; returns per engine (report, release)."""
    got = {}
    for engine in ("local", "spark"):
        out = folder / engine / release_format
        rc, _, err = cli(
            "--input", str(data), "--config", str(config), "--out", str(out),
            "--release-format", release_format, "--engine", engine,
        )  # fmt: skip
        assert rc == 0, err
        report = json.loads((out / "report.json").read_text())
        assert report["job"]["engine"]["used"] == engine
        got[engine] = (report, out / f"release.{release_format}")
    return got


def _same_reports(got: dict[str, Any]) -> None:
    local, spark = got["local"][0], got["spark"][0]
    for section in MEASURED:
        assert local[section] == spark[section], section


def _same_parquet(got: dict[str, Any]) -> pa.Table:
    local, spark = (pq.read_table(got[e][1]) for e in ("local", "spark"))
    assert local.schema.names == spark.schema.names
    assert [f.type for f in local.schema] == [f.type for f in spark.schema]
    for name in local.column_names:  # one file each side: same row order
        a, b = (t.column(name).to_numpy(zero_copy_only=False) for t in (local, spark))
        np.testing.assert_array_equal(a, b, err_msg=name)  # NaN equals NaN here
    return local


@pytest.fixture(scope="module")
def spark_session() -> Any:
    from leteo_fed.data.spark_stats import get_spark

    return get_spark()


def test_mondrian_with_l_t_and_pseudonyms_csv(spark_session: Any, tmp_path: Path) -> None:
    config = write_job(tmp_path)
    write_csv(tmp_path / "data.csv", rows(300, seed=11))
    got = _run_both(tmp_path, tmp_path / "data.csv", config, "csv")
    local, spark = (got[e][1].read_bytes() for e in ("local", "spark"))
    assert local == spark
    assert b'"said ""hi"", then left"' in local and b",04" in local  # quoting, leading zero
    _same_reports(got)
    assert got["local"][0]["privacy"]["all_hold"] is True


TDS = """\
[anonymization]
algorithm = "tds"
k = 6
suppression_limit = 0.05
info_gain = "{gain}"

[[quasi_identifier]]
column = "age"
type = "numeric"

[[quasi_identifier]]
column = "education"
type = "categorical"
hierarchy = "education.csv"

[[sensitive]]
column = "diagnosis"
hierarchy = "diagnosis.csv"
l_diversity = {{ variant = "distinct", l = 3 }}

[[sensitive]]
column = "hours"
t_closeness = {{ t = 0.4 }}

[identifiers]
drop = ["ssn", "name"]
"""


@pytest.mark.parametrize("gain", ["entropy", "squared_distance"])
def test_tds_with_suppression_csv_to_parquet(spark_session: Any, tmp_path: Path, gain: str) -> None:
    write_job(tmp_path)
    config = tmp_path / "tds.toml"
    config.write_text(TDS.format(gain=gain))
    write_csv(tmp_path / "data.csv", rows(260, seed=5))
    got = _run_both(tmp_path, tmp_path / "data.csv", config, "parquet")
    table = _same_parquet(got)
    _same_reports(got)
    report = got["local"][0]
    assert report["rows"]["suppressed"] > 0  # the case exercises suppression
    assert table.num_rows == report["rows"]["out"]


def test_parquet_input_with_typed_columns_and_awkward_text(
    spark_session: Any, tmp_path: Path
) -> None:
    """Numbers, booleans, dates, nulls and quoting-prone strings printed alike in a CSV out."""
    write_job(tmp_path)
    n = 120
    rng = np.random.default_rng(7)
    awkward = ["", " lead", "trail ", 'q"t', "a,b", "x\ny", "cr\rlf", "#h", "ünï", "NaN"]
    table = pa.table(
        {
            "rid": pa.array(np.arange(n), pa.int64()),
            "age": pa.array(rng.integers(17, 80, n).astype(np.int32)),
            "education": pa.array(rng.choice([e[0] for e in EDU], n).tolist()),
            "score": pa.array(rng.choice([0.1, 2.5, 1e-5, 1.23456789e8, -0.0, 40.0, 1e300], n)),
            "small": pa.array(rng.choice([0.1, 3.25], n).astype(np.float32)),
            "flag": pa.array(rng.choice([True, False], n).tolist()),
            "day": pa.array([datetime.date(2024, 1, 1 + i % 28) for i in range(n)]),
            "note": pa.array([awkward[i % len(awkward)] if i % 11 else None for i in range(n)]),
            "income": pa.array(rng.choice(["<=50K", ">50K"], n).tolist()),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    config = tmp_path / "k.toml"
    config.write_text(
        '[anonymization]\nalgorithm = "mondrian"\nk = 8\n'
        '[[quasi_identifier]]\ncolumn = "age"\ntype = "numeric"\n'
        '[[quasi_identifier]]\ncolumn = "education"\ntype = "categorical"\n'
        'hierarchy = "education.csv"\n'
        '[[sensitive]]\ncolumn = "income"\nt_closeness = { t = 0.5 }\n'
        '[[sensitive]]\ncolumn = "score"\n'
    )
    got = _run_both(tmp_path, tmp_path / "in.parquet", config, "csv")
    local, spark = (got[e][1].read_bytes() for e in ("local", "spark"))
    assert local == spark
    assert b"1.23456789E8" in local and b"1.0E-5" in local and b'""' in local
    _same_reports(got)
    got = _run_both(tmp_path, tmp_path / "in.parquet", config, "parquet")
    out = _same_parquet(got)
    assert out.schema.field("score").type == pa.float64()
    assert out.schema.field("day").type == pa.date32()


def test_csv_columns_keep_their_types_in_a_parquet_release(
    spark_session: Any, tmp_path: Path
) -> None:
    """Item 5: ids and counts stay numbers, codes with leading zeros stay text, QIs are labels."""
    config = write_job(tmp_path)
    data = rows(150, seed=2)
    for i, r in enumerate(data):
        r["visits"] = str(i % 9)
        r["ratio"] = "NaN" if i == 4 else f"{i / 7:.3f}"
        r["mixed"] = "n/a" if i == 3 else str(i)
    columns = [*data[0]]
    write_csv(tmp_path / "data.csv", data, columns)
    got = _run_both(tmp_path, tmp_path / "data.csv", config, "parquet")
    table = _same_parquet(got)
    types = {f.name: f.type for f in table.schema}
    assert types["visits"] == pa.int64() and types["ratio"] == pa.float64()
    assert types["hours"] == pa.float64()  # a numeric sensitive column
    assert types["zip"] == pa.string() and types["mixed"] == pa.string()
    assert types["age"] == pa.string() and types["education"] == pa.string()  # labels
    assert table.column("visits").to_pylist() == [i % 9 for i in range(150)]
    ratio = table.column("ratio").to_numpy(zero_copy_only=False)
    assert np.isnan(ratio[4]) and ratio[7] == 1.0
    assert table.column("zip").to_pylist() == [r["zip"] for r in data]
    _same_reports(got)


def test_auto_runs_small_inputs_in_process(tmp_path: Path) -> None:
    from leteo_fed.anonymize.engines.choice import choose

    write_csv(tmp_path / "data.csv", rows(20))
    local = choose("auto", str(tmp_path / "data.csv"), "csv")
    assert local.used == "local" and local.input_bytes == (tmp_path / "data.csv").stat().st_size
    assert "at most the local limit" in local.reason
    assert choose("auto", "hdfs:///pool/x.csv", "csv").used == "spark"
    (tmp_path / "big.csv.gz").write_bytes(b"x")
    assert choose("auto", str(tmp_path / "big.csv.gz"), "csv").reason.startswith("compressed")
    stamp = pa.table({"t": pa.array([datetime.datetime(2024, 1, 1)], pa.timestamp("us"))})
    pq.write_table(stamp, tmp_path / "t.parquet")
    typed = choose("auto", str(tmp_path / "t.parquet"), "parquet")
    assert typed.used == "spark" and "timestamp" in typed.reason
    (tmp_path / "parts" / "year=2024").mkdir(parents=True)
    assert "sub-folders" in choose("auto", str(tmp_path / "parts"), "parquet").reason
    assert choose("local", "hdfs:///x.csv", "csv").used == "local"  # asked for: no second guess
