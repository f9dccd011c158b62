"""Mondrian: the NumPy reference and the Spark rounds release the same, verifiably private table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.anonymize import verify
from leteo_fed.anonymize.config import (
    AnonymizationConfig,
    LDiversity,
    QuasiIdentifier,
    SensitiveAttribute,
    TCloseness,
)
from leteo_fed.anonymize.hierarchy import Hierarchy
from leteo_fed.anonymize.mondrian import anonymize
from leteo_fed.errors import DataError

ADULT = Path(__file__).resolve().parents[1] / "benchmarks" / "hierarchies" / "adult"

EDU = Hierarchy(
    [
        ["HS", "School", "*"],
        ["Some-college", "School", "*"],
        ["Bachelors", "Uni", "*"],
        ["Masters", "Uni", "*"],
        ["Doctorate", "Uni", "*"],
    ],
    "education",
)


def _config(
    k: int, qis: list[tuple[str, str]], sensitive: tuple[SensitiveAttribute, ...] = ()
) -> AnonymizationConfig:
    return AnonymizationConfig(
        algorithm="mondrian",
        k=k,
        suppression_limit=0.0,
        info_gain="entropy",
        quasi_identifiers=tuple(QuasiIdentifier(c, t) for c, t in qis),
        sensitive=sensitive,
    )


def _toy(n: int = 200, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "rid": np.arange(n),
        "age": rng.integers(17, 80, n),
        "education": rng.choice(EDU.leaves, n),
        "income": rng.choice(["<=50K", ">50K"], n, p=[0.7, 0.3]),
    }


TOY_CONFIG = _config(
    5,
    [("age", "numeric"), ("education", "categorical")],
    (SensitiveAttribute("income", LDiversity("distinct", 2), TCloseness(0.2)),),
)
TOY_H = {"education": EDU}


def _adult(n: int = 600, seed: int = 1) -> tuple[dict[str, np.ndarray], dict[str, Hierarchy]]:
    """Synthetic rows over the Adult hierarchies' domains (skewed like the real data)."""
    rng = np.random.default_rng(seed)
    hs = {
        c: Hierarchy.from_csv(ADULT / f"{c}.csv", c)
        for c in ("education", "race", "marital-status")
    }
    age = np.clip(rng.normal(38, 13, n).round(), 17, 90).astype(np.int64)

    def skewed(h: Hierarchy) -> np.ndarray:
        w = rng.random(len(h.leaves)) ** 2 + 0.02
        return rng.choice(h.leaves, n, p=w / w.sum())

    cols = {
        "rid": np.arange(n),
        "age": age,
        "education": skewed(hs["education"]),
        "race": skewed(hs["race"]),
        "sex": rng.choice(["Male", "Female"], n),
        "marital-status": skewed(hs["marital-status"]),
        "hours": rng.choice([20.0, 35.0, 40.0, 45.0, 60.0], n),
    }
    return cols, hs


ADULT_CONFIG = _config(
    10,
    [("age", "numeric"), ("education", "categorical"), ("race", "categorical")],
    (
        SensitiveAttribute(
            "marital-status",
            LDiversity("recursive", 2, 3.0),
            TCloseness(0.2, "hierarchical"),
            hierarchy=ADULT / "marital-status.csv",
        ),
        SensitiveAttribute("hours", None, TCloseness(0.15, "ordered")),
    ),
)


def _check(original: dict, released: dict, config: AnonymizationConfig, hs: dict) -> None:
    """Independent checks with :mod:`verify`: k, l, t, truthfulness, nothing lost or changed."""
    qi = config.qi_columns
    assert set(released) == set(original)
    assert all(len(released[c]) == len(original["rid"]) for c in released)
    for c in original:
        if c not in qi:
            np.testing.assert_array_equal(released[c], original[c])
    assert verify.k_anonymity(released, qi).k >= config.k
    for s in config.sensitive:
        if s.l_diversity is not None:
            ld = s.l_diversity
            rep = verify.l_diversity(released, qi, s.column, ld.variant, l=ld.l, c=ld.c)
            assert rep.satisfied, rep
        if s.t_closeness is not None:
            rep = verify.t_closeness(
                released,
                qi,
                s.column,
                distance=s.t_closeness.distance,
                hierarchy=hs.get(s.column),
            )
            assert rep.t <= s.t_closeness.t + 1e-9, rep.t
    assert verify.truthful(original, released, config.quasi_identifiers, hs) is None


