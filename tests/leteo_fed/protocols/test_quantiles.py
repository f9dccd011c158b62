"""The quantiles protocol: percentiles over public bounds from a dyadic-tree histogram.

Without DP every reported percentile is within one bin width of `numpy.percentile` (its default
'linear' rule) on the pooled rows; with DP the tree is made consistent by least squares (checked
against `numpy.linalg.lstsq` on the tree's design matrix), the sensitivity is checked by brute
force, and the measured noise of the count below each percentile stays under the stated rank
error. The last test runs the command through real processes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import DataError, LeteoError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import histogram_tree as tree
from leteo_fed.protocols import quantiles as qt
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.transport.codec import to_dict
from leteo_fed.transport.rounds import result_from_proto, result_to_proto

PERCENTILES = (0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 100.0)


class Table:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def matrix(self, columns) -> np.ndarray:
        return np.column_stack([np.asarray(self.data[c], dtype=np.float64) for c in columns])

    def labels(self, column: str) -> list[str]:
        return [str(v) for v in self.data[column]]


@dataclasses.dataclass
class Site:
    data: dict[str, Any]
    is_local: bool = True
    uses_spark: bool = False

    def read(self, columns) -> Table:
        return Table(self.data)

    def without_row(self, i: int) -> Site:
        return Site({k: np.delete(np.asarray(v), i, 0) for k, v in self.data.items()})


def _parts(sizes=(300, 200, 250), seed: int = 3) -> list[dict[str, np.ndarray]]:
    """Three sites: `a` skewed with a gap (nothing in [20, 60)), `b` whole numbers (edges hit)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        a = np.where(rng.random(n) < 0.7, rng.exponential(5.0, n), rng.uniform(60, 100, n))
        a = np.where((a >= 20) & (a < 60), 19.5, a)
        out.append({"a": np.clip(a, 0, 100), "b": np.round(rng.uniform(0, 100, n))})
    return out


def _pooled(parts, name: str) -> np.ndarray:
    return np.concatenate([p[name] for p in parts])


def run_round(request: qt.QuantilesRequest, sites: list[Site], dp: DpRequest | None = None) -> dict:
    """The engine's loop without a network: plan, owner checks, shares (noised as owners do),
    the slot-wise sum, finish; the result as the analyst receives it."""
    protocol = qt.PROTOCOL
    plan = protocol.plan(request, Common(n_invited=len(sites), min_owners=len(sites), dp=dp))
    rnd = protocol.next_round(plan, None, 1)
    enc = rnd.share_encoding
    shares = []
    for s in sites:
        protocol.check(rnd.spec, enc, rnd.dp, s)
        values = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
        assert len(values) == rnd.n_values
        shares.append(add_owner_noise(values, rnd.dp) if rnd.dp is not None else values)
    layout = enc.layout(2048)
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {})
    outcome.totals = slot_totals(unpack(summed, rnd.n_values, layout), len(sites), layout)
    outcome.encoding = encoding_facts(enc, layout, rnd.n_values, 2048)
    result = protocol.finish_round(plan, None, outcome).result
    return to_dict(result_from_proto(result_to_proto(result)))


@pytest.mark.parametrize("bins", [2, 16, 64, 1024])
def test_without_dp_every_percentile_is_within_one_bin_of_numpy(bins):
    parts = _parts()
    request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, bins)
    result = run_round(request, [Site(p) for p in parts])
    width = 100.0 / bins
    assert result["bin_width"] == width and result["dp"] is None
    for name in ("a", "b"):
        x = _pooled(parts, name)
        ref = np.percentile(x, PERCENTILES)  # method="linear"
        got = np.array(result["quantiles"][name])
        assert np.all(np.abs(got - ref) <= width), (name, got - ref)
        assert (
            result["histogram"][name]
            == np.bincount(tree.leaf_index(x, 0.0, 100.0, bins), minlength=bins).tolist()
        )
        assert result["n"][name] == len(x) and result["rank_error"][name] == [0.0] * 9


