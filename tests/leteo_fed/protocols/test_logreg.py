"""Federated logistic regression: the Newton iterations through the protocol's own functions
(owners' shares, the secure sum, the aggregator's step) against statsmodels' Logit on the pooled
rows, refusals by field, separation and singular Hessians, the owners' checks of a relayed
iteration, the DP sensitivity by brute force, snapshots; then through real processes (CSP,
aggregator, three owners over mTLS, a 2048-bit key) and the CLI."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
import statsmodels.api as sm

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import DataError, LeteoError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.protocols import logreg as lg
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.transport.codec import to_dict
from leteo_fed.transport.rounds import result_from_proto, result_to_proto

NAMES = ("a", "b", "c")
BETA = np.array([-0.4, 0.9, -0.6, 0.3])  # intercept, then a, b, c


def _data(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.normal(loc=[0.5, -1.0, 2.0], scale=[1.0, 1.5, 0.7], size=(n, 3))
    p = 1.0 / (1.0 + np.exp(-(BETA[0] + x @ BETA[1:])))
    labels = np.where(rng.uniform(size=n) < p, "yes", "no")
    return x, labels


class Table:
    def __init__(self, data: dict[str, np.ndarray]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([np.asarray(self.data[c], dtype=np.float64) for c in columns])

    def labels(self, column: str) -> list[str]:
        return [str(v) for v in self.data[column]]


@dataclass
class Site:
    x: np.ndarray
    labels: np.ndarray
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> Table:
        return Table({**{n: self.x[:, j] for j, n in enumerate(NAMES)}, "y": self.labels})

    def without_row(self, i: int) -> Site:
        return Site(np.delete(self.x, i, 0), np.delete(self.labels, i, 0))


def _secure_sum(shares: list[list[int]], enc) -> list[int]:
    """Slot-wise sum of the packed shares (what the homomorphic sum adds), offsets removed."""
    layout = enc.layout(2048)
    packed = [pack(s, layout) for s in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    return slot_totals(unpack(summed, len(shares[0]), layout), len(shares), layout)


def seeded_noise(values: list[int], dp, rng: np.random.Generator) -> list[int]:
    """An owner's Skellam share as `add_owner_noise` draws it, from a seeded generator."""
    z = Skellam(dp.mu).owner_share(dp.quorum).sample(len(values), rng)
    return [v + int(e) for v, e in zip(values, z.tolist(), strict=True)]


def _run(sites: list[Site], request: lg.LogregRequest, noisy: int | None = None, **common):
    """The engine's loop without a network: plan, every iteration's shares (`share_values`,
    seeded Skellam shares added with DP, as the owner agent adds its own), the secure sum, the Newton step;
    the typed result as the analyst receives it."""
    protocol = lg.PROTOCOL
    plan = protocol.plan(request, Common(n_invited=len(sites), **common))
    state = protocol.start(plan, "job-1", [f"site-{i}" for i in range(len(sites))])
    rng = np.random.default_rng(noisy)
    index = 1
    while True:
        rnd = protocol.next_round(plan, state, index)
        enc = rnd.share_encoding
        shares = []
        for s in sites:
            protocol.check(rnd.spec, enc, rnd.dp, s)
            share = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
            shares.append(seeded_noise(share, rnd.dp, rng) if noisy is not None else share)
        outcome = Outcome(
            f"job-1-it{index}", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {}
        )
        outcome.totals = _secure_sum(shares, enc)
        outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
        step = protocol.finish_round(plan, state, outcome)
        if step.done:
            return result_from_proto(result_to_proto(protocol.job_result(plan, state, step)))
        index += 1


def _statsmodels(x: np.ndarray, labels: np.ndarray):
    y = (labels == "yes").astype(float)
    return sm.Logit(y, sm.add_constant(x)).fit(method="newton", disp=0)


def _by_term(doc: dict, name: str) -> np.ndarray:
    return np.array([doc[name][t] for t in doc["terms"]])


