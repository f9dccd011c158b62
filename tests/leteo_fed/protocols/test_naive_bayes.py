"""Federated naive Bayes against scikit-learn's GaussianNB and CategoricalNB on the pooled rows,
its refusals, its DP sensitivity (by brute force), preview and accuracy, the CLI, and a round
through real processes."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.naive_bayes import CategoricalNB, GaussianNB

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import ConfigError, DataError, LeteoError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import naive_bayes as nb
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.transport.codec import to_dict
from leteo_fed.transport.rounds import result_from_proto, result_to_proto

CLASSES = ("a", "b", "c")
COLORS = ("red", "green", "blue=1")  # a value may hold '='
SIZES = ("S", "M", "L", "XL")
NUMERIC = ("x1", "x2")
# per class: means of x1, x2 and the probabilities of each color and size
MEANS = {"a": (0.0, 5.0), "b": (2.0, 3.0), "c": (-1.0, 8.0)}
COLOR_P = {"a": (0.7, 0.2, 0.1), "b": (0.2, 0.6, 0.2), "c": (0.1, 0.2, 0.7)}
SIZE_P = {"a": (0.4, 0.3, 0.2, 0.1), "b": (0.1, 0.4, 0.4, 0.1), "c": (0.25, 0.25, 0.25, 0.25)}


class Table:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([np.asarray(self.data[c], dtype=np.float64) for c in columns])

    def labels(self, column: str) -> list[str]:
        values = list(self.data[column])
        if any(v is None for v in values):
            raise DataError(f"label column '{column}' has missing value(s)", field=column)
        return [str(v) for v in values]


@dataclasses.dataclass
class Site:
    data: dict[str, Any]
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> Table:
        return Table(self.data)

    def without_row(self, i: int) -> Site:
        return Site({k: np.delete(np.asarray(v, dtype=object), i, 0) for k, v in self.data.items()})


def make_rows(n: int, rng: np.random.Generator, classes=CLASSES) -> dict[str, np.ndarray]:
    y = rng.choice(classes, n)
    x1 = np.array([rng.normal(MEANS[c][0], 1.0) for c in y])
    x2 = np.array([rng.normal(MEANS[c][1], 2.0) for c in y])
    color = np.array([COLORS[rng.choice(3, p=COLOR_P[c])] for c in y])
    size = np.array([SIZES[rng.choice(4, p=SIZE_P[c])] for c in y])
    return {"y": y, "x1": x1, "x2": x2, "color": color, "size": size}


def sites_data(sizes=(400, 300, 350), seed: int = 3) -> list[dict[str, np.ndarray]]:
    """Three sites; the first holds no class 'c' (its share still has a zero block for it)."""
    rng = np.random.default_rng(seed)
    return [make_rows(n, rng, CLASSES[:2] if i == 0 else CLASSES) for i, n in enumerate(sizes)]


def pooled(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def request(features=("x1", "color", "x2", "size"), **kw) -> nb.NaiveBayesRequest:
    domains = tuple(
        nb.NaiveBayesDomain(f, {"color": COLORS, "size": SIZES}[f])
        for f in features
        if f in ("color", "size")
    )
    return nb.NaiveBayesRequest(
        features=tuple(features), domains=domains, label_column="y", classes=CLASSES, **kw
    )


def typed_round(
    req: nb.NaiveBayesRequest, sites: list[Site], dp: DpRequest | None = None, **common
) -> nb.NaiveBayesResult:
    """The engine's loop without a network: plan, shares (noised as owners do), the slot-wise
    sum, finish; the result as the analyst receives it."""
    protocol = nb.PROTOCOL
    plan = protocol.plan(req, Common(n_invited=len(sites), min_owners=len(sites), dp=dp, **common))
    rnd = protocol.next_round(plan, None, 1)
    enc = rnd.share_encoding
    shares = []
    for s in sites:
        protocol.check(rnd.spec, enc, rnd.dp, s)
        values = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
        assert len(values) == rnd.n_values  # zero-filled: every class, whatever the site holds
        shares.append(add_owner_noise(values, rnd.dp) if rnd.dp is not None else values)
    layout = enc.layout(2048)
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {})
    outcome.totals = slot_totals(unpack(summed, rnd.n_values, layout), len(sites), layout)
    outcome.encoding = encoding_facts(enc, layout, rnd.n_values, 2048)
    result = protocol.finish_round(plan, None, outcome).result
    typed: nb.NaiveBayesResult = result_from_proto(result_to_proto(result))
    assert typed.to_dict() == to_dict(typed)
    return typed


def ordinal(values: np.ndarray, domain) -> np.ndarray:
    index = {v: i for i, v in enumerate(domain)}
    return np.array([index[str(v)] for v in values])


def sklearn_models(data: dict[str, np.ndarray], alpha: float = 1.0, var_smoothing=1e-9):
    x = np.column_stack([data[f] for f in NUMERIC])
    g = GaussianNB(var_smoothing=var_smoothing).fit(x, data["y"])
    xc = np.column_stack([ordinal(data["color"], COLORS), ordinal(data["size"], SIZES)])
    c = CategoricalNB(alpha=alpha, min_categories=[len(COLORS), len(SIZES)]).fit(xc, data["y"])
    return g, c, x, xc


TEST = make_rows(2000, np.random.default_rng(99))
# Tolerances (non-DP): the model differs from scikit-learn's only by the owners' rounding of
# their sums to 2^-32 and the order of float additions: parameters to rtol 1e-9, the log
# probabilities of the test rows (sums of ~10 terms of magnitude <~ 50) to atol 1e-8


def test_gaussian_part_equals_gaussiannb_on_the_pooled_rows():
    parts = sites_data()
    result = typed_round(request(("x1", "x2")), [Site(p) for p in parts])
    g, _, _, _ = sklearn_models(pooled(parts))
    assert list(g.classes_) == list(CLASSES)
    np.testing.assert_allclose(result.class_count, g.class_count_, rtol=0, atol=0)
    np.testing.assert_allclose(result.class_prior, g.class_prior_, rtol=1e-12)
    np.testing.assert_allclose(result.epsilon, g.epsilon_, rtol=1e-9)
    theta = np.array([result.theta[f] for f in NUMERIC]).T
    var = np.array([result.var[f] for f in NUMERIC]).T
    np.testing.assert_allclose(theta, g.theta_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(var, g.var_, rtol=1e-9)
    xt = np.column_stack([TEST[f] for f in NUMERIC])
    assert result.predict(TEST) == list(g.predict(xt))
    np.testing.assert_allclose(result.predict_log_proba(TEST), g.predict_log_proba(xt), atol=1e-8)


def test_categorical_part_equals_categoricalnb_with_the_domain_sizes():
    parts = sites_data()
    for alpha in (1.0, 0.3):
        result = typed_round(request(("color", "size"), alpha=alpha), [Site(p) for p in parts])
        _, c, _, _ = sklearn_models(pooled(parts), alpha=alpha)
        for j, table in enumerate(result.categorical):
            np.testing.assert_allclose(table.counts, c.category_count_[j], atol=0)
            np.testing.assert_allclose(table.log_prob, c.feature_log_prob_[j], atol=1e-12)
        xt = np.column_stack([ordinal(TEST["color"], COLORS), ordinal(TEST["size"], SIZES)])
        assert result.predict(TEST) == list(c.predict(xt))
        np.testing.assert_allclose(
            result.predict_log_proba(TEST), c.predict_log_proba(xt), atol=1e-8
        )


def test_mixed_model_is_the_sum_of_the_two_joint_log_likelihoods_less_one_prior():
    """jll = log prior + Gaussian part + categorical part = GaussianNB's jll + CategoricalNB's
    jll - log prior (each scikit-learn model adds the prior once)."""
    parts = sites_data()
    result = typed_round(request(), [Site(p) for p in parts])
    assert list(result.numeric_features) == ["x1", "x2"]
    assert [t.feature for t in result.categorical] == ["color", "size"]
    g, c, _, _ = sklearn_models(pooled(parts))
    xt = np.column_stack([TEST[f] for f in NUMERIC])
    xc = np.column_stack([ordinal(TEST["color"], COLORS), ordinal(TEST["size"], SIZES)])
    ref = g.predict_joint_log_proba(xt) + c.predict_joint_log_proba(xc) - np.log(g.class_prior_)
    got = result.joint_log_likelihood(TEST)
    np.testing.assert_allclose(got, ref, atol=1e-8)
    assert result.predict(TEST) == list(np.array(CLASSES)[np.argmax(ref, axis=1)])
    table = result.to_pandas()
    assert list(table.index) == list(CLASSES) and "mean(x1)" in table.columns
    import pandas as pd

    assert result.predict(pd.DataFrame(TEST)) == result.predict(TEST)  # a DataFrame works too
    unknown = {k: v[:3].copy() for k, v in TEST.items()}
    unknown["size"] = np.array(["S", "XXL", "M"])
    with pytest.raises(DataError, match="outside its domain") as err:
        result.predict(unknown)
    assert err.value.field == "size"


def test_every_share_has_every_class_zero_filled():
    parts = sites_data()
    plan = nb.PROTOCOL.plan(request(), Common(n_invited=3))
    rnd = nb.PROTOCOL.next_round(plan, None, 1)
    share = nb.PROTOCOL.share_values(rnd.spec, rnd.share_encoding, None, Site(parts[0]), {})
    assert len(share) == 3 * (1 + 2 * 2 + 3 + 4)
    per = len(share) // 3
    assert all(v == 0 for v in share[2 * per :])  # site 1 holds no class 'c'


@pytest.mark.parametrize(
    ("change", "field", "match"),
    [
        ({"classes": ()}, "classes", "--classes"),
        ({"classes": ("a",)}, "classes", "at least 2"),
        ({"classes": ("a", "a")}, "classes", "distinct"),
        ({"label_column": ""}, "label_column", "empty"),
        ({"label_column": "x1"}, "label_column", "also a feature"),
        ({"features": ()}, "features", "empty"),
        ({"domains": (nb.NaiveBayesDomain("zz", ("p",)),)}, "domains", "not a feature"),
        ({"domains": (nb.NaiveBayesDomain("color", ()),)}, "domains", "distinct, non-empty"),
        ({"alpha": 0.0}, "alpha", "positive"),
        ({"var_smoothing": -1.0}, "var_smoothing", ">= 0"),
        ({"bounds": (nb.NaiveBayesBound("x1", 0, 1),)}, "bounds", "DP rounds"),
    ],
)
def test_plan_refuses_a_bad_request_by_field(change, field, match):
    with pytest.raises(DataError) as err:
        nb.PROTOCOL.plan(dataclasses.replace(request(), **change), Common(n_invited=3))
    assert re.search(match, command_says(err.value))  # as `naive-bayes` states it
    assert err.value.field == field


def command_says(exc: LeteoError) -> str:
    """An error's message as the `naive-bayes` command prints it: the library names
    parameters (`classes`), the command its flags (--classes)."""
    import argparse

    from leteo_fed.cli import flags
    from leteo_fed.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return flags.name_flags(str(exc), exc.field, flags.flag_map(sub.choices["naive-bayes"]))


@pytest.mark.parametrize(
    ("bounds", "match"),
    [
        ((nb.NaiveBayesBound("color", 0, 1),), "not a numeric feature"),
        ((nb.NaiveBayesBound("x1", 1, 1),), "lower < upper"),
        ((nb.NaiveBayesBound("x1", 0, 1), nb.NaiveBayesBound("x1", 0, 2)), "more than one"),
    ],
)
def test_dp_plan_refuses_bad_bounds(bounds, match):
    with pytest.raises(DataError, match=match) as err:
        nb.PROTOCOL.plan(request(bounds=bounds), Common(n_invited=3, dp=DpRequest(1.0, 1e-6, 4.0)))
    assert err.value.field == "bounds"


def test_outside_values_refuse_a_non_dp_round_by_rule_without_quoting_them():
    for column, value in (("y", "secret-class"), ("color", "secret-color")):
        parts = sites_data()
        parts[1][column] = parts[1][column].astype(object)
        parts[1][column][0] = value
        with pytest.raises(DataError) as err:
            typed_round(request(), [Site(p) for p in parts])
        assert err.value.rule == "classes" and err.value.field == column
        assert value not in str(err.value)
    parts = sites_data()
    parts[2]["x2"][5] = 1e9  # beyond the value bound
    with pytest.raises(DataError) as err:
        typed_round(request(), [Site(p) for p in parts], value_bound=100.0)
    assert err.value.rule == "bounds" and "1e+09" not in str(err.value)
    parts = sites_data()
    parts[0]["x1"][3] = np.nan
    with pytest.raises(DataError) as err:
        typed_round(request(), [Site(p) for p in parts])
    assert err.value.rule == "values"


def test_a_class_without_pooled_rows_is_refused_by_name():
    parts = sites_data()
    for p in parts:
        p["y"] = np.where(p["y"] == "c", "b", p["y"])
    with pytest.raises(DataError, match=r"no pooled row has class\(es\) \['c'\]"):
        typed_round(request(), [Site(p) for p in parts])


DP = DpRequest(4.0, 1e-6, 10.0)
BOUNDS = (nb.NaiveBayesBound("x1", -4.0, 5.0), nb.NaiveBayesBound("x2", -3.0, 14.0))


def test_a_dp_round_drops_outside_rows_and_clips_numeric_values():
    parts = sites_data()
    parts[1]["y"] = parts[1]["y"].astype(object)
    parts[1]["y"][:50] = "unknown"
    parts[2]["x1"][:] = 1e6  # clipped to 5
    result = typed_round(request(bounds=BOUNDS), [Site(p) for p in parts], DP)
    assert abs(result.n - 1000) < 30  # 1050 rows, 50 dropped; the noise std is ~1
    assert {k: list(v) for k, v in (result.bounds or {}).items()} == {
        "x1": [-4.0, 5.0],
        "x2": [-3.0, 14.0],
    }
    assert max(result.theta["x1"]) <= 5.0
    assert result.dp is not None and result.dp.epsilon == 4.0


def test_the_owner_refuses_an_under_noised_or_forged_dp_spec():
    plan = nb.PROTOCOL.plan(request(bounds=BOUNDS), Common(n_invited=3, dp=DP))
    rnd = nb.PROTOCOL.next_round(plan, None, 1)
    site = Site(sites_data()[0])
    enc = rnd.share_encoding
    nb.PROTOCOL.check(rnd.spec, enc, rnd.dp, site)
    with pytest.raises(ProtocolError, match="more than the announced"):
        nb.PROTOCOL.check(rnd.spec, enc, dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2), site)
    with pytest.raises(ProtocolError):  # a forged value bound (and so slot offset)
        nb.PROTOCOL.check(rnd.spec, dataclasses.replace(enc, value_bound=8.0), rnd.dp, site)
    with pytest.raises(ProtocolError, match="every numeric feature"):
        nb.PROTOCOL.check(dataclasses.replace(rnd.spec, bounds=BOUNDS[:1]), enc, rnd.dp, site)


def test_sensitivity_bounds_every_one_row_change_by_brute_force():
    """Every row of one site removed in turn, the site holding rows at and beyond the bounds
    (clipped to them, so |u| = 1): the share's change never exceeds the stated L1/L2, and those
    rows come within the rounding slack of them (the bound is tight)."""
    plan = nb.PROTOCOL.plan(request(bounds=BOUNDS), Common(n_invited=3, dp=DP, scale_bits=10))
    rnd = nb.PROTOCOL.next_round(plan, None, 1)
    data = make_rows(120, np.random.default_rng(4))
    data["x1"][:3] = [-4.0, 9.0, -7.5]  # at and beyond the bounds: |u| = 1
    data["x2"][:3] = [14.0, -3.0, 20.0]
    data["color"] = data["color"].astype(object)
    data["color"][3] = "purple"  # dropped: changes nothing
    site = Site(data)
    enc = rnd.share_encoding
    full = np.array(nb.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site, {}), dtype=object)
    l1s, l2s = [], []
    for i in range(len(data["y"])):
        part = nb.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site.without_row(i), {})
        diff = np.array([float(a - b) for a, b in zip(full, part, strict=True)])
        l1s.append(np.abs(diff).sum())
        l2s.append(np.linalg.norm(diff))
    sens = plan.sensitivity
    assert isinstance(sens, noise.Sensitivity)
    f = 2.0**10
    assert sens.l1 == 3 * f + 4 * (f + 1) and sens.l2 == pytest.approx(
        math.sqrt(3 * f * f + 4 * (f + 1) ** 2)
    )
    assert max(l1s) <= sens.l1 and max(l2s) <= sens.l2
    assert l1s[3] == 0.0
    for corner in range(3):  # count, 2 categories, 4 sums of |u| = u^2 = 1: 7 coordinates of F
        assert abs(l2s[corner] - math.sqrt(7) * f) <= 3 and abs(l1s[corner] - 7 * f) <= 4


def _exact_totals(plan, rnd, sites):
    enc = rnd.share_encoding
    shares = [nb.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, s, {}) for s in sites]
    return [sum(col) for col in zip(*shares, strict=True)]


def _seeded_release(plan, rnd, exact, rng) -> nb.NaiveBayesResult:
    """One DP release with reproducible noise: the aggregate Skellam(mu) of a quorum of 3
    owners drawn from `rng` on the exact totals, then the aggregator's finish."""
    z = Skellam(plan.dp.mu).sample(len(exact), rng).tolist()
    enc = rnd.share_encoding
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(3)}, {})
    outcome.totals = [int(v) + int(e) for v, e in zip(exact, z, strict=True)]
    outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
    return nb.PROTOCOL.finish_round(plan, None, outcome).result