def test_one_bin_width_holds_for_any_data_small_or_tied():
    rng = np.random.default_rng(9)
    for trial in range(200):
        n = int(rng.integers(1, 40))
        x = rng.choice(rng.uniform(-3, 5, 6), n) if trial % 2 else rng.uniform(-3, 5, n)
        c = np.bincount(tree.leaf_index(x, -3.0, 5.0, 8), minlength=8)
        got = tree.percentiles_from_histogram(c, PERCENTILES, -3.0, 5.0)
        assert np.all(np.abs(got - np.percentile(x, PERCENTILES)) <= 1.0 + 1e-12)


def test_bins_are_left_closed_and_the_upper_bound_is_in_the_last():
    x = np.array([0.0, 24.999, 25.0, 50.0, 99.99, 100.0])
    assert tree.leaf_index(x, 0.0, 100.0, 4).tolist() == [0, 0, 1, 2, 3, 3]


def _tree_matrix(bins: int) -> np.ndarray:
    rows = []
    for level in range(tree.levels(bins) + 1):
        size = bins >> level
        for i in range(2**level):
            r = np.zeros(bins)
            r[i * size : (i + 1) * size] = 1
            rows.append(r)
    return np.array(rows)


@pytest.mark.parametrize("bins", [2, 4, 32])
def test_the_consistent_tree_is_the_least_squares_one(bins):
    a = _tree_matrix(bins)
    rng = np.random.default_rng(bins)
    leaves = rng.integers(0, 20, bins)
    assert tree.tree_counts(leaves).tolist() == (a @ leaves).tolist()
    y = a @ leaves + rng.normal(0, 4, len(a))
    fit, *_ = np.linalg.lstsq(a, y, rcond=None)
    np.testing.assert_allclose(tree.consistent_tree(y), a @ fit, atol=1e-9)
    x = tree.nonnegative_leaves(tree.consistent_tree(y), bins)
    assert x.min() >= 0 and x.sum() == pytest.approx(max(tree.consistent_tree(y)[0], 0))


def test_outside_values_refuse_a_non_dp_round_and_are_clamped_in_a_dp_round():
    parts = _parts()
    parts[1]["a"][0] = 250.0
    parts[2]["b"][3] = -1.0
    request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, 16)
    with pytest.raises(DataError) as err:
        run_round(request, [Site(p) for p in parts])
    assert err.value.rule == "values" and err.value.field == "a"
    result = run_round(request, [Site(p) for p in parts], DpRequest(8.0, 1e-6, 1.0))
    assert result["outside"].startswith("clamped") and result["histogram"]["a"][-1] > 0
    parts[0]["b"] = parts[0]["b"].astype(np.float64)
    parts[0]["b"][0] = np.nan
    for dp in (None, DpRequest(8.0, 1e-6, 1.0)):
        with pytest.raises(DataError) as err:
            run_round(request, [Site(p) for p in parts], dp)
        assert err.value.rule == "values" and err.value.field == "b"


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        (qt.QuantilesRequest(("a",), 0.0, 1.0, (50.0,), 3), "power of two"),
        (qt.QuantilesRequest(("a",), 0.0, 1.0, (50.0,), 8192), "power of two"),
        (qt.QuantilesRequest(("a",), 1.0, 1.0, (50.0,), 8), "lower < upper"),
        (qt.QuantilesRequest(("a",), 0.0, math.inf, (50.0,), 8), "finite"),
        (qt.QuantilesRequest(("a",), 0.0, 1.0, (101.0,), 8), "percentiles"),
        (qt.QuantilesRequest((), 0.0, 1.0, (50.0,), 8), "features"),
        (qt.QuantilesRequest(("a",) * 2, 0.0, 1.0, (50.0,), 8), "duplicates"),
    ],
)
def test_plan_refuses_bad_parameters_by_name(request_, match):
    with pytest.raises(DataError, match=match):
        qt.PROTOCOL.plan(request_, Common(n_invited=3))


