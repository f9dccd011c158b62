"""Federated linear regression: the protocol math without a network (against statsmodels' OLS
and scikit-learn's ridge on the pooled rows), the DP sensitivity by brute force and the noisy
fit's post-processing, then through real processes (CSP, aggregator, three owners over mTLS, a
2048-bit key) and the CLI."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import statsmodels.api as sm
from round_harness import statistic_share, statistic_totals

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import linreg as lr
from leteo_fed.protocols import linreg_fit as lf
from leteo_fed.protocols import moments
from leteo_fed.protocols.block_encoding import integer_sensitivity
from leteo_fed.protocols.moments import ALL_ROWS
from leteo_fed.protocols.requests import Common, DpRequest

RNG = np.random.default_rng(11)
STAT = lr.Linreg()
NAMES = ("a", "b", "c")
BETA = np.array([1.5, -0.7, 2.0])


def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.normal(loc=[1.0, -2.0, 5.0], scale=[0.5, 2.0, 1.0], size=(n, 3))
    y = 0.3 + x @ BETA + RNG.normal(0.0, 1.3, size=n)
    return x, y


def _shares(parts, spec, enc) -> list[list[int]]:
    """Each site's share of its rows [x, y] as given (the statistic's own sums and encoding)."""
    return [statistic_share(STAT, spec, np.column_stack([x, y]), {}, enc) for x, y in parts]


def _secure_sum(shares: list[list[int]], enc) -> list[int]:
    """Slot-wise sum of the packed shares (what the homomorphic sum adds), offsets removed."""
    layout = enc.layout(2048)
    packed = [pack(s, layout) for s in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    return slot_totals(unpack(summed, len(shares[0]), layout), len(shares), layout)


def _by_term(result: dict, name: str) -> np.ndarray:
    return np.array([result[name][t] for t in result["terms"]])


def _max_difference_to_statsmodels(result: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Every released statistic against statsmodels' OLS on the pooled rows: the largest
    absolute difference."""
    ols = sm.OLS(y, sm.add_constant(x)).fit()
    ci = ols.conf_int(alpha=1 - result["ci_level"])
    pairs = [
        (_by_term(result, "coefficients"), ols.params),
        (_by_term(result, "std_errors"), ols.bse),
        (_by_term(result, "t_statistics"), ols.tvalues),
        (_by_term(result, "p_values"), ols.pvalues),
        (_by_term(result, "ci_lower"), ci[:, 0]),
        (_by_term(result, "ci_upper"), ci[:, 1]),
        (result["r_squared"], ols.rsquared),
        (result["adj_r_squared"], ols.rsquared_adj),
        (result["residual_std_error"], np.sqrt(ols.scale)),
    ]
    assert result["df_residual"] == ols.df_resid and result["n_rows"] == ols.nobs
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in pairs)


def _run(parts, request: lr.LinregRequest, **common) -> dict:
    """Plan, the owners' shares through `share_values`, the secure sum, finish: the engine's
    loop without a network, the result as the analyst receives it."""
    from leteo_fed.protocols.dp_facts import encoding_facts
    from leteo_fed.protocols.round_types import Outcome
    from leteo_fed.transport.codec import to_dict
    from leteo_fed.transport.rounds import result_from_proto, result_to_proto

    plan = lr.PROTOCOL.plan(request, Common(n_invited=len(parts), **common))
    rnd = lr.PROTOCOL.next_round(plan, None, 1)
    enc = rnd.share_encoding
    shares = [lr.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, Site(x, y), {}) for x, y in parts]
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(len(parts))}, {})
    outcome.totals = _secure_sum(shares, enc)
    outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
    result = lr.PROTOCOL.finish_round(plan, None, outcome).result
    return to_dict(result_from_proto(result_to_proto(result)))


