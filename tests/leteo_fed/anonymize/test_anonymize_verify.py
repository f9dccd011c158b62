"""Independent verifier: a published table mislabelled "2-anonymous" as a negative case,
hand-computed k / l / t / loss values."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from leteo_fed.anonymize import Hierarchy, QuasiIdentifier
from leteo_fed.anonymize.audit.verify import (
    average_class_size,
    discernibility,
    equivalence_classes,
    k_anonymity,
    l_diversity,
    ncp,
    t_closeness,
    truthful,
)
from leteo_fed.errors import DataError

# A published example table labelled "2-anonymous" although three of its rows are singleton
# classes (k = 1): zip, age, gender, disease.
FIG_7_14 = {
    "zip": np.array(["32***"] * 4 + ["336**"] * 5, dtype=object),
    "age": np.array(["<35", "<35", ">40", ">40", ">30", "<30", "<30", "<30", ">30"], dtype=object),
    "gender": np.array(["Male", "Male", "*", "*", "Male", "Male", "Male", "Female", "Female"], dtype=object),
    "disease": np.array(
        ["Viral infection", "Cancer", "TB", "Viral infection", "Cancer", "Viral infection",
         "TB", "Cancer", "Heart disease"],
        dtype=object,
    ),
}  # fmt: skip
QIS = ["zip", "age", "gender"]
SINGLETONS = {("336**", ">30", "Male"), ("336**", "<30", "Female"), ("336**", ">30", "Female")}


@pytest.mark.parametrize("as_arrow", [False, True])
def test_book_fig_7_14_is_not_2_anonymous(as_arrow: bool) -> None:
    table = pa.table(FIG_7_14) if as_arrow else FIG_7_14
    rep = k_anonymity(table, QIS, k=2)
    assert rep.k == 1 < 2
    assert rep.n_classes == 6
    assert set(rep.smallest) == SINGLETONS
    assert {key for key, size in rep.below_k} == SINGLETONS
    # Suppressing the three singleton rows makes it 2-anonymous.
    suppressed = np.zeros(9, dtype=bool)
    suppressed[[4, 7, 8]] = True
    assert k_anonymity(table, QIS, suppressed).k == 2
    assert discernibility(table, QIS) == 3 * 4 + 3 * 1
    assert discernibility(table, QIS, suppressed) == 3 * 4 + 3 * 9
    assert average_class_size(table, QIS, 2) == pytest.approx(9 / 6 / 2)


def test_equivalence_classes_marks_suppressed() -> None:
    ec = equivalence_classes({"q": np.array([1, 1, 2, 2])}, ["q"], np.array([0, 0, 0, 1], bool))
    assert ec.ids[3] == -1 and ec.ids[0] == ec.ids[1] != ec.ids[2]
    assert sorted(ec.sizes.tolist()) == [1, 2] and ec.n_suppressed == 1
    with pytest.raises(DataError, match="'nope'"):
        equivalence_classes({"q": np.array([1])}, ["nope"])


# Classes A (4 rows: a,a,b,c) and B (4 rows: a,a,a,b).
L_TABLE = {
    "g": np.array(["A"] * 4 + ["B"] * 4),
    "s": np.array(["a", "a", "b", "c", "a", "a", "a", "b"]),
}


def test_l_diversity_variants_hand_computed() -> None:
    d = l_diversity(L_TABLE, ["g"], "s", "distinct", l=2)
    assert (d.value, d.satisfied, d.worst_class) == (2, True, ("B",))
    assert l_diversity(L_TABLE, ["g"], "s", "distinct", l=3).satisfied is False

    e = l_diversity(L_TABLE, ["g"], "s", "entropy", l=2)
    exp_b = 0.75**-0.75 * 0.25**-0.25  # exp(H) of (3/4, 1/4) ~ 1.7548; A has 2^1.5
    assert e.value == pytest.approx(exp_b) and e.worst_class == ("B",)
    assert e.satisfied is False
    assert l_diversity(L_TABLE, ["g"], "s", "entropy", l=1.7).satisfied is True

    # Recursive l=2: A counts (2,1,1) -> r1/(r2+r3) = 1; B (3,1) -> 3/1 = 3.
    r = l_diversity(L_TABLE, ["g"], "s", "recursive", l=2, c=4)
    assert (r.value, r.satisfied, r.worst_class) == (3.0, True, ("B",))
    assert l_diversity(L_TABLE, ["g"], "s", "recursive", l=2, c=3).satisfied is False
    # l=3: B has only 2 distinct values, so its tail is empty and it can never satisfy.
    r3 = l_diversity(L_TABLE, ["g"], "s", "recursive", l=3, c=100)
    assert r3.value == math.inf and r3.satisfied is False and r3.worst_class == ("B",)
    with pytest.raises(DataError, match="unknown l-diversity variant"):
        l_diversity(L_TABLE, ["g"], "s", "bogus")


# Classes A = {1, 1, 2, 3}, B = {3, 3}; global Q over (1, 2, 3) = (1/3, 1/6, 1/2).
T_TABLE = {"g": np.array(["A"] * 4 + ["B"] * 2), "s": np.array([1, 1, 2, 3, 3, 3])}


def test_t_closeness_ordered_distance() -> None:
    # A: P-Q = (1/6, 1/12, -1/4), cumsum (1/6, 1/4, 0) -> (5/12)/2 = 5/24.
    # B: P-Q = (-1/3, -1/6, 1/2), cumsum (-1/3, -1/2, 0) -> (5/6)/2 = 5/12.
    rep = t_closeness(T_TABLE, ["g"], "s")
    assert rep.distance == "ordered"
    assert rep.per_class.tolist() == pytest.approx([5 / 24, 5 / 12])
    assert rep.t == pytest.approx(5 / 12) and rep.worst_class == ("B",)


def test_t_closeness_equal_distance() -> None:
    # Half L1: A -> (1/6 + 1/12 + 1/4)/2 = 1/4; B -> (1/3 + 1/6 + 1/2)/2 = 1/2.
    table = {"g": T_TABLE["g"], "s": T_TABLE["s"].astype(str)}
    rep = t_closeness(table, ["g"], "s")
    assert rep.distance == "equal"
    assert rep.per_class.tolist() == pytest.approx([0.25, 0.5])
    assert t_closeness(T_TABLE, ["g"], "s", distance="equal").t == pytest.approx(0.5)
    # One class only: identical to the global distribution.
    assert t_closeness({"g": np.zeros(6), "s": T_TABLE["s"]}, ["g"], "s").t == 0.0


def test_t_closeness_hierarchical_distance(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("1;low;*\n2;low;*\n3;high;*\n")
    h = Hierarchy.from_csv(path, "s")
    # Same data as above: all mass moves between 'low' and 'high' (cost 2/2) -> equals half L1.
    rep = t_closeness(T_TABLE, ["g"], "s", hierarchy=h)
    assert rep.distance == "hierarchical"
    assert rep.per_class.tolist() == pytest.approx([0.25, 0.5])
    # Moving mass inside 'low' (1 <-> 2) costs only level 1 / height 2 = 1/2 per unit.
    inside = {"g": np.array(["A", "A", "B", "B"]), "s": np.array([1, 1, 2, 2])}
    assert t_closeness(inside, ["g"], "s", hierarchy=h).t == pytest.approx(0.25)
    assert t_closeness(inside, ["g"], "s", distance="equal").t == pytest.approx(0.5)
    with pytest.raises(DataError, match="needs a hierarchy"):
        t_closeness(inside, ["g"], "s", distance="hierarchical")


# ---------------------------------------------------------------------------- truthful / loss

ZIP_H = """\
33617;3361*;336**;*
33613;3361*;336**;*
33620;3362*;336**;*
32005;3200*;320**;*
"""


@pytest.fixture
def zip_h(tmp_path: Path) -> Hierarchy:
    path = tmp_path / "zip.csv"
    path.write_text(ZIP_H)
    return Hierarchy.from_csv(path, "zip")


ORIGINAL = {
    "age": np.array([17, 45, 28, 29]),
    "zip": np.array(["33617", "33613", "33620", "32005"], dtype=object),
}
SPECS = [QuasiIdentifier("age", "numeric"), QuasiIdentifier("zip", "categorical")]


def test_truthful_accepts_covering_release(zip_h: Hierarchy) -> None:
    released = {
        "age": np.array(["[17, 45]", "[17, 45]", "[28, 29]", "[28, 29]"], dtype=object),
        "zip": np.array(["3361*", "3361*", "*", "32005"], dtype=object),
    }
    assert truthful(ORIGINAL, released, SPECS, {"zip": zip_h}) is None


def test_truthful_finds_bad_interval_and_bad_label(zip_h: Hierarchy) -> None:
    released = {
        "age": np.array(["[17, 45]", "[17, 45]", "[28, 29]", "[20, 28]"], dtype=object),
        "zip": np.array(["3361*", "3361*", "336**", "336**"], dtype=object),
    }
    v = truthful(ORIGINAL, released, SPECS, {"zip": zip_h})
    assert v is not None and (v.row, v.column, v.original, v.released) == (3, "age", 29, "[20, 28]")
    released["zip"][1] = "3362*"  # 33613 is not under 3362*
    v = truthful(ORIGINAL, released, SPECS, {"zip": zip_h})
    assert v is not None and (v.row, v.column, v.released) == (1, "zip", "3362*")
    # A suppressed row is not checked.
    assert truthful(ORIGINAL, released, SPECS, {"zip": zip_h}, np.array([0, 1, 0, 1], bool)) is None
    released["zip"][1] = "Mars"  # not a label at all
    v = truthful(ORIGINAL, released, {"age": "numeric", "zip": "categorical"}, {"zip": zip_h})
    assert v is not None and (v.row, v.released) == (1, "Mars")


def test_ncp_bounds_and_hand_value(zip_h: Hierarchy) -> None:
    hs = {"zip": zip_h}
    assert ncp(ORIGINAL, ORIGINAL, SPECS, hs).gcp == 0.0
    full = {"age": np.array(["[17, 45]"] * 4, dtype=object), "zip": np.array(["*"] * 4)}
    loss = ncp(ORIGINAL, full, SPECS, hs)
    assert loss.per_column == {"age": 1.0, "zip": 1.0} and loss.gcp == 1.0
    assert ncp(ORIGINAL, {"age": np.array(["*"] * 4), "zip": full["zip"]}, SPECS, hs).gcp == 1.0
    # age [28, 29] on two rows: 1/28 each; zip 3361* on two rows: (2-1)/(4-1) = 1/3 each.
    part = {
        "age": np.array([17, 45, "[28, 29]", "[28, 29]"], dtype=object),
        "zip": np.array(["3361*", "3361*", "33620", "32005"], dtype=object),
    }
    loss = ncp(ORIGINAL, part, SPECS, hs)
    assert loss.per_column["age"] == pytest.approx((2 / 28) / 4)
    assert loss.per_column["zip"] == pytest.approx((2 / 3) / 4)
    # Suppressed rows lose everything.
    sup = ncp(ORIGINAL, ORIGINAL, SPECS, hs, np.array([1, 0, 0, 0], bool))
    assert sup.gcp == pytest.approx(0.25)


def test_large_table_is_fast() -> None:
    rng = np.random.default_rng(0)
    n = 200_000
    table = {
        "a": rng.integers(0, 50, n),
        "b": rng.integers(0, 20, n).astype(str),
        "s": rng.integers(0, 100, n),
    }
    rep = k_anonymity(table, ["a", "b"])
    assert rep.n_classes == 1000 and rep.k > 100
    assert l_diversity(table, ["a", "b"], "s", "recursive", l=2, c=3).satisfied
    assert 0 < t_closeness(table, ["a", "b"], "s").t < 0.2
