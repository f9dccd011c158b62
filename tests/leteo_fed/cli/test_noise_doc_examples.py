"""The `--dry-run` examples of docs/ldp-collection.md and docs/dp-kmeans.md run as pasted (they
contact no one and read no data) and print the expected error of every figure they name."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from leteo_fed.cli.main import main

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _examples(name: str) -> list[list[str]]:
    text = (DOCS / name).read_text()
    lines = [ln for ln in text.splitlines() if re.match(r"leteo-fed .*--dry-run", ln)]
    return [shlex.split(ln)[1:] for ln in lines]


@pytest.mark.parametrize(
    "argv", _examples("ldp-collection.md") + _examples("dp-kmeans.md"), ids=lambda a: a[0] + a[1]
)
def test_doc_dry_run_examples_run_as_pasted(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out.splitlines()[0])
    assert "assum" in out.err
    if argv[0] == "ldp":
        assert doc["figures"] and all(f["expected_std"] > 0 for f in doc["figures"])
    else:
        assert doc["center_error"] > 0


def test_there_are_examples_of_every_kind():
    ldp = _examples("ldp-collection.md")
    assert {a[a.index("--mechanism") + 1] for a in ldp if "--mechanism" in a} >= {
        "grr",
        "pm",
        "hm",
        "geo",
    }
    assert any(a[:2] == ["ldp", "naive-bayes"] for a in ldp)
    assert len(_examples("dp-kmeans.md")) >= 2


@pytest.mark.parametrize("argv", _examples("dp-release.md"), ids=lambda a: a[0])
def test_bounded_release_dry_runs_of_dp_release_md_run_as_pasted(argv, capsys):
    """The public-bounds examples: a simulated preview, every figure with a positive error and
    the assumption stated; nothing contacted."""
    assert "--bounds" in argv
    assert main(argv) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out.splitlines()[0])
    assert doc["expected_error"] and all(e > 0 for e in doc["expected_error"].values())
    assert set(doc["expected_error"]) == set(doc["expected_figures"])
    assert "assumed:" in out.err and "a sixth of their width" in out.err


@pytest.mark.parametrize("argv", _examples("correlation.md"), ids=lambda a: a[0])
def test_correlation_md_dry_run_runs_as_pasted(argv, capsys):
    """A command made from the statistic's declaration previews like the others: every
    coefficient with a positive expected error, none buried at this epsilon and row count."""
    assert main(argv) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out.splitlines()[0])
    assert set(doc["expected_error"]) == {
        "r(age, education-num)",
        "r(age, hours-per-week)",
        "r(education-num, hours-per-week)",
    }
    assert all(0 < e < 0.2 for e in doc["expected_error"].values())
    assert doc["noise_buries"] == []


def test_dp_release_md_shows_every_bounded_command():
    assert {a[0] for a in _examples("dp-release.md")} >= {"pca", "linreg", "stats"}