def test_defaults_bins_and_percentiles():
    plan = qt.PROTOCOL.plan(qt.QuantilesRequest(("a",), 0.0, 1.0), Common(n_invited=3))
    assert plan.spec.bins == qt.DEFAULT_BINS and plan.settings == qt.DEFAULT_PERCENTILES
    assert qt.PROTOCOL.next_round(plan, None, 1).n_values == 64
    dp_plan = qt.PROTOCOL.plan(
        qt.QuantilesRequest(("a", "b"), 0.0, 1.0), Common(n_invited=3, dp=DpRequest(1, 1e-6, 1))
    )
    assert qt.PROTOCOL.next_round(dp_plan, None, 1).n_values == 2 * 127
    assert dp_plan.dp is not None
    assert dp_plan.dp.row_norm_bound == 1.0


def test_the_owner_refuses_an_under_noised_or_forged_spec():
    request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, 16)
    plan = qt.PROTOCOL.plan(request, Common(n_invited=3, dp=DpRequest(1.0, 1e-6, 1.0)))
    rnd = qt.PROTOCOL.next_round(plan, None, 1)
    site = Site(_parts()[0])
    qt.PROTOCOL.check(rnd.spec, rnd.encoding, rnd.dp, site)
    with pytest.raises(ProtocolError, match="more than the announced"):
        qt.PROTOCOL.check(
            rnd.spec, rnd.encoding, dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2), site
        )
    # more bins (more nodes per row) under the same noise: the sensitivity grows, refused
    with pytest.raises(ProtocolError, match="more than the announced"):
        qt.PROTOCOL.check(dataclasses.replace(rnd.spec, bins=256), rnd.encoding, rnd.dp, site)
    with pytest.raises(LeteoError):
        qt.PROTOCOL.check(dataclasses.replace(rnd.spec, bins=12), rnd.encoding, rnd.dp, site)


@pytest.mark.parametrize(("features", "bins"), [(("a",), 8), (("a", "b"), 32)])
def test_sensitivity_by_brute_force(features, bins):
    """Every row of a site removed in turn: the integer share changes by exactly d (h + 1)
    counts of F, in d (h + 1) coordinates (the stated L1 and L2 are attained)."""
    request = qt.QuantilesRequest(features, 0.0, 100.0, (50.0,), bins)
    common = Common(n_invited=3, min_owners=3, scale_bits=8, dp=DpRequest(1.0, 1e-6, 1.0))
    plan = qt.PROTOCOL.plan(request, common)
    rnd = qt.PROTOCOL.next_round(plan, None, 1)
    enc = rnd.share_encoding
    site = Site({k: v[:60] for k, v in _parts()[0].items()})
    site.data["a"][0] = 500.0  # clamped: still one node per level
    full = np.array(qt.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site, {}), dtype=np.float64)
    l1 = l2 = 0.0
    for i in range(60):
        part = qt.PROTOCOL.share_values(rnd.spec, enc, rnd.dp, site.without_row(i), {})
        diff = full - np.array(part, dtype=np.float64)
        l1, l2 = max(l1, float(np.abs(diff).sum())), max(l2, float(np.linalg.norm(diff)))
    touched = len(features) * (tree.levels(bins) + 1)
    # L1 = d (h + 1) F, L2 = sqrt(d (h + 1)) F at F = 2^8
    assert plan.sensitivity == noise.Sensitivity(l1=touched * 256.0, l2=math.sqrt(touched) * 256.0)
    assert l1 == plan.sensitivity.l1 == touched * 256
    assert l2 == pytest.approx(plan.sensitivity.l2) and l2 == pytest.approx(
        math.sqrt(touched) * 256
    )


REPEATS = 300


def _cdf(leaves: np.ndarray, at: np.ndarray, width: float) -> np.ndarray:
    """The histogram's count below each value (uniform inside a bin), bounds at 0."""
    cum = np.concatenate([[0.0], np.cumsum(leaves)])
    j = np.minimum((at / width).astype(int), len(leaves) - 1)
    return cum[j] + (at / width - j) * leaves[j]