def test_preview_matches_the_measured_error_of_repeated_releases():
    """400 releases of the same data (seeded Skellam noise of the plan's mu on the exact
    totals): the measured std of each class's mean and variance is within 20% of
    `mean_and_variance_errors` at the true n, theta and m2 (the relative error of a std
    estimated from 400 draws is ~1 / sqrt(800) = 3.5%; the delta method's own error is
    O(sigma / n) ~ 1% at sigma ~ 3, n >= 400; the variance floor, 2 x its noise std, stays
    more than 5 noise stds below every class's true variance of u here, so no release is
    floored)."""
    parts = sites_data((800, 600, 700), seed=8)
    sites = [Site(p) for p in parts]
    dp = DpRequest(4.0, 1e-6, 10.0)
    plan = nb.PROTOCOL.plan(request(bounds=BOUNDS), Common(n_invited=3, min_owners=3, dp=dp))
    rnd = nb.PROTOCOL.next_round(plan, None, 1)
    exact = _exact_totals(plan, rnd, sites)
    enc = rnd.share_encoding
    sigma = plan.dp.noise_std(3, enc.scale_bits)
    rng = np.random.default_rng(12)
    sk = Skellam(plan.dp.mu)  # the aggregate noise of 3 = quorum owners
    thetas, variances = [], []
    for _ in range(400):
        z = sk.sample(len(exact), rng).tolist()
        noisy = [int(v) + int(e) for v, e in zip(exact, z, strict=True)]
        split = nb.split_totals(noisy, nb.layout_of(plan.spec))
        fit = nb.noisy_fit(
            split, enc.scale_bits, enc.count_scale_bits, 0.0, 1.0, plan.spec.bounds, sigma
        )
        assert fit.floored == 0  # the formula is the unfloored estimate's error
        thetas.append(fit.theta)
        variances.append(fit.var)
    data = pooled(parts)
    y = data["y"]
    x = np.column_stack([data[f] for f in NUMERIC])
    u = nb.standardize(x, BOUNDS)
    half = np.array([4.5, 8.5])
    n = np.array([(y == c).sum() for c in CLASSES], dtype=float)[:, None]
    theta = np.array([u[y == c].mean(axis=0) for c in CLASSES])
    m2 = np.array([(u[y == c] ** 2).mean(axis=0) for c in CLASSES])
    want_mean, want_var = nb.mean_and_variance_errors(sigma, n, theta, m2)
    want_mean, want_var = want_mean * half, want_var * half * half
    got_mean = np.std(np.array(thetas), axis=0)
    got_var = np.std(np.array(variances), axis=0)
    np.testing.assert_allclose(got_mean, want_mean, rtol=0.2)
    np.testing.assert_allclose(got_var, want_var, rtol=0.2)
    # and the preview states these at its operating point
    doc = nb.noise_preview(plan, 3000)
    assert doc["noise_std_per_value"] == pytest.approx(sigma)
    me, ve = nb.mean_and_variance_errors(sigma, 1000.0, 0.0, 0.25)
    half = 4.5  # x1's bounds [-4, 5]
    assert doc["noise_std_of_means"]["x1"] == pytest.approx(half * float(me))
    assert doc["noise_std_of_variances"]["x1"] == pytest.approx(half * half * float(ve))