class Table:
    def __init__(self, data: dict[str, np.ndarray]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([self.data[c] for c in columns])

    def labels(self, column: str) -> list[str]:
        return [str(v) for v in self.data[column]]


@dataclass
class Site:
    x: np.ndarray
    y: np.ndarray
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> Table:
        return Table({**{n: self.x[:, j] for j, n in enumerate(NAMES)}, "y": self.y})


def test_the_federated_fit_equals_statsmodels_ols_on_the_pooled_rows():
    """Three sites' shares summed slot-wise and unblinded: coefficients, standard errors, t
    statistics, p-values, confidence intervals, R^2, adjusted R^2 and the residual standard
    error equal statsmodels' OLS on the pooled rows to 1e-8."""
    parts = [_data(n) for n in (400, 750, 130)]
    result = _run(parts, lr.LinregRequest(features=NAMES, label_column="y"), value_bound=100.0)
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    worst = _max_difference_to_statsmodels(result, x, y)
    print(f"largest absolute difference to statsmodels OLS: {worst:.3g}")
    assert worst <= 1e-8
    assert result["method"] == "ols" and result["terms"] == ["intercept", *NAMES]
    assert result["label_bound"] is None and result["noise_std_errors"] is None
    assert result["dp"] is None


def test_ridge_equals_scikit_learn_and_its_sandwich_standard_errors():
    """Ridge penalizes the coefficients, not the intercept (scikit-learn's Ridge with an
    intercept); its standard errors are sigma^2 A^-1 X'X A^-1 on the centered rows."""
    from sklearn.linear_model import Ridge

    parts = [_data(n) for n in (300, 200, 250)]
    lam = 250.0
    result = _run(
        parts, lr.LinregRequest(features=NAMES, label_column="y", ridge=lam), value_bound=100.0
    )
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    ref = Ridge(alpha=lam).fit(x, y)
    np.testing.assert_allclose(
        _by_term(result, "coefficients"), np.r_[ref.intercept_, ref.coef_], rtol=0, atol=1e-9
    )
    xc, yc = x - x.mean(axis=0), y - y.mean()
    a_inv = np.linalg.inv(xc.T @ xc + lam * np.eye(3))
    resid = yc - xc @ ref.coef_
    df = len(y) - 4
    cov = (resid @ resid / df) * a_inv @ (xc.T @ xc) @ a_inv
    se0 = np.sqrt((resid @ resid / df) / len(y) + x.mean(axis=0) @ cov @ x.mean(axis=0))
    np.testing.assert_allclose(
        _by_term(result, "std_errors"), np.r_[se0, np.sqrt(np.diag(cov))], rtol=1e-9
    )
    assert result["method"] == "ridge" and result["ridge"] == lam
    assert 0 < result["r_squared"] < 1


def test_plan_refuses_bad_requests_naming_the_field():
    common = Common(n_invited=3)
    dp = Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 2.0))
    for request, on, field in (
        (lr.LinregRequest(label_column="y"), common, "features"),
        (lr.LinregRequest(features=("a", "a"), label_column="y"), common, "features"),
        (lr.LinregRequest(features=("a",)), common, "label_column"),
        (lr.LinregRequest(features=("a", "y"), label_column="y"), common, "label_column"),
        (lr.LinregRequest(features=("intercept",), label_column="y"), common, "features"),
        (lr.LinregRequest(features=("a",), label_column="y", ridge=-1.0), common, "ridge"),
        (lr.LinregRequest(features=("a",), label_column="y", ridge=np.nan), common, "ridge"),
        (
            lr.LinregRequest(features=("a",), label_column="y", label_bound=2.0),
            common,
            "label_bound",
        ),
        (lr.LinregRequest(features=("a",), label_column="y", label_bound=-2.0), dp, "label_bound"),
    ):
        with pytest.raises(DataError) as err:
            lr.PROTOCOL.plan(request, on)
        assert err.value.field == field, request
    plan = lr.PROTOCOL.plan(lr.LinregRequest(features=("a",), label_column="y"), dp)
    assert plan.spec.label_bound == 2.0  # B defaults to the row norm bound C


