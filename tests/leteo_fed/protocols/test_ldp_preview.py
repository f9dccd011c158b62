"""`leteo-fed ldp collect --dry-run`: the preview's standard errors are the errors a collection
has.

Repeated collections through the mechanisms' own code (the owner's perturbation, the
aggregator's support counts and unbiased estimator). Over 300 repetitions the standard deviation
of each estimate must match the preview within 20% (300 draws: a relative standard error of
about 4%). Frequency oracles: with the true shares as the analyst's hint the preview is the
exact variance; without, each value's worst share (an upper bound). Numeric mechanisms: the preview states the worst case, so
the data sits where each mechanism's report variance is largest (t^2 = 0 or 1). Seeded.
"""

from __future__ import annotations

import numpy as np
import pytest

from leteo_fed.ldp import numeric
from leteo_fed.protocols.ldp_collection import (
    LdpRequest,
    mechanism_for,
    spec_from_request,
)
from leteo_fed.protocols.ldp_noise import Expectation, noise_preview

REPEATS = 300
ROWS = 2000
DOMAIN = tuple(f"v{i}" for i in range(20))


@pytest.mark.parametrize("mechanism", ["grr", "oue", "olh"])
def test_frequency_errors_match_the_preview(mechanism):
    spec = spec_from_request(
        LdpRequest(column="c", mechanism=mechanism, epsilon=1.0, domain=DOMAIN)
    )
    oracle = mechanism_for(spec)
    rng = np.random.default_rng(41)
    codes = rng.integers(0, len(DOMAIN), size=ROWS)
    truth = np.bincount(codes, minlength=len(DOMAIN)) / ROWS
    errors = []
    for _ in range(REPEATS):
        est = oracle.estimate(oracle.support(oracle.perturb(codes, rng)), ROWS)
        errors.append(est.frequencies - truth)
    measured = np.sqrt(np.mean(np.square(np.array(errors))))  # pooled over the 20 values
    shares = dict(zip(DOMAIN, truth.tolist(), strict=True))
    figures = noise_preview(spec, ROWS, expect=Expectation(frequencies=shares))["figures"]
    predicted = np.sqrt(np.mean(np.square([f["expected_std"] for f in figures])))
    assert measured == pytest.approx(predicted, rel=0.2)
    # without the shares the preview takes each value's worst share: never below the truth
    assert measured <= 1.2 * noise_preview(spec, ROWS)["frequency_std_error"]


@pytest.mark.parametrize("mechanism", ["laplace", "duchi", "pm", "hm"])
def test_mean_errors_match_the_preview(mechanism):
    lo, hi = 0.0, 10.0
    spec = spec_from_request(
        LdpRequest(column="c", mechanism=mechanism, epsilon=1.0, lower=lo, upper=hi)
    )
    mech = mechanism_for(spec)
    worst_t = 1.0 if mech.report_variance(1.0) >= mech.report_variance(0.0) else 0.0
    t = np.full(ROWS, worst_t)
    rng = np.random.default_rng(43)
    means = [numeric.from_unit(float(mech.perturb(t, rng).mean()), lo, hi) for _ in range(REPEATS)]
    measured = float(np.std(means))
    predicted = noise_preview(spec, ROWS)["mean_std_error"]
    assert measured == pytest.approx(predicted, rel=0.2)


@pytest.mark.parametrize(
    ("columns", "box_fit"),
    [(("x", "y"), "remap"), (("x", "y", "z"), "remap"), (("x", "y"), "resample")],
)
def test_geo_mean_errors_match_the_preview(columns, box_fit):
    """Geo: the mean location's error about the pooled true mean is the noise alone, variance
    (m + 1) / (e^2 n) per coordinate (`geo_noise_variance`; resample draws at e / 2). The points
    sit well inside the box (40 units from every face, the noise radius averages m / e <= 12),
    so fitting into the box changes the spread by far less than the 20% tolerance. The owner's
    perturbation and the aggregator's estimate run as in a round (`perturb_chunks`, `result`);
    RMS over REPEATS collections and every coordinate (relative s.e. about 3%)."""
    from leteo_fed.protocols.ldp_collection import encode_column, new_accumulator, perturb_chunks

    m = len(columns)
    spec = spec_from_request(
        LdpRequest(
            column=columns[0],
            columns=columns,
            mechanism="geo",
            epsilon=0.5,
            box_lower=(0.0,) * m,
            box_upper=(100.0,) * m,
            box_fit=box_fit,
        )
    )
    rng = np.random.default_rng(47)
    rows = 400
    points = rng.uniform(40.0, 60.0, size=(rows, m))
    encoded = encode_column(points, spec)
    errors = []
    for _ in range(REPEATS):
        acc = new_accumulator(spec)
        for chunk in perturb_chunks(encoded, spec, rng):
            acc.fold(acc.partial(chunk))
        errors.append(np.array(acc.result()["mean"]) - points.mean(axis=0))
    measured = float(np.sqrt(np.mean(np.square(errors))))
    preview = noise_preview(spec, rows)
    assert measured == pytest.approx(preview["mean_std_error"], rel=0.2)
    assert acc.result()["std_errors"] == [preview["mean_std_error"]] * m  # the result states it
