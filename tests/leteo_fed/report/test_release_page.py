"""The release report pages render in real headless Chromium: every section, every figure
loaded, and no request beyond the page's own file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from report_browser import need_browser, render

SECTIONS = [
    "What was released",
    "The guarantee",
    "Information loss",
    "Re-identification risk",
    "Parameters and where they came from",
    "How to reproduce it",
]

DP_SECTIONS = [
    "What was released",
    "The guarantee",
    "Utility",
    "Re-identification risk",
    "Parameters and where they came from",
    "How to reproduce it",
]


def render_alone(page_file: Path):
    """The page rendered, having asked for nothing but itself and logged no error."""
    page = render(page_file)
    assert page.requests == [page_file.resolve().as_uri()]  # nothing else, ever
    assert page.failed == [] and page.console_errors == []
    return page


def _anonymize(tmp_path: Path) -> Path:
    from leteo_fed.cli.main import main

    rng = np.random.default_rng(7)
    n = 400
    rows = ["age,zip,diagnosis"]
    for a, z, d in zip(
        rng.integers(18, 90, n),
        rng.integers(1000, 1100, n),
        rng.choice(["flu", "cold", "ok"], n),
        strict=True,
    ):
        rows.append(f"{a},{z},{d}")
    (tmp_path / "data.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "job.toml").write_text(
        '[anonymization]\nalgorithm = "mondrian"\nk = 6\nrisk_threshold = 0.1\n\n'
        '[[quasi_identifier]]\ncolumn = "age"\ntype = "numeric"\n\n'
        '[[quasi_identifier]]\ncolumn = "zip"\ntype = "numeric"\n\n'
        '[[sensitive]]\ncolumn = "diagnosis"\nl_diversity = { variant = "distinct", l = 2 }\n'
    )
    out = tmp_path / "out"
    argv = ["anonymize", "--input", str(tmp_path / "data.csv"), "--config"]
    argv += [str(tmp_path / "job.toml"), "--out", str(out), "--engine", "local"]
    assert main(argv) == 0
    return out


def test_the_anonymization_page_says_what_its_report_says(tmp_path):
    out = _anonymize(tmp_path)
    report = json.loads((out / "report.json").read_text())
    html = (out / "report.html").read_text()
    assert report["reproduce"].startswith("leteo-fed anonymize --input ")
    assert report["parameters"]["k"] == {"value": 6, "source": f"config {tmp_path / 'job.toml'}"}
    assert report["parameters"]["engine"]["source"] == "command line"
    assert report["parameters"]["risk_threshold"]["value"] == 0.1
    assert 'src="http' not in html and "<script" not in html
    dist = report["classes"]["size_distribution"]
    assert sum(s * c for s, c in zip(dist["size"], dist["classes"], strict=True)) == 400
    assert min(dist["size"]) == report["privacy"]["k_anonymity"]["achieved"] >= 6


@pytest.mark.slow
def test_the_anonymization_page_renders_in_headless_chromium(tmp_path):
    need_browser()
    out = _anonymize(tmp_path)
    report = json.loads((out / "report.json").read_text())
    page = render_alone(out / "report.html")
    assert page.headings[1:] == SECTIONS
    assert len(page.images) == 2  # NCP per QI; records by class size
    for image in page.images:
        assert image["complete"] and image["data"] and image["width"] > 100, image
    k = report["privacy"]["k_anonymity"]
    assert f"k-anonymity with k = 6 (smallest class {k['achieved']}): holds" in page.text
    assert "l-diversity of 'diagnosis' with l = 2" in page.text
    assert f"{report['risk']['prosecutor']['highest']:.4g}" in page.text
    assert report["reproduce"] in page.text


def _dp_kmeans(tmp_path: Path) -> Path:
    from leteo_fed.cli.main import main

    rng = np.random.default_rng(3)
    x = np.vstack([rng.normal(c, 0.5, size=(300, 2)) for c in ((-2, -2), (2, 2), (2, -2))])
    (tmp_path / "points.csv").write_text(
        "a,b\n" + "\n".join(f"{u:.5f},{v:.5f}" for u, v in x) + "\n"
    )
    out = tmp_path / "km"
    argv = ["dp-kmeans", "--data", str(tmp_path / "points.csv"), "--k", "3", "--epsilon", "2"]
    argv += ["--method", "eugkm", "--bounds", "-4,4", "--seed", "5", "--engine", "local"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def test_the_dp_kmeans_report_states_its_guarantee_and_provenance(tmp_path):
    out = _dp_kmeans(tmp_path)
    report = json.loads((out / "report.json").read_text())
    result = json.loads((out / "dp_kmeans.json").read_text())
    assert report["kind"] == "dp-kmeans" and report["epsilon"] == result["epsilon"] == 2.0
    g = report["guarantee"]
    assert g["odds_ratio_bound"] == pytest.approx(np.exp(2.0))
    assert g["membership_guess_accuracy_at_most"] == pytest.approx(np.exp(2) / (1 + np.exp(2)))
    # the parts of the budget add up to epsilon
    parts = [v["epsilon"] for v in report["budget"].values()]
    assert sum(parts) == pytest.approx(2.0)
    p = report["parameters"]
    assert p["k"] == {"value": 3, "source": "command line"}
    assert p["seed"] == {"value": 5, "source": "command line"}
    assert p["delta"]["source"] == "default"
    assert report["reproduce"].startswith("leteo-fed dp-kmeans --data ")


@pytest.mark.slow
def test_the_dp_kmeans_page_renders_in_headless_chromium(tmp_path):
    need_browser()
    out = _dp_kmeans(tmp_path)
    page = render_alone(out / "report.html")
    assert page.headings[1:] == DP_SECTIONS
    assert len(page.images) == 1 and page.images[0]["complete"] and page.images[0]["width"] > 100
    assert "2-differential privacy (pure)" in page.text


SYNTH_CONFIG = """\
[synthesize]
epsilon = 4.0
k = 20
bins = 4
groups = [["a", "b"], ["c"]]