def test_dp_accuracy_approaches_the_non_private_one_as_epsilon_grows():
    """Accuracy on 2000 test rows, the mean of 5 seeded releases per epsilon (the bounds'
    half-widths 5.5 and 5 times the classes' standard deviations). Measured with these seeds: non-private
    0.8615; epsilon 0.05: 0.43, 1: 0.834, 4: 0.859, 16: 0.861. At epsilon 1 the noise (std ~11
    per value against ~400 rows per class) makes the variance floor bind (the model is
    blurred); from epsilon 4 (std ~3) the model is within a point of the non-private one, at
    16 within half a point (one release's accuracy varies by ~0.2 points there)."""
    parts = sites_data()
    sites = [Site(p) for p in parts]
    exact = typed_round(request(), sites)
    truth = np.asarray(TEST["y"])
    base = float(np.mean(np.array(exact.predict(TEST)) == truth))
    bounds = (nb.NaiveBayesBound("x1", -5.0, 6.0), nb.NaiveBayesBound("x2", -4.0, 16.0))
    rng = np.random.default_rng(21)
    accuracy = {}
    for eps in (0.05, 1.0, 4.0, 16.0):
        common = Common(n_invited=3, min_owners=3, dp=DpRequest(eps, 1e-6, 10.0))
        plan = nb.PROTOCOL.plan(request(bounds=bounds), common)
        rnd = nb.PROTOCOL.next_round(plan, None, 1)
        totals = _exact_totals(plan, rnd, sites)
        runs = []
        for _ in range(5):
            r = _seeded_release(plan, rnd, totals, rng)
            assert min(min(v) for v in r.var.values()) > 0
            assert all(np.min(t.counts) >= 0 for t in r.categorical)
            runs.append(float(np.mean(np.array(r.predict(TEST)) == truth)))
        accuracy[eps] = float(np.mean(runs))
    assert base > 0.85
    assert accuracy[0.05] < accuracy[1.0] < accuracy[4.0] <= accuracy[16.0] + 0.002
    assert base - accuracy[1.0] <= 0.06
    assert base - accuracy[4.0] <= 0.01 and base - accuracy[16.0] <= 0.005


