"""Conformance of every registered protocol, through its protocol object and no network.

For each protocol: the owners' shares, summed slot-wise exactly as the homomorphic sum adds the
plaintexts and unblinded, give the centralized result; a value beyond the public bounds is
refused; a DP spec announcing less noise than it claims is refused by the owner; and the
statistic's stated sensitivity bounds, by brute force, the change of one owner's integer share
when any one row is removed; every round planned from a request reads only columns the request
names and charges no more than it authorizes (what an owner checks against the analyst's signed
request). A protocol added to the registry without a case here fails
`test_every_registered_protocol_has_a_conformance_case`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from sklearn.datasets import load_iris

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import LeteoError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import correlation as corr
from leteo_fed.protocols import crosstab as ct
from leteo_fed.protocols import discriminant, kmeans, pca, registry
from leteo_fed.protocols import ldp_collection as lc
from leteo_fed.protocols import linreg as lr
from leteo_fed.protocols import logreg as lg
from leteo_fed.protocols import naive_bayes as nbayes
from leteo_fed.protocols import quantiles as qt
from leteo_fed.protocols import weighted_stats as ws
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import REPORTS, Outcome
from leteo_fed.transport.codec import to_dict
from leteo_fed.transport.rounds import result_from_proto, result_to_proto

IRIS = load_iris()
NAMES = ["sl", "sw", "pl", "pw"]
SPECIES = np.array(["setosa", "versicolor", "virginica"])[IRIS.target]
SPLIT = np.array_split(np.random.default_rng(1).permutation(len(IRIS.data)), 3)


class MemoryTable:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([np.asarray(self.data[c], dtype=np.float64) for c in columns])

    def labels(self, column: str) -> list[str]:
        return [str(v) for v in self.data[column]]


@dataclass
class MemorySite:
    """A site's table in memory (the owner agent reads a file; the protocol sees the same)."""

    data: dict[str, Any]
    site_id: str = "mem"
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> MemoryTable:
        return MemoryTable(self.data)

    def without_row(self, i: int) -> MemorySite:
        return MemorySite({k: np.delete(np.asarray(v), i, 0) for k, v in self.data.items()})


def iris_sites(extra: dict[str, np.ndarray] | None = None) -> list[MemorySite]:
    sites = []
    for idx in SPLIT:
        data = {n: IRIS.data[idx, j] for j, n in enumerate(NAMES)}
        data["species"] = SPECIES[idx]
        for k, v in (extra or {}).items():
            data[k] = v[idx]
        sites.append(MemorySite(data))
    return sites


WEIGHTS = np.random.default_rng(2).uniform(0, 2, size=len(IRIS.data))


@dataclass
class Case:
    request: Any
    sites: Callable[[], list[MemorySite]]
    check: Callable[[dict], None]  # compares the result with the centralized reference
    too_large: Callable[[], MemorySite]  # a site with a value beyond the public bounds
    dp: bool = True
    common: dict = field(default_factory=dict)
    row_norm: float = 8.0  # the DP checks' row-norm bound


def _check_pca(result: dict) -> None:
    evals, comps, _ = pca.reference_pca(IRIS.data, 2)
    np.testing.assert_allclose(result["eigenvalues"], evals, rtol=1e-9)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    assert np.all(cos >= 1 - 1e-9)


def _check_lda(result: dict) -> None:
    codes = np.unique(SPECIES, return_inverse=True)[1]
    evals, _ = discriminant.reference(IRIS.data, [codes], "lda", 2)
    np.testing.assert_allclose(result["eigenvalues"], evals, rtol=1e-6)


INIT = np.array([[5.0, 3.0, 1.5, 0.2], [6.0, 2.8, 4.5, 1.5], [7.0, 3.0, 6.0, 2.0]])


def _check_kmeans(result: dict) -> None:
    ref = kmeans.lloyd(IRIS.data, INIT, 20)
    np.testing.assert_allclose(result["centers"], ref.centers, rtol=0, atol=1e-9)
    assert result["iterations_run"] == ref.iterations


def _check_weighted(result: dict) -> None:
    mean = np.average(IRIS.data, axis=0, weights=WEIGHTS)
    var = np.average((IRIS.data - mean) ** 2, axis=0, weights=WEIGHTS)
    np.testing.assert_allclose([result["means"][n] for n in NAMES], mean, rtol=1e-9)
    np.testing.assert_allclose([result["variances"][n] for n in NAMES], var, rtol=1e-7)


