"""The Spark statistics path must match the NumPy path: same sums, same refusals, same words."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_wine

from leteo_fed.data import spark_stats
from leteo_fed.data.spark_stats import get_spark, spark_local_statistics
from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.errors import DataError
from leteo_fed.protocols.pca import DEFAULT_VALUE_BOUND, local_statistics

pytestmark = pytest.mark.spark

RTOL = 1e-12


@pytest.fixture(scope="module")
def spark_cwd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Starts the shared session from an empty cwd, so stray Spark state would show up there."""
    cwd = tmp_path_factory.mktemp("spark_cwd")
    old = os.getcwd()
    os.chdir(cwd)
    try:
        get_spark()
        yield cwd
    finally:
        os.chdir(old)  # the session is cached per process and reused by later modules


@pytest.fixture(scope="module")
def wine() -> tuple[np.ndarray, list[str]]:
    data = load_wine()
    names = [re.sub(r"\W+", "_", n).strip("_") for n in data.feature_names]
    assert len(names) == 13 and len(set(names)) == 13
    return np.asarray(data.data, dtype=np.float64), names


def write_csv(path: Path, x: np.ndarray, names: list[str]) -> Path:
    """repr() round-trips float64, so Spark parses exactly the matrix NumPy sees; NaN -> empty."""
    lines = [",".join(names)]
    lines += [",".join("" if np.isnan(v) else repr(float(v)) for v in row) for row in x]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_parquet(path: Path, x: np.ndarray, names: list[str], files: int = 1) -> Path:
    """One file, or a directory of `files` parts (several Spark partitions)."""
    if files == 1:
        pq.write_table(pa.table({n: x[:, i] for i, n in enumerate(names)}), path)
        return path
    path.mkdir()
    for k, part in enumerate(np.array_split(x, files)):
        table = pa.table({n: part[:, i] for i, n in enumerate(names)})
        pq.write_table(table, path / f"part-{k}.parquet")
    return path


def assert_same_stats(path: Path, x: np.ndarray, names: list[str], fmt: str | None) -> None:
    got = spark_local_statistics(str(path), names, fmt, DEFAULT_VALUE_BOUND)
    want = local_statistics(x)
    assert got.q == want.q and isinstance(got.q, int)
    assert got.r.shape == want.r.shape and got.v.shape == want.v.shape
    np.testing.assert_allclose(got.r, want.r, rtol=RTOL, atol=0)
    np.testing.assert_allclose(got.v, want.v, rtol=RTOL, atol=0)


def numpy_error(x: np.ndarray, names: list[str], bound: float) -> str:
    with pytest.raises(DataError) as exc:
        check_finite_and_bounded(x, names, bound)
    return str(exc.value)


def test_csv_matches_numpy(spark_cwd, wine, tmp_path):
    x, names = wine
    assert_same_stats(write_csv(tmp_path / "wine.csv", x, names), x, names, None)


def test_parquet_matches_numpy(spark_cwd, wine, tmp_path):
    x, names = wine
    assert_same_stats(write_parquet(tmp_path / "wine.parquet", x, names), x, names, "parquet")


def test_column_subset_order_and_small_batches(spark_cwd, wine, tmp_path, monkeypatch):
    """Several partitions, several NumPy blocks per partition, columns in a chosen order."""
    x, names = wine
    path = write_parquet(tmp_path / "parts", x, names, files=4)
    # Spark opens each small file at a cost of 4 MB (openCostInBytes): 4 files make >1 split.
    assert get_spark().read.parquet(str(path)).rdd.getNumPartitions() > 1
    monkeypatch.setattr(spark_stats, "BATCH_ROWS", 7)
    cols = [12, 0, 5, 3]
    assert_same_stats(path, x[:, cols], [names[c] for c in cols], "parquet")


def test_missing_value_in_csv_names_column(spark_cwd, wine, tmp_path):
    x, names = wine
    x = x.copy()
    x[[3, 50, 100], 4] = np.nan  # written as empty cells: Spark reads null
    path = write_csv(tmp_path / "wine.csv", x, names)
    with pytest.raises(DataError) as exc:
        spark_local_statistics(str(path), names, "csv", DEFAULT_VALUE_BOUND)
    assert exc.value.field == names[4]
    assert str(exc.value) == numpy_error(x, names, DEFAULT_VALUE_BOUND)
    assert "3 missing, NaN or infinite" in str(exc.value)


def test_nan_and_inf_in_parquet_names_first_bad_column(spark_cwd, wine, tmp_path):
    x, names = wine
    x = x.copy()
    x[7, 9] = np.nan
    x[8, 9] = -np.inf
    x[0, 11] = np.inf
    path = write_parquet(tmp_path / "wine.parquet", x, names)
    with pytest.raises(DataError) as exc:
        spark_local_statistics(str(path), names, None, DEFAULT_VALUE_BOUND)
    assert exc.value.field == names[9]
    assert str(exc.value) == numpy_error(x, names, DEFAULT_VALUE_BOUND)


def test_value_above_bound_names_column(spark_cwd, wine, tmp_path):
    x, names = wine  # proline reaches 1680; every other column stays below 1000
    path = write_parquet(tmp_path / "wine.parquet", x, names)
    with pytest.raises(DataError) as exc:
        spark_local_statistics(str(path), names, None, 1000.0)
    assert exc.value.field == "proline"
    assert str(exc.value) == numpy_error(x, names, 1000.0)


def test_missing_column_names_column_and_path(spark_cwd, wine, tmp_path):
    x, names = wine
    path = write_csv(tmp_path / "wine.csv", x, names)
    with pytest.raises(DataError, match=r"column 'no_such_column'.*wine\.csv") as exc:
        spark_local_statistics(str(path), [names[0], "no_such_column"], None, 1e6)
    assert exc.value.field == "no_such_column"


def test_non_numeric_column_and_empty_data(spark_cwd, tmp_path):
    table = pa.table({"a": pa.array([1.0, 2.0]), "s": pa.array(["x", "y"])})
    pq.write_table(table, tmp_path / "mixed.parquet")
    with pytest.raises(DataError, match=r"^column 's' is not numeric$"):
        spark_local_statistics(str(tmp_path / "mixed.parquet"), ["a", "s"], None, 1e6)
    pq.write_table(table.slice(0, 0), tmp_path / "empty.parquet")
    with pytest.raises(DataError, match=r"^the data source has no rows$"):
        spark_local_statistics(str(tmp_path / "empty.parquet"), ["a"], None, 1e6)


def test_unreadable_inputs(spark_cwd, tmp_path):
    with pytest.raises(DataError, match="format"):
        spark_local_statistics(str(tmp_path / "data.txt"), ["a"], None, 1e6)
    with pytest.raises(DataError, match="cannot read"):
        spark_local_statistics(str(tmp_path / "absent.parquet"), ["a"], None, 1e6)


def test_no_spark_state_in_cwd(spark_cwd):
    """Runs last: nothing above may have created spark-warehouse/ or metastore_db/ in the cwd."""
    assert sorted(p.name for p in spark_cwd.iterdir()) == []
