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
