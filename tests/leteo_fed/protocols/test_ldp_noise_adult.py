"""The LDP preview against repeated releases on a real data set (UCI Adult, 30,162 rows).

Every collection runs through the protocol's own functions (the owner's `encode_column` and
`perturb_chunks`, the aggregator's accumulator (`new_accumulator`); naive Bayes: the model's client reports and
fit), REPEATS times with fixed seeds. For each released figure the measured error is the root
mean square of (release - the figure on the raw rows) over the repeats.

Tolerances, from the theory of a standard deviation estimated from R independent draws: its
relative standard error is about 1/sqrt(2R) (R = 200: 5%; R = 100: 7%). With tens of figures
per test, 4 to 5 of those standard errors bound every figure: 25% (R = 200), 35% (R = 100).
Naive Bayes' figures are ratios (the delta method is first order): they are compared where the
figure lies 3 of its std errors inside (0, 1), away from the floor at one record and from 1.

- With the analyst's hint (the true shares, mean and spread of the data), the preview is the
  exact variance, so measured / predicted lies within the tolerance on both sides.
- Without a hint the preview takes the worst case it states, so it may be pessimistic but never
  optimistic: measured / predicted <= 1 + the tolerance (far below the issue's 1.5).
The ratios are printed (pytest -s) for the record.
"""

from __future__ import annotations

import numpy as np
import pytest

from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.errors import DataError
from leteo_fed.protocols import ldp_collection as lc
from leteo_fed.protocols.ldp_naive_bayes_noise import nb_std_errors, nb_std_errors_of
from leteo_fed.protocols.ldp_noise import Expectation, noise_preview

ROWS = 6000  # a seeded sample of Adult's rows keeps each test to seconds


@pytest.fixture(scope="module")
def adult() -> dict[str, np.ndarray]:
    try:
        wheel = locate_wheel(download=False)
    except DataError as exc:
        pytest.skip(str(exc))
    cols = read_adult(wheel)
    keep = np.random.default_rng(2026).choice(len(cols["age"]), ROWS, replace=False)
    return {k: v[keep] for k, v in cols.items()}


def _release(spec: lc.LdpSpec, encoded: np.ndarray, rng: np.random.Generator) -> dict:
    acc = lc.new_accumulator(spec)
    for chunk in lc.perturb_chunks(encoded, spec, rng):
        acc.fold(acc.partial(chunk))
    return acc.result()


def _report(name: str, ratios: dict[str, float]) -> None:
    print(name, {k: round(v, 3) for k, v in ratios.items()})


@pytest.mark.parametrize("mechanism", ["grr", "sue", "oue", "she", "the", "olh"])
def test_frequencies_on_adult(adult, mechanism):
    values = adult["marital-status"]
    domain = tuple(sorted(set(values)))
    spec = lc.spec_from_request(
        lc.LdpRequest(column="m", mechanism=mechanism, epsilon=2.0, domain=domain)
    )
    encoded = lc.encode_column(list(values), spec)
    truth = np.bincount(encoded, minlength=len(domain)).astype(float)
    rng = np.random.default_rng(11)
    repeats = 200
    errors = np.array(
        [
            np.array(list(_release(spec, encoded, rng)["estimates"].values())) - truth
            for _ in range(repeats)
        ]
    )
    measured = np.sqrt(np.mean(errors**2, axis=0)) / ROWS
    shares = {v: float(t) / ROWS for v, t in zip(domain, truth, strict=True)}
    hinted = noise_preview(spec, ROWS, expect=Expectation(frequencies=shares))["figures"]
    worst = noise_preview(spec, ROWS)["figures"]
    ratio_h = {v: m / f["expected_std"] for v, m, f in zip(domain, measured, hinted, strict=True)}
    ratio_w = {v: m / f["expected_std"] for v, m, f in zip(domain, measured, worst, strict=True)}
    _report(f"{mechanism} hinted", ratio_h)
    _report(f"{mechanism} no hint", ratio_w)
    assert all(0.75 <= r <= 1.25 for r in ratio_h.values()), ratio_h
    assert all(r <= 1.25 for r in ratio_w.values()), ratio_w


NUMERIC = {"age": (17.0, 90.0), "education-num": (1.0, 16.0)}  # spread 0.18 and 0.17 of bounds