def _max_difference(doc: dict, ref) -> float:
    """Every released statistic against statsmodels' Logit: the largest absolute difference."""
    ci = ref.conf_int(alpha=1 - doc["ci_level"])
    pairs = [
        (_by_term(doc, "coefficients"), ref.params),
        (_by_term(doc, "std_errors"), ref.bse),
        (_by_term(doc, "z_statistics"), ref.tvalues),
        (_by_term(doc, "p_values"), ref.pvalues),
        (_by_term(doc, "ci_lower"), ci[:, 0]),
        (_by_term(doc, "ci_upper"), ci[:, 1]),
    ]
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in pairs)


def _sites(seed: int = 3, sizes=(400, 250, 350)) -> tuple[list[Site], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    parts = [_data(rng, n) for n in sizes]
    sites = [Site(x, lab) for x, lab in parts]
    return sites, np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


REQUEST = lg.LogregRequest(features=NAMES, label_column="y", positive_class="yes")


def test_the_federated_fit_equals_statsmodels_logit_on_the_pooled_rows():
    sites, x, labels = _sites()
    result = _run(sites, REQUEST)
    doc = result.to_dict()
    ref = _statsmodels(x, labels)
    worst = _max_difference(doc, ref)
    print(f"largest absolute difference to statsmodels' Logit: {worst:.3g}")
    assert worst <= 1e-6
    assert doc["converged"] and doc["iterations_run"] == len(doc["iterations"]) <= 10
    assert doc["n_rows"] == 1000 and doc["n_positive"] == int(np.sum(labels == "yes"))
    assert doc["terms"] == ["intercept", *NAMES] and doc["dp"] is None
    assert doc["iterations"][0]["coefficients"] != [0.0] * 4
    assert doc["iterations"][-1]["max_step"] <= 1e-8
    table = result.to_pandas()
    assert list(table.index) == doc["terms"] and table["coefficient"].tolist() == list(
        _by_term(doc, "coefficients")
    )


def test_a_wide_value_bound_keeps_the_agreement():
    """The encoding's bound is the value bound's (1e6 by default); a site with values of
    order 100 and 20 fraction bits still agrees to 1e-6 (fixed-point error 2^-21 per sum)."""
    rng = np.random.default_rng(8)
    parts = []
    for n in (300, 300, 300):
        x, _ = _data(rng, n)
        x = x * [50.0, 1.0, 1.0]
        p = 1.0 / (1.0 + np.exp(-(0.2 + x @ np.array([0.02, -0.6, 0.3]))))
        parts.append((x, np.where(rng.uniform(size=n) < p, "yes", "no")))
    x = np.vstack([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    doc = _run([Site(*p) for p in parts], REQUEST, scale_bits=20, value_bound=1000.0).to_dict()
    assert _max_difference(doc, _statsmodels(x, labels)) <= 1e-6


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"features": ()}, "features"),
        ({"features": ("a", "a")}, "features"),
        ({"features": ("a", "intercept")}, "features"),
        ({"label_column": ""}, "label_column"),
        ({"label_column": "a"}, "label_column"),
        ({"positive_class": ""}, "positive_class"),
        ({"max_iterations": 101}, "max_iterations"),
        ({"tolerance": -1.0}, "tolerance"),
        ({"tolerance": float("nan")}, "tolerance"),
        ({"coefficient_bound": -2.0}, "coefficient_bound"),
        ({"coefficient_bound": 1e7}, "coefficient_bound"),
        ({"coefficient_bound": float("inf")}, "coefficient_bound"),
    ],
)
def test_plan_refuses_bad_requests_naming_the_field(change, field):
    with pytest.raises(DataError) as err:
        lg.PROTOCOL.plan(dataclasses.replace(REQUEST, **change), Common(n_invited=3))
    assert err.value.field == field