def test_a_fit_the_data_cannot_support_is_refused():
    x, y = _data(60)
    request = lr.LinregRequest(features=NAMES, label_column="y")
    collinear = x.copy()
    collinear[:, 2] = 2 * collinear[:, 0] - collinear[:, 1]
    with pytest.raises(DataError, match="collinear"):
        _run([(collinear[:30], y[:30]), (collinear[30:], y[30:])], request, value_bound=100.0)
    with pytest.raises(DataError, match="label is constant"):
        _run([(x[:30], np.full(30, 2.0)), (x[30:], np.full(30, 2.0))], request, value_bound=100.0)
    with pytest.raises(DataError, match="needs at least 5"):
        _run([(x[:2], y[:2]), (x[2:4], y[2:4])], request, value_bound=100.0)
    with pytest.raises(DataError, match="value bound 100"):  # beyond the public bound
        _run([(x[:30] * 100, y[:30]), (x[30:], y[30:])], request, value_bound=100.0)
    # ridge makes collinear features solvable
    ridge = lr.LinregRequest(features=NAMES, label_column="y", ridge=1.0)
    _run([(collinear[:30], y[:30]), (collinear[30:], y[30:])], ridge, value_bound=100.0)


def test_sensitivity_bounds_every_add_remove_neighbour():
    """Brute force: a site's integer share with and without each row (features clipped to C,
    labels to [-B, B] inside `share_values`) never differs by more than the stated L1 and L2
    sensitivity, and the worst row comes close to it."""
    c, b, f = 2.0, 3.0, 16
    plan = lr.PROTOCOL.plan(
        lr.LinregRequest(features=NAMES, label_column="y", label_bound=b),
        Common(n_invited=3, min_owners=3, scale_bits=f, dp=DpRequest(1.0, 1e-6, c)),
    )
    rnd = lr.PROTOCOL.next_round(plan, None, 1)
    x = RNG.normal(scale=2.0, size=(120, 3))
    y = RNG.normal(scale=4.0, size=120)
    x[0], y[0] = [9.0, 0.0, 0.0], 50.0  # clipped onto the sphere and the label bound
    full = np.array(lr.PROTOCOL.share_values(rnd.spec, plan.encoding, rnd.dp, Site(x, y), {}))
    worst_l1 = worst_l2 = 0.0
    for i in range(len(x)):
        site = Site(np.delete(x, i, 0), np.delete(y, i))
        part = lr.PROTOCOL.share_values(rnd.spec, plan.encoding, rnd.dp, site, {})
        diff = np.array([float(p - q) for p, q in zip(full, part, strict=True)])
        worst_l1 = max(worst_l1, float(np.abs(diff).sum()))
        worst_l2 = max(worst_l2, float(np.linalg.norm(diff)))
    sens = integer_sensitivity(STAT.blocks(rnd.spec, c), f, f)  # the blocks' sensitivity at C
    assert sens == plan.sensitivity
    assert worst_l1 <= sens.l1 and worst_l2 <= sens.l2
    assert worst_l2 >= 0.5 * sens.l2
    # the stated bound is that of the moments of a row of norm sqrt(C^2 + B^2)
    assert sens == moments.sensitivities_for_scatter(
        np.hypot(c, b), f, 4, 1, n_classes=[1], count_scale_bits=f
    )


def test_owners_refuse_an_under_noised_spec_and_dp_on_spark():
    plan = lr.PROTOCOL.plan(
        lr.LinregRequest(features=NAMES, label_column="y"),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 2.0)),
    )
    rnd = lr.PROTOCOL.next_round(plan, None, 1)
    x, y = _data(10)
    lr.PROTOCOL.check(rnd.spec, plan.encoding, plan.dp, Site(x, y))  # the honest spec passes
    weaker = type(plan.dp)(**{**plan.dp.__dict__, "mu": plan.dp.mu / 2})
    with pytest.raises(ProtocolError, match="more than the announced"):
        lr.PROTOCOL.check(rnd.spec, plan.encoding, weaker, Site(x, y))
    looser = type(rnd.spec)(rnd.spec.features, rnd.spec.label_column, 2 * rnd.spec.label_bound)
    with pytest.raises(ProtocolError):  # a wider label clip than the noise was sized for
        lr.PROTOCOL.check(looser, plan.encoding, plan.dp, Site(x, y))
    with pytest.raises(DataError, match="numpy engine"):
        lr.PROTOCOL.check(rnd.spec, plan.encoding, plan.dp, Site(x, y, uses_spark=True))


