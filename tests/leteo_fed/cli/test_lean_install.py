"""A base install (no extras) runs the three services and the analyst client.

Each check runs in a fresh interpreter whose import system behaves as if pyspark, pandas,
matplotlib, scikit-learn and phe were not installed, and records every attempt to import them:
a service module that reaches for one at import time fails here, even if it would swallow the
ImportError.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

EXTRA_PACKAGES = ("pyspark", "pandas", "matplotlib", "sklearn", "phe")

LEAN_PRELUDE = f"""
import contextlib, importlib.abc, io, json, sys, traceback

ATTEMPTS = []


class NotInstalled(importlib.abc.MetaPathFinder):
    \"\"\"Every import of an extra's package fails as if the package were not installed.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {EXTRA_PACKAGES!r}:
            stack = [f"{{f.filename}}:{{f.lineno}}" for f in traceback.extract_stack()[:-1]]
            ATTEMPTS.append({{"module": name, "from": stack[-8:]}})
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())


def cli(*argv):
    \"\"\"Exit code, stdout and stderr of `leteo-fed ARGV` in this interpreter.\"\"\"
    from leteo_fed.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return {{"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}}
"""

SERVICE_MODULES = (
    "owner_agent.service",
    "owner_agent.server",
    "csp.service",
    "csp.server",
    "aggregator.service",
    "aggregator.server",
    "leteo_fed.client",
)


def run_lean(body: str) -> dict:
    """Run BODY after the prelude; it must print one JSON document on its last line."""
    code = LEAN_PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", SERVICE_MODULES)
def test_service_modules_import_without_extras(module):
    result = run_lean(
        f"""
        import importlib
        importlib.import_module({module!r})
        print(json.dumps(ATTEMPTS))
        """
    )
    assert result == [], f"{module} imports an optional extra at import time: {result}"


@pytest.mark.parametrize("service", ["owner", "csp", "aggregator"])
def test_serve_help_without_extras(service):
    result = run_lean(
        f"""
        result = cli({service!r}, "serve", "--help")
        print(json.dumps({{**result, "attempts": ATTEMPTS}}))
        """
    )
    assert result["code"] == 0, result["stderr"]
    assert f"usage: leteo-fed {service} serve" in result["stdout"]
    assert len(result["stdout"].splitlines()) > 5
    assert result["attempts"] == []


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["anonymize", "--input", "in.csv", "--config", "anon.toml", "--out", "o",
          "--engine", "spark"], "spark"),
        (["synthesize", "--input", "in.csv", "--config", "synth.toml", "--out", "o",
          "--engine", "spark"], "spark"),
        (["dp-kmeans", "--data", "d.csv", "--k", "2", "--epsilon", "1", "--method", "eugkm",
          "--bounds", "0,1", "--out", "o", "--engine", "spark"], "spark"),
        (["dp-kmeans", "--data", "d.csv", "--k", "2", "--epsilon", "1", "--method", "eugkm",
          "--bounds", "0,1", "--out", "o"], "plots"),
        (["demo", "pca", "--out", "o"], "plots"),
        (["bench", "pca", "--quick", "--out", "o.json"], "bench"),
    ],
)  # fmt: skip
def test_commands_needing_an_extra_name_it(tmp_path, argv, extra):
    """Refused before any work (exit 2, one line), with the command that installs the extra."""
    result = run_lean(
        f"""
        import os
        os.chdir({str(tmp_path)!r})
        print(json.dumps(cli(*{argv!r})))
        """
    )
    assert result["code"] == 2, result
    assert result["stderr"].startswith("error: this needs the [")
    assert f"pip install 'leteo-fed[{extra}]'" in result["stderr"]
    assert len(result["stderr"].strip().splitlines()) == 1
    assert not any(tmp_path.iterdir()), "nothing may be written"


def test_anonymize_in_process_needs_no_extra(tmp_path):
    """`--engine local` (and `auto` on a small file) runs on the base install: pyarrow + NumPy."""
    (tmp_path / "edu.csv").write_text("HS;School;*\nBA;Uni;*\nMA;Uni;*\n")
    (tmp_path / "job.toml").write_text(
        '[anonymization]\nalgorithm = "mondrian"\nk = 3\n'
        '[[quasi_identifier]]\ncolumn = "age"\ntype = "numeric"\n'
        '[[quasi_identifier]]\ncolumn = "edu"\ntype = "categorical"\nhierarchy = "edu.csv"\n'
    )
    lines = ["id,age,edu"] + [f"{i},{20 + i % 30},{['HS', 'BA', 'MA'][i % 3]}" for i in range(60)]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n")
    for engine in ("local", "auto"):
        result = run_lean(
            f"""
            import os
            os.chdir({str(tmp_path)!r})
            result = cli("anonymize", "--input", "in.csv", "--config", "job.toml",
                         "--out", "out-{engine}", "--engine", "{engine}")
            print(json.dumps({{**result, "attempts": ATTEMPTS}}))
            """
        )
        assert result["code"] == 0, result["stderr"]
        assert "(engine local)" in result["stdout"]
        # pyspark is never looked up; pyarrow probes for pandas by itself and carries on
        assert not [a for a in result["attempts"] if a["module"].startswith("pyspark")]
        assert (tmp_path / f"out-{engine}" / "release.csv").read_text().startswith("id,age,edu\n")
        assert (tmp_path / f"out-{engine}" / "report.json").exists()


def test_synthesize_in_process_needs_no_extra(tmp_path):
    """`synthesize --engine local` runs on the base install: pyarrow, NumPy and SciPy."""
    (tmp_path / "synth.toml").write_text(
        '[synthesize]\nepsilon = 1.0\nk = 5\ngroups = [["age", "edu"]]\n'
        '[[column]]\nname = "age"\ntype = "numeric"\nlo = 18\nhi = 60\n'
        '[[column]]\nname = "edu"\ntype = "categorical"\ncategories = ["HS", "BA", "MA"]\n'
    )
    lines = ["age,edu"] + [f"{20 + i % 30},{['HS', 'BA', 'MA'][i % 3]}" for i in range(60)]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n")
    result = run_lean(
        f"""
        import os
        os.chdir({str(tmp_path)!r})
        result = cli("synthesize", "--input", "in.csv", "--config", "synth.toml",
                     "--out", "out", "--engine", "local", "--seed", "1")
        print(json.dumps({{**result, "attempts": ATTEMPTS}}))
        """
    )
    assert result["code"] == 0, result["stderr"]
    assert "(engine local)" in result["stdout"]
    assert not [a for a in result["attempts"] if a["module"].startswith("pyspark")]
    assert (tmp_path / "out" / "synthetic.csv").read_text().startswith("age,edu\n")
    assert (tmp_path / "out" / "report.json").exists()
