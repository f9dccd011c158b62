"""Small data sets and configs shared by the synthesizer's tests."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

import numpy as np

from leteo_fed.cli.main import main

CONFIG = """\
[synthesize]
epsilon = {epsilon}
k = {k}
bins = 4
groups = {groups}
label = "y"
classes = ["no", "yes"]

[[column]]
name = "a"
type = "numeric"
lo = 0
hi = 100
integer = true

[[column]]
name = "b"
type = "numeric"
lo = -1
hi = 1

[[column]]
name = "c"
type = "categorical"
categories = ["x", "y", "z"]

[[column]]
name = "d"
type = "numeric"
lo = 0
hi = 10
bins = 2
"""

GROUPS = '[["a", "b"], ["c", "d"]]'


def write_config(folder: Path, *, epsilon: float = 1.0, k: int = 10, groups: str = GROUPS) -> Path:
    path = folder / "synth.toml"
    path.write_text(CONFIG.format(epsilon=epsilon, k=k, groups=groups))
    return path


def rows(n: int, seed: int) -> list[dict[str, str]]:
    """Correlated a/b, c depending on d, a label depending on a; some values out of bounds."""
    g = np.random.default_rng(seed)
    a = np.clip(g.normal(50, 15, n), -5, 110).round()
    b = np.clip((a - 50) / 40 + g.normal(0, 0.2, n), -1.3, 1.3)
    d = g.uniform(0, 10, n)
    c = np.where(d < 3, "x", np.where(g.random(n) < 0.5, "y", "z"))
    y = np.where(a + g.normal(0, 10, n) > 55, "yes", "no")
    return [
        {
            "a": str(int(a[i])),
            "b": f"{b[i]:.4f}",
            "c": str(c[i]),
            "d": f"{d[i]:.3f}",
            "y": str(y[i]),
        }
        for i in range(n)
    ]


def write_csv(path: Path, data: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(data[0]))
        w.writeheader()
        w.writerows(data)
    return path


def cli(*args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `leteo-fed synthesize ARGS` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["synthesize", *args])
    return rc, out.getvalue(), err.getvalue()
