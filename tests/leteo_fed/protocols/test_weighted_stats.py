"""Federated weighted mean/variance: the protocol math without a network, then through real
processes (CSP, aggregator, owners over mTLS, a 2048-bit key) and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from round_harness import statistic_share, statistic_totals

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import weighted_stats as ws
from leteo_fed.protocols.block_encoding import integer_sensitivity, statistic_encoding
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.statistic import n_values

RNG = np.random.default_rng(3)
STAT = ws.WeightedStats()


def _spec(d: int, weight_bound: float) -> ws.WeightedStatsSpec:
    return ws.WeightedStatsSpec(tuple(f"c{j}" for j in range(d)), "w", weight_bound)


def _encoding(spec, scale_bits=32, value_bound=1e6, max_rows_per_owner=2**31, **more):
    blocks = STAT.blocks(spec, value_bound)
    return statistic_encoding(
        blocks,
        scale_bits=scale_bits,
        value_bound=value_bound,
        max_rows_per_owner=max_rows_per_owner,
        **more,
    )


def _share(spec, x, w, enc) -> list[int]:
    return statistic_share(STAT, spec, x, {"w": w}, enc)


def _data(n: int, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    x = RNG.normal(loc=[1.0, -2.0, 5.0][:d], scale=[0.5, 2.0, 1.0][:d], size=(n, d))
    w = RNG.uniform(0.0, 3.0, size=n)
    return x, w


def _reference(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = np.average(x, axis=0, weights=w)
    var = np.average((x - mean) ** 2, axis=0, weights=w)
    return mean, var


def test_encode_sum_decode_equals_the_centralized_weighted_statistics():
    """Three sites' packed shares summed slot-wise (what the homomorphic sum does), offsets
    removed: the result equals NumPy's weighted mean and variance on pooled rows."""
    parts = [_data(n) for n in (40, 75, 13)]
    d = 3
    spec = _spec(d, 3.0)
    enc = _encoding(spec, value_bound=100.0, max_owners=3)
    layout = enc.layout(2048)
    packed = [pack(_share(spec, x, w, enc), layout) for x, w in parts]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    totals = slot_totals(unpack(summed, n_values(STAT.blocks(spec, 100.0)), layout), 3, layout)
    got = ws.statistics(statistic_totals(STAT, spec, totals, enc), d, 100.0, noisy=False)
    x = np.vstack([p[0] for p in parts])
    w = np.concatenate([p[1] for p in parts])
    mean, var = _reference(x, w)
    np.testing.assert_allclose(got["means"], mean, rtol=1e-9)
    np.testing.assert_allclose(got["variances"], var, rtol=1e-7)
    assert got["n_rows"] == len(x)
    assert math.isclose(got["total_weight"], w.sum(), rel_tol=1e-9)


def test_encoding_refuses_a_value_beyond_its_bound():
    spec = _spec(1, 1.0)
    enc = _encoding(spec, scale_bits=8, value_bound=2.0, max_rows_per_owner=4)
    x = np.full((4, 1), 2.0)
    _share(spec, x, np.ones(4), enc)  # the worst case fits exactly
    with pytest.raises(Exception, match="exceeds the declared bound"):
        _share(spec, np.full((4, 1), 3.0), np.ones(4), enc)


def test_sensitivity_bounds_every_add_remove_neighbour():
    """Brute force: the integer share with and without each row (rows clipped to C, weights in
    [0, W]) never differs by more than the stated L1 and L2 sensitivity."""
    c, wb, f, d = 2.0, 3.0, 16, 3
    spec = _spec(d, wb)
    enc = _encoding(spec, f, c, max_rows_per_owner=1000, count_scale_bits=f)
    sens = integer_sensitivity(STAT.blocks(spec, c), f, f)
    x = noise.clip_rows(RNG.normal(scale=2.0, size=(150, d)), c)
    x[0] = [c, 0, 0]  # a row on the clip sphere with the largest weight
    w = RNG.uniform(0, wb, size=150)
    w[0] = wb
    full = np.array(_share(spec, x, w, enc), dtype=object)
    worst_l1 = worst_l2 = 0.0
    for i in range(len(x)):
        part = _share(spec, np.delete(x, i, 0), np.delete(w, i), enc)
        diff = np.array([float(a - b) for a, b in zip(full, part, strict=True)])
        worst_l1 = max(worst_l1, np.abs(diff).sum())
        worst_l2 = max(worst_l2, float(np.linalg.norm(diff)))
    assert worst_l1 <= sens.l1 and worst_l2 <= sens.l2
    assert worst_l2 >= 0.5 * sens.l2  # the bound is not vacuous: the worst row comes close


