"""Shared inputs of the `leteo-fed anonymize` job tests: rows, hierarchies, config, CLI call."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

from leteo_fed.cli.main import main

KEY = b"unit-test-hmac-key-0123456789"
ENGINES = ["local", "spark"]
EDU = [
    ["HS", "School", "*"],
    ["Some-college", "School", "*"],
    ["Bachelors", "Uni", "*"],
    ["Masters", "Uni", "*"],
    ["Doctorate", "Uni", "*"],
]
DIAG = [
    ["Flu", "Respiratory", "*"],
    ["Pneumonia", "Respiratory", "*"],
    ["Gastritis", "Digestive", "*"],
    ["Ulcer", "Digestive", "*"],
]
COLUMNS = ["name", "ssn", "age", "education", "zip", "income", "hours", "diagnosis", "note"]
QIS = ["age", "education"]

CONFIG = """\
[anonymization]
algorithm = "mondrian"
k = {k}

[[quasi_identifier]]
column = "{age}"
type = "numeric"

[[quasi_identifier]]
column = "education"
type = "categorical"
hierarchy = "education.csv"

[[sensitive]]
column = "income"
l_diversity = {{ variant = "distinct", l = 2 }}
t_closeness = {{ t = 0.3 }}

[[sensitive]]
column = "hours"
l_diversity = {{ variant = "entropy", l = 2 }}
t_closeness = {{ t = 0.35 }}

[[sensitive]]
column = "diagnosis"
hierarchy = "diagnosis.csv"
l_diversity = {{ variant = "recursive", l = 2, c = 4.0 }}
t_closeness = {{ t = 0.3, distance = "hierarchical" }}

[identifiers]
drop = ["ssn"]
pseudonymize = ["name"]
key_file = "hmac.key"
"""


def rows(n: int, seed: int = 3) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "name": f"person-{i:04d}",
            "ssn": f"{int(rng.integers(0, 10**9)):09d}",
            "age": int(rng.integers(17, 80)),
            "education": str(rng.choice([e[0] for e in EDU], p=[0.3, 0.25, 0.25, 0.12, 0.08])),
            "zip": f"0{int(rng.integers(1000, 9999))}",  # leading zero must survive
            "income": str(rng.choice(["<=50K", ">50K"], p=[0.7, 0.3])),
            "hours": float(rng.choice([20, 35, 40, 45, 60], p=[0.1, 0.2, 0.4, 0.2, 0.1])),
            "diagnosis": str(rng.choice([d[0] for d in DIAG])),
            "note": 'said "hi", then left' if i % 7 == 0 else f"n{i}",  # RFC 4180 quoting
        }
        for i in range(n)
    ]


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] = COLUMNS) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)


def write_job(folder: Path, k: int = 5, age: str = "age") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "education.csv").write_text("\n".join(";".join(r) for r in EDU) + "\n")
    (folder / "diagnosis.csv").write_text("\n".join(";".join(r) for r in DIAG) + "\n")
    key = folder / "hmac.key"
    key.write_bytes(KEY + b"\n")
    key.chmod(0o600)
    config = folder / "job.toml"
    config.write_text(CONFIG.format(k=k, age=age))
    return config


def cli(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `leteo-fed anonymize ARGS` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["anonymize", *args])
    return rc, out.getvalue(), err.getvalue()