def test_separation_one_class_and_a_constant_feature_are_refused_clearly():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3))
    separated = np.where(x[:, 0] > 0, "yes", "no")
    sites = [Site(x[i::3], separated[i::3]) for i in range(3)]
    with pytest.raises(DataError, match="separated"):
        _run(sites, REQUEST)
    one_class = np.array(["no"] * 300)
    with pytest.raises(DataError, match="no row of label column 'y' is 'yes'"):
        _run([Site(x[i::3], one_class[i::3]) for i in range(3)], REQUEST)
    constant = x.copy()
    constant[:, 2] = 1.0  # collinear with the intercept
    labels = np.where(rng.uniform(size=300) < 0.5, "yes", "no")
    with pytest.raises(DataError, match="Hessian is singular"):
        _run([Site(constant[i::3], labels[i::3]) for i in range(3)], REQUEST)


def test_not_converging_within_max_iterations_is_reported():
    sites, _, _ = _sites()
    doc = _run(sites, dataclasses.replace(REQUEST, max_iterations=2)).to_dict()
    assert doc["iterations_run"] == 2 and doc["converged"] is False
    assert doc["iterations"][-1]["max_step"] > doc["tolerance"]


def _iteration(common: Common, **change):
    plan = lg.PROTOCOL.plan(REQUEST, common)
    state = lg.PROTOCOL.start(plan, "job-1", ["a", "b", "c"])
    rnd = lg.PROTOCOL.next_round(plan, state, 1)
    return plan, rnd, dataclasses.replace(rnd.spec, **change)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"coefficients": (0.0, 0.0, 0.0)}, "has 3 value"),
        ({"coefficients": (0.0, float("nan"), 0.0, 0.0)}, "non-finite"),
        ({"coefficients": (0.0, 1001.0, 0.0, 0.0)}, "beyond the bound"),
        ({"iteration": 26}, "iteration 26 of a job of at most 25"),
    ],
)
def test_an_owner_refuses_a_relayed_iteration_it_cannot_check(change, match):
    _, rnd, bad = _iteration(Common(n_invited=3), **change)
    site = _sites()[0][0]
    lg.PROTOCOL.check(rnd.spec, rnd.encoding, rnd.dp, site)
    with pytest.raises(LeteoError, match=match):
        lg.PROTOCOL.check(bad, rnd.encoding, rnd.dp, site)


def test_expected_round_takes_only_bounded_coefficients_from_the_aggregator():
    plan, rnd, _ = _iteration(Common(n_invited=3))
    later = dataclasses.replace(rnd.spec, iteration=2, coefficients=(0.5, -1.0, 2.0, 0.0))
    rebuilt = lg.PROTOCOL.expected_round(plan, "job-1", ["a", "b", "c"], 2, later)
    assert rebuilt.spec == later and lg.PROTOCOL.chosen_by_aggregator(later)
    assert not lg.PROTOCOL.chosen_by_aggregator(rnd.spec)
    first = lg.PROTOCOL.expected_round(plan, "job-1", ["a", "b", "c"], 1, later)
    assert first.spec.coefficients == (0.0,) * 4  # iteration 1 is at the signed start
    with pytest.raises(DataError, match="beyond the bound"):
        too_far = dataclasses.replace(later, coefficients=(0.0, 0.0, -2000.0, 0.0))
        lg.PROTOCOL.expected_round(plan, "job-1", ["a", "b", "c"], 2, too_far)
    assert lg.PROTOCOL.max_rounds(plan) == 25