def _check_correlation(result: dict) -> None:
    np.testing.assert_allclose(result["correlation"], np.corrcoef(IRIS.data.T), rtol=1e-9)
    lower, upper = np.array(result["ci_lower"]), np.array(result["ci_upper"])
    assert np.all(lower <= np.array(result["correlation"])) and np.all(
        np.array(result["correlation"]) <= upper
    )


def _skewness_request():
    """The example plugin's request; the plugin is installed by `make test`
    (examples/plugin-skewness): without it this suite fails, naming the fix."""
    try:
        from leteo_skewness import SkewnessRequest
    except ModuleNotFoundError:
        raise RuntimeError(
            "the example plugin is not installed: pip install -e examples/plugin-skewness "
            "(make test does)"
        ) from None
    return SkewnessRequest(features=tuple(NAMES))


def _check_skewness(result: dict) -> None:
    from scipy import stats

    skew = stats.skew(IRIS.data, bias=True)
    kurt = stats.kurtosis(IRIS.data, bias=True)
    np.testing.assert_allclose([result["skewness"][n] for n in NAMES], skew, rtol=1e-9)
    np.testing.assert_allclose([result["excess_kurtosis"][n] for n in NAMES], kurt, rtol=1e-7)
    assert result["protocol"] == "skewness" and result["version"] == "1.0.0"


SL_EDGES = (4.0, 5.0, 6.0, 7.0, 8.0)
SPECIES_DOMAIN = ("setosa", "versicolor", "virginica")


def _check_crosstab(result: dict) -> None:
    import pandas as pd

    bins = pd.cut(IRIS.data[:, 0], SL_EDGES, right=False)
    ref = pd.crosstab(SPECIES, bins, dropna=False).reindex(
        index=list(SPECIES_DOMAIN), columns=bins.categories, fill_value=0
    )
    assert result["counts"] == ref.to_numpy().tolist()
    assert result["categories"]["sl"] == ["[4, 5)", "[5, 6)", "[6, 7)", "[7, 8)"]
    assert result["margins"]["species"] == [50, 50, 50] and result["n"] == 150


def _check_linreg(result: dict) -> None:
    import statsmodels.api as sm

    ols = sm.OLS(IRIS.data[:, 3], sm.add_constant(IRIS.data[:, :3])).fit()
    terms = result["terms"]
    assert terms == ["intercept", *NAMES[:3]]
    for name, ref in (("coefficients", ols.params), ("std_errors", ols.bse)):
        np.testing.assert_allclose([result[name][t] for t in terms], ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result["r_squared"], ols.rsquared, rtol=0, atol=1e-9)


def _check_logreg(result: dict) -> None:
    import statsmodels.api as sm

    y = (SPECIES == "versicolor").astype(float)
    ref = sm.Logit(y, sm.add_constant(IRIS.data[:, :3])).fit(method="newton", disp=0)
    terms = result["terms"]
    assert terms == ["intercept", *NAMES[:3]] and result["converged"]
    for name, want in (("coefficients", ref.params), ("std_errors", ref.bse)):
        np.testing.assert_allclose([result[name][t] for t in terms], want, rtol=0, atol=1e-6)
    assert result["n_rows"] == 150 and result["n_positive"] == 50


QT_PERCENTILES = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 100.0)


def _check_quantiles(result: dict) -> None:
    width = result["bin_width"]
    assert width == 8.0 / 16
    for j, name in enumerate(("sl", "pl")):
        ref = np.percentile(IRIS.data[:, [0, 2][j]], QT_PERCENTILES)
        assert np.all(np.abs(np.array(result["quantiles"][name]) - ref) <= width), name
        assert result["n"][name] == 150 and result["rank_error"][name] == [0.0] * 7


BAND = np.array(["narrow", "mid", "wide"])[np.digitize(IRIS.data[:, 1], [2.9, 3.3])]
BAND_DOMAIN = ("narrow", "mid", "wide")