# ---------------------------------------------------------------------------- NumPy reference


def test_median_cut_and_release_labels() -> None:
    cols = {"x": np.array([4, 1, 3, 2, 2, 9]), "note": np.array(list("abcdef"))}
    res = anonymize(cols, _config(2, [("x", "numeric")]), {})
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
    res = anonymize(cols, _config(2, [("x", "numeric"), ("education", "categorical")]), TOY_H)
    assert res.released["x"].tolist() == ["5"] * 6
    # * -> {School, Uni}; School {HS, HS, Some} cannot split (Some alone); Uni -> Bachelors alone
    assert res.released["education"].tolist() == ["School"] * 3 + ["Uni"] * 3


def test_toy_reference_satisfies_models() -> None:
    cols = _toy()
    res = anonymize(cols, TOY_CONFIG, TOY_H)
    _check(cols, res.released, TOY_CONFIG, TOY_H)
    assert res.n_partitions == verify.k_anonymity(res.released, TOY_CONFIG.qi_columns).n_classes
    assert res.n_partitions > 5  # it did cut
    assert verify.ncp(cols, res.released, TOY_CONFIG.quasi_identifiers, TOY_H).gcp < 0.5


def test_adult_like_reference_satisfies_models() -> None:
    cols, hs = _adult()
    res = anonymize(cols, ADULT_CONFIG, hs)
    _check(cols, res.released, ADULT_CONFIG, hs)
    assert res.n_partitions > 10


def test_k_only_without_sensitive_columns() -> None:
    cols = _toy(seed=3)
    config = _config(4, [("age", "numeric"), ("education", "categorical")])
    res = anonymize(cols, config, TOY_H)
    _check(cols, res.released, config, TOY_H)
    assert np.bincount(res.partition_id).min() >= 4


def test_unreachable_models_raise() -> None:
    cols = _toy(n=50)
    with pytest.raises(DataError, match="no output can reach k=51"):
        anonymize(cols, _config(51, [("age", "numeric")]), {})
    impossible = (SensitiveAttribute("income", LDiversity("distinct", 3)),)
    with pytest.raises(DataError, match="no output can reach k=2"):
        anonymize(cols, _config(2, [("age", "numeric")], impossible), {})


def test_value_outside_hierarchy_is_refused() -> None:
    cols = _toy(n=20)
    cols["education"][3] = "Kindergarten"
    with pytest.raises(DataError, match="Kindergarten"):
        anonymize(cols, TOY_CONFIG, TOY_H)


# ---------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from leteo_fed.data.spark_stats import get_spark

    yield get_spark()


def _to_df(spark, cols: dict[str, np.ndarray]):  # noqa: ANN001, ANN202
    names = list(cols)
    rows = list(zip(*[cols[c].tolist() for c in names], strict=True))
    return spark.createDataFrame(rows, names)


def _run_spark(spark, cols, config, hs):  # noqa: ANN001, ANN202
    from leteo_fed.anonymize.spark_mondrian import SUPPRESSED, anonymize_dataframe

    out, stats = anonymize_dataframe(_to_df(spark, cols), config, hs)
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
        cols, config, hs = _toy(), TOY_CONFIG, TOY_H
    elif case == "k_only":  # no sensitive column: the histograms have no sensitive keys
        cols, hs = _toy(seed=3), TOY_H
        config = _config(4, [("age", "numeric"), ("education", "categorical")])
    else:
        (cols, hs), config = _adult(), ADULT_CONFIG
    ref = anonymize(cols, config, hs)
    released, stats = _run_spark(spark, cols, config, hs)
    assert stats.n_rows == len(cols["rid"])
    assert (stats.n_partitions, stats.rounds) == (ref.n_partitions, ref.rounds)
    for c in cols:  # row order preserved, every released value identical
        np.testing.assert_array_equal(released[c], ref.released[c])
    _check(cols, released, config, hs)


@pytest.mark.spark
def test_spark_unreachable_k_raises(spark) -> None:  # noqa: ANN001
    from leteo_fed.anonymize.spark_mondrian import anonymize_dataframe

    df = _to_df(spark, _toy(n=30))
    with pytest.raises(DataError, match="no output can reach k=31"):
        anonymize_dataframe(df, _config(31, [("age", "numeric")]), {})