@pytest.mark.parametrize("mechanism", ["laplace", "duchi", "pm", "hm"])
@pytest.mark.parametrize("multi", [False, True], ids=["1-D", "2 columns"])
def test_means_on_adult(adult, mechanism, multi):
    names = list(NUMERIC) if multi else ["age"]
    x = np.column_stack([adult[c].astype(float) for c in names])
    lows = tuple(NUMERIC[c][0] for c in names)
    highs = tuple(NUMERIC[c][1] for c in names)
    if multi:
        request = lc.LdpRequest(
            column=names[0],
            columns=tuple(names),
            mechanism=mechanism,
            epsilon=2.0,
            box_lower=lows,
            box_upper=highs,
        )
    else:
        request = lc.LdpRequest(
            column="age", mechanism=mechanism, epsilon=2.0, lower=lows[0], upper=highs[0]
        )
    spec = lc.spec_from_request(request)
    encoded = lc.encode_column(x if multi else x[:, 0], spec)
    rng = np.random.default_rng(13)
    repeats = 200
    releases = []
    for _ in range(repeats):
        doc = _release(spec, encoded, rng)
        releases.append([doc["means"][c] for c in names] if multi else [doc["mean"]])
    measured = np.sqrt(np.mean((np.array(releases) - x.mean(axis=0)) ** 2, axis=0))
    hint = Expectation(mean=tuple(x.mean(axis=0)), std=tuple(x.std(axis=0)))
    hinted = noise_preview(spec, ROWS, expect=hint)["figures"]
    worst = noise_preview(spec, ROWS)["figures"]
    ratio_h = {c: m / f["expected_std"] for c, m, f in zip(names, measured, hinted, strict=True)}
    ratio_w = {c: m / f["expected_std"] for c, m, f in zip(names, measured, worst, strict=True)}
    _report(f"{mechanism} {names} hinted", ratio_h)
    _report(f"{mechanism} {names} no hint", ratio_w)
    assert all(0.75 <= r <= 1.25 for r in ratio_h.values()), ratio_h
    assert all(r <= 1.25 for r in ratio_w.values()), ratio_w


@pytest.mark.parametrize("box_fit", ["remap", "resample"])
def test_geo_on_adult(adult, box_fit):
    """Geo on (age, hours-per-week), epsilon 0.5 per year / hour: many people are within a few
    years of the age bound 17, so fitting the reports into the box biases the mean location.
    The preview's error is the noise and that bias (`geo_box_bias`): without a hint at the
    worst placement of a spread of a sixth of the box (pessimistic, never optimistic); with the
    columns' mean and spread, under a normal shape, which Adult's skewed ages only roughly
    follow (a stated approximation: measured within [0.5, 1.25] of it)."""
    x = np.column_stack([adult["age"].astype(float), adult["hours-per-week"].astype(float)])
    spec = lc.spec_from_request(
        lc.LdpRequest(
            column="age",
            columns=("age", "hours"),
            mechanism="geo",
            epsilon=0.5,
            box_lower=(17.0, 1.0),
            box_upper=(90.0, 99.0),
            box_fit=box_fit,
        )
    )
    encoded = lc.encode_column(x, spec)
    rng = np.random.default_rng(17)
    means = np.array([_release(spec, encoded, rng)["mean"] for _ in range(200)])
    measured = np.sqrt(np.mean((means - x.mean(axis=0)) ** 2, axis=0))
    hint = Expectation(mean=tuple(x.mean(axis=0)), std=tuple(x.std(axis=0)))
    hinted = [f["expected_std"] for f in noise_preview(spec, ROWS, expect=hint)["figures"]]
    worst = [f["expected_std"] for f in noise_preview(spec, ROWS)["figures"]]
    _report(f"geo {box_fit} hinted", dict(zip(("age", "hours"), measured / hinted, strict=True)))
    _report(f"geo {box_fit} no hint", dict(zip(("age", "hours"), measured / worst, strict=True)))
    assert np.all(measured / worst <= 1.25)
    assert np.all((measured / hinted >= 0.5) & (measured / hinted <= 1.25))


NB_FEATURES = ("sex", "race", "relationship", "workclass")