def test_the_measured_rank_error_stays_under_the_stated_one():
    """Repeated DP releases (owners' own Skellam sampler): at each exact percentile, the
    released histogram's count below it minus the true histogram's; the std of that error over
    the releases is at most the stated rank_error (the consistency only lowers it) and of the
    order of the noise of one node. The reported quantile's true rank is within 4 stated
    errors plus a bin of the target."""
    parts = _parts((2000, 1500, 1800), seed=4)
    x = _pooled(parts, "b")
    bins, width = 64, 100.0 / 64
    ps = np.array(PERCENTILES[2:-1])
    request = qt.QuantilesRequest(("b",), 0.0, 100.0, tuple(ps), bins)
    sites = [Site(p) for p in parts]
    true_leaves = np.bincount(tree.leaf_index(x, 0.0, 100.0, bins), minlength=bins)
    exact = np.percentile(x, ps)
    errs, rank_off = [], []
    for _ in range(REPEATS):
        result = run_round(request, sites, DpRequest(0.5, 1e-6, 1.0))
        leaves = np.array(result["histogram"]["b"])
        errs.append(_cdf(leaves, exact, width) - _cdf(true_leaves, exact, width))
        q = np.array(result["quantiles"]["b"])
        rank_off.append(np.searchsorted(np.sort(x), q) - ps / 100 * len(x))
    measured = np.std(np.array(errs), axis=0)
    stated = np.array(result["rank_error"]["b"])
    sigma = result["dp"]["noise_std_per_value"]
    assert 1 < sigma < 50
    bound = sigma * np.sqrt([int(v).bit_count() + 1 for v in tree.leaf_index(exact, 0, 100, bins)])
    assert np.all(stated >= sigma)  # sigma sqrt(popcount(j) + 1) at the released quantile's leaf
    assert np.all(measured <= 1.1 * bound), (measured, bound)
    assert np.all(measured >= 0.3 * sigma), (measured, sigma)
    assert np.all(np.abs(np.array(rank_off)) <= 4 * stated.max() + 1.5 * len(x) / bins)
    assert np.all(stated <= sigma * math.sqrt(tree.levels(bins) + 1) + 1e-12)
    print(f"sigma {sigma:.4g}; measured {np.round(measured, 2)}; stated {np.round(bound, 2)}")


def test_the_noise_preview_states_the_worst_rank_error():
    request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, 256)
    plan = qt.PROTOCOL.plan(request, Common(n_invited=3, dp=DpRequest(1.0, 1e-6, 1.0)))
    doc = qt.noise_preview(plan, 10_000)
    assert doc["tree_levels"] == 9 and doc["bin_width"] == 100 / 256
    assert doc["rank_error_at_most"] == pytest.approx(doc["noise_std_per_node"] * 3)
    assert [c["statistic"] for c in doc["signal_checks"]] == [
        "the count below each percentile",
        "each leaf count",
    ]
    with pytest.raises(DataError):
        qt.noise_preview(qt.PROTOCOL.plan(request, Common(n_invited=3)))


# ------------------------------------------------------------------ the command


