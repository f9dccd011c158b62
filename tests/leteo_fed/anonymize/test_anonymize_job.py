"""`leteo-fed anonymize` end to end: the released file is checked by `verify` and by pycanon.

Every input (CSV, TOML, hierarchies, HMAC key) is written into a temporary folder; the CLI runs
in-process (one Spark session for the module), once per engine (`--engine local` and `--engine
spark`). The release is then graded independently of the job: k / l / t with `verify` and with
pycanon as a referee, truthfulness of every QI value, row order, dropped and pseudonymized
identifiers, and the report's numbers against the same independent computation. Refusals must
exit 2, name the problem and leave no output behind, on either engine.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from job_cases import (
    COLUMNS,
    ENGINES,
    KEY,
    QIS,
)
from job_cases import cli as _cli
from job_cases import rows as _rows
from job_cases import write_csv as _write_csv
from job_cases import write_job as _write_job

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import load_config

pytestmark = pytest.mark.spark


def _read_release(path: Path) -> dict[str, np.ndarray]:
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{path} is empty"
    return {c: np.array([r[c] for r in rows], dtype=object) for c in rows[0]}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from leteo_fed.data.spark_stats import get_spark

    yield get_spark()


@dataclass(frozen=True)
class Run:
    engine: str
    folder: Path
    original: list[dict[str, Any]]
    released: dict[str, np.ndarray]
    report: dict[str, Any]
    stdout: str
    stderr: str


N = 240


@pytest.fixture(scope="module", params=ENGINES)
def run(spark: Any, tmp_path_factory: pytest.TempPathFactory, request: Any) -> Run:
    folder = tmp_path_factory.mktemp("job")
    config = _write_job(folder)
    rows = _rows(N)
    _write_csv(folder / "data.csv", rows)
    rc, out, err = _cli(
        "--engine",
        request.param,
        "--input",
        str(folder / "data.csv"),
        "--config",
        str(config),
        "--out",
        str(folder / "out"),
    )
    assert rc == 0, err
    assert sorted(p.name for p in (folder / "out").iterdir()) == [
        "release.csv",
        "report.html",
        "report.json",
    ]
    released = _read_release(folder / "out" / "release.csv")
    released["hours"] = released["hours"].astype(float)
    report = json.loads((folder / "out" / "report.json").read_text())
    return Run(request.param, folder, rows, released, report, out, err)


def _original_table(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    table = {c: np.array([r[c] for r in rows], dtype=object) for c in COLUMNS}
    table["age"] = table["age"].astype(np.int64)
    table["hours"] = table["hours"].astype(float)
    return table


# ---------------------------------------------------------------------------- the release


def test_cli_prints_rounds_summary_and_report_path(run: Run) -> None:
    prefix = "spark " if run.engine == "spark" else ""
    assert f"\n{prefix}mondrian round 1" in run.stderr
    assert run.stderr.startswith(f"engine: {run.engine} (--engine {run.engine} was asked for)")
    assert run.report["job"]["engine"]["used"] == run.engine
    assert f"released {N} of {N} rows (0 suppressed)" in run.stdout
    assert f"wrote {run.folder / 'out' / 'release.csv'} (engine {run.engine})" in run.stdout
    assert f"report: {run.folder / 'out' / 'report.json'}" in run.stdout
    assert _leftovers(run.folder / "out") == []


def test_rows_order_identifiers_and_untouched_columns(run: Run) -> None:
    rel, orig = run.released, _original_table(run.original)
    assert list(rel) == [c for c in COLUMNS if c != "ssn"]  # dropped, order kept
    assert len(rel["name"]) == N
    expected = [hmac.new(KEY, r["name"].encode(), hashlib.sha256).hexdigest() for r in run.original]
    assert rel["name"].tolist() == expected  # keyed pseudonym, same row order
    for c in ("zip", "income", "diagnosis", "note"):
        assert rel[c].tolist() == orig[c].tolist(), c
    np.testing.assert_array_equal(rel["hours"], orig["hours"])
    assert verify.truthful(orig, rel, load_config(run.folder / "job.toml").quasi_identifiers, _hs(run)) is None  # fmt: skip


def _hs(run: Run) -> dict[str, Any]:
    return load_config(run.folder / "job.toml").load_hierarchies()


def test_privacy_models_hold_by_verify(run: Run) -> None:
    rel, hs = run.released, _hs(run)
    assert verify.k_anonymity(rel, QIS).k >= 5
    assert verify.l_diversity(rel, QIS, "income", "distinct", l=2).satisfied
    assert verify.l_diversity(rel, QIS, "hours", "entropy", l=2).satisfied
    assert verify.l_diversity(rel, QIS, "diagnosis", "recursive", l=2, c=4.0).satisfied
    assert verify.t_closeness(rel, QIS, "income").t <= 0.3 + 1e-9
    assert verify.t_closeness(rel, QIS, "hours").t <= 0.35 + 1e-9
    t_diag = verify.t_closeness(rel, QIS, "diagnosis", hierarchy=hs["diagnosis"])
    assert t_diag.distance == "hierarchical" and t_diag.t <= 0.3 + 1e-9


def test_privacy_models_hold_by_pycanon(run: Run) -> None:
    pd = pytest.importorskip("pandas")
    from pycanon import anonymity

    df = pd.DataFrame({c: run.released[c] for c in run.released})
    df["hours"] = df["hours"].astype(float)
    for c in ("name", "age", "education", "zip", "income", "diagnosis", "note"):
        df[c] = df[c].astype(str)
    k = anonymity.k_anonymity(df, QIS)
    assert k >= 5 and k == run.report["privacy"]["k_anonymity"]["achieved"]
    assert anonymity.l_diversity(df, QIS, ["income"]) >= 2
    assert anonymity.entropy_l_diversity(df, QIS, ["hours"]) >= 2
    t_income = anonymity.t_closeness(df, QIS, ["income"])  # equal distance
    t_hours = anonymity.t_closeness(df, QIS, ["hours"])  # ordered distance
    assert t_income <= 0.3 + 1e-9 and t_hours <= 0.35 + 1e-9
    t = run.report["privacy"]["t_closeness"]
    assert t["income"]["achieved"] == pytest.approx(t_income, abs=1e-12)
    assert t["hours"]["achieved"] == pytest.approx(t_hours, abs=1e-12)


def test_report_equals_independent_measurement(run: Run) -> None:
    rel, rep, hs = run.released, run.report, _hs(run)
    orig = _original_table(run.original)
    specs = load_config(run.folder / "job.toml").quasi_identifiers
    k_rep = verify.k_anonymity(rel, QIS)
    assert rep["rows"] == {"in": N, "out": N, "suppressed": 0, "suppression_limit": 0.0}
    assert rep["classes"]["count"] == k_rep.n_classes
    k_entry = rep["privacy"]["k_anonymity"]
    assert (k_entry["required"], k_entry["achieved"], k_entry["holds"]) == (5, k_rep.k, True)
    assert tuple(k_entry["smallest_class"][c] for c in QIS) in k_rep.smallest
    l_rep = rep["privacy"]["l_diversity"]
    assert l_rep["income"]["achieved"] == verify.l_diversity(rel, QIS, "income").value
    assert l_rep["hours"]["achieved"] == pytest.approx(
        verify.l_diversity(rel, QIS, "hours", "entropy").value
    )
    assert l_rep["diagnosis"]["achieved"] == pytest.approx(
        verify.l_diversity(rel, QIS, "diagnosis", "recursive", l=2, c=4.0).value
    )
    t_rep = rep["privacy"]["t_closeness"]
    assert t_rep["diagnosis"]["achieved"] == pytest.approx(
        verify.t_closeness(rel, QIS, "diagnosis", hierarchy=hs["diagnosis"]).t
    )
    assert rep["privacy"]["all_hold"] is True
    assert all(e["holds"] for m in ("l_diversity", "t_closeness") for e in rep["privacy"][m].values())  # fmt: skip
    loss = verify.ncp(orig, rel, specs, hs)
    for c in QIS:
        assert rep["information_loss"]["ncp"][c] == pytest.approx(loss.per_column[c])
    assert rep["information_loss"]["gcp"] == pytest.approx(loss.gcp)
    assert rep["information_loss"]["discernibility"] == verify.discernibility(rel, QIS)
    assert rep["information_loss"]["average_class_size"] == pytest.approx(
        verify.average_class_size(rel, QIS, 5)
    )
    # re-identification risk, counted here from the written release's QI tuples
    _, sizes = np.unique(np.array([rel[c].astype(str) for c in QIS]).T, axis=0, return_counts=True)
    risk = rep["risk"]
    assert risk["prosecutor"]["highest"] == pytest.approx(1 / sizes.min())
    assert risk["prosecutor"]["average"] == pytest.approx(len(sizes) / N)
    assert risk["prosecutor"]["records_at_risk"] == pytest.approx(sizes[sizes < 5].sum() / N)
    assert risk["marketer"]["average"] == pytest.approx(len(sizes) / N)
    assert risk["sample_uniques"] == 0.0  # k = 5 holds
    assert set(rep["timings_s"]) == {"read", "anonymize", "write", "measure", "total"}
    assert rep["algorithm_stats"]["rounds"] >= 1 and rep["job"]["published"] is True
    assert rep["identifiers"] == {
        "dropped": ["ssn"],
        "pseudonymized": ["name"],
        "pseudonym": "HMAC-SHA256, lowercase hex",
    }
    assert KEY.decode() not in json.dumps(rep) + run.stdout + run.stderr


# ---------------------------------------------------------------------------- Parquet


@pytest.mark.parametrize("engine", ENGINES)
def test_parquet_in_parquet_out_replaces_old_output(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    config = _write_job(tmp_path)
    rows = _rows(120, seed=5)
    pq.write_table(pa.table({c: [r[c] for r in rows] for c in COLUMNS}), tmp_path / "in.parquet")
    out = tmp_path / "released"
    (out / "release.parquet").mkdir(parents=True)
    (out / "release.parquet" / "stale.txt").write_text("from an earlier run")
    (out / "notes.txt").write_text("not ours")
    rc, stdout, err = _cli(
        "--input", str(tmp_path / "in.parquet"), "--config", str(config), "--out", str(out),
        "--release-format", "parquet", "--engine", engine,
    )  # fmt: skip
    assert rc == 0, err
    assert not (out / "release.parquet" / "stale.txt").exists()
    assert (out / "notes.txt").read_text() == "not ours"  # only the release is replaced
    table = pq.read_table(out / "release.parquet")
    assert table.num_rows == 120 and "ssn" not in table.column_names
    assert table.column("name").to_pylist() == [
        hmac.new(KEY, r["name"].encode(), hashlib.sha256).hexdigest() for r in rows
    ]
    assert verify.k_anonymity(table, QIS).k >= 5
    report = json.loads((out / "report.json").read_text())
    assert report["job"]["output_format"] == "parquet"
    assert report["job"]["output"] == str(out / "release.parquet")
    assert report["privacy"]["k_anonymity"]["achieved"] == verify.k_anonymity(table, QIS).k
    assert _leftovers(tmp_path) == [] and _leftovers(out) == []


# ---------------------------------------------------------------------------- refusals


def _refused(
    folder: Path, config: Path, needle: str, data: str = "data.csv", engine: str = "auto"
) -> str:
    rc, out, err = _cli(
        "--input", str(folder / data), "--config", str(config), "--out", str(folder / "out"),
        "--engine", engine,
    )  # fmt: skip
    assert rc == 2, (out, err)
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: ") and needle in line, line
    assert not (folder / "out").exists()
    assert _leftovers(folder) == []
    return line


@pytest.mark.parametrize("engine", ENGINES)
def test_unknown_column_is_named_with_the_available_ones(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    config = _write_job(tmp_path, age="agee")
    _write_csv(tmp_path / "data.csv", _rows(30))
    line = _refused(tmp_path, config, "'agee'", engine=engine)
    assert "available columns" in line and "'age'" in line


@pytest.mark.parametrize("engine", ENGINES)
def test_value_missing_from_hierarchy(spark: Any, tmp_path: Path, engine: str) -> None:
    config = _write_job(tmp_path)
    rows = _rows(30)
    rows[7]["education"] = "Kindergarten"
    rows[9]["education"] = "Abitur"
    _write_csv(tmp_path / "data.csv", rows)
    line = _refused(tmp_path, config, "'Abitur'", engine=engine)
    assert line.endswith("also missing: 'Kindergarten'")
    assert "'education'" in line and "not in its hierarchy" in line


@pytest.mark.parametrize("engine", ENGINES)
def test_unreachable_k(spark: Any, tmp_path: Path, engine: str) -> None:
    config = _write_job(tmp_path, k=1000)
    _write_csv(tmp_path / "data.csv", _rows(40))
    _refused(tmp_path, config, "no output can reach k=1000", engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bad", ["", "NaN"])
def test_missing_or_nan_quasi_identifier(spark: Any, tmp_path: Path, bad: str, engine: str) -> None:
    config = _write_job(tmp_path)
    rows = _rows(30)
    rows[3]["age"] = bad
    _write_csv(tmp_path / "data.csv", rows)
    line = _refused(tmp_path, config, "column 'age' has 1 missing", engine=engine)
    assert "null/NaN" in line


@pytest.mark.parametrize("engine", ENGINES)
def test_text_in_a_numeric_quasi_identifier(spark: Any, tmp_path: Path, engine: str) -> None:
    config = _write_job(tmp_path)
    rows = _rows(30)
    rows[5]["age"] = "forty"
    _write_csv(tmp_path / "data.csv", rows)
    _refused(tmp_path, config, "numeric quasi-identifier 'age' is read as text", engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_input_and_output_over_input(spark: Any, tmp_path: Path, engine: str) -> None:
    config = _write_job(tmp_path)
    _refused(tmp_path, config, "cannot read", data="nowhere.csv", engine=engine)
    out = tmp_path / "out"
    out.mkdir()
    _write_csv(out / "release.csv", _rows(10))
    rc, _, err = _cli("--input", str(out / "release.csv"), "--config", str(config), "--out", str(out), "--engine", engine)  # fmt: skip
    assert rc == 2 and "would overwrite the input" in err
    assert len((out / "release.csv").read_text().splitlines()) == 11
    assert sorted(p.name for p in out.iterdir()) == ["release.csv"]  # no report either
    # a Parquet input in DIR/release.parquet, and an --out inside an input folder
    import pyarrow as pa
    import pyarrow.parquet as pq

    (out / "release.parquet").mkdir()
    part = out / "release.parquet" / "part-0.parquet"
    pq.write_table(pa.table({"age": [30] * 10}), part)
    rc, _, err = _cli("--input", str(part), "--config", str(config), "--out", str(out), "--release-format", "parquet")  # fmt: skip
    assert rc == 2 and "would overwrite the input" in err
    rc, _, err = _cli("--input", str(out / "release.parquet"), "--config", str(config), "--out", str(out / "release.parquet" / "x"))  # fmt: skip
    assert rc == 2 and "is the input" in err and "or inside it" in err
    assert part.exists() and sorted(p.name for p in out.iterdir()) == ["release.csv", "release.parquet"]  # fmt: skip
    assert [p.name for p in (out / "release.parquet").iterdir()] == ["part-0.parquet"]
    rc, _, err = _cli("--input", str(out / "release.csv"), "--config", str(config), "--out", str(out / "release.csv"))  # fmt: skip
    assert rc == 2 and "is a file; --out names a folder" in err


def test_bad_toml(tmp_path: Path) -> None:
    config = _write_job(tmp_path)
    config.write_text(config.read_text().replace("k = 5", "k = "))
    _write_csv(tmp_path / "data.csv", _rows(10))
    _refused(tmp_path, config, "is not valid TOML")


def test_exposed_or_short_key_is_refused_and_not_echoed(tmp_path: Path) -> None:
    config = _write_job(tmp_path)
    _write_csv(tmp_path / "data.csv", _rows(10))
    (tmp_path / "hmac.key").chmod(0o644)
    line = _refused(tmp_path, config, "accessible by group or others")
    assert KEY.decode() not in line
    (tmp_path / "hmac.key").write_bytes(b"short\n")
    (tmp_path / "hmac.key").chmod(0o600)
    _refused(tmp_path, config, "at least 16 are required")


@pytest.mark.parametrize("engine", ENGINES)
def test_release_missing_its_models_is_not_published(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """A broken algorithm (releases the raw QIs) is caught by the measurement: exit 1."""
    if engine == "spark":
        from pyspark.sql import functions as F

        from leteo_fed.anonymize.engines.spark import job as spark_job
        from leteo_fed.anonymize.engines.spark.mondrian import SUPPRESSED, SparkMondrianStats

        def raw(df: Any, config: Any, hierarchies: Any, progress: Any = None) -> tuple[Any, Any]:
            cols = [F.col(c).cast("string").alias(c) if c in QIS else F.col(c) for c in df.columns]
            return df.select(*cols, F.lit(False).alias(SUPPRESSED)), SparkMondrianStats(30, 1, 1)

        monkeypatch.setattr(spark_job, "algorithm", lambda name: raw)
    else:
        import pyarrow as pa

        from leteo_fed.anonymize.engines.local import job as local_job
        from leteo_fed.anonymize.planners.mondrian import MondrianStats

        def raw_local(typed: Any, job: Any, summary: Any, say: Any) -> tuple[Any, Any, Any]:
            labels = {c: typed.column(c).cast(pa.string()).combine_chunks() for c in QIS}
            return labels, np.zeros(typed.num_rows, dtype=bool), MondrianStats(30, 1, 1)

        monkeypatch.setattr(local_job, "_anonymize", raw_local)
    config = _write_job(tmp_path)
    _write_csv(tmp_path / "data.csv", _rows(30))
    out = tmp_path / "o"
    out.mkdir()
    (out / "release.csv").write_text("an earlier release\n")
    rc, _, err = _cli(
        "--input", str(tmp_path / "data.csv"), "--config", str(config), "--out", str(out),
        "--engine", engine,
    )  # fmt: skip
    assert rc == 1 and "k-anonymity" in err and "nothing published" in err
    assert (out / "release.csv").read_text() == "an earlier release\n"  # kept: job failed
    assert _leftovers(tmp_path) == [] and _leftovers(out) == []
    report = json.loads((out / "report.json").read_text())
    assert report["job"]["published"] is False
    assert report["privacy"]["k_anonymity"]["holds"] is False


# ---------------------------------------------------------------------------- HMAC


@pytest.mark.parametrize("key", [b"0123456789abcdef", b"k" * 64, b"K" * 100])
def test_spark_hmac_equals_python_hmac(spark: Any, key: bytes) -> None:
    from leteo_fed.anonymize.engines.spark.pseudonymize import pseudonymize

    values = ["alice", "", "ünïcødé", None, "x" * 300, "007"]
    df = spark.createDataFrame(list(enumerate(values)), "i long, v string")
    got = [r["v"] for r in pseudonymize(df, ["v"], key).orderBy("i").collect()]
    want = [None if v is None else hmac.new(key, v.encode(), hashlib.sha256).hexdigest() for v in values]  # fmt: skip
    assert got == want


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from leteo_fed.anonymize.keys import load_key
    from leteo_fed.anonymize.models.config import Identifiers
    from leteo_fed.errors import ConfigError

    monkeypatch.setenv("LETEO_TEST_HMAC", "a-long-enough-secret")
    assert load_key(Identifiers((), ("n",), key_env="LETEO_TEST_HMAC")) == b"a-long-enough-secret"
    monkeypatch.delenv("LETEO_TEST_HMAC")
    with pytest.raises(ConfigError, match="LETEO_TEST_HMAC"):
        load_key(Identifiers((), ("n",), key_env="LETEO_TEST_HMAC"))
    assert os.environ.get("LETEO_TEST_HMAC") is None