def _check_naive_bayes(result: dict) -> None:
    from sklearn.naive_bayes import CategoricalNB, GaussianNB

    g = GaussianNB().fit(IRIS.data, SPECIES)
    codes = np.array([BAND_DOMAIN.index(b) for b in BAND])[:, None]
    c = CategoricalNB(min_categories=[3]).fit(codes, SPECIES)
    assert result["classes"] == list(g.classes_) and result["numeric_features"] == NAMES
    theta = np.array([result["theta"][n] for n in NAMES]).T
    var = np.array([result["var"][n] for n in NAMES]).T
    np.testing.assert_allclose(theta, g.theta_, rtol=1e-9)
    np.testing.assert_allclose(var, g.var_, rtol=1e-9)
    np.testing.assert_allclose(result["class_prior"], g.class_prior_, rtol=1e-12)
    np.testing.assert_allclose(result["categorical"][0]["log_prob"], c.feature_log_prob_[0])


def _big(column: str, extra: dict | None = None) -> Callable[[], MemorySite]:
    def make() -> MemorySite:
        site = iris_sites({"w": WEIGHTS, **(extra or {})})[0]
        site.data[column] = np.array(site.data[column], dtype=np.float64)
        site.data[column][0] = 1e9  # beyond every case's value bound below
        return site

    return make


GEO = lc.LdpRequest(
    column="sl",
    columns=("sl", "sw"),
    mechanism="geo",
    epsilon=5.0,
    box_lower=(0.0, 0.0),
    box_upper=(10.0, 10.0),
)
PETAL = np.where(IRIS.data[:, 2] > 4.5, "long", "short")
NAIVE_BAYES = lc.LdpRequest(
    mechanism="grr",
    epsilon=4.0,
    label_column="species",
    classes=("setosa", "versicolor", "virginica"),
    features=(lc.FeatureDomain("petal", ("long", "short")),),
)


def _check_pooled_reports(request: lc.LdpRequest, result: dict) -> None:
    """Geo and naive Bayes: the result is the aggregator's estimate of every site's reports,
    each site perturbing as `_run_typed` seeds it (rng i), folded here in one accumulator."""
    spec = lc.spec_from_request(request)
    sites = iris_sites({"petal": PETAL})
    if lc.is_naive_bayes(spec):
        acc: Any = lc.NbAccumulator(spec)
        for i, site in enumerate(sites):
            rng = np.random.default_rng(i)
            per_type = lc.naive_bayes_model(spec).client_reports(
                {"petal": site.data["petal"]}, site.data["species"], rng
            )
            acc.fold(acc.partial(lc.nb_report_rows(spec, per_type, rng)))
        expected = to_dict(acc.result())
        assert result["priors"] == expected["priors"]
        assert result["conditionals"] == expected["conditionals"]
        assert result["report_counts"] == expected["report_counts"]
        return
    acc = lc.new_accumulator(spec)
    for i, site in enumerate(sites):
        x = np.column_stack([site.data["sl"], site.data["sw"]])
        for chunk in lc.perturb_chunks(lc.encode_column(x, spec), spec, np.random.default_rng(i)):
            acc.fold(acc.partial(chunk))
    expected = acc.result()
    assert result["points"] == expected["points"] and result["mean"] == expected["mean"]
    se = result["std_errors"][0]
    assert np.all(np.abs(np.array(result["mean"]) - IRIS.data[:, :2].mean(axis=0)) <= 4 * se)


