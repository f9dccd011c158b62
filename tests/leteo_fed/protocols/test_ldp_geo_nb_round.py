"""Geo estimates and LDP naive Bayes as LDP collection rounds: the owner's reports, the
aggregator's accumulator and result, and the refusals, through the round's own functions.

Naive Bayes accuracy: 3 owners' rows (24,000 pooled) from a fixed class-conditional model, a
hold-out of 3,000 rows, scikit-learn's CategoricalNB (alpha = 1) on the pooled rows as the
non-private reference. At epsilon = 2 the LDP model's accuracy was within 0.016 of it in every
one of 60 seeded runs we measured (20 seeds x grr, oue, olh; mean gap 0.002-0.003), so the
stated tolerance is 0.03. Report counts per type are Binomial(n, 1 / (features + 1)): 4 s.d.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import pytest
from sklearn.naive_bayes import CategoricalNB

from leteo_fed.errors import ConfigError, DataError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import ldp_collection as lc
from leteo_fed.protocols import registry
from leteo_fed.protocols.ldp_round import LdpNaiveBayesResult, LdpPointsResult
from leteo_fed.protocols.results import ReportTimings
from leteo_fed.transport import codec

VALUES = {
    "color": ("red", "green", "blue", "grey"),
    "size": ("s", "m", "l"),
    "shape": ("round", "square", "star"),
}
CLASSES = ("no", "yes")
P_GIVEN_CLASS = {
    "color": ([0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]),
    "size": ([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]),
    "shape": ([0.6, 0.3, 0.1], [0.3, 0.3, 0.4]),
}
FEATURES = tuple(lc.FeatureDomain(f, v) for f, v in VALUES.items())


def population(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Rows {feature: strings} and labels drawn from the naive Bayes model above."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(int)
    rows = {}
    for f, vals in VALUES.items():
        cdf = np.cumsum(np.array(P_GIVEN_CLASS[f]), axis=1)[y]
        codes = (rng.random(n)[:, None] > cdf).sum(axis=1)
        rows[f] = np.array(vals)[codes]
    return rows, np.array(CLASSES)[y]


def _codes(rows: dict[str, np.ndarray]) -> np.ndarray:
    return np.column_stack([[VALUES[f].index(v) for v in rows[f]] for f in VALUES])


def nb_request(mechanism: str = "oue", **changes) -> lc.LdpRequest:
    base = lc.LdpRequest(
        mechanism=mechanism, epsilon=2.0, label_column="y", classes=CLASSES, features=FEATURES
    )
    return dataclasses.replace(base, **changes)


def _fit(spec: lc.LdpSpec, sites, rng) -> dict:
    """Each site reports as the owner does (one typed report per row); the aggregator folds."""
    acc = lc.NbAccumulator(spec)
    for rows, labels in sites:
        model = lc.naive_bayes_model(spec)
        wire = lc.nb_report_rows(spec, model.client_reports(rows, labels, rng), rng)
        for start in range(0, len(wire), 5000):  # several chunks, as streamed
            acc.fold(acc.partial(wire[start : start + 5000]))
    return acc.result()


@pytest.mark.parametrize("mechanism", ["grr", "oue", "olh"])
def test_accuracy_close_to_the_non_private_classifier(mechanism):
    sites = [population(n, seed) for n, seed in ((9000, 1), (7000, 2), (8000, 3))]
    test_rows, test_labels = population(3000, 99)
    pooled = {f: np.concatenate([s[0][f] for s in sites]) for f in VALUES}
    labels = np.concatenate([s[1] for s in sites])
    reference = CategoricalNB(alpha=1.0).fit(_codes(pooled), labels == "yes")
    ref_acc = np.mean(np.where(reference.predict(_codes(test_rows)), "yes", "no") == test_labels)
    spec = lc.spec_from_request(nb_request(mechanism))
    doc = _fit(spec, sites, np.random.default_rng(7))
    acc = np.mean(np.array(lc.nb_predict(doc, test_rows)) == test_labels)
    assert ref_acc > 0.7  # the task is learnable: the comparison means something
    assert acc >= ref_acc - 0.03, (acc, ref_acc)
    n = len(labels)
    assert doc["n"] == n and sum(doc["report_counts"].values()) == n
    share = 1 / (len(VALUES) + 1)
    for count in doc["report_counts"].values():
        assert abs(count - n * share) <= 4 * np.sqrt(n * share * (1 - share))
    # the priors estimate the pooled class shares (floor and normalisation aside): 0.03 is
    # > 4 s.e. of a share from 6,000 prior reports at epsilon 2
    assert abs(doc["priors"]["yes"] - np.mean(labels == "yes")) <= 0.03


def test_result_travels_and_tabulates():
    spec = lc.spec_from_request(nb_request("grr"))
    doc = _fit(spec, [population(4000, 5)], np.random.default_rng(3))
    timings = ReportTimings({"site-1": {"perturb_seconds": 0.1}}, {"estimate_seconds": 0.1})
    result = LdpNaiveBayesResult(
        **doc, round_id="ldp_naive_bayes-1", owners=["site-1"], declined={}, timings=timings
    )
    back = codec.from_proto(codec.to_proto(result, pb.LdpNaiveBayesResult()), LdpNaiveBayesResult)
    as_json = codec.to_dict(back)
    assert as_json == codec.to_dict(result)
    for f, vals in VALUES.items():
        cond = as_json["conditionals"][f]
        assert cond["values"] == list(vals)
        for c in CLASSES:  # P(value | class) sums to 1 over the values
            assert sum(cond["by_class"][c]) == pytest.approx(1.0)
    frame = back.to_pandas()
    assert len(frame) == sum(len(v) for v in VALUES.values()) and set(CLASSES) <= set(frame)
    spec_back = codec.from_proto(codec.to_proto(spec, pb.LdpSpec()), lc.LdpSpec)
    assert spec_back == spec
    protocol = registry.get("ldp")
    plan = protocol.plan(nb_request("grr"), _common())
    assert plan.label == "ldp_naive_bayes"
    assert protocol.result_file(plan.label) == "result.json"
    assert protocol.output_file(nb_request()) == "result.json"
    assert protocol.request_columns(nb_request()) == ["color", "size", "shape", "y"]


def _common():
    from leteo_fed.protocols.requests import Common

    return Common(n_invited=3)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"mechanism": "she"}, "mechanism"),
        ({"features": ()}, "features"),
        ({"features": (*FEATURES, lc.FeatureDomain("color", ("x",)))}, "features"),
        ({"features": (lc.FeatureDomain("y", ("a", "b")),)}, "label_column"),
        ({"classes": ("no",)}, "label"),
        ({"features": (lc.FeatureDomain("color", ("a", "a")),)}, "color"),
        ({"column": "color"}, "column"),
        ({"box_fit": "remap"}, "box_fit"),
        ({"epsilon": -1.0}, "epsilon"),
    ],
)
def test_bad_naive_bayes_requests_name_the_field(changes, field):
    with pytest.raises(DataError) as err:
        lc.spec_from_request(nb_request(**changes))
    assert err.value.field == field


def test_classes_without_a_label_column_are_refused():
    with pytest.raises(DataError, match="label_column"):
        lc.spec_from_request(
            lc.LdpRequest(column="c", mechanism="grr", epsilon=1.0, classes=CLASSES)
        )


@pytest.mark.parametrize("mechanism", ["grr", "oue", "olh"])
def test_malformed_reports_change_nothing(mechanism):
    spec = lc.spec_from_request(nb_request(mechanism))
    rows, labels = population(200, 4)
    rng = np.random.default_rng(0)
    good = lc.nb_report_rows(
        spec, lc.naive_bayes_model(spec).client_reports(rows, labels, rng), rng
    )
    acc = lc.NbAccumulator(spec)
    bad_type = good.copy()
    bad_type[0, 0] = len(VALUES) + 1  # no such report type
    bad_value = good.copy()
    bad_value[:, -1 if mechanism == "olh" else 1] = 7 if mechanism == "oue" else 10_000
    for bad in (bad_type, bad_value, good[:, :-1], good.astype(np.float64)):
        with pytest.raises((ProtocolError, DataError)):
            acc.fold(acc.partial(bad))
    assert acc.n == 0 and not acc.supports
    if mechanism == "oue":  # padding beyond a type's own bits must stay zero
        padded = good.copy()
        prior = np.flatnonzero(padded[:, 0] == 0)[0]
        padded[prior, -1] = 1
        with pytest.raises(ProtocolError, match="bits"):
            acc.partial(padded)
    acc.fold(acc.partial(good))
    assert acc.n == len(good)


def test_naive_bayes_cli_domains():
    from leteo_fed.cli.ldp import naive_bayes_request

    request = naive_bayes_request(
        ["color", "size"], ["color=red,green", "size=s,m"], "y", ["no", "yes"], 1.0, "grr"
    )
    assert request.features[0] == lc.FeatureDomain("color", ("red", "green"))
    for domains in (["color=red,green"], ["color=red", "size=s", "shape=x"], ["color"]):
        with pytest.raises(ConfigError, match="domain"):
            naive_bayes_request(["color", "size"], domains, "y", ["no", "yes"], 1.0, "grr")


# ------------------------------------------------------------------ geo


def geo_request(m: int = 2, **changes) -> lc.LdpRequest:
    columns = ("x", "y", "z")[:m]
    base = lc.LdpRequest(
        column="x",
        columns=columns,
        mechanism="geo",
        epsilon=0.5,
        box_lower=(0.0,) * m,
        box_upper=(100.0,) * m,
    )
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(("m", "kind"), [(2, "joint"), (3, "marginals"), (1, "marginals")])
def test_geo_result_has_the_estimate_and_density(m, kind):
    spec = lc.spec_from_request(geo_request(m, bins=10))
    assert spec.box_fit == "remap" and spec.bins == 10
    rng = np.random.default_rng(11)
    x = rng.uniform(30.0, 70.0, size=(3000, m))
    acc = lc.new_accumulator(spec)
    for chunk in lc.perturb_chunks(lc.encode_column(x, spec), spec, rng):
        acc.fold(acc.partial(chunk))
    doc = acc.result()
    points = np.array(doc["points"])
    assert doc["density_kind"] == kind and len(doc["bin_edges"]) == m
    np.testing.assert_allclose(doc["mean"], points.mean(axis=0))
    density = np.array(doc["density"])
    if kind == "joint":
        assert density.shape == (10, 10) and density.sum() == len(x)
    else:
        assert density.shape == (m, 10) and np.all(density.sum(axis=1) == len(x))
    se = np.sqrt((m + 1) / 0.5**2 / len(x))  # the noise alone: m-D Laplace, Gamma(m, 2) radius
    assert doc["std_errors"] == pytest.approx([se] * m)
    assert np.all(np.abs(np.array(doc["mean"]) - x.mean(axis=0)) <= 4 * se)
    timings = ReportTimings({"s": {"perturb_seconds": 0.1}}, {"estimate_seconds": 0.1})
    result = LdpPointsResult(**doc, round_id="r", owners=["s"], declined={}, timings=timings)
    back = codec.from_proto(codec.to_proto(result, pb.LdpPointsResult()), LdpPointsResult)
    assert codec.to_dict(back) == codec.to_dict(result)


def test_geo_resample_keeps_reports_in_the_box_at_half_the_rate():
    spec = lc.spec_from_request(geo_request(box_fit="resample"))
    assert lc.draw_epsilon(spec) == 0.25
    rng = np.random.default_rng(2)
    x = np.full((2000, 2), 1.0)  # near a corner: remapping would pile reports on the faces
    reports = np.vstack(list(lc.perturb_chunks(lc.encode_column(x, spec), spec, rng)))
    assert np.all((reports >= 0) & (reports <= 100))
    assert np.mean(reports == 0.0) == 0.0  # redrawn, never clipped onto a face


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (geo_request(box_fit="snap"), "box_fit"),
        (geo_request(bins=10_000), "bins"),
        (
            lc.LdpRequest(column="c", mechanism="pm", epsilon=1.0, lower=0, upper=1, bins=5),
            "box_fit",
        ),
        (geo_request(box_upper=(100.0,)), "box_lower"),
    ],
)
def test_bad_geo_requests_name_the_field(request_, field):
    with pytest.raises(DataError) as err:
        lc.spec_from_request(request_)
    assert err.value.field == field


def test_geo_cli_request_and_dry_run(capsys):
    from leteo_fed.cli.ldp import _dry_run, _noise_preview, collect_request
    from leteo_fed.client import RoundOptions

    args = argparse.Namespace(
        column="",
        columns=["x", "y"],
        mechanism="geo",
        epsilon=0.5,
        domain=None,
        bounds=None,
        consistency=False,
        box_lower=[0.0, 0.0],
        box_upper=[100.0, 100.0],
        box_fit="resample",
        bins=0,
    )
    request = collect_request(args)
    assert request.column == "x" and request.columns == ("x", "y")
    assert _dry_run(_noise_preview(request, RoundOptions()), 1000) == 0
    out = capsys.readouterr()
    doc = __import__("json").loads(out.out)
    assert doc["draw_epsilon"] == 0.25 and doc["mean_std_error"] == pytest.approx(
        np.sqrt(3 / 0.25**2 / 1000)
    )
    assert "mean location" in out.err


@pytest.mark.parametrize("m", [2, 3])
def test_geo_and_naive_bayes_plots_are_written(tmp_path, m):
    """The commands' figures from result documents: the joint density (2 columns) or the
    marginals (3), and the naive Bayes conditionals."""
    pytest.importorskip("matplotlib")
    from leteo_fed.cli.plots import plot_ldp_naive_bayes as plot_naive_bayes
    from leteo_fed.cli.plots import plot_ldp_points as plot_geo

    spec = lc.spec_from_request(geo_request(m))
    rng = np.random.default_rng(5)
    acc = lc.new_accumulator(spec)
    for chunk in lc.perturb_chunks(rng.uniform(20, 80, size=(500, m)), spec, rng):
        acc.fold(acc.partial(chunk))
    plot_geo(acc.result(), tmp_path / "geo.png")
    assert (tmp_path / "geo.png").read_bytes()[:4] == b"\x89PNG"
    nb = codec.to_dict(_fit(lc.spec_from_request(nb_request()), [population(3000, 6)], rng))
    nb["test"] = {"file": "h.csv", "rows": 10, "accuracy": 0.5}
    plot_naive_bayes(nb, tmp_path / "nb.png")
    assert (tmp_path / "nb.png").read_bytes()[:4] == b"\x89PNG"


def test_geo_flags_on_another_mechanism_are_refused():
    from leteo_fed.cli.main import main

    argv = ["ldp", "collect", "--mechanism", "pm", "--bounds", "0,1", "--epsilon", "1"]
    for extra in (["--columns", "a,b"], ["--column", "a", "--box-fit", "resample"]):
        with pytest.raises(ConfigError, match="only for --mechanism geo"):
            from leteo_fed.cli.ldp import collect_request

            parser_args = _parse([*argv, *extra])
            collect_request(parser_args)
        assert main([*argv, *extra, "--dry-run"]) == 2


def _parse(argv: list[str]) -> argparse.Namespace:
    from leteo_fed.cli.main import build_parser

    return build_parser().parse_args(argv)
