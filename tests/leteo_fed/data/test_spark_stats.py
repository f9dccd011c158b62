"""The Spark statistics path must match the NumPy path: same sums, same refusals, same words."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_wine

from leteo_fed.data import sources, spark_stats
from leteo_fed.data.spark_stats import get_spark, spark_local_moments, spark_local_statistics
from leteo_fed.encoding.packing import check_finite_and_bounded
from leteo_fed.errors import DataError
from leteo_fed.protocols import moments
from leteo_fed.protocols.moments import ALL_ROWS, Grouping
from leteo_fed.protocols.moments_round import DEFAULT_VALUE_BOUND
from leteo_fed.protocols.pca import local_statistics

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


Labels = dict[str, list]  # label column -> one value per row (None: missing)


def write_csv(path: Path, x: np.ndarray, names: list[str], labels: Labels | None = None) -> Path:
    """repr() round-trips float64, so Spark parses exactly the matrix NumPy sees; NaN -> empty.

    Label values are written with repr() too (floats as 1.0), strings bare, None as empty.
    """
    labels = labels or {}
    lines = [",".join([*names, *labels])]
    for r, row in enumerate(x):
        cells = ["" if np.isnan(v) else repr(float(v)) for v in row]
        cells += [_csv_cell(vals[r]) for vals in labels.values()]
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def _csv_cell(v: object) -> str:
    return "" if v is None else v if isinstance(v, str) else repr(v)


def _table(x: np.ndarray, names: list[str], labels: Labels, rows: slice) -> pa.Table:
    cols = {n: x[rows, i] for i, n in enumerate(names)}
    cols.update({n: pa.array(vals[rows]) for n, vals in labels.items()})
    return pa.table(cols)


def write_parquet(
    path: Path, x: np.ndarray, names: list[str], files: int = 1, labels: Labels | None = None
) -> Path:
    """One file, or a directory of `files` parts (several Spark partitions)."""
    labels = labels or {}
    if files == 1:
        pq.write_table(_table(x, names, labels, slice(None)), path)
        return path
    path.mkdir()
    bounds = np.linspace(0, len(x), files + 1).astype(int)
    for k in range(files):
        part = _table(x, names, labels, slice(bounds[k], bounds[k + 1]))
        pq.write_table(part, path / f"part-{k}.parquet")
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


# --- per-class moments (DCA, LDA, MDR) ------------------------------------------------------


@pytest.fixture(scope="module")
def wine_labels(wine) -> Labels:
    """The cultivar as int and as integer-valued float, and a string label derived from colour."""
    x, _ = wine
    y = load_wine().target
    color = np.where(x[:, 9] < 3.5, "pale", np.where(x[:, 9] < 7.0, "medium", "deep"))
    return {
        "cultivar": [int(v) for v in y],
        "cultivar_f": [float(v) for v in y],
        "tone": [str(v) for v in color],
    }


# Class lists out of sorted order; "3" and "none" have no rows (their sums and counts must be 0).
WINE_GROUPINGS = [
    Grouping("cultivar", ("2", "0", "1")),
    Grouping("tone", ("pale", "none", "medium", "deep")),
    Grouping("cultivar_f", ("3", "1", "0", "2")),
]


def numpy_moments(
    path: Path, fmt: str | None, features: list[str], groupings: list[Grouping]
) -> moments.LocalMoments:
    """The owner-side NumPy path of the moments protocol (MomentsProtocol._local_moments)."""
    labels = [g.label_column for g in groupings if g.label_column is not None]
    table = sources.read_table(str(path), fmt, list(dict.fromkeys([*features, *labels])))
    x = sources.to_matrix(table, features)
    check_finite_and_bounded(x, features, DEFAULT_VALUE_BOUND)
    index = [
        None
        if g.label_column is None
        else moments.class_indices(sources.label_strings(table, g.label_column), g)
        for g in groupings
    ]
    return moments.local_moments(x, index, groupings)


def numpy_label_error(path: Path, fmt: str | None, grouping: Grouping) -> DataError:
    table = sources.read_table(str(path), fmt, [grouping.label_column])
    with pytest.raises(DataError) as exc:
        moments.class_indices(sources.label_strings(table, grouping.label_column), grouping)
    return exc.value


def assert_same_moments(got: moments.LocalMoments, want: moments.LocalMoments) -> None:
    assert got.r.shape == want.r.shape
    np.testing.assert_allclose(got.r, want.r, rtol=RTOL, atol=0)
    assert len(got.v) == len(want.v) and len(got.m) == len(want.m)
    for gv, wv, gm, wm in zip(got.v, want.v, got.m, want.m, strict=True):
        assert gv.shape == wv.shape
        np.testing.assert_allclose(gv, wv, rtol=RTOL, atol=0)
        assert gm.dtype == np.int64 and gm.tolist() == wm.tolist()


def check_wine_counts(mom: moments.LocalMoments) -> None:
    """Guards the reference itself: the label spellings really hit the intended classes."""
    assert mom.m[0].tolist() == [48, 59, 71]  # cultivars 2, 0, 1
    assert mom.m[1][1] == 0 and mom.m[1].sum() == 178 and min(mom.m[1][[0, 2, 3]]) > 0
    assert mom.m[2].tolist() == [0, 71, 59, 48]  # "3" (no rows), 1, 0, 2
    assert not mom.v[1][1].any() and not mom.v[2][0].any()


def test_moments_csv_match_numpy(spark_cwd, wine, wine_labels, tmp_path):
    x, names = wine
    path = write_csv(tmp_path / "wine.csv", x, names, wine_labels)
    groupings = [*WINE_GROUPINGS, ALL_ROWS]  # label_column None: every row in one class
    want = numpy_moments(path, None, names, groupings)
    check_wine_counts(want)
    got = spark_local_moments(str(path), names, groupings, None, DEFAULT_VALUE_BOUND)
    assert_same_moments(got, want)
    assert got.m[3].tolist() == [178]


def test_moments_parquet_parts_small_batches(spark_cwd, wine, wine_labels, tmp_path, monkeypatch):
    """Several partitions and NumPy blocks; a column subset; a grouping repeated."""
    x, names = wine
    whole = write_parquet(tmp_path / "wine.parquet", x, names, labels=wine_labels)
    parts = write_parquet(tmp_path / "parts", x, names, files=4, labels=wine_labels)
    assert get_spark().read.parquet(str(parts)).rdd.getNumPartitions() > 1
    monkeypatch.setattr(spark_stats, "BATCH_ROWS", 7)
    cols = [names[c] for c in (12, 0, 5, 3)]
    groupings = [*WINE_GROUPINGS, Grouping("tone", ("deep", "medium", "pale"))]
    want = numpy_moments(whole, None, cols, groupings)
    check_wine_counts(want)
    assert_same_moments(spark_local_moments(str(parts), cols, groupings, "parquet", 1e4), want)


def test_float_labels_spelled_like_pyarrow(spark_cwd, tmp_path):
    """Float labels compare as pyarrow spells them: 1.0 -> '1', 1e-07 -> '1e-7', nan -> 'nan'."""
    doubles = [1.0, -0.0, 0.0, 2.5, -3.0, 1e-7, 1.25e-6, 1e-6, 0.0001, 0.1, 12345678.5, 1e9,
               123456789.0, 1e10, 1.5e14, 2.0**53, 1e21, float("nan"), float("inf"), -float("inf"),
               1 / 3, 0.30000000000000004]  # fmt: skip
    floats = [1.0, -0.0, 0.1, 2.5, -7.0, 1e-7, 3.3e-5, 1234567.0, 0.3, 1 / 3, float("nan")]
    floats += [floats[i % len(floats)] for i in range(len(doubles) - len(floats))]
    n = len(doubles)
    x = np.arange(2.0 * n).reshape(n, 2)
    table = pa.table(
        {
            "a": x[:, 0],
            "b": x[:, 1],
            "d": pa.array(doubles, pa.float64()),
            "f": pa.array(floats, pa.float32()),
        }
    )
    path = tmp_path / "floats.parquet"
    pq.write_table(table, path)
    groupings = []
    for col in ("d", "f"):
        spelled = pc.unique(pc.cast(table.column(col), pa.string())).to_pylist()
        assert "1" in spelled and "-0" in spelled and "nan" in spelled  # the cases that matter
        groupings.append(Grouping(col, (*reversed(spelled), "unused")))
    want = numpy_moments(path, None, ["a", "b"], groupings)
    got = spark_local_moments(str(path), ["a", "b"], groupings, None, 1e6)
    assert_same_moments(got, want)


def test_label_outside_classes(spark_cwd, wine, wine_labels, tmp_path):
    """Same message as class_indices: the five smallest distinct outsiders, sorted as strings."""
    x, names = wine  # proline: integer-valued doubles (1065.0 reads '1065'), 278 to 1680
    path = write_parquet(tmp_path / "wine.parquet", x, names, labels=wine_labels)
    bad = [WINE_GROUPINGS[0], Grouping("proline", ("1065", "1050", "1185"))]
    want = numpy_label_error(path, None, bad[1])
    # sorted as strings ('278' > '1680'), first five shown; the three classes are not outsiders
    assert "value(s) '1015', '1020', '1035', '1045', '1060' outside" in str(want)
    with pytest.raises(DataError) as exc:
        spark_local_moments(str(path), names, bad, None, DEFAULT_VALUE_BOUND)
    assert str(exc.value) == str(want) and exc.value.field == "proline"

    few = [Grouping("cultivar_f", ("0", "1"))]
    with pytest.raises(DataError) as exc:
        spark_local_moments(str(path), names, few, None, DEFAULT_VALUE_BOUND)
    assert str(exc.value) == str(numpy_label_error(path, None, few[0]))
    assert "value(s) '2' outside the round's classes ['0', '1']" in str(exc.value)


def test_missing_labels(spark_cwd, wine, wine_labels, tmp_path):
    x, names = wine
    labels = {k: list(v) for k, v in wine_labels.items()}
    for r in (5, 60, 150):
        labels["cultivar"][r] = None
    labels["tone"][7] = None
    csv = write_csv(tmp_path / "wine.csv", x, names, labels)  # empty cells in an int column
    msg = r"^label column 'cultivar' has 3 missing value\(s\)$"
    with pytest.raises(DataError, match=msg) as exc:
        numpy_moments(csv, None, names, WINE_GROUPINGS)
    with pytest.raises(DataError, match=msg) as exc:
        spark_local_moments(str(csv), names, WINE_GROUPINGS, None, DEFAULT_VALUE_BOUND)
    assert exc.value.field == "cultivar"

    parquet = write_parquet(tmp_path / "wine.parquet", x, names, labels=labels)
    msg = r"^label column 'tone' has 1 missing value\(s\)$"
    with pytest.raises(DataError, match=msg):
        numpy_moments(parquet, None, names, WINE_GROUPINGS[1:])
    with pytest.raises(DataError, match=msg):
        spark_local_moments(str(parquet), names, WINE_GROUPINGS[1:], None, DEFAULT_VALUE_BOUND)

    absent = [Grouping("no_such_label", ("a", "b"))]
    with pytest.raises(DataError, match=r"label column 'no_such_label'") as exc:
        spark_local_moments(str(parquet), names, absent, None, DEFAULT_VALUE_BOUND)
    assert exc.value.field == "no_such_label"


def test_no_spark_state_in_cwd(spark_cwd):
    """Runs last: nothing above may have created spark-warehouse/ or metastore_db/ in the cwd."""
    assert sorted(p.name for p in spark_cwd.iterdir()) == []