def test_a_noisy_fit_is_always_defined():
    """Few rows and much noise: whenever the noisy row count leaves degrees of freedom, the
    post-processed fit has a positive definite X'X, finite standard errors and 0 <= R^2 < 1;
    the noise's own error of every term is reported."""
    plan = lr.PROTOCOL.plan(
        lr.LinregRequest(features=NAMES, label_column="y"),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 10.0)),
    )
    enc = plan.encoding
    x, y = _data(300)
    x = noise.clip_rows(x, 10.0)
    y = np.clip(y, -10.0, 10.0)
    parts = [(x[:100], y[:100]), (x[100:200], y[100:200]), (x[200:], y[200:])]
    shares = _shares(parts, plan.spec, enc)
    sigma = plan.dp.noise_std(3, enc.scale_bits)
    fits = 0
    for _ in range(40):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        try:
            totals = [sum(v) for v in zip(*noisy, strict=True)]
            fit = lr.fit_from_totals(
                statistic_totals(STAT, plan.spec, totals, enc), 3, 0.0, True, sigma
            )
        except DataError as exc:  # the noisy row count is too small: refused, as documented
            assert "too small for this epsilon" in str(exc)
            continue
        fits += 1
        assert np.all(np.isfinite(fit.std_errors)) and np.all(fit.std_errors > 0)
        assert 0 <= fit.r_squared < 1 and np.all(np.linalg.eigvalsh(fit.a_inverse) > 0)
        errs = lf.noise_errors(fit.a_inverse, fit.coefficients, fit.mean, fit.n, sigma)
        assert errs.shape == (4,) and np.all(np.isfinite(errs))
    assert fits >= 10


# ------------------------------------------------------------------ through real processes


