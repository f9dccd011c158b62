"""Public bounds per column: parsing (command line, codebooks), the owners' clip-and-scale, the
aggregator's return to natural units, and the bundled codebooks against the data they cover."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tomllib

from leteo_fed.demo import codebooks
from leteo_fed.errors import DataError
from leteo_fed.privacy import bounds as b
from leteo_fed.privacy.bounds import ColumnBounds

REPO = Path(__file__).resolve().parents[3]


def test_command_line_form_and_its_errors_name_the_flag():
    assert b.parse_bound("age=17,90") == ColumnBounds("age", 17.0, 90.0)
    assert b.parse_bound("temp=-40,-1.5") == ColumnBounds("temp", -40.0, -1.5)
    for bad in ("age", "age=17", "age=a,b", "age=90,17", "age=1,inf", "=1,2"):
        with pytest.raises(DataError) as err:
            b.parse_bound(bad)
        assert err.value.field == "bounds", bad


def test_codebooks_in_toml_and_json_and_the_command_line_overrides(tmp_path):
    toml = tmp_path / "book.toml"
    toml.write_text('[bounds]\nage = [17, 90]\n"hours-per-week" = [1, 99]\n')
    js = tmp_path / "book.json"
    js.write_text(json.dumps({"age": [17, 90], "hours-per-week": [1, 99]}))
    assert b.load_codebook(toml) == b.load_codebook(js)
    merged = b.merged([b.parse_bound("age=18,65")], b.load_codebook(toml))
    assert {x.column: (x.lower, x.upper) for x in merged} == {
        "age": (18, 65),
        "hours-per-week": (1, 99),
    }
    (tmp_path / "bad.toml").write_text("age = [17]\n")
    with pytest.raises(DataError, match="age"):
        b.load_codebook(tmp_path / "bad.toml")
    with pytest.raises(DataError, match="cannot read codebook"):
        b.load_codebook(tmp_path / "missing.toml")
    with pytest.raises(DataError, match="twice"):
        b.merged([b.parse_bound("a=0,1"), b.parse_bound("a=0,2")])


def test_a_release_names_every_column_without_bounds():
    given = (ColumnBounds("age", 17, 90), ColumnBounds("unused", 0, 1))
    with pytest.raises(DataError) as err:
        b.for_columns(given, ["age", "hours", "gain"])
    assert "hours, gain" in str(err.value) and "`bounds` must give" in str(err.value)
    assert "hours=LO,HI" in str(err.value)
    assert b.for_columns(given, ["age"]) == (given[0],)  # the codebook's extra column dropped


def test_owners_clip_and_scale_and_the_aggregator_maps_back():
    bounds = (ColumnBounds("age", 17, 90), ColumnBounds("hours", 1, 99))
    x = np.array([[17.0, 1.0], [53.5, 50.0], [90.0, 99.0], [100.0, 40.0], [10.0, 120.0]])
    scaled, clipped = b.scale_columns(x, bounds)
    assert np.all(np.abs(scaled) <= 1.0)
    assert scaled[:3].tolist() == [[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]
    assert clipped.tolist() == [False, False, False, True, True]
    inside = x[:3]
    # means and centered second moments of the scaled rows come back in natural units
    assert np.allclose(b.unscale_mean(scaled[:3].mean(axis=0), bounds), inside.mean(axis=0))
    c = scaled[:3] - scaled[:3].mean(axis=0)
    natural = inside - inside.mean(axis=0)
    assert np.allclose(b.unscale_scatter(c.T @ c, bounds), natural.T @ natural)
    assert b.clip_to(np.array([-5.0, 150.0]), bounds).tolist() == [17.0, 99.0]


def test_narrower_bounds_than_a_site_publishes_are_named():
    published = {"age": (17.0, 90.0), "hours": (1.0, 99.0)}
    asked = (ColumnBounds("age", 18, 90), ColumnBounds("hours", 0, 120))
    assert b.narrower_than(asked, published) == ["age=18,90 inside the published 17,90"]


@pytest.mark.parametrize(
    "name,book", [("breast-cancer", codebooks.BREAST_CANCER), ("adult", codebooks.ADULT)]
)
def test_the_example_codebooks_are_the_bundled_ones(name, book):
    doc = tomllib.loads((REPO / "examples" / f"{name}-codebook.toml").read_text())["bounds"]
    assert {k: tuple(v) for k, v in doc.items()} == {k: tuple(v) for k, v in book.items()}


def test_the_breast_cancer_codebook_covers_the_data_set():
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    names = [n.replace(" ", "_") for n in data.feature_names]
    assert set(names) == set(codebooks.BREAST_CANCER)
    for i, n in enumerate(names):
        lo, hi = codebooks.BREAST_CANCER[n]
        assert lo <= data.data[:, i].min() and data.data[:, i].max() <= hi, n