def test_dp_variances_stay_positive_when_the_noise_is_larger_than_the_data():
    parts = sites_data((30, 30, 30))
    sites = [Site(p) for p in parts]
    for _ in range(5):
        r = typed_round(request(bounds=BOUNDS), sites, DpRequest(0.05, 1e-6, 10.0))
        for f, (lo, hi) in (("x1", (-4.0, 5.0)), ("x2", (-3.0, 14.0))):
            v = np.array(r.var[f]) - r.epsilon
            assert np.all(v > 0) and np.all(v <= ((hi - lo) / 2) ** 2 + 1e-12)
            assert np.all(np.array(r.theta[f]) >= lo) and np.all(np.array(r.theta[f]) <= hi)
        assert min(r.class_count) >= 1.0


def test_dp_models_of_one_kind_of_feature_only():
    """Categorical features only (no sums: L2 = F sqrt(1 + d_cat)) and numeric only: released,
    predicted, previewed."""
    sites = [Site(p) for p in sites_data()]
    dp = DpRequest(8.0, 1e-6, 20.0)  # the numeric features' default bounds: [-20, 20]
    cat = typed_round(request(("color", "size")), sites, dp)
    assert not cat.numeric_features and cat.epsilon == 0.0
    assert cat.dp is not None and cat.dp.sensitivity_l2 == pytest.approx(2.0**16 * math.sqrt(3))
    num = typed_round(request(("x1", "x2")), sites, dp)
    assert {k: list(v) for k, v in (num.bounds or {}).items()} == {
        "x1": [-20.0, 20.0],
        "x2": [-20.0, 20.0],
    }
    for r in (cat, num):
        assert len(r.predict(TEST)) == len(TEST["y"])
    plan = nb.PROTOCOL.plan(request(("color", "size")), Common(n_invited=3, dp=dp))
    doc = nb.noise_preview(plan, 3000)
    assert not doc["noise_std_of_means"] and set(doc["noise_std_of_category_probabilities"]) == {
        "color",
        "size",
    }