def test_a_value_beyond_the_value_bound_is_refused_without_dp_and_clipped_with_it():
    sites, _, _ = _sites()
    big = Site(sites[0].x.copy(), sites[0].labels)
    big.x[0, 1] = 5e3
    with pytest.raises(LeteoError, match="bound"):
        _run([big, *sites[1:]], REQUEST, value_bound=100.0)
    dp = DpRequest(9.0, 1e-6, 4.0)
    plan, rnd, _ = _iteration(Common(n_invited=3, min_owners=3, dp=dp))
    share = lg.PROTOCOL.share_values(rnd.spec, rnd.share_encoding, rnd.dp, big, {})
    clipped = Site(noise.clip_rows(big.x, 4.0), big.labels)
    assert np.linalg.norm(clipped.x[0]) == pytest.approx(4.0)
    # the row beyond the bound is clipped to C, not refused: the share of the clipped rows
    assert share == lg.PROTOCOL.share_values(rnd.spec, rnd.share_encoding, rnd.dp, clipped, {})


def _dp_round(beta=None, scale_bits: int = 10):
    common = Common(n_invited=3, min_owners=3, scale_bits=scale_bits, dp=DpRequest(2.0, 1e-6, 3.0))
    plan = lg.PROTOCOL.plan(REQUEST, common)
    state = lg.PROTOCOL.start(plan, "job-1", ["a", "b", "c"])
    if beta is not None:
        state.beta = np.asarray(beta, dtype=np.float64)
    return plan, lg.PROTOCOL.next_round(plan, state, 2 if beta is not None else 1)


@pytest.mark.parametrize("beta", [None, (3.0, -2.0, 1.5, 0.5), (-40.0, 0.1, 0.0, -0.2)])
def test_sensitivity_bounds_every_add_remove_neighbour(beta):
    """Brute force over every row of one site, some of them beyond the clip bound C = 3, at
    beta = 0 (p = 1/2, where p (1 - p) is largest) and at beta far from it."""
    plan, rnd = _dp_round(beta)
    rng = np.random.default_rng(5)
    x, labels = _data(rng, 200)
    x[:20] *= 4.0  # rows clipped to C
    site = Site(x, labels)
    enc = rnd.share_encoding
    full = lg.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site, {})
    worst_l1 = worst_l2 = 0.0
    for i in range(len(x)):
        part = lg.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site.without_row(i), {})
        diff = np.array([float(a - b) for a, b in zip(full, part, strict=True)])
        worst_l1 = max(worst_l1, float(np.abs(diff).sum()))
        worst_l2 = max(worst_l2, float(np.linalg.norm(diff)))
    sens = plan.sensitivity
    print(f"beta {beta}: L1 {worst_l1:.4g} <= {sens.l1:.4g}, L2 {worst_l2:.4g} <= {sens.l2:.4g}")
    assert worst_l1 <= sens.l1 and worst_l2 <= sens.l2
    if beta is None:  # at p = 1/2 (|y - p| = 1/2, p (1 - p) = 1/4) the bound is not loose:
        # a row of norm C moves the share by more than half of it
        assert worst_l2 >= 0.5 * sens.l2


def test_the_signed_iterations_together_meet_the_dp_budget():
    request = dataclasses.replace(REQUEST, max_iterations=4)
    common = Common(n_invited=3, min_owners=3, dp=DpRequest(2.0, 1e-6, 3.0))
    plan = lg.PROTOCOL.plan(request, common)
    assert (plan.dp.epsilon, plan.dp.delta, plan.dp.compositions) == (2.0, 1e-6, 4)
    assert Skellam(plan.dp.mu).epsilon(plan.sensitivity, 1e-6, compositions=4) <= 2.0
    state = lg.PROTOCOL.start(plan, "job-1", ["a", "b", "c"])
    rnd = lg.PROTOCOL.next_round(plan, state, 1)
    # against the analyst's authorization each iteration takes its share, T of them the whole
    assert lg.PROTOCOL.charge(rnd.spec, rnd.dp).epsilon == pytest.approx(0.5)
    assert lg.PROTOCOL.job_budget(rnd.spec, rnd.dp).epsilon == pytest.approx(2.0)
    later = dataclasses.replace(rnd.spec, iteration=3)
    ahead = lg.PROTOCOL.ledger_charge(later, rnd.encoding, rnd.dp, ahead=True)
    assert ahead.further == 1 and ahead.job == "logreg:job-1" and ahead.budget.epsilon == 2.0
    assert ahead.event.mu == plan.dp.mu and ahead.event.l2 == plan.sensitivity.l2
    # an owner refuses the iteration if the announced noise is below what T iterations need
    site = _sites()[0][0]
    lg.PROTOCOL.check(rnd.spec, rnd.encoding, rnd.dp, site)
    with pytest.raises(ProtocolError, match="accounted for 3"):
        lg.PROTOCOL.check(rnd.spec, rnd.encoding, dataclasses.replace(rnd.dp, compositions=3), site)
    with pytest.raises(ProtocolError, match="more than the announced"):
        lg.PROTOCOL.check(
            rnd.spec, rnd.encoding, dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2), site
        )
    with pytest.raises(DataError, match="numpy engine"):
        lg.PROTOCOL.check(
            rnd.spec, rnd.encoding, rnd.dp, dataclasses.replace(site, uses_spark=True)
        )