CASES: dict[str, list[Case]] = {
    "moments": [
        Case(
            MomentsRequest(method="pca", features=tuple(NAMES), components=2),
            iris_sites,
            _check_pca,
            _big("sl"),
            common={"value_bound": 100.0},
        ),
        Case(
            MomentsRequest(
                method="lda",
                features=tuple(NAMES),
                groupings=(LabelClasses("species", ("setosa", "versicolor", "virginica")),),
            ),
            iris_sites,
            _check_lda,
            _big("pw"),
            common={"value_bound": 100.0},
        ),
    ],
    "kmeans": [
        Case(
            KmeansRequest(k=3, centers=tuple(INIT.ravel()), iterations=20, features=tuple(NAMES)),
            iris_sites,
            _check_kmeans,
            _big("sw"),
            common={"value_bound": 100.0},
        )
    ],
    "correlation": [
        Case(
            corr.CorrelationRequest(features=tuple(NAMES)),
            iris_sites,
            _check_correlation,
            _big("pl"),
            common={"value_bound": 100.0},
        )
    ],
    "statistic": [  # a plugin: the example package make test installs (docs/plugins.md)
        Case(
            _skewness_request(),
            iris_sites,
            _check_skewness,
            _big("pl"),
            common={"value_bound": 100.0},
            row_norm=2.0,  # fourth powers: at C = 8 the noise would be too large to sample
        )
    ],
    "weighted_stats": [
        Case(
            ws.WeightedStatsRequest(features=tuple(NAMES), weight_column="w", weight_bound=2.0),
            lambda: iris_sites({"w": WEIGHTS}),
            _check_weighted,
            _big("pl"),
            common={"value_bound": 100.0},
        )
    ],
    "crosstab": [
        Case(
            ct.CrosstabRequest(
                columns=(
                    ct.CrosstabColumn("species", domain=SPECIES_DOMAIN),
                    ct.CrosstabColumn("sl", edges=SL_EDGES),
                )
            ),
            iris_sites,
            _check_crosstab,
            _big("sl"),  # outside the edges: a non-DP round is refused (rule classes)
        )
    ],
    "quantiles": [
        Case(
            qt.QuantilesRequest(
                features=("sl", "pl"), lower=0.0, upper=8.0, percentiles=QT_PERCENTILES, bins=16
            ),
            iris_sites,
            _check_quantiles,
            _big("sl"),  # outside the bounds: a non-DP round is refused (rule values)
        )
    ],
    "naive_bayes": [
        Case(
            nbayes.NaiveBayesRequest(
                features=(*NAMES, "band"),
                domains=(nbayes.NaiveBayesDomain("band", BAND_DOMAIN),),
                label_column="species",
                classes=SPECIES_DOMAIN,
            ),
            lambda: iris_sites({"band": BAND}),
            _check_naive_bayes,
            _big("pl", {"band": BAND}),
            common={"value_bound": 100.0},
        )
    ],
    "linreg": [
        Case(
            lr.LinregRequest(features=tuple(NAMES[:3]), label_column="pw"),
            iris_sites,
            _check_linreg,
            _big("pw"),
            common={"value_bound": 100.0},
        )
    ],
    "logreg": [
        Case(
            lg.LogregRequest(
                features=tuple(NAMES[:3]), label_column="species", positive_class="versicolor"
            ),
            iris_sites,
            _check_logreg,
            _big("sl"),
            common={"value_bound": 100.0},
        )
    ],
    "ldp": [
        Case(
            lc.LdpRequest(
                column="species",
                mechanism="oue",
                epsilon=2.0,
                domain=("setosa", "versicolor", "virginica"),
            ),
            iris_sites,
            lambda result: None,  # compared with the pooled reports' estimate in the test
            lambda: MemorySite({"species": np.array(["setosa", "orchid"])}),
            dp=False,
            common={"min_owners": 1},
        ),
        Case(  # the box is public; a point is clipped into it, a NaN refused
            GEO,
            iris_sites,
            lambda result: _check_pooled_reports(GEO, result),
            lambda: MemorySite({"sl": np.array([5.0, np.nan]), "sw": np.array([3.0, 3.0])}),
            dp=False,
            common={"min_owners": 1},
        ),
        Case(
            NAIVE_BAYES,
            lambda: iris_sites({"petal": PETAL}),
            lambda result: _check_pooled_reports(NAIVE_BAYES, result),
            lambda: MemorySite({"petal": np.array(["long", "huge"]), "species": SPECIES[:2]}),
            dp=False,
            common={"min_owners": 1},
        ),
    ],
}


def _cases() -> list[tuple[str, Case]]:
    return [(name, case) for name, cases in CASES.items() for case in cases]


def _ids() -> list[str]:
    return [
        f"{n}-{getattr(c.request, 'method', '') or getattr(c.request, 'mechanism', '')}"
        for n, c in _cases()
    ]


def _secure_sum(shares: list[list[int]], layout) -> list[int]:
    """Slot-wise sum of the packed shares (what the homomorphic sum computes), offsets off."""
    n_values = len(shares[0])
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    return slot_totals(unpack(summed, n_values, layout), len(shares), layout)


def _run(name: str, case: Case, sites: list[MemorySite]) -> dict:
    """The result document of `_run_typed` (JSON-ready)."""
    return _run_typed(name, case, sites).to_dict()


