"""Bad input is refused by name, before anything is written (exit 2 from the CLI)."""

from __future__ import annotations

from pathlib import Path

import pytest
from synth_cases import CONFIG, GROUPS, cli, rows, write_config, write_csv

from leteo_fed.errors import ConfigError, DataError
from leteo_fed.synth.config import parse


def _run(tmp_path: Path, data: list[dict[str, str]], config: Path, *extra: str) -> tuple[int, str]:
    src = write_csv(tmp_path / "data.csv", data)
    out = tmp_path / "out"
    rc, _, err = cli("--input", str(src), "--config", str(config), "--out", str(out), *extra)
    assert not (out / "synthetic.csv").exists() and not (out / "report.json").exists()
    return rc, err


def test_value_outside_a_domain_names_the_column(tmp_path: Path) -> None:
    data = rows(30, seed=1)
    data[4]["c"] = "w"
    rc, err = _run(tmp_path, data, write_config(tmp_path), "--engine", "local")
    assert rc == 2 and "column 'c'" in err and "'w'" in err and "public domain" in err


def test_label_outside_its_classes(tmp_path: Path) -> None:
    data = rows(30, seed=1)
    data[0]["y"] = "maybe"
    rc, err = _run(tmp_path, data, write_config(tmp_path), "--engine", "local")
    assert rc == 2 and "label column 'y'" in err and "'maybe'" in err


@pytest.mark.parametrize("column, value", [("a", ""), ("b", "NaN"), ("c", "")])
def test_missing_values_name_the_column(tmp_path: Path, column: str, value: str) -> None:
    data = rows(30, seed=1)
    data[2][column] = value
    rc, err = _run(tmp_path, data, write_config(tmp_path), "--engine", "local")
    assert rc == 2 and f"column {column!r} has 1 missing" in err


def test_not_a_number(tmp_path: Path) -> None:
    data = rows(30, seed=1)
    data[3]["d"] = "ten"
    rc, err = _run(tmp_path, data, write_config(tmp_path), "--engine", "local")
    assert rc == 2 and "numeric column 'd'" in err and "'ten'" in err


def test_missing_column(tmp_path: Path) -> None:
    data = [{k: v for k, v in r.items() if k != "b"} for r in rows(30, seed=1)]
    rc, err = _run(tmp_path, data, write_config(tmp_path), "--engine", "local")
    assert rc == 2 and "column 'b' is not in the input" in err


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "51"])
def test_bad_epsilon(tmp_path: Path, epsilon: str) -> None:
    rc, err = _run(tmp_path, rows(30, seed=1), write_config(tmp_path), "--epsilon", epsilon)
    assert rc == 2 and "epsilon must be finite and in (0, 50]" in err


def test_grid_over_the_cell_cap_names_bins_and_the_group(tmp_path: Path) -> None:
    config = tmp_path / "synth.toml"
    config.write_text(
        CONFIG.format(epsilon=1, k=10, groups=GROUPS).replace(
            "bins = 4", "bins = 4\nmax_cells = 12"
        )
    )
    rc, err = _run(tmp_path, rows(30, seed=1), config, "--engine", "local")
    assert rc == 2 and "['a', 'b'] spans 16 grid cells" in err and "`bins`" in err


def _doc(**top: object) -> dict[str, object]:
    return {
        "synthesize": {"epsilon": 1.0, "groups": "dp", **top},
        "column": [{"name": "a", "type": "numeric", "lo": 0, "hi": 1}],
    }


@pytest.mark.parametrize(
    "doc, words",
    [
        ({"column": [{"name": "a", "type": "numeric", "lo": 1, "hi": 1}]}, "lo must be < hi"),
        ({"column": [{"name": "a", "type": "numeric", "lo": 0}]}, "public bounds lo and hi"),
        ({"column": [{"name": "a", "type": "categorical", "categories": []}]}, "a.categories"),
        ({"column": [{"name": "a", "type": "date"}]}, "type must be 'numeric' or 'categorical'"),
        (_doc(groups=[["b"]]), "undeclared columns ['b']"),
        (_doc(label="y"), "synthesize.classes"),
        (_doc(shares={"histogram": 1.0}), "synthesize.shares"),
        (_doc(k=0), "synthesize.k"),
        (_doc(epsilon=0), "epsilon"),
    ],
)
def test_config_refusals(doc: dict[str, object], words: str) -> None:
    with pytest.raises((ConfigError, DataError)) as info:
        parse(doc)
    assert words in str(info.value)
