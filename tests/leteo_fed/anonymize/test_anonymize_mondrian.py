"""Mondrian: the NumPy reference and the Spark rounds release the same, verifiably private table."""

from __future__ import annotations

import numpy as np
import pytest
from anonymize_cases import (
    ADULT_CONFIG,
    TOY_CONFIG,
    TOY_H,
    adult_like,
    check_release,
    make_config,
    to_df,
    toy_table,
)
from reference_mondrian import anonymize

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import LDiversity, SensitiveAttribute
from leteo_fed.errors import DataError

# ---------------------------------------------------------------------------- NumPy reference


def test_median_cut_and_release_labels() -> None:
    cols = {"x": np.array([4, 1, 3, 2, 2, 9]), "note": np.array(list("abcdef"))}
    res = anonymize(cols, make_config(2, [("x", "numeric")]), {})
    # lower median of 1,2,2,3,4,9 is 2: {1,2,2} | {3,4,9}; then {1,2,2} cannot be cut (k=2)
    # and {3,4,9} neither (median 4 -> {3,4} | {9} has a part of size 1)
    assert res.released["x"].tolist() == [
        "[3, 9]",
        "[1, 2]",
        "[3, 9]",
        "[1, 2]",
        "[1, 2]",
        "[3, 9]",
    ]
    assert res.released["note"].tolist() == list("abcdef")
    assert res.n_partitions == 2
    assert res.rounds == 2
    assert res.partition_id.tolist() == [1, 0, 1, 0, 0, 1]


def test_point_partition_releases_the_value_and_categorical_cuts_follow_the_tree() -> None:
    cols = {
        "x": np.array([5, 5, 5, 5, 5, 5]),
        "education": np.array(["HS", "HS", "Some-college", "Bachelors", "Masters", "Masters"]),
    }
    res = anonymize(cols, make_config(2, [("x", "numeric"), ("education", "categorical")]), TOY_H)
    assert res.released["x"].tolist() == ["5"] * 6
    # * -> {School, Uni}; School {HS, HS, Some} cannot split (Some alone); Uni -> Bachelors alone
    assert res.released["education"].tolist() == ["School"] * 3 + ["Uni"] * 3


def test_toy_reference_satisfies_models() -> None:
    cols = toy_table()
    res = anonymize(cols, TOY_CONFIG, TOY_H)
    check_release(cols, res.released, TOY_CONFIG, TOY_H)
    assert res.n_partitions == verify.k_anonymity(res.released, TOY_CONFIG.qi_columns).n_classes
    assert res.n_partitions > 5  # it did cut
    assert verify.ncp(cols, res.released, TOY_CONFIG.quasi_identifiers, TOY_H).gcp < 0.5


def test_adult_like_reference_satisfies_models() -> None:
    cols, hs = adult_like()
    res = anonymize(cols, ADULT_CONFIG, hs)
    check_release(cols, res.released, ADULT_CONFIG, hs)
    assert res.n_partitions > 10


def test_k_only_without_sensitive_columns() -> None:
    cols = toy_table(seed=3)
    config = make_config(4, [("age", "numeric"), ("education", "categorical")])
    res = anonymize(cols, config, TOY_H)
    check_release(cols, res.released, config, TOY_H)
    assert np.bincount(res.partition_id).min() >= 4


def test_unreachable_models_raise() -> None:
    cols = toy_table(n=50)
    with pytest.raises(DataError, match="no output can reach k=51"):
        anonymize(cols, make_config(51, [("age", "numeric")]), {})
    impossible = (SensitiveAttribute("income", LDiversity("distinct", 3)),)
    with pytest.raises(DataError, match="no output can reach k=2"):
        anonymize(cols, make_config(2, [("age", "numeric")], impossible), {})


def test_value_outside_hierarchy_is_refused() -> None:
    cols = toy_table(n=20)
    cols["education"][3] = "Kindergarten"
    with pytest.raises(DataError, match="Kindergarten"):
        anonymize(cols, TOY_CONFIG, TOY_H)


# ---------------------------------------------------------------------------- Spark


def _run_spark(spark, cols, config, hs):  # noqa: ANN001, ANN202
    from leteo_fed.anonymize.engines.spark.mondrian import SUPPRESSED, anonymize_dataframe

    out, stats = anonymize_dataframe(to_df(spark, cols), config, hs)
    rows = out.collect()
    assert out.columns == [*cols, SUPPRESSED]
    assert not any(r[SUPPRESSED] for r in rows)
    qi = set(config.qi_columns)
    released = {
        c: np.array([r[c] for r in rows], dtype=object if c in qi else cols[c].dtype) for c in cols
    }
    return released, stats


@pytest.mark.spark
@pytest.mark.parametrize("case", ["toy", "adult", "k_only"])
def test_spark_equals_reference(spark, case: str) -> None:  # noqa: ANN001
    if case == "toy":
        cols, config, hs = toy_table(), TOY_CONFIG, TOY_H
    elif case == "k_only":  # no sensitive column: the histograms have no sensitive keys
        cols, hs = toy_table(seed=3), TOY_H
        config = make_config(4, [("age", "numeric"), ("education", "categorical")])
    else:
        (cols, hs), config = adult_like(), ADULT_CONFIG
    ref = anonymize(cols, config, hs)
    released, stats = _run_spark(spark, cols, config, hs)
    assert stats.n_rows == len(cols["rid"])
    assert (stats.n_partitions, stats.rounds) == (ref.n_partitions, ref.rounds)
    for c in cols:  # row order preserved, every released value identical
        np.testing.assert_array_equal(released[c], ref.released[c])
    check_release(cols, released, config, hs)


@pytest.mark.spark
def test_spark_unreachable_k_raises(spark) -> None:  # noqa: ANN001
    from leteo_fed.anonymize.engines.spark.mondrian import anonymize_dataframe

    df = to_df(spark, toy_table(n=30))
    with pytest.raises(DataError, match="no output can reach k=31"):
        anonymize_dataframe(df, make_config(31, [("age", "numeric")]), {})
