"""A DP round the noise would bury is refused before anyone is invited (no budget is spent).

Pure checks of the gate, then the analyst's commands: with an unreachable aggregator address, a
refused round must fail with exit 2 and the gate's message (it never tries to connect); with
`--accept-noise` (or a large enough `--rows`) the command goes on to contact the aggregator,
which a stand-in client records instead.
"""

from __future__ import annotations

import math

import pytest

from leteo_fed.defaults import DEFAULT_MIN_ROWS
from leteo_fed.errors import DataError
from leteo_fed.privacy.noise_gate import (
    LOCAL_FIXES,
    SECURE_SUM_FIXES,
    SignalCheck,
    drowned,
    refusal,
    rows_to_assume,
)


def test_a_statistic_is_drowned_when_its_error_exceeds_its_largest_value():
    assert not SignalCheck("mean", 0.5, 1.0).drowned
    assert not SignalCheck("mean", 1.0, 1.0).drowned
    assert SignalCheck("mean", 1.5, 1.0).drowned
    assert SignalCheck("mean", math.nan, 1.0).drowned  # an undefined error is not a pass
    checks = [SignalCheck("a", 2.0, 1.0), SignalCheck("b", 0.1, 1.0)]
    assert [c.statistic for c in drowned(checks)] == ["a"]


def _as_pca_says(text: str) -> str:
    """The library names parameters; the `pca` command's user reads them as its flags."""
    from leteo_fed.cli.flags import flag_map, name_backticked
    from leteo_fed.cli.main import command_parser

    pca = command_parser("pca")
    return name_backticked(text, flag_map(pca))


def test_rows_default_to_the_fewest_the_default_policy_admits():
    assert _as_pca_says(rows_to_assume(5000, 3)[1]) == "your --rows estimate"
    rows, basis = rows_to_assume(None, 3)
    assert rows == 3 * DEFAULT_MIN_ROWS and "--rows" in _as_pca_says(basis)
    with pytest.raises(DataError, match="`rows` must be at least 2"):
        rows_to_assume(1, 3)


def test_the_refusal_names_every_fix_and_the_way_out():
    text = refusal([SignalCheck("row count", 6.5e4, 3000.0)], 3000, "your `rows` estimate")
    text = _as_pca_says(text)
    assert "before any budget is spent" in text and "row count +/- 6.5e+04" in text
    for flag in ("--row-norm-bound", "--scale-bits", "epsilon", "--rows", "--accept-noise"):
        assert flag in text
    local = refusal([SignalCheck("mean", 9.0, 5.0)], 20, "x", LOCAL_FIXES)
    assert "scale_bits" not in local and "mechanism" in local
    assert SECURE_SUM_FIXES != LOCAL_FIXES


# ------------------------------------------------------------------ the commands

UNREACHABLE = ["--aggregator", "127.0.0.1:1", "--insecure"]
# the raw-unit PCA: rows clipped to 120 at 4 fraction bits, 3000 rows. The row count's
# noise (std ~6.5e4) is 20 times the row count: the release would be noise whatever the data
RAW_PCA = ["pca", "--features", "a,b,c,d,e", "--dp-epsilon", "1", "--row-norm-bound", "120"]
RAW_PCA += ["--scale-bits", "4", "--rows", "3000", *UNREACHABLE]


class Contacted(Exception):
    """Raised by the stand-in client: the command got past the gate."""


@pytest.fixture
def no_aggregator(monkeypatch):
    from leteo_fed.cli import ldp, statistics

    def client(args):
        raise Contacted

    for module in (statistics, ldp):
        monkeypatch.setattr(module, "analyst_client", client)


