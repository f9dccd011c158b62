"""What an LDP release warns about (`ldp_noise.release_warnings`), the terminal's lines, and the
Python API's NoiseWarnings (`Result.release_warnings`, `noise_gate.warn_all`)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from leteo_fed.privacy.noise_gate import NoiseWarning, warn_all
from leteo_fed.protocols import ldp_collection as lc
from leteo_fed.protocols.ldp_noise import release_warnings
from leteo_fed.protocols.ldp_round import LdpFrequencyResult, LdpMeanResult
from leteo_fed.protocols.results import ReportTimings, Result

FACTS = dict(
    protocol="ldp",
    engine="numpy",
    estimator="",
    round_id="r",
    owners=["a"],
    declined={},
    timings=ReportTimings({}, {}),
)


def test_frequency_warnings():
    doc = {
        "n": 1000,
        "estimates": {"a": 900.0, "b": -12.0, "c": 20.0},
        "std_errors": {"a": 30.0, "b": 30.0, "c": 30.0},
    }
    found = {w.figure: w.message for w in release_warnings(doc)}
    assert set(found) == {"frequency of b", "frequency of c"}
    assert "negative" in found["frequency of b"] and "noise" in found["frequency of c"]


def test_mean_warnings():
    base = {"column": "x", "bounds": [0.0, 10.0]}
    assert release_warnings({**base, "mean": 4.0, "std_error": 0.5}) == []
    assert "half its bounds" in release_warnings({**base, "mean": 4.0, "std_error": 6.0})[0].message
    assert "outside" in release_warnings({**base, "mean": -1.0, "std_error": 0.5})[0].message
    multi = {
        "columns": ["x", "y"],
        "means": {"x": 1.0, "y": 30.0},
        "std_errors": {"x": 0.1, "y": 1},
        "bounds": [[0.0, 0.0], [10.0, 10.0]],
    }
    assert [w.figure for w in release_warnings(multi)] == ["mean of y"]


def test_geo_pile_up_on_the_faces():
    spec = lc.spec_from_request(
        lc.LdpRequest(
            column="x",
            columns=("x", "y"),
            mechanism="geo",
            epsilon=0.2,
            box_lower=(0.0, 0.0),
            box_upper=(10.0, 10.0),
        )
    )
    rng = np.random.default_rng(1)
    acc = lc.new_accumulator(spec)
    for chunk in lc.perturb_chunks(rng.uniform(4, 6, (2000, 2)), spec, rng):
        acc.fold(acc.partial(chunk))
    found = release_warnings(acc.result())
    assert any(w.figure == "points" and "clipped onto the box" in w.message for w in found)


def test_naive_bayes_warns_on_noisy_conditionals_and_states_std_errors():
    spec = lc.spec_from_request(
        lc.LdpRequest(
            mechanism="grr",
            epsilon=1.0,
            label_column="y",
            classes=("n", "y"),
            features=(lc.FeatureDomain("a", tuple("pqrstuvw")),),
        )
    )
    rng = np.random.default_rng(2)
    labels = np.where(rng.random(3000) < 0.9, "n", "y")
    rows = {"a": np.array(list("pqrstuvw"))[rng.integers(0, 8, 3000)]}
    acc = lc.NbAccumulator(spec)
    acc.fold(
        acc.partial(
            lc.nb_report_rows(
                spec, lc.naive_bayes_model(spec).client_reports(rows, labels, rng), rng
            )
        )
    )
    doc = acc.result()
    found = release_warnings(doc)
    assert any(w.figure.startswith("P(a = ") and w.figure.endswith("| y)") for w in found)


def test_the_api_warns_and_never_prints(capsys):
    result = LdpMeanResult(
        mechanism="pm",
        epsilon=0.1,
        column="x",
        n=10,
        mean=5.0,
        std_error=40.0,
        bounds=[0.0, 10.0],
        **FACTS,
    )
    with pytest.warns(NoiseWarning, match="half its bounds"):
        warn_all(result.release_warnings())
    assert capsys.readouterr() == ("", "")
    clear = LdpFrequencyResult(
        mechanism="grr",
        epsilon=4,
        column="c",
        n=100,
        estimates={"a": 60.0, "b": 40.0},
        std_errors={"a": 5.0, "b": 5.0},
        **FACTS,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_all(clear.release_warnings())
    assert Result.release_warnings(clear) == []  # the generic default


def test_cli_prints_figures_and_warning_lines(capsys):
    from leteo_fed.cli.ldp import released

    result = LdpFrequencyResult(
        mechanism="grr",
        epsilon=1,
        column="c",
        n=100,
        estimates={"a": 90.0, "b": -3.0},
        std_errors={"a": 9.0, "b": 9.0},
        **FACTS,
    )
    doc = released(result)
    err = capsys.readouterr().err
    assert "a: 90 +/- 9 records" in err
    assert "warning: frequency of b is negative" in err
    assert doc["warnings"] == [w.to_dict() for w in result.release_warnings()]