[[column]]
name = "a"
type = "numeric"
lo = 0
hi = 100

[[column]]
name = "b"
type = "numeric"
lo = 0
hi = 1

[[column]]
name = "c"
type = "categorical"
categories = ["x", "y", "z"]
"""


def _synthesize(tmp_path: Path, *extra: str) -> Path:
    from leteo_fed.cli.main import main

    rng = np.random.default_rng(11)
    a = rng.uniform(0, 100, 1500)
    b = np.clip(a / 100 + rng.normal(0, 0.1, a.size), 0, 1)
    c = rng.choice(["x", "y", "z"], a.size, p=[0.6, 0.3, 0.1])
    (tmp_path / "real.csv").write_text(
        "a,b,c\n" + "".join(f"{u:.3f},{v:.4f},{w}\n" for u, v, w in zip(a, b, c, strict=True))
    )
    (tmp_path / "synth.toml").write_text(SYNTH_CONFIG)
    out = tmp_path / "syn"
    argv = ["synthesize", "--input", str(tmp_path / "real.csv"), "--config"]
    argv += [str(tmp_path / "synth.toml"), "--out", str(out), "--seed", "4", "--engine", "local"]
    assert main([*argv, *extra]) == 0
    return out


def test_the_synthetic_report_measures_the_table_for_the_holder_only(tmp_path):
    out = _synthesize(tmp_path)
    report = json.loads((out / "report.json").read_text())
    utility = report["holder_only"]["utility"]  # measured on the real rows: holder only
    assert "utility" not in report and set(utility["tvd_1way"]) == {"a", "b", "c"}
    assert 0 <= utility["tvd_1way_mean"] < 0.15  # epsilon 4, 1,500 rows, 4 bins
    corr = utility["correlation"]
    assert corr["columns"] == ["a", "b"] and corr["real"][0][1] > 0.9
    assert corr["abs_error_max"] == pytest.approx(abs(corr["real"][0][1] - corr["synthetic"][0][1]))
    html = (out / "report.html").read_text()
    assert "For the data holder" in html and "<script" not in html


@pytest.mark.slow
def test_the_synthetic_page_renders_in_headless_chromium(tmp_path):
    need_browser()
    out = _synthesize(tmp_path)
    page = render_alone(out / "report.html")
    assert page.headings[1:] == DP_SECTIONS
    assert len(page.images) == 2  # marginals, correlations
    assert all(i["complete"] and i["width"] > 100 for i in page.images)
    assert "4-differential privacy (pure)" in page.text
    assert "--seed 4" in page.text and "For the data holder" in page.text


def test_a_holdout_measures_disclosure_against_rows_the_model_never_saw(tmp_path):
    """--holdout 0.3: 450 of 1,500 rows stay out of the model. Against as many seen rows, a
    DP generator that does not memorise has a DCR share and an attack AUC near 0.5: with 450
    rows a side the AUC's standard error is sqrt((1/450 + 1/450) / 12) ~ 0.019, so 0.5 +/- 0.1
    is five of them."""
    out = _synthesize(tmp_path, "--holdout", "0.3")
    report = json.loads((out / "report.json").read_text())
    doc = report["holder_only"]["disclosure"]
    attack, dcr = doc["membership"], doc["dcr"]
    assert attack["members"] == attack["non_members"] == 450
    assert abs(attack["auc"] - 0.5) < 0.1 and abs(dcr["dcr_share"] - 0.5) < 0.1
    assert attack["dp_accuracy_bound"] == pytest.approx(np.exp(4) / (1 + np.exp(4)))
    assert report["holder_only"]["input_rows"] == 1050  # the model saw the rest only
    html = (out / "report.html").read_text()
    assert "membership attack: ROC AUC" in html


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--holdout", "0.7"], "--holdout must be in"),
        (["--holdout", "0.2", "--engine", "spark"], "needs the in-process engine"),
    ],
)
def test_a_bad_holdout_is_refused_by_name(tmp_path, capsys, extra, message):
    from leteo_fed.cli.main import main

    (tmp_path / "real.csv").write_text("a,b,c\n1,0.5,x\n")
    (tmp_path / "synth.toml").write_text(SYNTH_CONFIG)
    argv = ["synthesize", "--input", str(tmp_path / "real.csv"), "--config"]
    argv += [str(tmp_path / "synth.toml"), "--out", str(tmp_path / "o"), *extra]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