def test_plan_refuses_bad_requests_and_an_under_noised_dp_spec():
    common = Common(n_invited=3)
    for request, field in (
        (ws.WeightedStatsRequest(), "features"),
        (ws.WeightedStatsRequest(features=("a", "a")), "features"),
        (ws.WeightedStatsRequest(features=("a",), weight_column="a"), "weight_column"),
        (ws.WeightedStatsRequest(features=("a",), weight_bound=-1.0), "weight_bound"),
    ):
        with pytest.raises(DataError) as err:
            ws.PROTOCOL.plan(request, common)
        assert err.value.field == field
    dp = DpRequest(1.0, 1e-6, 2.0)
    plan = ws.PROTOCOL.plan(
        ws.WeightedStatsRequest(features=("a", "b")), Common(n_invited=3, min_owners=3, dp=dp)
    )
    rnd = ws.PROTOCOL.next_round(plan, None, 1)

    class Site:
        is_local, uses_spark = True, False

    ws.PROTOCOL.check(rnd.spec, plan.encoding, plan.dp, Site())  # the honest spec passes
    weaker = type(plan.dp)(**{**plan.dp.__dict__, "mu": plan.dp.mu / 2})
    with pytest.raises(ProtocolError, match="more than the announced"):
        ws.PROTOCOL.check(rnd.spec, plan.encoding, weaker, Site())


# ------------------------------------------------------------------ through real processes


@pytest.mark.slow
def test_weighted_stats_through_the_services_and_the_cli(tmp_path):
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    names = ["a", "b", "c"]
    parts = []
    for i, n in enumerate((2000, 1500, 2500), start=1):
        x, w = _data(n)
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({**{k: x[:, j] for j, k in enumerate(names)}, "w": w}), path)
        parts.append((path, x, w))
    owners = [OwnerSpec(f"site-{i}", p) for i, (p, _, _) in enumerate(parts, start=1)]
    with LocalCluster(tmp_path / "run", owners, privacy_budget=(10.0, 1e-4)) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        request = ws.WeightedStatsRequest(
            features=tuple(names), weight_column="w", weight_bound=3.0
        )
        result = client.run(request, RoundOptions(min_owners=3)).to_dict()
        x = np.vstack([p[1] for p in parts])
        w = np.concatenate([p[2] for p in parts])
        mean, var = _reference(x, w)
        np.testing.assert_allclose([result["means"][k] for k in names], mean, rtol=1e-9)
        np.testing.assert_allclose([result["variances"][k] for k in names], var, rtol=1e-7)
        assert result["n_rows"] == len(x) and result["owners"] == ["site-1", "site-2", "site-3"]
        assert result["encoding"]["paillier_bits"] == 2048 and result["dp"] is None

        # the CLI, DP: a round the noise would bury (at the policy's fewest rows, 30, the
        # total weight's noise exceeds it) is refused before anyone is invited: no charge
        dp_stats = [
            "stats",
            "--aggregator",
            cluster.addresses["aggregator"],
            "--tls-dir",
            str(cluster.certs),
            "--features",
            ",".join(names),
            "--min-owners",
            "3",
            "--dp-epsilon",
            "8",
            "--row-norm-bound",
            "10",
            "--out",
            str(tmp_path / "refused"),
        ]
        assert main(dp_stats) == 2
        assert not (tmp_path / "refused").exists()
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            assert not path.exists() or json.loads(path.read_text())["spends"] == []

        # with the analyst's row estimate it passes: every owner's ledger is charged once
        code = main(
            [
                "stats",
                "--rows",
                "6000",
                "--aggregator",
                cluster.addresses["aggregator"],
                "--tls-dir",
                str(cluster.certs),
                "--features",
                ",".join(names),
                "--weight-column",
                "w",
                "--weight-bound",
                "3",
                "--min-owners",
                "3",
                "--dp-epsilon",
                "8",
                "--row-norm-bound",
                "10",
                "--out",
                str(tmp_path),  # a folder, as for every command
            ]
        )
        assert code == 0
        doc = json.loads((tmp_path / "stats.json").read_text())
        assert doc["dp"]["epsilon"] == 8.0 and doc["dp"]["row_norm_bound"] == 10.0
        # the released total weight carries Skellam noise of the announced standard deviation
        # (near-Gaussian at this mu): within 6 of them of the truth
        sigma = doc["dp"]["noise_std_per_value"]
        assert sigma > 0 and abs(doc["total_weight"] - w.sum()) <= 6 * sigma
        assert all(-10 <= doc["means"][k] <= 10 for k in names)  # projected onto [-C, C]
        for i in range(1, 4):
            path = cluster.workdir / "config" / "ledgers" / f"site-{i}.json"
            ledger = json.loads(path.read_text())
            assert [e["epsilon"] for e in ledger["spends"]] == [8.0]
        client.close()
