"""Top-down specialization: trees, the gain formula, the NumPy reference and Spark agreeing."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from anonymize_cases import (
    ADULT_CONFIG,
    EDU,
    TOY_CONFIG,
    TOY_H,
    adult_like,
    check_release,
    make_config,
    to_df,
    toy_table,
)
from reference_tds import anonymize

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import AnonymizationConfig, LDiversity, SensitiveAttribute
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.taxonomy import hierarchy_taxonomy, leaf_codes, numeric_taxonomy
from leteo_fed.errors import DataError


def tds(config: AnonymizationConfig, **changes: object) -> AnonymizationConfig:
    return dataclasses.replace(config, algorithm="tds", **changes)


# ---------------------------------------------------------------------------- taxonomies


def test_numeric_tree_splits_at_the_weighted_lower_median() -> None:
    t = numeric_taxonomy("x", np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 5, 1, 1]))
    # 8 rows; the lower median (row 3 of 0..7) has value 2: {1, 2} | {3, 4}
    left, right = t.children[0]
    assert (t.labels[0], t.labels[left], t.labels[right]) == ("[1, 4]", "[1, 2]", "[3, 4]")
    assert all(t.lo[c] >= t.lo[p] and t.hi[c] <= t.hi[p] for c, p in enumerate(t.parent) if p >= 0)
    leaves = [n for n in range(t.n_nodes) if t.is_leaf(n)]
    assert sorted(t.labels[n] for n in leaves) == ["1", "2", "3", "4"]
    # a skewed range still splits into two non-empty halves
    t2 = numeric_taxonomy("x", np.array([1.0, 2.0]), np.array([1, 9]))
    assert [t2.labels[c] for c in t2.children[0]] == ["1", "2"]


def test_hierarchy_tree_is_depth_first_and_collapses_single_child_chains() -> None:
    h = Hierarchy(
        [
            ["a1", "A1", "A", "*"],
            ["a2", "A1", "A", "*"],
            ["a3", "A2", "A", "*"],
            ["b1", "B", "B+", "*"],  # B+ has the single child B: collapsed to B
            ["b2", "B", "B+", "*"],
            ["c", "c", "C+", "*"],  # C+ -> c: collapsed to the leaf c
        ],
        "x",
    )
    t = hierarchy_taxonomy(h)
    assert t.labels[0] == "*"
    assert [t.labels[c] for c in t.children[0]] == ["A", "B", "c"]
    for node in range(t.n_nodes):  # every node covers a contiguous range of leaf codes
        covered = set(range(int(t.lo[node]), int(t.hi[node]) + 1))
        under = {t.keys.index(v) for v in h.leaves_under(t.labels[node])}
        assert covered == under, t.labels[node]
    assert [t.labels[c] for c in t.children[t.children[0][0]]] == ["A1", "a3"]
    assert leaf_codes(t, np.array(["c", "a2"])).tolist() == [5, 1]
    with pytest.raises(DataError, match="'zz' of column 'x' is not in its hierarchy"):
        leaf_codes(t, np.array(["zz"]))


# ---------------------------------------------------------------------------- the gain


def test_first_choice_follows_the_gain_formula() -> None:
    """Hand-computed: 8 rows, QI a splits 4|4, QI b splits 6|2; k = 2.

    Specializing a: classes {4, 4}: entropy 1 bit, A 8 -> 4, gain 1 / (1 + 4) = 0.2.
    Specializing b: classes {6, 2}: entropy H(6/8, 2/8) = 0.811 bits, A 8 -> 2,
    gain 0.811 / (1 + 6) = 0.116. So a goes first, with these exact scores.
    """
    cols = {
        "a": np.array([1, 1, 1, 1, 2, 2, 2, 2]),
        "b": np.array([1, 1, 1, 1, 1, 1, 2, 2]),
    }
    config = tds(make_config(2, [("a", "numeric"), ("b", "numeric")]))
    res = anonymize(cols, config, {})
    first = res.history[0]
    assert (first.attr, first.anonymity_gain) == (0, 4.0)
    assert first.info_gain == pytest.approx(1.0, abs=1e-12)
    assert first.gain == pytest.approx(0.2)
    h = -(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25))
    assert h / 7 < first.gain
    # then b inside a's halves: {1: 4 rows b=1}, {2: 2+2} -> classes 4, 2, 2 -> k = 2 holds
    assert verify.k_anonymity(res.released, ["a", "b"]).k == 2
    assert res.n_classes == 3


def test_squared_distance_prefers_the_wider_spread() -> None:
    """a: values 0 | 100 (far apart) vs b: 0 | 1 over the same span: a gains more accuracy."""
    cols = {
        "a": np.array([0, 0, 0, 0, 100, 100, 100, 100]),
        "b": np.array([0, 0, 100, 100, 0, 0, 99, 100]),
    }
    config = tds(make_config(4, [("a", "numeric"), ("b", "numeric")]), info_gain="squared_distance")
    res = anonymize(cols, config, {})
    assert res.history[0].attr == 0
    assert res.released["a"].tolist() == ["0"] * 4 + ["100"] * 4
    assert set(res.released["b"].tolist()) == {"[0, 100]"}


# ---------------------------------------------------------------------------- NumPy reference


@pytest.mark.parametrize("info_gain", ["entropy", "squared_distance"])
def test_toy_reference_satisfies_models(info_gain: str) -> None:
    cols = toy_table()
    config = tds(TOY_CONFIG, info_gain=info_gain)
    res = anonymize(cols, config, TOY_H)
    check_release(cols, res.released, config, TOY_H, res.suppressed)
    assert not res.suppressed.any()
    assert res.n_classes == verify.k_anonymity(res.released, config.qi_columns).n_classes > 5


@pytest.mark.parametrize("info_gain", ["entropy", "squared_distance"])
def test_adult_like_reference_satisfies_models(info_gain: str) -> None:
    cols, hs = adult_like()
    config = tds(ADULT_CONFIG, info_gain=info_gain)
    res = anonymize(cols, config, hs)
    check_release(cols, res.released, config, hs, res.suppressed)
    assert res.n_classes > 3


def test_numeric_qi_with_a_hierarchy_releases_its_labels() -> None:
    cols = toy_table(n=300, seed=4)
    age = Hierarchy.from_csv(
        __import__("anonymize_cases").ADULT / "age.csv", "age"
    )  # ARX-style age bands
    hs = {"education": EDU, "age": age}
    config = tds(make_config(10, [("age", "numeric"), ("education", "categorical")]))
    res = anonymize(cols, config, hs)
    check_release(cols, res.released, config, hs, res.suppressed)
    assert set(res.released["age"].tolist()) <= age.labels()


def _outlier_case() -> tuple[dict[str, np.ndarray], AnonymizationConfig]:
    rng = np.random.default_rng(7)
    n = 200
    cols = {"age": np.concatenate([rng.integers(20, 30, n - 1), [95]]), "rid": np.arange(n)}
    return cols, tds(make_config(10, [("age", "numeric")]), suppression_limit=0.01)


def test_suppression_buys_detail_within_the_limit() -> None:
    """One outlier age forces a coarse release at limit 0; a 1% budget withholds it instead."""
    cols, loose = _outlier_case()
    strict = tds(loose, suppression_limit=0.0)
    a = anonymize(cols, strict, {})
    b = anonymize(cols, loose, {})
    check_release(cols, a.released, strict, {}, a.suppressed)
    check_release(cols, b.released, loose, {}, b.suppressed)
    assert a.suppressed.sum() == 0
    assert 1 <= b.suppressed.sum() <= 2 and b.suppressed[-1]
    gcp = [
        verify.ncp(cols, r.released, strict.quasi_identifiers, {}, r.suppressed).gcp for r in (a, b)
    ]
    assert b.n_classes >= a.n_classes
    assert gcp[1] < gcp[0]


def test_suppression_keeps_t_closeness_of_the_release_itself() -> None:
    """With a budget, t is checked with margin B/(N-B), so the release is t-close to its own
    distribution (the verifier recomputes it from the released, non-suppressed rows)."""
    cols = toy_table(n=400, seed=9)
    cols["age"][:6] = [1, 2, 3, 120, 121, 122]
    config = tds(TOY_CONFIG, suppression_limit=0.03)
    res = anonymize(cols, config, TOY_H)
    check_release(cols, res.released, config, TOY_H, res.suppressed)
    rep = verify.t_closeness(res.released, config.qi_columns, "income", suppressed=res.suppressed)
    assert 0 < res.suppressed.sum() <= 12  # the six outliers (or fewer) withheld
    assert rep.t <= 0.2 + 1e-12


def test_unreachable_models_and_bad_values_raise() -> None:
    cols = toy_table(n=50)
    with pytest.raises(DataError, match="no output can reach k=51"):
        anonymize(cols, tds(make_config(51, [("age", "numeric")])), {})
    impossible = (SensitiveAttribute("income", LDiversity("distinct", 3)),)
    with pytest.raises(DataError, match="no output can reach k=2"):
        anonymize(cols, tds(make_config(2, [("age", "numeric")], impossible)), {})
    cols["education"] = cols["education"].astype(object)
    cols["education"][3] = "Kindergarten"
    config = tds(make_config(2, [("education", "categorical")]))
    with pytest.raises(
        DataError, match="'Kindergarten' of column 'education' is not in its hierarchy"
    ):
        anonymize(cols, config, TOY_H)


# ---------------------------------------------------------------------------- Spark


def _run_spark(spark, cols, config, hs):  # noqa: ANN001, ANN202
    from leteo_fed.anonymize.engines.spark.mondrian import SUPPRESSED
    from leteo_fed.anonymize.engines.spark.tds import anonymize_dataframe

    out, stats = anonymize_dataframe(to_df(spark, cols), config, hs)
    table = out.toArrow()
    assert out.columns == [*cols, SUPPRESSED]
    qi = set(config.qi_columns)
    released = {
        c: np.array(table.column(c).to_pylist(), dtype=object if c in qi else cols[c].dtype)
        for c in cols
    }
    return released, np.array(table.column(SUPPRESSED).to_pylist(), dtype=bool), stats


@pytest.mark.spark
@pytest.mark.parametrize("case", ["toy", "adult", "k_only", "squared", "suppression"])
def test_spark_equals_reference(spark, case: str) -> None:  # noqa: ANN001
    hs = TOY_H
    if case == "toy":
        cols, config = toy_table(), tds(TOY_CONFIG)
    elif case == "k_only":
        cols, config = (
            toy_table(seed=3),
            tds(make_config(4, [("age", "numeric"), ("education", "categorical")])),
        )
    elif case == "squared":
        cols, config = toy_table(seed=5), tds(TOY_CONFIG, info_gain="squared_distance")
    elif case == "suppression":
        cols, config = _outlier_case()
    else:
        cols, hs = adult_like()
        config = tds(ADULT_CONFIG)
    ref = anonymize(cols, config, hs)
    released, suppressed, stats = _run_spark(spark, cols, config, hs)
    assert stats.n_rows == len(cols["rid"])
    assert (stats.n_partitions, stats.rounds) == (ref.n_classes, ref.rounds)
    assert [(h.attr, h.node) for h in stats.history] == [(h.attr, h.node) for h in ref.history]
    np.testing.assert_array_equal(suppressed, ref.suppressed)
    assert stats.n_suppressed == int(ref.suppressed.sum())
    for c in cols:  # row order preserved, every released value identical
        np.testing.assert_array_equal(released[c], ref.released[c])
    check_release(cols, released, config, hs, suppressed)
    if case == "suppression":
        assert suppressed.any()


@pytest.mark.spark
def test_spark_replicated_rows_give_the_same_cut(spark) -> None:  # noqa: ANN001
    """x3 replicated rows: the compact table has as many distinct rows, the cut is as deep."""
    cols = toy_table(n=120, seed=8)
    triple = {c: np.concatenate([v, v, v]) for c, v in cols.items()}
    config = tds(make_config(5, [("age", "numeric"), ("education", "categorical")]))
    once = _run_spark(spark, cols, config, TOY_H)[2]
    thrice = _run_spark(spark, triple, dataclasses.replace(config, k=15), TOY_H)[2]
    assert thrice.distinct_rows == once.distinct_rows
    assert [(h.attr, h.node) for h in thrice.history] == [(h.attr, h.node) for h in once.history]


@pytest.mark.spark
def test_spark_unreachable_k_raises(spark) -> None:  # noqa: ANN001
    from leteo_fed.anonymize.engines.spark.tds import anonymize_dataframe

    df = to_df(spark, toy_table(n=30))
    with pytest.raises(DataError, match="no output can reach k=31"):
        anonymize_dataframe(df, tds(make_config(31, [("age", "numeric")])), {})
