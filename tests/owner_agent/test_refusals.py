"""What a refusal met while reading the data tells the aggregator: the rule, never the data.

Each problem is raised by the code that meets it (the encoders, the row checks, the label and
LDP encoders, the site's min_rows), with the rule it belongs to; `from_error` keeps the detail
at the site. No network.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from leteo_fed.encoding.packing import check_finite_and_bounded, encode_fixed
from leteo_fed.errors import DataError, LeteoError
from leteo_fed.protocols import moments
from leteo_fed.protocols.ldp_collection import LdpSpec, encode_column
from leteo_fed.protocols.moments_round import encoding as moments_encoding
from owner_agent.refusals import DATA_RULES, SENTENCES, Refusal, from_error


def _raised(call) -> LeteoError:
    with pytest.raises(LeteoError) as err:
        call()
    return err.value


def _public(exc: LeteoError) -> Refusal:
    """The refusal of a data problem: a rule's fixed sentence out, the error's text kept."""
    refusal = from_error(exc)
    rule = refusal.public.split(":")[0]
    assert refusal.public == f"{rule}: {SENTENCES[rule]}"
    assert refusal.detail == str(exc)
    return refusal


def test_every_problem_with_the_data_leaves_the_site_as_its_rule_only():
    enc = moments_encoding(16, 10.0, max_owners=3)
    x = np.array([[1.0, 2.0], [3.0, 4321.5]])
    cases = {
        "bounds": lambda: check_finite_and_bounded(x, ["a", "b"], 10.0),
        "values": lambda: check_finite_and_bounded(np.array([[np.nan, 1.0]]), ["a", "b"], 10.0),
        "rows": lambda: enc.check_rows(np.zeros((0, 2)), ["a", "b"]),
        "classes": lambda: moments.class_indices(
            ["x", "y", "secret"], moments.Grouping("label", ("x", "y"))
        ),
    }
    for rule, call in cases.items():
        exc = _raised(call)
        refusal = _public(exc)
        assert refusal.public == f"{rule}: {DATA_RULES[rule]}"
        assert refusal.data_dependent
        # nothing of the detail (values, counts, class values) is in what leaves
        for token in re.findall(r"'[^']*'|\d+(?:\.\d+)?", str(exc)):
            assert token not in refusal.public, (rule, token)
    assert from_error(_raised(lambda: encode_fixed(np.array([1e9]), 16, 2**20, "r"))).public == (
        f"bounds: {DATA_RULES['bounds']}"
    )


def test_an_unnamed_problem_is_generic_and_a_crash_is_internal():
    assert from_error(DataError("column 'x' is odd: 17 rows")).public == (
        f"data: {DATA_RULES['data']}"
    )
    crash = from_error(ZeroDivisionError("at /srv/site/data.csv"))
    assert crash.public == f"internal: {SENTENCES['internal']}" and not crash.data_dependent
    assert "data.csv" in crash.detail and "data.csv" not in crash.public


def test_ldp_clips_values_beyond_the_public_range_and_refuses_unknown_classes():
    numeric = LdpSpec(column="h", mechanism="duchi", epsilon=1.0, lower=0.0, upper=10.0)
    got = encode_column(np.array([-5.0, 5.0, 50.0]), numeric)
    np.testing.assert_allclose(got, [-1.0, 0.0, 1.0])
    geo = LdpSpec(
        column="x",
        mechanism="geo",
        epsilon=1.0,
        columns=("x", "y"),
        box_lower=(0.0, 0.0),
        box_upper=(1.0, 1.0),
    )
    np.testing.assert_allclose(encode_column(np.array([[2.0, -1.0]]), geo), [[1.0, 0.0]])
    freq = LdpSpec(column="c", mechanism="grr", epsilon=1.0, domain=("a", "b"))
    exc = _raised(lambda: encode_column(["a", "zzz"], freq))
    assert from_error(exc).public == f"classes: {DATA_RULES['classes']}"
    assert "zzz" in str(exc)