def test_a_dp_job_runs_its_iterations_and_stays_near_the_clipped_fit():
    """DP at a generous epsilon: every iteration runs (the noisy step never falls below 1e-8),
    the release is within 6 noise errors of the fit to the clipped rows."""
    rng = np.random.default_rng(12)
    x, labels = _data(rng, 30000)
    sites = [Site(x[i::3], labels[i::3]) for i in range(3)]
    request = dataclasses.replace(REQUEST, max_iterations=6)
    result = _run(sites, request, noisy=7, min_owners=3, dp=DpRequest(6.0, 1e-6, 4.0))
    doc = result.to_dict()
    assert doc["iterations_run"] == 6 and doc["dp"]["epsilon_spent"] == pytest.approx(6.0)
    ref = _statsmodels(noise.clip_rows(x, 4.0), labels)
    for j, term in enumerate(doc["terms"]):
        err = doc["noise_std_errors"][term]
        assert abs(doc["coefficients"][term] - ref.params[j]) <= 6 * err + 1e-9, term
        # the sampling errors come from the noisy Hessian (within 4% over seeds 1-5)
        assert doc["std_errors"][term] == pytest.approx(ref.bse[j], rel=0.1)


def test_a_snapshot_restores_the_job_and_a_bad_one_is_refused():
    sites, _, _ = _sites()
    plan = lg.PROTOCOL.plan(REQUEST, Common(n_invited=3))
    state = lg.PROTOCOL.start(plan, "job-1", ["a", "b", "c"])
    rnd = lg.PROTOCOL.next_round(plan, state, 1)
    enc = rnd.share_encoding
    shares = [lg.PROTOCOL.share_values(rnd.spec, enc, None, s, {}) for s in sites]
    outcome = Outcome("job-1-it1", rnd, [], {"a": {}, "b": {}, "c": {}}, {})
    outcome.totals = _secure_sum(shares, enc)
    outcome.encoding = encoding_facts(enc, enc.layout(2048), rnd.n_values, 2048)
    lg.PROTOCOL.finish_round(plan, state, outcome)
    snap = json.loads(json.dumps(lg.PROTOCOL.snapshot(state)))
    back = lg.PROTOCOL.restore(plan, "job-1", ["a", "b", "c"], snap)
    assert np.array_equal(back.beta, state.beta) and back.iterations == state.iterations
    assert back.n_rows == 1000
    with pytest.raises(ProtocolError, match="unusable"):
        lg.PROTOCOL.restore(plan, "job-2", ["a", "b", "c"], snap)
    with pytest.raises(ProtocolError, match="unusable"):
        lg.PROTOCOL.restore(plan, "job-1", ["a"], {**snap, "beta": [0.0]})


def test_the_result_travels_typed_and_as_json():
    sites, _, _ = _sites()
    result = _run(sites, REQUEST)
    doc = to_dict(result)
    assert json.loads(json.dumps(doc)) == doc
    assert lg.PROTOCOL.result_file("logreg") == "result.json"
    assert lg.PROTOCOL.plot_file == "coefficients.png"