# ------------------------------------------------------------------ the CLI


BASE = ["naive-bayes", "--aggregator", "127.0.0.1:1", "--insecure", "--label-column", "y"]
FEATURES = ["--features", "x1,color,x2", "--domain", "color=red,green,blue=1"]


def _args(argv):
    from leteo_fed.cli.main import build_parser

    return build_parser().parse_args(argv)


def build_request(args):
    """The request the generated command builds from its flags, and the row_norm_bound its DP
    request carries (None without DP); an error as the command states it (its flags named)."""
    from leteo_fed.cli import flags
    from leteo_fed.cli.main import build_parser
    from leteo_fed.cli.statistics import request_from_args

    try:
        req = request_from_args(nb.NaiveBayesRequest, args)
    except ConfigError as exc:
        said = flags.for_command(build_parser(), args, str(exc), exc.field)
        raise ConfigError(said, field=exc.field) from None
    dp = args.dp_epsilon is not None
    return req, (nb.PROTOCOL.statistic.implied_row_norm_bound(req) if dp else None)


def test_the_cli_builds_the_request_the_classes_from_either_flag():

    req, c = build_request(_args([*BASE, *FEATURES, "--classes", "a,b,c"]))
    assert req.classes == CLASSES and c is None
    assert req.domains == (nb.NaiveBayesDomain("color", COLORS),)
    req2, _ = build_request(_args([*BASE, *FEATURES, "--domain", "y=a,b,c"]))
    assert req2 == req
    dp = ["--classes", "a,b,c", "--dp-epsilon", "1", "--bounds=-1,1", "--bounds", "x2=0,20"]
    req3, c3 = build_request(_args([*BASE, *FEATURES, *dp]))
    assert req3.bounds == (nb.NaiveBayesBound("x1", -1, 1), nb.NaiveBayesBound("x2", 0, 20))
    assert c3 == 20.0
    for argv, match in (
        ([*BASE, *FEATURES], "give --classes a,b,... or --domain y="),
        ([*BASE, *FEATURES, "--classes", "a,b", "--domain", "y=a,b"], "given twice"),
        ([*BASE, *FEATURES, "--classes", "a,b", "--bounds", "0,1"], "DP rounds"),
        ([*BASE, *FEATURES, "--classes", "a,b", "--dp-epsilon", "1"], "--bounds COL=LO,HI"),
        ([*BASE, *FEATURES, "--classes", "a,b", "--domain", "q=1"], "not in --features"),
    ):
        with pytest.raises(ConfigError, match=match):
            build_request(_args(argv))


