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