@pytest.mark.slow
def test_logreg_through_the_services_and_the_cli(tmp_path):
    """CSP, aggregator and three owners as processes, mTLS, a 2048-bit key: statsmodels' Logit
    to 1e-6; the CLI writes result.json and the plot; a DP job charges every owner once per
    iteration."""
    import time

    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    rng = np.random.default_rng(21)
    parts = []
    for i, n in enumerate((2000, 1500, 2500), start=1):
        x, labels = _data(rng, n)
        path = tmp_path / f"site-{i}.csv"
        table = {**{k: x[:, j] for j, k in enumerate(NAMES)}, "y": labels}
        pacsv.write_csv(pa.table(table), path)
        parts.append((path, x, labels))
    x = np.vstack([p[1] for p in parts])
    labels = np.concatenate([p[2] for p in parts])
    ref = _statsmodels(x, labels)
    owners = [OwnerSpec(f"site-{i}", p) for i, (p, _, _) in enumerate(parts, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        start = time.perf_counter()
        result = client.run(REQUEST, RoundOptions(min_owners=3)).to_dict()
        seconds = time.perf_counter() - start
        worst = _max_difference(result, ref)
        print(
            f"through the services: {result['iterations_run']} iterations in {seconds:.1f} s; "
            f"largest absolute difference to statsmodels: {worst:.3g}"
        )
        assert worst <= 1e-6 and result["converged"]
        assert result["owners"] == ["site-1", "site-2", "site-3"]
        assert result["encoding"]["paillier_bits"] == 2048 and result["dp"] is None
        assert [it["round_id"] for it in result["iterations"]] == [
            f"{result['job_id']}-it{i}" for i in range(1, result["iterations_run"] + 1)
        ]
        client.close()

        # `leteo-fed result JOB` writes the document of the finished job, as the command would
        address = ["--aggregator", cluster.addresses["aggregator"], "--tls-dir", str(cluster.certs)]
        assert main(["result", result["job_id"], *address, "--out", str(tmp_path / "again")]) == 0
        again = json.loads((tmp_path / "again" / "result.json").read_text())
        assert again["coefficients"] == result["coefficients"] and again["converged"]

        base = ["logreg", "--aggregator", cluster.addresses["aggregator"]]
        base += ["--tls-dir", str(cluster.certs), "--features", ",".join(NAMES)]
        base += ["--label-column", "y", "--positive-class", "yes", "--min-owners", "3"]
        assert main([*base, "--out", str(tmp_path / "plain")]) == 0
        doc = json.loads((tmp_path / "plain" / "result.json").read_text())
        assert _max_difference(doc, ref) <= 1e-6
        assert list(doc["coefficients"]) == ["intercept", *NAMES]
        png = (tmp_path / "plain" / "coefficients.png").read_bytes()
        assert png.startswith(b"\x89PNG") and doc["plot"].endswith("coefficients.png")

        # DP: 4 iterations calibrated so the 4 together are epsilon 8 (Renyi); every owner
        # charged 4 times: the increments of the job's composition, adding up to its 8
        dp = ["--dp-epsilon", "8", "--row-norm-bound", "6", "--max-iterations", "4"]
        assert main([*base, *dp, "--rows", "6000", "--out", str(tmp_path / "dp")]) == 0
        doc = json.loads((tmp_path / "dp" / "result.json").read_text())
        assert doc["dp"]["epsilon"] == 8.0 and doc["iterations_run"] == 4
        assert set(doc["noise_std_errors"]) == {"intercept", *NAMES}
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            charged = [e["epsilon"] for e in ledger["spends"]]
            assert len(charged) == 4 and sum(charged) == pytest.approx(8.0, rel=1e-6)
            assert charged == sorted(charged, reverse=True)  # each round adds less
