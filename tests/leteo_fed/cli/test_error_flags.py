"""Errors name what the user typed: through the CLI the command's flag (`--dp-epsilon` for pca,
linreg and stats, `--epsilon` for kmeans and ldp), never the Python API's parameter name
(`dp_epsilon`), in one line and exit code 2, before anyone is contacted. The Python API's side
(the parameter named) is `tests/integration/test_python_api_doc.py`."""

from __future__ import annotations

import json
import re

import pytest

from leteo_fed.cli import flags
from leteo_fed.cli.main import build_parser, main

UNREACHABLE = ["--aggregator", "127.0.0.1:1", "--insecure"]  # refused before any contact
PCA = ["pca", "--features", "age,hours", "--components", "1"]
BOUNDED = ["--bounds", "age=17,90", "--bounds", "hours=1,99"]
LINREG = ["linreg", "--features", "age", "--label-column", "hours"]
STATS = ["stats", "--features", "age,hours"]


def _kmeans(tmp_path) -> list[str]:
    init = tmp_path / "init.json"
    init.write_text(json.dumps({"centers": [[40, 40]]}))
    return ["kmeans", "--features", "age,hours", "--init", str(init), "--rounds", "2"]


CASES = {
    "pca-negative-epsilon": (PCA + ["--dp-epsilon", "-1", *BOUNDED, "--dry-run"], "--dp-epsilon"),
    "pca-bounds-without-epsilon": (PCA + BOUNDED + UNREACHABLE, "--dp-epsilon"),
    "pca-delta-without-epsilon": (PCA + ["--dp-delta", "1e-6", *UNREACHABLE], "--dp-epsilon"),
    "pca-epsilon-without-bounds": (PCA + ["--dp-epsilon", "1", "--dry-run"], "--row-norm-bound"),
    "pca-negative-norm": (
        PCA + ["--dp-epsilon", "1", "--row-norm-bound", "-2", "--dry-run"],
        "--row-norm-bound",
    ),
    "pca-bad-delta": (PCA + ["--dp-epsilon", "1", "--dp-delta", "2", *BOUNDED], "--dp-delta"),
    "pca-reversed-bounds": (
        PCA + ["--dp-epsilon", "1", "--bounds", "age=90,17", "--bounds", "hours=1,99"],
        "--bounds",
    ),
    "pca-bounds-not-col-lo-hi": (
        PCA + ["--dp-epsilon", "1", "--bounds", "age", "--dry-run"],
        "--bounds",
    ),
    "pca-bounds-twice": (
        PCA + ["--dp-epsilon", "1", *BOUNDED, "--bounds", "age=0,1", "--dry-run"],
        "--bounds",
    ),
    "pca-missing-codebook": (
        PCA + ["--dp-epsilon", "1", "--codebook", "/nonexistent/book.toml", "--dry-run"],
        "--codebook",
    ),
    "pca-bad-expect-std": (
        PCA + ["--dp-epsilon", "1", *BOUNDED, "--expect-std", "age=wide", "--dry-run"],
        "--expect-std",
    ),
    "linreg-nan-epsilon": (LINREG + ["--dp-epsilon", "nan", *BOUNDED, "--dry-run"], "--dp-epsilon"),
    "linreg-bounds-without-epsilon": (LINREG + BOUNDED + UNREACHABLE, "--dp-epsilon"),
    "linreg-label-unbounded": (
        LINREG + ["--dp-epsilon", "1", "--bounds", "age=17,90", "--dry-run"],
        "--bounds",
    ),
    "stats-epsilon-over-cap": (
        STATS + ["--dp-epsilon", "1e9", *BOUNDED, "--dry-run"],
        "--dp-epsilon",
    ),
    "stats-zero-epsilon": (STATS + ["--dp-epsilon", "0", *BOUNDED, *UNREACHABLE], "--dp-epsilon"),
    "stats-bad-deadline": (
        STATS + ["--dp-epsilon", "1", *BOUNDED, "--deadline", "-3", "--dry-run"],
        "--deadline",
    ),
    "stats-min-owners": (
        STATS + ["--dp-epsilon", "1", *BOUNDED, "--min-owners", "1", "--dry-run"],
        "--min-owners",
    ),
    "ldp-negative-epsilon": (
        ["ldp", "collect", "--column", "c", "--mechanism", "grr", "--domain", "x,y"]
        + ["--epsilon", "-1", "--dry-run"],
        "--epsilon",
    ),
}


