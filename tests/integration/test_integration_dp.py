"""DP releases through real processes: owners clip, add Skellam noise before
encryption and charge their persistent ledgers; the released aggregate carries exactly the
announced noise; a request beyond the budget is refused and spends nothing."""

from __future__ import annotations

import json
import math

import grpc
import numpy as np
import pytest
from integration_helpers import write_parts
from sklearn.datasets import load_wine

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions, RpcRefused
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import moments, pca
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest

pytestmark = pytest.mark.slow

EPSILON, BUDGET = 2.0, 5.0


@pytest.fixture(scope="module")
def dp_cluster(tmp_path_factory):
    bunch = load_wine()
    x = bunch.data / bunch.data.max(axis=0)  # public per-feature bounds: values in [0, 1]
    names = [f"f{i}" for i in range(x.shape[1])]
    work = tmp_path_factory.mktemp("dp")
    parts = write_parts(np.column_stack([x, bunch.target]), [*names, "cultivar"], 3, work / "data")
    owners = [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    cluster = LocalCluster(work / "run", owners, csp_transcript=True, privacy_budget=(BUDGET, 1e-4))
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield cluster, client, parts, names


def _ledger(cluster, site):
    return json.loads((cluster.workdir / "config" / "ledgers" / f"{site}.json").read_text())


def test_released_aggregate_carries_the_announced_noise(dp_cluster):
    cluster, client, parts, names = dp_cluster
    c = math.sqrt(len(names))
    result = client.run(
        MomentsRequest(features=tuple(names), components=2),
        RoundOptions(min_owners=3, dp_epsilon=EPSILON, row_norm_bound=c),
    ).to_dict()
    dp = result["dp"]
    assert dp["epsilon"] == EPSILON and dp["row_norm_bound"] == c

    # exact totals of the clipped data, encoded like the owners do (counts scaled like sums)
    f = result["encoding"]["scale_bits"]
    exact = None
    for path in parts:
        mom = pca.as_moments(
            pca.local_statistics(noise.clip_rows(read_matrix(str(path), names), c))
        )
        vals = moments.encode_moments(mom, f, 2**200, 2**31, count_scale_bits=f)
        exact = vals if exact is None else [a + b for a, b in zip(exact, vals, strict=True)]
    record = [
        json.loads(line)
        for line in (cluster.workdir / "aggregator-transcript.jsonl").read_text().splitlines()
    ]
    released = [
        int(v)
        for v in next(r for r in record if r["round_id"] == result["round_id"])["aggregate_totals"]
    ]
    z = np.array(released, dtype=float) - np.array(exact, dtype=float)
    sigma = math.sqrt(2 * dp["skellam_mu_aggregate"])  # Skellam(mu): variance 2 mu
    n = len(z)
    # mean: 4 standard errors; std: the sample std of n draws has relative s.e. ~ 1/sqrt(2n)
    # (~7% for n = 105), so 25% is about 3.6 standard errors.
    assert abs(z.mean()) < 4 * sigma / math.sqrt(n)
    assert abs(z.std() / sigma - 1) < 0.25, (z.std(), sigma)
    assert np.all(z != 0)  # every value got noise

    for site in ("site-1", "site-2", "site-3"):
        spends = _ledger(cluster, site)["spends"]
        mine = [s for s in spends if s["round_id"] == result["round_id"]]
        assert len(mine) == 1 and mine[0]["state"] == "committed" and mine[0]["epsilon"] == EPSILON


def test_dp_discriminant_at_small_epsilon_stays_definite(dp_cluster):
    """The noise-sized ridge floor keeps the noisy DCA problem definite (it used to fail after
    the owners had already spent their budget)."""
    cluster, client, _, names = dp_cluster
    result = client.run(
        MomentsRequest(
            features=tuple(names),
            method="dca",
            groupings=tuple(LabelClasses(c, tuple(k)) for c, k in (("cultivar", ("0", "1", "2")),)),
        ),
        RoundOptions(min_owners=3, dp_epsilon=0.25, row_norm_bound=math.sqrt(len(names))),
    ).to_dict()
    assert len(result["components"]) == 2 and np.all(np.isfinite(result["eigenvalues"]))
    sigma = result["dp"]["noise_std_per_value"]
    assert result["ridge"]["rho"] >= 3 * math.sqrt(len(names)) * sigma * (1 - 1e-9)


def test_over_budget_request_is_refused_and_spends_nothing(dp_cluster):
    cluster, client, _, names = dp_cluster
    before = {s: _ledger(cluster, s) for s in ("site-1", "site-2", "site-3")}
    # the ledgers compose by RDP at delta_total: a release of epsilon = BUDGET (at delta 1e-5)
    # after the earlier ones may still fit; one of twice the budget cannot, alone
    with pytest.raises(RoundFailed) as err:
        client.run(
            MomentsRequest(features=tuple(names)),
            RoundOptions(min_owners=3, dp_epsilon=2 * BUDGET, row_norm_bound=3.0),
        ).to_dict()
    assert "budget: this site's privacy budget does not cover the round" in str(err.value)
    after = {s: _ledger(cluster, s) for s in ("site-1", "site-2", "site-3")}
    assert after == before


def test_dp_requests_need_their_parameters(dp_cluster):
    _, client, _, names = dp_cluster
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple(names)), RoundOptions(dp_epsilon=1.0))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "row_norm_bound" in str(err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(
            MomentsRequest(features=tuple(names)), RoundOptions(dp_epsilon=-1.0, row_norm_bound=1.0)
        )
    assert "dp_epsilon" in str(err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple(names)), RoundOptions(row_norm_bound=1.0))
    assert "dp_epsilon" in str(err.value)