@pytest.mark.parametrize("oracle", ["grr", "oue", "olh"])
def test_naive_bayes_on_adult(adult, oracle):
    classes = ("<=50K", ">50K")
    features = tuple(lc.FeatureDomain(f, tuple(sorted(set(adult[f])))) for f in NB_FEATURES)
    spec = lc.spec_from_request(
        lc.LdpRequest(
            mechanism=oracle,
            epsilon=2.0,
            label_column="income",
            classes=classes,
            features=features,
        )
    )
    labels = adult["income"]
    rows = {f: adult[f] for f in NB_FEATURES}
    # the figures on the raw rows
    prior = np.array([np.mean(labels == c) for c in classes])
    cond = {
        f.name: {
            c: [float(np.mean(rows[f.name][labels == c] == v)) for v in f.values] for c in classes
        }
        for f in features
    }
    rng = np.random.default_rng(19)
    repeats = 100
    errs: dict[str, list[float]] = {}
    plug_in: dict[str, list[float]] = {}
    for _ in range(repeats):
        model = lc.naive_bayes_model(spec)
        model.fit(model.client_reports(rows, labels, rng))
        doc = {
            "column": "income",
            "mechanism": oracle,
            "epsilon": 2.0,
            "classes": list(classes),
            "features": list(NB_FEATURES),
            "priors": dict(zip(classes, np.exp(model.class_log_prior_).tolist(), strict=True)),
            "conditionals": {
                f.name: {
                    "values": f.values,
                    "by_class": {
                        c: model.conditional(f.name)[:, j].tolist() for j, c in enumerate(classes)
                    },
                }
                for f in features
            },
            "report_counts": dict(model.group_sizes_),
        }
        se = nb_std_errors_of(doc)
        for j, c in enumerate(classes):
            errs.setdefault(f"prior {c}", []).append(doc["priors"][c] - prior[j])
            plug_in.setdefault(f"prior {c}", []).append(se["priors"][c])
        for f in features:
            for c in classes:
                for i, v in enumerate(f.values):
                    key = f"P({f.name} = {v} | {c})"
                    got = doc["conditionals"][f.name]["by_class"][c][i]
                    errs.setdefault(key, []).append(got - cond[f.name][c][i])
                    plug_in.setdefault(key, []).append(se["conditionals"][f.name][c][i])
    measured = {k: float(np.sqrt(np.mean(np.square(v)))) for k, v in errs.items()}
    # the exact figure at the true shares (what --expect-priors plus a perfect guess of the
    # conditionals would give), at the expected reports per type
    group = ROWS / (len(NB_FEATURES) + 1)
    model = lc.naive_bayes_model(spec)
    exact = nb_std_errors(
        model,
        dict(zip(classes, prior, strict=True)),
        cond,
        dict.fromkeys(model.report_types, group),
    )
    predicted = {f"prior {c}": exact["priors"][c] for c in classes}
    for f in features:
        for c in classes:
            for i, v in enumerate(f.values):
                predicted[f"P({f.name} = {v} | {c})"] = exact["conditionals"][f.name][c][i]
    # a figure the floor at one record truncates (std above a third of the figure) is only
    # bounded: flooring shrinks its error
    truth = {f"prior {c}": prior[j] for j, c in enumerate(classes)}
    for f in features:
        for c in classes:
            for i, v in enumerate(f.values):
                truth[f"P({f.name} = {v} | {c})"] = cond[f.name][c][i]
    ratio = {k: measured[k] / predicted[k] for k in measured}
    clear = {k: r for k, r in ratio.items() if 3 * predicted[k] < truth[k] < 1 - 3 * predicted[k]}
    _report(f"nb {oracle} exact at the true shares", ratio)
    assert len(clear) >= 10
    assert all(0.65 <= r <= 1.35 for r in clear.values()), {
        k: (r, truth[k], predicted[k]) for k, r in clear.items() if not 0.65 <= r <= 1.35
    }
    assert all(r <= 1.35 for r in ratio.values()), ratio
    # the plug-in std errors a release states (from its own figures) agree with the exact ones
    for k in clear:
        assert np.mean(plug_in[k]) == pytest.approx(predicted[k], rel=0.35), k
    # the preview without a hint: per (feature, class) the worst value share, a class of 1/(2k)
    worst = {f["figure"]: f["expected_std"] for f in noise_preview(spec, ROWS)["figures"]}
    worst_ratio = {}
    for k, m in measured.items():
        if k.startswith("prior"):
            worst_ratio[k] = m / worst[k]
        else:
            name, _, rest = k[2:].partition(" = ")
            c = rest.split(" | ")[1][:-1]
            worst_ratio[k] = m / worst[f"P({name} = each value | {c})"]
    _report(f"nb {oracle} no hint", worst_ratio)
    assert all(r <= 1.35 for r in worst_ratio.values()), worst_ratio