@pytest.mark.parametrize(("argv", "flag"), CASES.values(), ids=CASES.keys())
def test_cli_errors_name_the_flag(argv, flag, capsys):
    assert main(argv) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert re.search(rf"{flag}(?![\w-])", lines[0]), lines[0]
    # the Python API's spelling of a parameter never reaches the command line's user
    assert not re.search(r"\b(dp_epsilon|dp_delta|row_norm_bound|deadline_seconds)\b", lines[0])


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--epsilon", "-1", "--row-norm-bound", "1", "--dry-run"], "--epsilon"),  # bad
        (["--row-norm-bound", "1", *UNREACHABLE], "--epsilon"),  # missing
        (["--epsilon", "1", "--delta", "3", "--row-norm-bound", "1", "--dry-run"], "--delta"),
        (["--epsilon", "1", "--row-norm-bound", "-1", "--dry-run"], "--row-norm-bound"),
    ],
    ids=["bad-epsilon", "missing-epsilon", "bad-delta", "negative-norm"],
)
def test_kmeans_names_its_own_epsilon_flag(tmp_path, extra, flag, capsys):
    assert main(_kmeans(tmp_path) + extra) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and re.search(rf"{flag}(?![\w-])", lines[0]), lines
    assert "--dp-epsilon" not in lines[0] and "dp_epsilon" not in lines[0]


def _flags_of(*argv: str) -> dict[str, str]:
    parser = build_parser()
    args, _ = parser.parse_known_args(list(argv))
    return flags.flag_map(flags.command_parser(parser, args))


def test_each_command_maps_parameters_to_its_flags():
    pca = _flags_of("pca", "--features", "a", "--components", "1")
    assert pca["dp_epsilon"] == "--dp-epsilon" and pca["bounds"] == "--bounds"
    assert pca["deadline_seconds"] == "--deadline" and pca["row_norm_bound"] == "--row-norm-bound"
    km = _flags_of("kmeans", "--features", "a")
    assert km["dp_epsilon"] == "--epsilon" and km["dp_delta"] == "--delta"
    assert km["iterations"] == "--rounds" and km["bounds"] == "--bounds"
    ldp = _flags_of("ldp", "collect", "--mechanism", "grr", "--epsilon", "1")
    assert ldp["epsilon"] == "--epsilon"


def test_rewriting_leaves_names_that_are_not_parameters():
    pca = _flags_of("pca", "--features", "a", "--components", "1")
    rewrite = flags.name_flags
    # a parameter with its flag in parentheses is said once
    assert rewrite("give row_norm_bound (--row-norm-bound)", None, pca) == "give --row-norm-bound"
    # quoted column names, config keys and flags stay as they are
    text = "column 'min_owners' breaks policy.min_rows; see --dp-epsilon"
    assert rewrite(text, None, pca) == text
    # a one-word parameter is named where the message names it, once
    assert rewrite("bounds of column 'a' must be finite", "bounds", pca) == (
        "--bounds of column 'a' must be finite"
    )
    assert rewrite("features is empty", "features", pca) == "--features is empty"
    # a parameter in backticks is one, whatever its spelling; unknown ones keep their quotes
    assert rewrite("dp_delta and `bounds` need dp_epsilon", "dp_epsilon", pca) == (
        "--dp-delta and --bounds need --dp-epsilon"
    )
    assert rewrite("`bounds` and `label_bound`", None, pca) == "--bounds and `label_bound`"
    # a parameter this command has no flag for is left as the library says it
    crosstab = _flags_of("crosstab", "--columns", "a")
    assert rewrite("row_norm_bound must be positive", "row_norm_bound", crosstab) == (
        "row_norm_bound must be positive"
    )
