"""Anonymization config loading and hierarchy parsing: happy paths and every refusal."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from leteo_fed.anonymize import Hierarchy, format_interval, load_config, parse_interval
from leteo_fed.errors import ConfigError, DataError

EDUCATION = """\
Bachelors;Undergraduate;Higher education;*
Masters;Graduate;Higher education;*
Doctorate;Graduate;Higher education;*
HS-grad;High school;Secondary;*
11th;High school;Secondary;*
"""

BASE = """\
[anonymization]
algorithm = "mondrian"
k = 10
suppression_limit = 0.0
info_gain = "entropy"

[[quasi_identifier]]
column = "age"
type = "numeric"

[[quasi_identifier]]
column = "education"
type = "categorical"
hierarchy = "hierarchies/education.csv"

[[sensitive]]
column = "income"
l_diversity = { variant = "distinct", l = 2 }
t_closeness = { t = 0.3 }

[identifiers]
drop = ["name"]
pseudonymize = ["student_id"]
key_env = "LETEO_HMAC_KEY"
"""


@pytest.fixture
def cfg_dir(tmp_path: Path) -> Path:
    (tmp_path / "hierarchies").mkdir()
    (tmp_path / "hierarchies" / "education.csv").write_text(EDUCATION)
    return tmp_path


def _write(cfg_dir: Path, text: str) -> Path:
    path = cfg_dir / "anon.toml"
    path.write_text(text)
    return path


def test_happy_path_resolves_relative_paths(cfg_dir: Path) -> None:
    cfg = load_config(_write(cfg_dir, BASE))
    assert cfg.algorithm == "mondrian" and cfg.k == 10 and cfg.suppression_limit == 0.0
    assert cfg.qi_columns == ["age", "education"]
    assert cfg.quasi_identifiers[0].hierarchy is None
    assert cfg.quasi_identifiers[1].hierarchy == (cfg_dir / "hierarchies/education.csv").resolve()
    (s,) = cfg.sensitive
    assert (
        s.l_diversity is not None and s.l_diversity.variant == "distinct" and s.l_diversity.l == 2
    )
    assert s.t_closeness is not None and s.t_closeness.t == 0.3
    assert cfg.identifiers.drop == ("name",) and cfg.identifiers.pseudonymize == ("student_id",)
    assert cfg.identifiers.key_env == "LETEO_HMAC_KEY"
    hs = cfg.load_hierarchies()
    assert hs["education"].lca(["Masters", "Doctorate"]) == "Graduate"


def test_tds_recursive_and_key_file(cfg_dir: Path) -> None:
    (cfg_dir / "hmac.key").write_bytes(b"x" * 32)
    text = (
        BASE.replace('"mondrian"', '"tds"')
        .replace('info_gain = "entropy"', 'info_gain = "squared_distance"')
        .replace('variant = "distinct", l = 2', 'variant = "recursive", l = 3, c = 1.5')
        .replace('key_env = "LETEO_HMAC_KEY"', 'key_file = "hmac.key"')
    )
    cfg = load_config(_write(cfg_dir, text))
    assert cfg.algorithm == "tds" and cfg.info_gain == "squared_distance"
    ld = cfg.sensitive[0].l_diversity
    assert ld is not None and (ld.variant, ld.l, ld.c) == ("recursive", 3, 1.5)
    assert cfg.identifiers.key_file == (cfg_dir / "hmac.key").resolve()


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('algorithm = "mondrian"', 'algorithm = "datafly"', "anonymization.algorithm"),
        ('algorithm = "mondrian"\n', "", "anonymization.algorithm"),
        ("k = 10", "k = 1", "anonymization.k"),
        ("k = 10", "k = 2.5", "anonymization.k"),
        ("k = 10", "k = true", "anonymization.k"),
        ("k = 10\n", "", "anonymization.k"),
        ("suppression_limit = 0.0", "suppression_limit = 1.0", "anonymization.suppression_limit"),
        ("suppression_limit = 0.0", "suppression_limit = -0.1", "anonymization.suppression_limit"),
        ('info_gain = "entropy"', 'info_gain = "gini"', "anonymization.info_gain"),
        ('info_gain = "entropy"', 'info_gain = "entropy"\nepsilon = 1', "anonymization.epsilon"),
        ('type = "numeric"', 'type = "date"', "quasi_identifier[0].type"),
        ('type = "numeric"', 'type = "numeric"\nweight = 2', "quasi_identifier[0].weight"),
        ('hierarchy = "hierarchies/education.csv"\n', "", "quasi_identifier[1].hierarchy"),
        ("hierarchies/education.csv", "hierarchies/missing.csv", "quasi_identifier[1].hierarchy"),
        ('column = "education"', 'column = "age"', "quasi_identifier[1].column"),
        ('variant = "distinct"', 'variant = "probabilistic"', "sensitive[0].l_diversity.variant"),
        ("l = 2", "l = 1", "sensitive[0].l_diversity.l"),
        (
            'variant = "distinct", l = 2',
            'variant = "recursive", l = 2',
            "sensitive[0].l_diversity.c",
        ),
        (
            'variant = "distinct", l = 2',
            'variant = "recursive", l = 2, c = 0',
            "sensitive[0].l_diversity.c",
        ),
        ("l = 2 }", "l = 2, c = 1 }", "sensitive[0].l_diversity.c"),
        ("t = 0.3", "t = 0", "sensitive[0].t_closeness.t"),
        ("t = 0.3", "t = 1.5", "sensitive[0].t_closeness.t"),
        ("t = 0.3", 't = 0.3, distance = "hierarchical"', "sensitive[0].t_closeness.distance"),
        ('drop = ["name"]', 'drop = "name"', "identifiers.drop"),
        ('drop = ["name"]', 'drop = ["income"]', "identifiers.drop[0]"),
        ('key_env = "LETEO_HMAC_KEY"\n', "", "identifiers.pseudonymize"),
        ('key_env = "LETEO_HMAC_KEY"', 'key_file = "nope.key"', "identifiers.key_file"),
        ('key_env = "LETEO_HMAC_KEY"', 'key_env = "K"\nsalt = "x"', "identifiers.salt"),
        ("[identifiers]", "[output]\npath = 'x'\n[identifiers]", "output"),
    ],
)
def test_config_errors_name_the_key(cfg_dir: Path, old: str, new: str, field: str) -> None:
    assert old in BASE
    with pytest.raises(ConfigError) as info:
        load_config(_write(cfg_dir, BASE.replace(old, new, 1)))
    assert info.value.field == field, str(info.value)


def test_missing_qis_and_bad_toml(cfg_dir: Path) -> None:
    with pytest.raises(ConfigError, match="quasi_identifier"):
        load_config(_write(cfg_dir, '[anonymization]\nalgorithm = "tds"\nk = 5\n'))
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write(cfg_dir, "[anonymization\n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(cfg_dir / "absent.toml")


# ---------------------------------------------------------------------------- hierarchy


@pytest.fixture
def education(tmp_path: Path) -> Hierarchy:
    path = tmp_path / "education.csv"
    path.write_text(EDUCATION + "\n")  # trailing blank line is ignored
    return Hierarchy.from_csv(path, "education")


def test_hierarchy_levels_generalize_lca(education: Hierarchy) -> None:
    assert education.levels == 4 and education.height == 3
    assert education.leaves == ["Bachelors", "Masters", "Doctorate", "HS-grad", "11th"]
    got = education.generalize(np.array(["Masters", "11th", "Bachelors"]), 1)
    assert list(got) == ["Graduate", "High school", "Undergraduate"]
    assert list(education.generalize(["Masters"], 0)) == ["Masters"]
    assert education.lca(["Masters"]) == "Masters"
    assert education.lca(["Masters", "Doctorate", "Masters"]) == "Graduate"
    assert education.lca(["Masters", "Bachelors"]) == "Higher education"
    assert education.lca(["Masters", "11th"]) == "*"
    assert education.leaves_under("Graduate") == {"Masters", "Doctorate"}
    assert education.leaves_under("*") == set(education.leaves)
    assert education.leaves_under("11th") == {"11th"}
    assert education.covers("Secondary", "HS-grad") and not education.covers("Graduate", "11th")
    with pytest.raises(DataError, match="'PhD'"):
        education.generalize(["PhD"], 1)
    with pytest.raises(DataError, match="level 4"):
        education.generalize(["Masters"], 4)
    with pytest.raises(DataError, match="'Nope'"):
        education.leaves_under("Nope")


def test_numeric_hierarchy_matches_float_values(tmp_path: Path) -> None:
    path = tmp_path / "age.csv"
    path.write_text("17;[15, 19];*\n18;[15, 19];*\n24;[20, 24];*\n")
    h = Hierarchy.from_csv(path, "age")
    assert list(h.generalize(np.array([17.0, 24.0]), 1)) == ["[15, 19]", "[20, 24]"]
    assert h.lca(np.array([17, 18])) == "[15, 19]"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("a;x;*\nb;*\n", "2 levels, expected 3"),
        ("a;x;*\na;y;*\n", "appears on lines 1 and 2"),
        ("a;x;P;*\nb;x;Q;*\n", "not a tree"),
        ("a;x;*\nb;a;*\n", "different values on different levels"),
        ("a;;*\n", "empty label"),
        ("", "empty"),
    ],
)
def test_hierarchy_refuses_bad_files(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "h.csv"
    path.write_text(text)
    with pytest.raises(DataError, match=match) as info:
        Hierarchy.from_csv(path, "col")
    assert info.value.field == "col"


def test_hierarchy_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        Hierarchy.from_csv(tmp_path / "none.csv", "col")


def test_intervals_round_trip() -> None:
    assert format_interval(20, 29) == "[20, 29]"
    assert format_interval(20.0, 29.5) == "[20, 29.5]"
    assert format_interval(7, 7) == "7"
    assert parse_interval("[20, 29]") == (20.0, 29.0)
    assert parse_interval("[20,29.5]") == (20.0, 29.5)
    assert parse_interval("7") == (7.0, 7.0)
    assert parse_interval(7) == (7.0, 7.0)
    assert parse_interval("*") == (-np.inf, np.inf)
    for bad in ("[29, 20]", "abc", "[1, 2"):
        with pytest.raises(DataError):
            parse_interval(bad)
    with pytest.raises(DataError):
        format_interval(3, 2)