def test_dry_run_prints_the_noise_of_the_model_and_contacts_nobody(capsys):
    from leteo_fed.cli.main import main

    argv = [*BASE, *FEATURES, "--classes", "a,b,c", "--dp-epsilon", "1", "--bounds=-5,20"]
    assert main([*argv, "--dry-run", "--rows", "30000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["classes"] == 3 and doc["values_per_share"] == 3 * (1 + 4 + 3)
    assert set(doc["noise_std_of_means"]) == {"x1", "x2"}
    assert not doc["noise_check"]["refused_without_accept_noise"]
    assert "each class's mean +/-" in err


def test_a_buried_dp_model_is_refused_before_contacting_anyone(capsys, monkeypatch):
    from leteo_fed.cli import statistics as cli
    from leteo_fed.cli.main import main

    class Contacted(Exception):
        pass

    def client(args):
        raise Contacted

    monkeypatch.setattr(cli, "analyst_client", client)
    argv = [*BASE, *FEATURES, "--classes", "a,b,c", "--bounds=-1000,1000"]
    argv += ["--dp-epsilon", "0.1", "--no-plot"]  # at the policy's fewest rows
    assert main(argv) == 2
    assert "refused before any budget is spent" in capsys.readouterr().err
    with pytest.raises(Contacted):
        main([*argv, "--accept-noise"])


def test_the_plot_is_a_png(tmp_path):
    from leteo_fed.cli.plots import plot_naive_bayes as plot_model

    sites = [Site(p) for p in sites_data()]
    for dp in (None, DP):
        req = request(bounds=BOUNDS) if dp else request()
        result = typed_round(req, sites, dp).to_dict()
        path = tmp_path / f"plot-{dp is not None}.png"
        plot_model(result, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ through real processes


def _write_sites(tmp_path, parts) -> list:
    paths = []
    for i, p in enumerate(parts, start=1):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({k: list(v) for k, v in p.items()}), path)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_naive_bayes_through_the_services_and_the_cli(tmp_path):
    """CSP, aggregator and 3 owners as processes, mTLS, a 2048-bit key: the model equals
    scikit-learn's on the pooled rows; a DP round through the CLI charges every ledger once."""
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    parts = sites_data((500, 400, 450))
    paths = _write_sites(tmp_path, parts)
    data = pooled(parts)
    owners = [OwnerSpec(f"site-{i}", p) for i, p in enumerate(paths, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        result = client.run(request(), RoundOptions(min_owners=3, value_bound=100.0))
        g, c, _, _ = sklearn_models(data)
        xt = np.column_stack([TEST[f] for f in NUMERIC])
        xc = np.column_stack([ordinal(TEST["color"], COLORS), ordinal(TEST["size"], SIZES)])
        ref = g.predict_joint_log_proba(xt) + c.predict_joint_log_proba(xc) - np.log(g.class_prior_)
        np.testing.assert_allclose(result.joint_log_likelihood(TEST), ref, atol=1e-8)
        assert result.predict(TEST) == list(np.array(CLASSES)[np.argmax(ref, axis=1)])
        assert list(result.owners) == ["site-1", "site-2", "site-3"]
        assert result.encoding.paillier_bits == 2048 and result.dp is None

        # classes that leave one out: refused (rule classes), nothing released
        short = dataclasses.replace(request(), classes=("a", "b"))
        with pytest.raises(RoundFailed, match="classes"):
            client.run(short, RoundOptions(min_owners=3, deadline_seconds=30))

        base = ["naive-bayes", "--aggregator", cluster.addresses["aggregator"]]
        base += ["--tls-dir", str(cluster.certs), "--min-owners", "3", "--label-column", "y"]
        base += ["--features", "x1,x2,color", "--domain", f"color={','.join(COLORS)}"]
        base += ["--classes", ",".join(CLASSES)]
        out = tmp_path / "plain"
        assert main([*base, "--value-bound", "100", "--out", str(out)]) == 0
        doc = json.loads((out / "result.json").read_text())
        np.testing.assert_allclose(doc["theta"]["x1"], g.theta_[:, 0], rtol=1e-9, atol=1e-12)
        assert (out / "naive_bayes.png").read_bytes()[:4] == b"\x89PNG"

        out = tmp_path / "dp"
        argv = [*base, "--dp-epsilon", "2", "--bounds=x1=-5,6", "--bounds=x2=-4,16"]
        argv += ["--rows", "1350", "--out", str(out), "--no-plot"]
        assert main(argv) == 0
        doc = json.loads((out / "result.json").read_text())
        sigma = doc["dp"]["noise_std_per_value"]
        assert doc["dp"]["epsilon"] == 2.0 and 0 < sigma < 20
        np.testing.assert_allclose(doc["class_count"], g.class_count_, atol=6 * sigma + 1)
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            assert [e["epsilon"] for e in ledger["spends"]] == [2.0]
        client.close()


def test_an_outside_value_is_refused_through_the_protocol_object():
    parts = sites_data()
    parts[0]["y"] = parts[0]["y"].astype(object)
    parts[0]["y"][0] = "zzz"
    with pytest.raises(LeteoError):
        typed_round(request(), [Site(p) for p in parts])


# ------------------------------------------------------------------ the statistic kit


def _kit_sites() -> list[dict[str, np.ndarray]]:
    """Two sites whose numeric values lie within the kit's bound 3 (the statistic reads its
    own columns: the kit takes its rows as they are); the first holds no class 'c'."""
    rng = np.random.default_rng(5)
    out = []
    for n, classes in ((40, CLASSES[:2]), (50, CLASSES)):
        y = rng.choice(classes, n)
        out.append(
            {
                "y": y,
                "x1": rng.uniform(-3, 3, n),
                "x2": rng.uniform(-1, 2, n),
                "color": rng.choice(COLORS, n),
            }
        )
    return out


KIT_REQUEST = request(("x1", "color", "x2"))


def test_the_statistic_kit_passes_the_declaration():
    """Round trip, row bounds, sensitivity (each class's group of blocks counted once) and the
    owner's check of the noise; its wire is its proto messages (tested above), not the JSON of
    a plugin's payload (`check_wire`)."""
    from leteo_fed.protocols.secure_sum import SecureSumProtocol
    from leteo_fed.testing.statistic_kit import (
        check_bounds,
        check_noise_is_verified,
        check_round_trip,
        check_sensitivity,
    )

    protocol = SecureSumProtocol(nb.NaiveBayes())
    sites = _kit_sites()
    check_round_trip(protocol, KIT_REQUEST, sites)
    check_bounds(protocol, KIT_REQUEST, sites)
    check_sensitivity(protocol, KIT_REQUEST, sites[0])
    check_noise_is_verified(protocol, KIT_REQUEST, sites[0])
    edge = {**sites[0], "x1": np.sign(sites[0]["x1"]) * 5.0}  # clipped to the bound: |u| = 1
    check_sensitivity(protocol, KIT_REQUEST, edge)


def test_the_kit_catches_groups_one_row_moves_together():
    """A group per block instead of per class understates the share's sensitivity (one row
    moves its class's count, sums and categories together): the kit says so, on rows beyond
    the kit's DP bound (clipped to it: |u| = 1)."""
    from leteo_fed.protocols.secure_sum import SecureSumProtocol
    from leteo_fed.testing.statistic_kit import check_sensitivity

    class PerBlock(nb.NaiveBayes):
        def exclusive_blocks(self, spec):
            return [[name] for group in super().exclusive_blocks(spec) for name in group]

    with pytest.raises(AssertionError, match="beyond the integer sensitivity"):
        site = _kit_sites()[0]
        site = {**site, "x1": np.sign(site["x1"]) * 5.0, "x2": np.full(len(site["y"]), -5.0)}
        check_sensitivity(SecureSumProtocol(PerBlock()), KIT_REQUEST, site)