def _run_typed(name: str, case: Case, sites: list[MemorySite]) -> Any:
    """The engine's loop without a network: plan, rounds, shares, sum, finish."""
    protocol = registry.get(name)
    plan = protocol.plan(case.request, Common(n_invited=len(sites), **case.common))
    state = protocol.start(plan, "job-1", [f"site-{i}" for i in range(len(sites))])
    index = 1
    while True:
        rnd = protocol.next_round(plan, state, index)
        outcome = Outcome(
            f"job-1-it{index}", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {}
        )
        if protocol.kind == REPORTS:
            acc = protocol.new_accumulator(plan)
            for i, site in enumerate(sites):
                stream = protocol.reports(rnd.spec, site, np.random.default_rng(i), {})
                for chunk in stream.chunks:
                    acc.fold(acc.partial(chunk))
            outcome.reports = acc
        else:
            enc = rnd.share_encoding
            shares = [protocol.share_values(rnd.spec, enc, rnd.dp, s, {}) for s in sites]
            outcome.totals = _secure_sum(shares, enc.layout(2048))
            outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
        step = protocol.finish_round(plan, state, outcome)
        if step.done:
            result = protocol.job_result(plan, state, step)
            # as the analyst receives it: the typed result over the wire
            return result_from_proto(result_to_proto(result))
        index += 1


def test_every_registered_protocol_has_a_conformance_case():
    assert set(registry.names()) == set(CASES)


@pytest.mark.parametrize(("name", "case"), _cases(), ids=_ids())
def test_the_analyst_api_finds_the_protocol_and_tables_its_result(name, case):
    """`AnalystClient.run` finds the protocol by the request's type; the typed result's
    `to_dict()` is the CLI's document and `to_pandas()` its table, a row per item."""
    pytest.importorskip("pandas")
    assert registry.for_request(case.request) is registry.get(name)
    result = _run_typed(name, case, case.sites())
    expected = to_dict(result)
    if name == "statistic":  # a plugin's own fields travel as JSON; its document holds them
        expected = {k: v for k, v in expected.items() if k != "values_json"}
        expected |= json.loads(result.values_json)
    assert result.to_dict() == expected
    table = result.to_pandas()
    doc = result.to_dict()
    rows = {  # what a row is: a component, a cluster, a feature, a term, a category, ...
        "moments": lambda: len(doc["components"]),
        "kmeans": lambda: doc["k"],
        "weighted_stats": lambda: len(doc["features"]),
        "crosstab": lambda: len(doc["categories"][doc["columns"][0]]),
        "linreg": lambda: len(doc["terms"]),
        "logreg": lambda: len(doc["terms"]),
        "ldp": lambda: len(  # a category, a report (geo), a feature's value (naive Bayes)
            doc.get("estimates") or doc.get("points") or table.index
        ),
        "quantiles": lambda: len(doc["percentiles"]),
        "naive_bayes": lambda: len(doc["classes"]),
        "correlation": lambda: len(doc["features"]),
        "statistic": lambda: len(doc["figures"]),  # a plugin's table: a row per figure
    }[name]()
    assert table.shape[0] == rows > 0


@pytest.mark.parametrize(("name", "case"), _cases(), ids=_ids())
def test_round_trip_equals_the_centralized_result(name, case):
    result = _run(name, case, case.sites())
    case.check(result)
    if name == "ldp" and case.request.domain:  # the pooled reports' estimate, centrally
        spec = lc.spec_from_request(case.request)
        oracle = lc.mechanism_for(spec)
        reports = [
            oracle.perturb(
                lc.encode_column(s.read([]).labels("species"), spec), np.random.default_rng(i)
            )
            for i, s in enumerate(case.sites())
        ]
        est = oracle.estimate(sum(oracle.support(r) for r in reports), len(IRIS.data))
        assert [result["estimates"][v] for v in spec.domain] == list(map(float, est.counts))


