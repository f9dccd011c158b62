"""LDP naive Bayes (one report per user): accuracy vs non-private NB, estimates vs plain counts.

The synthetic data are drawn from a known naive Bayes model (3 classes, 5 categorical features,
seeded), so naive Bayes is the right model and the only losses are the LDP noise and the split of
the users into n + 1 = 6 report groups. Statistical tolerances use 4 standard errors (a correct
implementation fails a check with probability ~6e-5; the seeds are fixed).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from sklearn.naive_bayes import CategoricalNB

from leteo_fed.errors import DataError
from leteo_fed.ldp.naive_bayes import PRIOR, LdpNaiveBayes

CLASSES = ["c0", "c1", "c2"]
PRIOR_PROBS = np.array([0.5, 0.3, 0.2])
SIZES = (3, 4, 5, 6, 4)
DOMAINS = {f"f{i}": [f"v{a}" for a in range(s)] for i, s in enumerate(SIZES)}
MECHANISMS = ("grr", "oue", "olh")


def _model_params() -> dict[str, np.ndarray]:
    """P(F_i = a | C = j) as (k, n_i) rows, from a seeded Dirichlet (mildly informative)."""
    rng = np.random.default_rng(1)
    return {f: rng.dirichlet(np.full(len(v), 0.7), size=len(CLASSES)) for f, v in DOMAINS.items()}


COND = _model_params()


def _sample(rng: np.random.Generator, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    y = rng.choice(len(CLASSES), size=n, p=PRIOR_PROBS)
    rows = {}
    for f, c in COND.items():
        cum = c.cumsum(axis=1)[y]
        a = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), c.shape[1] - 1)
        rows[f] = np.array(DOMAINS[f])[a]
    return rows, np.array(CLASSES)[y]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    train = _sample(rng, 20_000)
    test = _sample(rng, 5_000)
    return train, test


def _fit(mech: str, eps: float, train, seed: int) -> LdpNaiveBayes:
    model = LdpNaiveBayes(mech, eps, DOMAINS, CLASSES)
    rows, labels = train
    return model.fit(model.client_reports(rows, labels, np.random.default_rng(seed)))


def _accuracy(model: LdpNaiveBayes, test) -> float:
    rows, labels = test
    return float(np.mean(model.predict(rows) == labels))


@pytest.fixture(scope="module")
def baseline(data):
    """Non-private CategoricalNB (alpha = 1) accuracy and the majority-class accuracy."""
    (rows, labels), (trows, tlabels) = data
    enc = LdpNaiveBayes("grr", 1.0, DOMAINS, CLASSES)
    nb = CategoricalNB(alpha=1.0, min_categories=list(SIZES))
    nb.fit(enc.encode(rows), enc.encode_labels(labels))
    acc = float(np.mean(nb.predict(enc.encode(trows)) == enc.encode_labels(tlabels)))
    values, counts = np.unique(labels, return_counts=True)
    majority = float(np.mean(tlabels == values[np.argmax(counts)]))
    return acc, majority


# ----------------------------------------------------------------------------- accuracy


@pytest.mark.parametrize("mech", MECHANISMS)
def test_large_epsilon_matches_non_private_nb(mech, data, baseline):
    nb_acc, majority = baseline
    assert nb_acc > majority + 0.3  # the data set has real structure
    for seed in range(3):
        acc = _accuracy(_fit(mech, 8.0, data[0], seed), data[1])
        assert acc >= nb_acc - 0.02, (mech, seed, acc, nb_acc)


@pytest.mark.parametrize("mech", MECHANISMS)
def test_small_epsilon_degrades_but_not_below_majority(mech, data, baseline):
    """At ε = 0.5 (about 3,300 users per group, pair domains up to 18 values) accuracy drops
    clearly, yet stays above the majority baseline. (At ε <= 0.25 single runs can fall BELOW
    the majority class: noisy conditionals are worse than ignoring the features.)"""
    nb_acc, majority = baseline
    small = [_accuracy(_fit(mech, 0.5, data[0], seed), data[1]) for seed in range(5)]
    large = [_accuracy(_fit(mech, 8.0, data[0], seed), data[1]) for seed in range(5)]
    assert np.mean(small) < np.mean(large) - 0.03
    assert min(small) >= majority - 0.02, (small, majority)


# ----------------------------------------------------------------------------- estimates


@pytest.mark.parametrize("mech", MECHANISMS)
def test_huge_epsilon_conditionals_match_plain_frequencies(mech, data):
    """At ε = 50 every conditional is within 4 sd of the plain full-data frequency.

    Two independent error sources for P̂(x|c) = Ê_x / S (S = Σ_h Ê_h, one group's estimates):
    - the group is a random subset (~1/6) of the users: Var ≈ P(1-P)/m_c (1 - m_c/n_c), m_c the
      class-c users in the group, n_c in the data set;
    - the oracle noise, by the delta method from the exact per-cell variances V_h:
      Var ≈ [(1-P)² V_x + P² Σ_{h≠x} V_h] / S² (≈ 0 for GRR/OLH at ε = 50; OUE keeps p = 1/2,
      so V_h ≈ n_h there).
    The floor (1 user in population scale) moves a zero cell by < 6/m_c: added to the tolerance.
    """
    rows, labels = data[0]
    model = _fit(mech, 50.0, data[0], seed=7)
    k = len(CLASSES)
    y = model.encode_labels(labels)
    x = model.encode(rows)
    n_c = np.bincount(y, minlength=k)
    checked = 0
    for i, (name, values) in enumerate(DOMAINS.items()):
        plain = np.zeros((len(values), k))
        np.add.at(plain, (x[:, i], y), 1.0)
        plain /= plain.sum(axis=0)
        est = model.estimates_[name]
        counts = est.counts.reshape(len(values), k)
        var = est.variance.reshape(len(values), k)
        s = counts.sum(axis=0)  # class-c users in the group (estimated)
        got = model.conditional(name)
        for c in range(k):
            p = plain[:, c]
            sampling = p * (1 - p) / s[c] * max(0.0, 1 - s[c] / n_c[c])
            oracle = ((1 - p) ** 2 * var[:, c] + p**2 * (var[:, c].sum() - var[:, c])) / s[c] ** 2
            tol = 4 * np.sqrt(sampling + oracle) + 6.0 / s[c]
            assert np.all(np.abs(got[:, c] - p) <= tol), (name, c, got[:, c], p, tol)
            checked += len(values)
    assert checked == sum(SIZES) * k
    # the prior, same reasoning (one group of size n_0 drawn from N users)
    prior = np.exp(model.class_log_prior_)
    plain_prior = n_c / n_c.sum()
    n0 = model.group_sizes_[PRIOR]
    v0 = model.estimates_[PRIOR].variance
    tol = 4 * np.sqrt(plain_prior * (1 - plain_prior) / n0 + v0 / n0**2) + 1e-9
    assert np.all(np.abs(prior - plain_prior) <= tol)


def test_each_user_reports_once_and_groups_are_uniform(data):
    rows, labels = data[0]
    model = LdpNaiveBayes("oue", 1.0, DOMAINS, CLASSES)
    reports = model.client_reports(rows, labels, np.random.default_rng(3))
    assert [t for t, _ in reports] == model.report_types == [PRIOR, *DOMAINS]
    sizes = np.array([r.shape[0] for _, r in reports])
    n = labels.size
    assert sizes.sum() == n
    p = 1 / len(reports)
    assert np.all(np.abs(sizes - n * p) <= 4 * np.sqrt(n * p * (1 - p)))
    for (t, r), size in zip(reports, sizes, strict=True):
        assert r.shape == (size, model.oracles[t].d)  # OUE: one bit vector per report
    assert model.oracles["f3"].d == len(CLASSES) * SIZES[3]  # pair domain k * n_i


def test_chunked_summaries_equal_one_shot_fit(data):
    rows, labels = data[0]
    model = LdpNaiveBayes("olh", 2.0, DOMAINS, CLASSES)
    reports = model.client_reports(rows, labels, np.random.default_rng(4))
    one = LdpNaiveBayes("olh", 2.0, DOMAINS, CLASSES).fit(reports)
    chunks = []
    for t, r in reports:
        half = r.shape[0] // 2
        chunks += [model.summarize(t, r[:half]), model.summarize(t, r[half:])]
    two = model.fit_from_reports(reversed(chunks))
    np.testing.assert_allclose(two.class_log_prior_, one.class_log_prior_)
    for f in DOMAINS:
        np.testing.assert_allclose(two.feature_log_prob_[f], one.feature_log_prob_[f])


def test_predict_outputs_and_pyarrow_input(data):
    (rows, labels), (trows, _) = data
    model = _fit("grr", 2.0, (rows, labels), seed=5)
    lp = model.predict_log_proba(trows)
    assert lp.shape == (trows["f0"].size, len(CLASSES))
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0)
    pred = model.predict(trows)
    assert set(pred) <= set(CLASSES)
    np.testing.assert_array_equal(pred, model.classes_[np.argmax(lp, axis=1)])
    table = pa.table({**trows, "extra": np.arange(trows["f0"].size)})
    np.testing.assert_array_equal(model.predict(table), pred)
    for f in DOMAINS:  # floor keeps every probability positive; columns normalised
        cond = model.conditional(f)
        assert np.all(cond > 0)
        np.testing.assert_allclose(cond.sum(axis=0), 1.0)


# ----------------------------------------------------------------------------- refusals


def test_unknown_values_and_labels_are_refused(data):
    rows, labels = data[0]
    model = LdpNaiveBayes("grr", 1.0, DOMAINS, CLASSES)
    rng = np.random.default_rng(0)
    bad = dict(rows)
    bad["f2"] = rows["f2"].astype(object)  # not <U2: "v99" must fit
    bad["f2"][10] = "v99"
    with pytest.raises(DataError, match="'f2'.*'v99'") as err:
        model.client_reports(bad, labels, rng)
    assert err.value.field == "f2"
    bad_labels = labels.astype(object)
    bad_labels[0] = "c9"
    with pytest.raises(DataError, match="'c9'") as err:
        model.client_reports(rows, bad_labels, rng)
    assert err.value.field == "label"
    missing = {f: v for f, v in rows.items() if f != "f4"}
    with pytest.raises(DataError, match="missing column 'f4'"):
        model.client_reports(missing, labels, rng)
    nonstr = dict(rows)
    nonstr["f1"] = np.arange(labels.size)
    with pytest.raises(DataError, match="'f1' must hold strings") as err:
        model.client_reports(nonstr, labels, rng)
    assert err.value.field == "f1"
    with pytest.raises(DataError, match="null") as err:
        model.encode(pa.table({**rows, "f0": pa.array([None] + list(rows["f0"][1:]))}))
    assert err.value.field == "f0"
    with pytest.raises(DataError, match="labels"):
        model.client_reports(rows, labels[:-1], rng)
    fitted = _fit("grr", 1.0, data[0], seed=0)
    with pytest.raises(DataError, match="'f0'.*'nope'"):
        fitted.predict({**rows, "f0": np.array(["nope"] * labels.size)})


def test_bad_configuration_and_reports_are_refused(data):
    with pytest.raises(DataError, match="mechanism"):
        LdpNaiveBayes("xyz", 1.0, DOMAINS, CLASSES)
    with pytest.raises(DataError, match="epsilon"):
        LdpNaiveBayes("grr", 0.0, DOMAINS, CLASSES)
    with pytest.raises(DataError, match="at least 2"):
        LdpNaiveBayes("grr", 1.0, DOMAINS, ["only"])
    with pytest.raises(DataError, match="duplicate"):
        LdpNaiveBayes("grr", 1.0, {"a": ["x", "x"]}, CLASSES)
    with pytest.raises(DataError, match="reserved"):
        LdpNaiveBayes("grr", 1.0, {PRIOR: ["x"]}, CLASSES)
    with pytest.raises(DataError, match="floor"):
        LdpNaiveBayes("grr", 1.0, DOMAINS, CLASSES, floor=0)
    model = LdpNaiveBayes("grr", 1.0, DOMAINS, CLASSES)
    with pytest.raises(DataError, match="not fitted"):
        model.predict(data[1][0])
    with pytest.raises(DataError, match="unknown report type"):
        model.summarize("f9", np.zeros(3, dtype=np.int32))
    with pytest.raises(DataError, match="outside"):
        model.summarize("f0", np.array([99], dtype=np.int32))  # d = 9 for f0
    with pytest.raises(DataError, match="no reports"):
        model.fit([(PRIOR, np.array([0, 1], dtype=np.int32))])