@pytest.mark.slow
def test_linreg_through_the_services_and_the_cli(tmp_path):
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    parts = []
    for i, n in enumerate((2000, 1500, 2500), start=1):
        # centered features of some spread: what a DP fit needs (docs/linear-regression.md)
        x = RNG.normal(scale=[2.0, 3.0, 1.5], size=(n, 3))
        y = 0.3 + x @ np.array([0.5, -0.3, 0.8]) + RNG.normal(0.0, 1.0, size=n)
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({**{k: x[:, j] for j, k in enumerate(NAMES)}, "y": y}), path)
        parts.append((path, x, y))
    x = np.vstack([p[1] for p in parts])
    y = np.concatenate([p[2] for p in parts])
    owners = [OwnerSpec(f"site-{i}", p) for i, (p, _, _) in enumerate(parts, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        request = lr.LinregRequest(features=NAMES, label_column="y")
        result = client.run(request, RoundOptions(min_owners=3)).to_dict()
        worst = _max_difference_to_statsmodels(result, x, y)
        print(f"through the services: largest absolute difference to statsmodels: {worst:.3g}")
        assert worst <= 1e-8
        assert result["owners"] == ["site-1", "site-2", "site-3"]
        assert result["encoding"]["paillier_bits"] == 2048 and result["dp"] is None
        client.close()

        base = [
            "linreg",
            "--aggregator",
            cluster.addresses["aggregator"],
            "--tls-dir",
            str(cluster.certs),
            "--features",
            ",".join(NAMES),
            "--label-column",
            "y",
            "--min-owners",
            "3",
        ]
        # the CLI without DP: result.json (statsmodels' fit) and the coefficient plot
        assert main([*base, "--out", str(tmp_path / "ols")]) == 0
        doc = json.loads((tmp_path / "ols" / "result.json").read_text())
        assert _max_difference_to_statsmodels(doc, x, y) <= 1e-8
        png = (tmp_path / "ols" / "coefficients.png").read_bytes()
        assert png.startswith(b"\x89PNG") and doc["plot"].endswith("coefficients.png")

        # DP: at the policy's fewest rows (30) the noise buries the row count; refused before
        # anyone is invited, nothing charged
        dp = ["--dp-epsilon", "8", "--row-norm-bound", "12", "--label-bound", "10"]
        assert main([*base, *dp, "--out", str(tmp_path / "refused")]) == 2
        assert not (tmp_path / "refused").exists()
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            assert not path.exists() or json.loads(path.read_text())["spends"] == []

        # with the analyst's row estimate it runs: every owner's ledger is charged once
        assert main([*base, *dp, "--rows", "6000", "--out", str(tmp_path / "dp")]) == 0
        doc = json.loads((tmp_path / "dp" / "result.json").read_text())
        assert doc["dp"]["epsilon"] == 8.0 and doc["label_bound"] == 10.0
        assert (
            doc["dp"]["noise_std_per_value"] > 0 and "0 of 3 raised" in doc["dp"]["post_processing"]
        )
        assert set(doc["noise_std_errors"]) == {"intercept", *NAMES}
        assert (tmp_path / "dp" / "coefficients.png").exists()
        # the owners fit their clipped rows: the release is OLS on them plus the noise, each
        # term within 6 of its reported noise error
        ref = sm.OLS(np.clip(y, -10, 10), sm.add_constant(noise.clip_rows(x, 12.0))).fit()
        for j, term in enumerate(doc["terms"]):
            err = doc["noise_std_errors"][term]
            assert abs(doc["coefficients"][term] - ref.params[j]) <= 6 * err, term
            assert doc["std_errors"][term] == pytest.approx(ref.bse[j], rel=0.2)
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            assert [e["epsilon"] for e in ledger["spends"]] == [8.0]


@pytest.mark.spark
def test_a_spark_site_sends_the_share_the_numpy_path_sends(tmp_path):
    """An owner with `engine = "spark"` computes the moments of [x, y] with Spark
    (`spark_moments`, as for PCA): the fit equals statsmodels' as with the NumPy path."""
    from leteo_fed.data.spark_stats import spark_local_moments

    parts = [_data(n) for n in (200, 300)]
    paths = []
    for i, (x, y) in enumerate(parts):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({**{k: x[:, j] for j, k in enumerate(NAMES)}, "y": y}), path)
        paths.append(path)

    @dataclass
    class SparkSite(Site):
        path: str = ""
        uses_spark: bool = True

        def read(self, columns) -> Table:
            raise AssertionError("a non-DP round on a Spark site reads no table")

        def spark_moments(self, features, groupings, value_bound):
            return spark_local_moments(self.path, list(features), [ALL_ROWS], None, value_bound)

    request = lr.LinregRequest(features=NAMES, label_column="y")
    plan = lr.PROTOCOL.plan(request, Common(n_invited=2, min_owners=2, value_bound=100.0))
    rnd = lr.PROTOCOL.next_round(plan, None, 1)
    enc = rnd.share_encoding
    shares = []
    for (x, y), path in zip(parts, paths, strict=True):
        numpy_share = lr.PROTOCOL.share_values(rnd.spec, enc, None, Site(x, y), {})
        site = SparkSite(x, y, path=str(path))
        shares.append(lr.PROTOCOL.share_values(rnd.spec, enc, None, site, {}))
        # another summation order: the encoded sums differ by a few units of 2^-32 at most
        assert max(abs(a - b) for a, b in zip(shares[-1], numpy_share, strict=True)) <= 64
    totals = statistic_totals(STAT, rnd.spec, _secure_sum(shares, enc), enc)
    fit = lr.fit_from_totals(totals, 3, 0.0, False)
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    ols = sm.OLS(y, sm.add_constant(x)).fit()
    np.testing.assert_allclose(np.r_[fit.intercept, fit.coefficients], ols.params, atol=1e-8)
    np.testing.assert_allclose(fit.std_errors, ols.bse, atol=1e-8)
