"""`leteo-fed synthesize` end to end on UCI Adult (a 4,000-row subset) with the shipped config."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from synth_cases import cli, rows, write_config, write_csv

from leteo_fed.cli.main import build_parser
from leteo_fed.data.adult import locate_wheel, read_adult

ROOT = Path(__file__).resolve().parents[3]
ADULT_CONFIG = ROOT / "examples" / "synth-adult.toml"


@pytest.fixture(scope="module")
def adult_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        wheel = locate_wheel(download=False)
    except Exception as exc:  # noqa: BLE001 - the wheel is fetched once, out of the test run
        pytest.skip(f"adult.data source wheel not found ({exc})")
    cols = read_adult(wheel)
    names = list(cols)
    path = tmp_path_factory.mktemp("adult") / "adult.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        w.writerows(zip(*[cols[n][:4000] for n in names], strict=True))
    return path


def test_adult_end_to_end(adult_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    rc, stdout, err = cli(
        "--input", str(adult_csv), "--config", str(ADULT_CONFIG), "--out", str(out),
        "--engine", "local", "--seed", "3", "--epsilon", "2",
    )  # fmt: skip
    assert rc == 0, err
    assert "reading and encoding" in err and "building the DP model" in err  # progress
    assert "released" in stdout and "pure DP" in stdout
    report = json.loads((out / "report.json").read_text())
    assert report["epsilon"] == 2.0 and report["delta"] == 0.0 and report["k"] == 50
    assert report["groups"]["provenance"] == "config" and len(report["groups"]["columns"]) == 6
    spent = sum(g["epsilon"] for g in report["budget"]["groups"])
    assert spent == pytest.approx(2.0)  # the split adds up to the whole budget
    assert {c["class"] for c in report["clusters"]} == {"<=50K", ">50K"}
    assert all(c["clusters"] >= 1 for c in report["clusters"])
    assert "--seed" in report["holder_only"]["command"] and report["holder_only"]["seed"] == 3
    with (out / "synthetic.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames is not None and reader.fieldnames[-1] == "income"
        body = list(reader)
    assert len(body) == report["output"]["rows"]
    assert abs(len(body) - 4000) < 400  # the noisy class sizes
    config = ADULT_CONFIG.read_text()
    assert all(f'"{r["native-country"]}"' in config for r in body)  # only public categories
    assert all(17 <= int(r["age"]) <= 90 for r in body)
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no staging left


def test_rows_and_failed_run_keeps_the_previous_release(tmp_path: Path) -> None:
    data = write_csv(tmp_path / "data.csv", rows(200, seed=4))
    config = write_config(tmp_path)
    out = tmp_path / "out"
    args = ["--input", str(data), "--config", str(config), "--out", str(out)]
    rc, _, err = cli(*args, "--rows", "123", "--seed", "1")
    assert rc == 0, err
    engine = json.loads((out / "report.json").read_text())["holder_only"]["engine"]
    assert engine["requested"] == "auto" and engine["used"] == "local"  # a small local file
    before = (out / "synthetic.csv").read_bytes()
    assert before.count(b"\n") == 124  # header + the requested rows
    bad = rows(200, seed=4)
    bad[0]["c"] = "nope"
    write_csv(data, bad)
    rc, _, err = cli(*args, "--seed", "1")
    assert rc == 2 and "column 'c'" in err
    assert (out / "synthetic.csv").read_bytes() == before  # nothing replaced by a refused run


def test_help_explains(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["synthesize", "--help"])
    text = capsys.readouterr().out
    for words in (
        "--epsilon",
        "--seed",
        "--engine",
        "--rows",
        "report.json",
        "Z-order",
        "max_cells",
    ):
        assert words in text
