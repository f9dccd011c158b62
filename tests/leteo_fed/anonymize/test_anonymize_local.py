"""The in-process engine's parts, without Spark: each against its reference.

The vectorized Mondrian round planner and the in-process TDS driver must release exactly what the
per-partition NumPy references release (on toy, Adult-like and k-only cases, with l and t); the
privacy model must judge a class alike alone or in a batch; the column typing, the Java-style
number printing and the CSV writer must produce what Spark would.
"""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import reference_mondrian
import reference_tds
from anonymize_cases import ADULT_CONFIG, TOY_CONFIG, TOY_H, adult_like, make_config, toy_table

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.engines.local.io import read_csv_text, write_csv
from leteo_fed.anonymize.engines.local.mondrian import anonymize_table as local_mondrian
from leteo_fed.anonymize.engines.local.scan import scan_arrow
from leteo_fed.anonymize.engines.local.table import sensitive
from leteo_fed.anonymize.engines.local.tds import anonymize_table as local_tds
from leteo_fed.anonymize.engines.local.text import java_float
from leteo_fed.anonymize.models import kinds as K
from leteo_fed.anonymize.models.config import AnonymizationConfig, LDiversity, SensitiveAttribute
from leteo_fed.anonymize.models.privacy import PrivacyModel


def _arrow(cols: dict[str, np.ndarray]) -> tuple[pa.Table, dict[str, str]]:
    table = pa.table({c: pa.array(np.asarray(v).tolist()) for c, v in cols.items()})
    kinds = {}
    for f in table.schema:
        kinds[f.name] = (
            K.INTEGER
            if pa.types.is_integer(f.type)
            else (K.FLOAT if pa.types.is_floating(f.type) else K.TEXT)
        )
    return table, kinds


def _cases() -> list[tuple[dict, AnonymizationConfig, dict]]:
    (adult, adult_h) = adult_like()
    k_only = make_config(4, [("age", "numeric"), ("education", "categorical")])
    ld = make_config(
        6,
        [("age", "numeric"), ("education", "categorical")],
        (SensitiveAttribute("income", LDiversity("recursive", 2, 3.0)),),
    )
    return [
        (toy_table(), TOY_CONFIG, TOY_H),
        (toy_table(seed=3), k_only, TOY_H),
        (toy_table(n=400, seed=5), ld, TOY_H),
        (adult, ADULT_CONFIG, adult_h),
    ]


@pytest.mark.parametrize("case", range(4))
def test_round_planner_releases_what_the_reference_releases(case: int) -> None:
    cols, config, hs = _cases()[case]
    table, kinds = _arrow(cols)
    labels, stats = local_mondrian(table, config, hs, sensitive(table, config, kinds))
    ref = reference_mondrian.anonymize(cols, config, hs)
    for j, q in enumerate(config.quasi_identifiers):
        assert labels[j].to_pylist() == ref.released[q.column].tolist(), q.column
    assert (stats.n_partitions, stats.rounds) == (ref.n_partitions, ref.rounds)


@pytest.mark.parametrize("case", range(4))
@pytest.mark.parametrize("gain", ["entropy", "squared_distance"])
def test_local_tds_releases_what_the_reference_releases(case: int, gain: str) -> None:
    cols, config, hs = _cases()[case]
    config = AnonymizationConfig(
        "tds", config.k, 0.04, gain, config.quasi_identifiers, config.sensitive
    )
    table, kinds = _arrow(cols)
    labels, withheld, stats = local_tds(table, config, hs, sensitive(table, config, kinds))
    ref = reference_tds.anonymize(cols, config, hs)
    for j, q in enumerate(config.quasi_identifiers):
        assert labels[j].to_pylist() == ref.released[q.column].tolist(), q.column
    np.testing.assert_array_equal(withheld, ref.suppressed)
    assert (stats.n_partitions, stats.rounds) == (ref.n_classes, ref.rounds)