@pytest.mark.parametrize(
    ("argv", "buried"),
    [
        (RAW_PCA, "row count"),
        (  # stats on raw units at the policy's fewest rows (30): the total weight is noise
            ["stats", "--features", "a,b", "--dp-epsilon", "1", "--row-norm-bound", "50"],
            "total weight",
        ),
        (
            # 10 iterations composed by RDP (at 200 rows the old even split buried the counts)
            ["kmeans", "--features", "a,b", "--k", "4", "--init-bounds", "0,1", "--epsilon"]
            + ["1", "--row-norm-bound", "3", "--rows", "80"],
            "rows per cluster",
        ),
        (
            ["dca", "--features", "a,b", "--label-column", "y", "--classes", "0,1,2"]
            + ["--dp-epsilon", "0.5", "--row-norm-bound", "10"],
            "rows of class y=0",
        ),
        (
            ["ldp", "collect", "--column", "c", "--mechanism", "pm", "--epsilon", "0.1"]
            + ["--bounds", "0,10", "--rows", "50"],
            "mean",
        ),
        (  # geo on a unit box at 0.1 per unit: the mean location's noise is 5 times the box
            ["ldp", "collect", "--mechanism", "geo", "--columns", "x,y", "--box-lower", "0,0"]
            + ["--box-upper", "1,1", "--epsilon", "0.1", "--rows", "50", "--no-plot"],
            "mean location",
        ),
        (  # a 10 x 10 table at the policy's fewest rows (30): the row count sums 100 cells' noise
            ["crosstab", "--columns", "a,b", "--edges", "a=0,1,2,3,4,5,6,7,8,9,10", "--no-plot"]
            + ["--edges", "b=0,1,2,3,4,5,6,7,8,9,10", "--dp-epsilon", "1"],
            "row count",
        ),
        (  # 1024 bins, two features at the policy's fewest rows (30): a rank sums 11 nodes
            ["quantiles", "--features", "a,b", "--bounds", "0,1", "--bins", "1024", "--no-plot"]
            + ["--dp-epsilon", "1"],
            "the count below each percentile",
        ),
        (  # 10 iterations at the policy's fewest rows (30): each release has epsilon 0.1
            ["logreg", "--features", "a,b", "--label-column", "y", "--positive-class", "1"]
            + ["--no-plot", "--dp-epsilon", "1", "--row-norm-bound", "4", "--max-iterations"]
            + ["10"],
            "row count",
        ),
        (  # 3 classes at the policy's fewest rows (30): 10 rows per class against noise ~50
            ["naive-bayes", "--features", "a,b", "--label-column", "y", "--classes", "0,1,2"]
            + ["--bounds=-1,1", "--dp-epsilon", "0.1", "--no-plot"],
            "count of each class",
        ),
    ],
)
def test_a_buried_round_is_refused_before_contacting_anyone(argv, buried, capsys, no_aggregator):
    from leteo_fed.cli.main import main

    argv = argv if "--aggregator" in argv else [*argv, *UNREACHABLE]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "refused before any budget is spent" in err and f"{buried} +/-" in err
    assert "--accept-noise" in err
    with pytest.raises(Contacted):  # the analyst's way out: pay for it anyway
        main([*argv, "--accept-noise"])
    assert "--accept-noise: at" in capsys.readouterr().err


def test_a_round_worth_its_budget_goes_on(no_aggregator):
    from leteo_fed.cli.main import main

    raw = list(RAW_PCA)
    # scaled features (rows within norm 1) at the default fraction bits and 3000 rows
    raw[raw.index("120")], raw[raw.index("4")] = "1", "16"
    with pytest.raises(Contacted):
        main(raw)
    # the same stats round as above passes once the analyst states a row count it fits
    stats = ["stats", "--features", "a,b", "--dp-epsilon", "1", "--row-norm-bound", "50"]
    with pytest.raises(Contacted):
        main([*stats, "--rows", "100000", *UNREACHABLE])


def test_a_dry_run_reports_the_verdict_a_real_round_would_get(capsys):
    import json

    from leteo_fed.cli.main import main

    assert main([*RAW_PCA, "--dry-run"]) == 0
    out, err = capsys.readouterr()
    check = json.loads(out)["noise_check"]
    assert check["refused_without_accept_noise"] and check["rows"] == 3000
    assert [b["statistic"] for b in check["buried"]] == ["row count"]
    assert "a real round would be refused" in err
