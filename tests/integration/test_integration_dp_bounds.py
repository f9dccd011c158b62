"""DP releases in natural units through real processes: three sites hold held-out UCI Adult
rows as they are (age in years, hours per week); the analyst signs public bounds per column;
owners clip and scale, count their clipped rows in the same noisy share; the result comes back
in natural units with each figure's noise and the warnings, and the Python API warns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from integration_helpers import write_parts

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.privacy.noise_gate import NoiseWarning
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.pca import reference_pca

pytestmark = pytest.mark.slow

COLUMNS = ["age", "education-num", "hours-per-week"]
BOUNDS = {"age": (17, 90), "education-num": (1, 16), "hours-per-week": (1, 99)}


@pytest.fixture(scope="module")
def adult_cluster(tmp_path_factory):
    data = read_adult(locate_wheel())
    x = np.column_stack([data[c].astype(float) for c in COLUMNS])
    x = x[np.random.default_rng(0).permutation(len(x))[:15060]]
    work = tmp_path_factory.mktemp("dp-bounds")
    parts = write_parts(x, COLUMNS, 3, work / "data")
    owners = [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    with LocalCluster(work / "run", owners, privacy_budget=(20.0, 1e-4)) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            yield client, x


def test_dp_pca_in_natural_units_is_within_a_quarter_of_pooled(adult_cluster):
    client, x = adult_cluster
    result = client.run(
        MomentsRequest(features=tuple(COLUMNS), components=3),
        RoundOptions(min_owners=3, dp_epsilon=1.0, bounds=BOUNDS),
    )
    pooled, _, mean = reference_pca(x, 3)
    got = np.array(result.eigenvalues)
    # the done-when of issue 28: every eigenvalue within 25% of pooled at epsilon 1
    assert np.all(np.abs(got - pooled) <= 0.25 * pooled), (got, pooled)
    dp = result.dp
    assert [b.column for b in dp.bounds] == COLUMNS
    # a figure's stated noise is the release's own: 0 < noise, and the released mean lies
    # within 5 stated noise std of the pooled mean (a z-test at 5 sigma)
    for j, c in enumerate(COLUMNS):
        e = dp.figure_noise_std[f"mean of {c}"]
        assert e > 0 and abs(result.mean[j] - mean[j]) <= 5 * e, (c, result.mean[j], mean[j], e)
    # Adult's values lie within these bounds: the noisy clipped count is noise around 0
    # (its std is the noise per value, about 19 rows at this epsilon; 6 std)
    assert abs(dp.clipped_rows) < 120


def test_dp_linreg_coefficients_within_two_stated_errors_and_narrow_bounds_warn(adult_cluster):
    client, x = adult_cluster
    request = LinregRequest(features=("age", "education-num"), label_column="hours-per-week")
    result = client.run(request, RoundOptions(min_owners=3, dp_epsilon=1.0, bounds=BOUNDS))
    design = np.column_stack([np.ones(len(x)), x[:, :2]])
    beta = np.linalg.lstsq(design, x[:, 2], rcond=None)[0]
    for term, b in zip(result.terms, beta, strict=True):
        e = result.noise_std_errors[term]
        # the owners' noise is not seeded here: 4 stated std (P(|z| > 4) ~ 6e-5 per term);
        # that 95% of releases fall within 2 is measured over seeded repeats in
        # tests/leteo_fed/protocols/test_dp_release_preview.py
        assert abs(result.coefficients[term] - b) <= 4 * e, (term, result.coefficients, beta)
    # bounds far narrower than the data: heavy clipping is said, as a NoiseWarning
    narrow = dict(BOUNDS, age=(17, 30))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clipped = client.run(request, RoundOptions(min_owners=3, dp_epsilon=1.0, bounds=narrow))
    messages = [str(w.message) for w in caught if issubclass(w.category, NoiseWarning)]
    assert any("clipped" in m and "widen the public bounds" in m for m in messages), messages
    share = float(np.mean(x[:, 0] > 30))
    assert abs(clipped.dp.clipped_rows / len(x) - share) < 0.02


def test_dp_kmeans_in_natural_units_states_its_centers_noise(adult_cluster):
    """A 10-iteration DP k-means job on the public bounds: centers come back in natural units,
    within 5 stated noise std of the same job's centers without noise (the protocol's own code
    in process on the pooled rows), every cluster size stated with its noise."""
    from leteo_fed.protocols import registry
    from leteo_fed.protocols.dp_release import ArraySite
    from leteo_fed.protocols.kmeans_round import KmeansRequest
    from leteo_fed.protocols.release_preview import NoNoise, run_in_process
    from leteo_fed.protocols.requests import Common, DpRequest

    client, x = adult_cluster
    init = (25.0, 9.0, 40.0, 45.0, 13.0, 45.0, 60.0, 10.0, 30.0)
    request = KmeansRequest(k=3, centers=init, iterations=10, features=tuple(COLUMNS))
    result = client.run(request, RoundOptions(min_owners=3, dp_epsilon=1.0, bounds=BOUNDS))
    protocol = registry.for_request(request)
    plan = protocol.plan(
        request,
        Common(
            n_invited=3,
            min_owners=3,
            dp=DpRequest(1.0, 1e-6, 0.0, tuple(_bounds(c) for c in COLUMNS)),
        ),
    )
    sites = [ArraySite({c: p[:, j] for j, c in enumerate(COLUMNS)}) for p in np.array_split(x, 3)]
    noise_free = np.array(run_in_process(protocol, plan, sites, NoNoise()).centers)
    got = np.array(result.centers)
    noise = result.dp.figure_noise_std
    for j in range(3):
        for i, c in enumerate(COLUMNS):
            assert abs(got[j, i] - noise_free[j, i]) <= 5 * noise[f"center {j} {c}"], (j, c)
        assert noise[f"rows in cluster {j}"] > 0
    assert [b.column for b in result.dp.bounds] == COLUMNS


def _bounds(column: str):
    from leteo_fed.privacy.bounds import ColumnBounds

    lo, hi = BOUNDS[column]
    return ColumnBounds(column, lo, hi)