@pytest.mark.parametrize(("name", "case"), _cases(), ids=_ids())
def test_every_round_stays_within_what_the_request_names(name, case):
    """Owners refuse a round reading a column the analyst's request does not name, or charging
    more than it authorizes: an honest plan never does either, in any of its rounds."""
    protocol = registry.get(name)
    dps = [None, DpRequest(1.0, 1e-6, case.row_norm)] if case.dp else [None]
    for dp in dps:
        common = Common(n_invited=3, **{"min_owners": 3, **case.common, "dp": dp})
        plan = protocol.plan(case.request, common)
        state = protocol.start(plan, "job-1", ["a", "b", "c"])
        named = set(protocol.request_columns(case.request))
        allowed = protocol.request_budget(case.request, dp)
        for index in (1, 2):
            rnd = protocol.next_round(plan, state, index)
            assert set(protocol.columns(rnd.spec)) <= named
            spent = protocol.job_budget(rnd.spec, rnd.dp)
            assert (spent is None) == (allowed is None)
            if spent is not None and allowed is not None:
                assert spent.fits_within(allowed, rel_slack=1e-9), (spent, allowed)


@pytest.mark.parametrize(("name", "case"), _cases(), ids=_ids())
def test_a_value_beyond_the_public_bounds_is_refused(name, case):
    with pytest.raises(LeteoError):
        _run(name, case, [case.too_large(), *case.sites()[1:]])


def _dp_plan(name: str, case: Case, scale_bits: int = 8):
    protocol = registry.get(name)
    common = Common(
        n_invited=3,
        min_owners=3,
        scale_bits=scale_bits,
        dp=DpRequest(1.0, 1e-6, 8.0),
    )
    plan = protocol.plan(case.request, common)
    state = protocol.start(plan, "job-1", ["a", "b", "c"])
    return protocol, plan, protocol.next_round(plan, state, 1)


DP_CASES = [(n, c) for n, c in _cases() if c.dp]
DP_IDS = [i for i, (_, c) in zip(_ids(), _cases(), strict=True) if c.dp]


@pytest.mark.parametrize(("name", "case"), DP_CASES, ids=DP_IDS)
def test_an_under_noised_dp_spec_is_refused_by_the_owner(name, case):
    protocol, plan, rnd = _dp_plan(name, case)
    site = case.sites()[0]
    protocol.check(rnd.spec, rnd.encoding, rnd.dp, site)  # the honest spec passes
    weaker = dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2)
    with pytest.raises(ProtocolError, match="more than the announced"):
        protocol.check(rnd.spec, rnd.encoding, weaker, site)
    tight = dataclasses.replace(rnd.encoding, noise_bound=1, data_bound=rnd.encoding.data_bound)
    with pytest.raises(ProtocolError):
        protocol.check(rnd.spec, tight, rnd.dp, site)


@pytest.mark.parametrize(("name", "case"), DP_CASES, ids=DP_IDS)
def test_the_stated_sensitivity_bounds_every_one_row_change(name, case):
    """Brute force over every row of one site (rows clipped to C = 8 inside share_values)."""
    protocol, plan, rnd = _dp_plan(name, case)
    site = case.sites()[0]
    enc = rnd.share_encoding
    full = np.array(protocol.share_values(rnd.spec, enc, rnd.dp, site, {}), dtype=object)
    worst_l1 = worst_l2 = 0.0
    n_rows = len(next(iter(site.data.values())))
    for i in range(n_rows):
        part = protocol.share_values(rnd.spec, enc, rnd.dp, site.without_row(i), {})
        diff = np.array([float(a - b) for a, b in zip(full, part, strict=True)])
        worst_l1 = max(worst_l1, float(np.abs(diff).sum()))
        worst_l2 = max(worst_l2, float(np.linalg.norm(diff)))
    sens = plan.sensitivity
    assert isinstance(sens, noise.Sensitivity)
    assert worst_l1 <= sens.l1 and worst_l2 <= sens.l2, (worst_l1, sens.l1, worst_l2, sens.l2)
    assert worst_l2 > 0


@pytest.mark.parametrize("scale_bits", [-1, 65, 1100])
def test_an_out_of_range_scale_is_refused_before_any_bound_is_derived(scale_bits):
    """Found by the RPC fuzzer: a DP request with 1100 fraction bits overflowed a float while
    the sensitivity was derived (an internal error); every protocol now refuses it by name."""
    from leteo_fed.errors import DataError

    with pytest.raises(DataError, match="scale_bits must be in 0..64") as err:
        Common(n_invited=3, scale_bits=scale_bits, dp=DpRequest(1.0, 1e-6, 1.0))
    assert err.value.field == "scale_bits"