def test_privacy_model_judges_a_class_alone_as_in_a_batch() -> None:
    """Hierarchical EMD sums by reduceat, not BLAS: batch size cannot flip a borderline t."""
    (cols, hs) = adult_like(n=900, seed=4)
    pairs = zip(cols["marital-status"], cols["hours"], strict=True)
    combos = [(str(m), float(h)) for m, h in pairs]
    model = PrivacyModel(ADULT_CONFIG, hs, [False, True], combos, np.ones(len(combos)))
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, size=(300, len(model.combos))).astype(float)
    for s in model._sens:
        per_value = counts @ s.to_value
        p = per_value / per_value.sum(axis=1, keepdims=True)
        whole = model._emd(s, p)
        for i in range(0, 300, 7):
            assert model._emd(s, p[i : i + 1])[0] == whole[i]  # bit for bit
    assert np.array_equal(model.satisfied(counts), [model.satisfied(c)[0] for c in counts])


def test_unique_rows_is_numpys_unique_rows() -> None:
    rng = np.random.default_rng(1)
    for rows in (rng.integers(-3, 5, size=(500, 4)), rng.integers(0, 2**40, size=(300, 3))):
        want, inv = np.unique(rows, axis=0, return_inverse=True)
        got, got_inv = unique_rows(rows)
        assert np.array_equal(got, want) and np.array_equal(got_inv, inv.reshape(-1))


@pytest.mark.parametrize(
    ("x", "java"),
    [  # what Spark 4 on Java 17 writes (Double.toString)
        (40.0, "40.0"),
        (1e-5, "1.0E-5"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (0.001, "0.001"),
        (1.5e300, "1.5E300"),
        (0.002, "0.002"),
        (1 / 3, "0.3333333333333333"),
        (100.0, "100.0"),
        (1e16, "1.0E16"),
        (-0.0, "-0.0"),
        (-1234567.5, "-1234567.5"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_floats_print_as_java_does(x: float, java: str) -> None:
    assert java_float(x) == java


def test_float32_prints_its_own_shortest_digits() -> None:
    assert java_float(float(np.float32(0.1)), single=True) == "0.1"


def test_column_kinds_by_content() -> None:
    table = pa.table(
        {
            "id": ["1", "22", "-3", None],
            "zip": ["04767", "12345", "1", "2"],
            "x": ["1.5", ".5", "NaN", "2e-3"],
            "inf": ["inf", "-Infinity", "3", "4"],
            "plus": ["+5", "6", "7", "8"],
            "word": ["1", "2", "three", "4"],
            "none": pa.array([None] * 4, pa.string()),
        }
    )
    scans = scan_arrow(table, table.column_names)
    kinds = {c: K.text_kind(scans[c], table.num_rows) for c in table.column_names}
    assert kinds == {
        "id": K.INTEGER,
        "zip": K.TEXT,  # a leading zero: a code, kept as written
        "x": K.FLOAT,
        "inf": K.FLOAT,
        "plus": K.FLOAT,
        "word": K.TEXT,
        "none": K.TEXT,
    }
    assert (scans["x"].nans, scans["x"].lo, scans["x"].hi) == (1, 0.002, 1.5)


def test_csv_writer_quotes_like_spark_and_reads_back(tmp_path) -> None:  # noqa: ANN001
    values = ["plain", "", None, " lead", 'q"t', "a,b", "x\ny", "cr\rlf", "ünï"]
    table = pa.table({"v": values, "n": pa.array([1, 2, None, 4, 5, 6, 7, 8, 9])})
    write_csv(table, tmp_path / "o.csv")
    text = (tmp_path / "o.csv").read_bytes().decode()
    assert text.splitlines()[:4] == ["v,n", "plain,1", '"",2', ","]
    assert '\n"q""t",5\n"a,b",6\n"x\ny",7\n"cr\rlf",8\nünï,9\n' in text
    back = read_csv_text(tmp_path / "o.csv", multiline=True)
    assert back.column("v").to_pylist() == [v if v != "" else None for v in values]


def test_csv_reader_reads_every_column_as_text(tmp_path) -> None:  # noqa: ANN001
    (tmp_path / "i.csv").write_text('a,b\n007,"x, y"\n,NaN\n')
    table = read_csv_text(tmp_path / "i.csv")
    assert table.to_pydict() == {"a": ["007", None], "b": ["x, y", "NaN"]}
    buf = io.BytesIO()
    pacsv.write_csv(table, buf)  # a plain table again