def test_dry_run_prints_the_rank_error_and_contacts_nobody(capsys):
    from leteo_fed.cli.main import main

    argv = ["quantiles", "--features", "a,b", "--bounds", "0,100", "--bins", "128"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    assert main([*argv, "--dp-epsilon", "1", "--dry-run", "--rows", "5000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["bins"] == 128 and doc["quorum"] == 3 and doc["row_norm_bound"] == 1.0
    assert not doc["noise_check"]["refused_without_accept_noise"]
    assert "the count below a percentile at most" in err
    assert main([*argv, "--dry-run"]) == 2
    assert main([*argv[:6], "100", *argv[7:], "--no-plot"]) == 2  # not a power of two
    assert "power of two" in capsys.readouterr().err


def test_a_buried_dp_release_is_refused_before_contacting_anyone(capsys, monkeypatch):
    from leteo_fed.cli import statistics as cli
    from leteo_fed.cli.main import main

    class Contacted(Exception):
        pass

    def client(args):
        raise Contacted

    monkeypatch.setattr(cli, "analyst_client", client)
    argv = ["quantiles", "--features", "a", "--bounds", "0,1", "--bins", "4096"]
    argv += ["--dp-epsilon", "0.05", "--aggregator", "127.0.0.1:1", "--insecure", "--no-plot"]
    assert main(argv) == 2
    assert "refused before any budget is spent" in capsys.readouterr().err
    with pytest.raises(Contacted):
        main([*argv, "--accept-noise"])
    with pytest.raises(Contacted):
        main([*argv, "--rows", "10000000"])


def test_the_plot_is_a_png(tmp_path):
    from leteo_fed.cli.plots import plot_quantiles

    request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, 32)
    for dp in (None, DpRequest(1.0, 1e-6, 1.0)):
        result = run_round(request, [Site(p) for p in _parts()], dp)
        path = tmp_path / f"plot-{dp is not None}.png"
        plot_quantiles(result, path)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ through real processes


@pytest.mark.slow
def test_quantiles_through_the_services_and_the_cli(tmp_path):
    """3 owners, mTLS, a 2048-bit key: non-DP within one bin width of numpy.percentile on the
    pooled rows; a value outside the bounds refused (rule values); a DP release charged once to
    every owner's ledger, its ranks within the stated error."""
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    parts = _parts((900, 700, 800))
    paths = []
    for i, p in enumerate(parts, start=1):
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({k: list(v) for k, v in p.items()}), path)
        paths.append(path)
    owners = [OwnerSpec(f"site-{i}", p) for i, p in enumerate(paths, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        request = qt.QuantilesRequest(("a", "b"), 0.0, 100.0, PERCENTILES, 128)
        result = client.run(request, RoundOptions(min_owners=3)).to_dict()
        assert result["owners"] == ["site-1", "site-2", "site-3"] and result["dp"] is None
        assert result["encoding"]["paillier_bits"] == 2048
        for name in ("a", "b"):
            ref = np.percentile(_pooled(parts, name), PERCENTILES)
            assert np.all(np.abs(np.array(result["quantiles"][name]) - ref) <= 100 / 128)

        narrow = qt.QuantilesRequest(("a",), 0.0, 50.0, (50.0,), 8)
        with pytest.raises(RoundFailed, match="values"):
            client.run(narrow, RoundOptions(min_owners=3, deadline_seconds=30)).to_dict()

        base = ["quantiles", "--aggregator", cluster.addresses["aggregator"]]
        base += ["--tls-dir", str(cluster.certs), "--min-owners", "3"]
        base += ["--features", "a,b", "--bounds", "0,100", "--percentiles", "10,25,50,75,90"]
        out = tmp_path / "plain"
        assert main([*base, "--bins", "64", "--out", str(out)]) == 0
        doc = json.loads((out / "result.json").read_text())
        ref = np.percentile(_pooled(parts, "b"), [10, 25, 50, 75, 90])
        assert np.all(np.abs(np.array(doc["quantiles"]["b"]) - ref) <= 100 / 64)
        assert (out / "quantiles.png").read_bytes()[:4] == b"\x89PNG"

        out = tmp_path / "dp"
        argv = [*base, "--bins", "32", "--dp-epsilon", "2", "--rows", "2400", "--out", str(out)]
        assert main([*argv, "--no-plot"]) == 0
        doc = json.loads((out / "result.json").read_text())
        sigma = doc["dp"]["noise_std_per_value"]
        assert doc["dp"]["epsilon"] == 2.0 and 0 < sigma < 10
        assert doc["dp"]["sensitivity_l1"] == 2 * 6 * 2**16
        for name in ("a", "b"):
            x = np.sort(_pooled(parts, name))
            target = np.array([10, 25, 50, 75, 90]) / 100 * len(x)
            rank = np.searchsorted(x, doc["quantiles"][name])
            slack = 6 * max(doc["rank_error"][name]) + len(x) / 32 * 2
            assert np.all(np.abs(rank - target) <= slack), (name, rank, target)
        assert not (out / "quantiles.png").exists()
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            assert [e["epsilon"] for e in ledger["spends"]] == [2.0]
        client.close()
