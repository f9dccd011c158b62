"""benchmarks/bench_pca_share.py through `leteo-fed bench pca`: runs end to end with tiny settings
and writes the documented JSON rows."""

from __future__ import annotations

import json

import pytest

from leteo_fed.cli import bench
from leteo_fed.cli.bench import load_benchmark
from leteo_fed.cli.main import main


def book_row(method: str, features: int):
    return load_benchmark().book_row(method, features)


REQUIRED = (
    "features",
    "key_bits",
    "owners",
    "owner_share_s",
    "aggregate_per_share_s",
    "csp_decrypt_s",
    "eig_s",
    "baseline_owner_share_s",
)


@pytest.mark.insecure_small_key
@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["pca", "dca"])
def test_bench_writes_rows_with_the_table_columns(method, tmp_path, capsys):
    out = tmp_path / f"{method}.json"
    argv = ["bench", "pca", "--quick", "--method", method, "--out", str(out)]
    argv += ["--features", "4,8", "--owners", "2", "--key-bits", "1024", "--rows", "200"]
    assert main(argv) == 0

    rows = json.loads(out.read_text())
    assert isinstance(rows, list) and [r["features"] for r in rows] == [4, 8]
    for row in rows:
        for name in REQUIRED:
            value = row[name]
            assert isinstance(value, (int, float)) and value > 0, (name, value)
        assert row["method"] == method and row["key_bits"] == 1024 and row["owners"] == 2
        assert row["owner_share_warm_s"] > 0
        assert row["aggregate_exact"] is True
        assert row["max_rel_eig_error"] < 1e-6
        assert row["eig_compared"] == row["features"]
        assert row["baseline"]["roundtrip_ok"] is True
    # published figures exist for d = 8 but not for d = 4
    assert rows[0]["book"] is None
    assert rows[1]["book"] == book_row(method, 8)
    assert rows[1]["book"]["key_bits"] == 1024 and rows[1]["book"]["owner_share_s"] > 0

    printed = capsys.readouterr().out
    assert f"table {'9.1' if method == 'pca' else '9.2'}" in printed
    assert "EXTRAPOLATED" in printed


def test_book_numbers_are_the_published_ones():
    assert book_row("pca", 50)["eig_s"] == pytest.approx(13.8 * 60)
    assert book_row("dca", 24)["aggregate_per_share_s"] == pytest.approx(0.022)
    assert book_row("pca", 7) is None


def test_bad_options_exit_2(capsys):
    assert main(["bench", "pca", "--owners", "1"]) == 2
    assert "--owners" in capsys.readouterr().err


def test_outside_a_source_checkout_the_command_says_so(monkeypatch, tmp_path, capsys):
    """An installed package has no benchmarks/: one line naming what it needs, exit 2."""
    monkeypatch.setattr(bench, "BENCHMARK", tmp_path / "benchmarks" / "bench_pca_share.py")
    assert main(["bench", "pca", "--quick", "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err
    assert "source checkout" in err and "make bench" in err
    assert not (tmp_path / "o.json").exists()


@pytest.mark.insecure_small_key
@pytest.mark.timeout(60)
def test_bench_with_key_holders_measures_them_on_the_csp_round(tmp_path, capsys):
    """--keyholders/--threshold: one safe-prime modulus for the CSP and the holders; every holder
    and the combiner measured on the CSP's round, the combined plaintexts exactly the CSP's."""
    out = tmp_path / "threshold.json"
    argv = ["bench", "pca", "--quick", "--key-bits", "1024", "--features", "8", "--owners", "2"]
    argv += ["--rows", "200", "--keyholders", "3", "--threshold", "2", "--out", str(out)]
    assert main(argv) == 0

    (row,) = json.loads(out.read_text())
    assert row["keyholders"] == 3 and row["threshold"] == 2
    assert row["threshold_exact"] is True and row["aggregate_exact"] is True
    assert [h["index"] for h in row["holders"]] == [1, 2, 3]
    assert row["combine_holders"] == [1, 2]
    for step in ("verify", "sum", "partial_decrypt", "prove", "total"):
        assert 0 < row[f"holder_{step}_s"] <= row[f"holder_{step}_max_s"]
    for name in ("product", "verify", "lagrange", "total"):
        assert row[f"combine_{name}_s"] > 0
    assert row["combine_total_s"] == pytest.approx(
        row["combine_product_s"] + row["combine_verify_s"] + row["combine_lagrange_s"]
    )
    assert {"holder_total_le_1s", "combine_le_0_2s"} <= set(row["targets"])
    printed = capsys.readouterr().out
    assert "Single CSP vs each key holder vs combine" in printed
    assert "key holder 3" in printed and "exact" in printed


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--keyholders", "3"], "go together"),
        (["--threshold", "2"], "go together"),
        (["--keyholders", "4", "--threshold", "2"], "not a majority"),
        (["--keyholders", "3", "--threshold", "4"], "--threshold 4"),
    ],
)
def test_threshold_flags_are_both_or_neither_and_a_majority(flags, says, capsys):
    assert main(["bench", "pca", "--quick", *flags]) == 2
    assert says in capsys.readouterr().err
