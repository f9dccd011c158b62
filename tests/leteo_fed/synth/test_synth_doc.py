"""The configuration example of docs/synthetic-data.md runs as pasted, with both methods."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from synth_cases import cli, write_csv

DOC = Path(__file__).resolve().parents[3] / "docs" / "synthetic-data.md"


def doc_config() -> str:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 1
    return blocks[0]


def adult_like(n: int, seed: int) -> list[dict[str, str]]:
    g = np.random.default_rng(seed)
    age = g.integers(17, 91, n)
    gain = np.where(g.random(n) < 0.9, 0, g.integers(1, 99999, n))
    hours = np.clip(g.normal(40, 12, n).round(), 1, 99).astype(int)
    sex = np.where(g.random(n) < 0.5, "Female", "Male")
    income = np.where(age + g.normal(0, 15, n) > 50, ">50K", "<=50K")
    return [
        {
            "age": str(age[i]),
            "capital-gain": str(gain[i]),
            "hours-per-week": str(hours[i]),
            "sex": str(sex[i]),
            "income": str(income[i]),
        }
        for i in range(n)
    ]


def test_doc_config_runs_with_both_methods(tmp_path: Path) -> None:
    data = write_csv(tmp_path / "adult-like.csv", adult_like(2000, seed=4))
    text = doc_config()
    for method in ("microaggregation", "marginals"):
        config = tmp_path / f"{method}.toml"
        config.write_text(text.replace('method = "microaggregation"', f'method = "{method}"'))
        out = tmp_path / method
        rc, stdout, err = cli(
            "--input", str(data), "--config", str(config), "--out", str(out), "--seed", "1"
        )
        assert rc == 0, err
        assert f"method {method}" in stdout
        header = (out / "synthetic.csv").read_text().splitlines()[0]
        assert header == "age,capital-gain,sex,hours-per-week,income"
