"""docs/plugins.md runs as pasted: its code is the example package's own files, byte for
byte; the package is installed from the repository (as `make test` installs it, like a site);
its tests pass under the kit; the page's dry run previews the plugin's release without
contacting anyone. (Its rounds through real processes: tests/integration/
test_integration_statistics.py.)"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

from leteo_fed.cli.main import main

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "plugins.md").read_text()
PACKAGE = REPO / "examples" / "plugin-skewness"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC, re.M | re.S)


def test_the_page_shows_the_package_files_as_they_are():
    toml, *_ = _blocks("toml")
    statistic, tests = _blocks("python")
    assert toml == (PACKAGE / "pyproject.toml").read_text()
    assert statistic == (PACKAGE / "leteo_skewness" / "__init__.py").read_text()
    assert tests == (PACKAGE / "tests" / "test_skewness.py").read_text()


def test_the_example_is_installed_as_a_package_of_its_own():
    dist = distribution("leteo-skewness")
    assert dist.version == "1.0.0"
    assert [ep.value for ep in dist.entry_points if ep.group == "leteo_fed.statistics"] == [
        "leteo_skewness:SkewnessStatistic"
    ]


def test_the_pages_commands_run_as_pasted(capsys):
    bash = "\n".join(_blocks("bash"))
    lines = [ln for ln in bash.splitlines() if ln.strip()]
    assert lines[0] == "pip install -e examples/plugin-skewness"  # done by make test
    pytest_line = shlex.split(lines[1])
    assert pytest_line[:3] == ["python", "-m", "pytest"]
    proc = subprocess.run(
        [sys.executable, *pytest_line[1:], "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    dry = shlex.split(lines[2])
    assert dry[0] == "leteo-fed" and "--dry-run" in dry
    assert main(dry[1:]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out.splitlines()[0])
    assert set(doc["expected_error"]) == {
        "skewness of score",
        "skewness of age",
        "excess kurtosis of score",
        "excess kurtosis of age",
    }
    assert all(e > 0 for e in doc["expected_error"].values())
