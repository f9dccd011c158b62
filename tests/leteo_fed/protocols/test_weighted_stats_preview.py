"""`leteo-fed stats --dry-run`: the preview's expected errors are the errors a DP round has.

Repeated releases through the protocol's own code: each of three owners encodes its sums
(`WeightedStats.sums`, encoded by the adapter's `encode_blocks`) and adds its Skellam share with `add_owner_noise`, exactly as an
owner agent does; the totals are decoded by `statistics`, as the aggregator does. The standard
deviation of the error of each mean and variance over the repetitions must match the preview
(delta method, at the true means and variances) within 20%. 400 repetitions: the relative
standard error of a standard deviation estimate is about 1/sqrt(2 x 400) = 3.5%, so 20% is more
than five standard errors. Seeded data; the noise itself comes from the owners' sampler.
"""

from __future__ import annotations

import numpy as np
from round_harness import statistic_share, statistic_totals

from leteo_fed.errors import DataError
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import registry
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.weighted_stats import (
    WeightedStats,
    WeightedStatsRequest,
    noise_preview,
    statistics,
)

STAT = WeightedStats()


def encode_sums(spec, x, enc) -> list[int]:
    """An owner's share of its rows, each of weight 1 (the owner's own code)."""
    return statistic_share(STAT, spec, x, {}, enc)


def decoded(spec, totals, enc, noisy, noise_std=0.0) -> dict:
    """The aggregator's means and variances of the summed shares."""
    t = statistic_totals(STAT, spec, totals, enc)
    return statistics(t, len(spec.features), enc.value_bound, noisy, noise_std)


REPEATS = 400


def test_the_preview_matches_the_measured_error_of_means_and_variances():
    rng = np.random.default_rng(20)
    x = np.column_stack([rng.normal(0.5, 1.0, 6000), rng.normal(-1.5, 0.7, 6000)])
    x = x[np.linalg.norm(x, axis=1) <= 10.0]  # within the row norm bound: no clipping bias
    protocol = registry.get("weighted_stats")
    plan = protocol.plan(
        WeightedStatsRequest(features=("a", "b")),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 10.0)),
    )
    enc = plan.encoding
    parts = np.array_split(x, 3)
    shares = [encode_sums(plan.spec, p, enc) for p in parts]
    exact = decoded(plan.spec, [sum(v) for v in zip(*shares, strict=True)], enc, noisy=False)
    errors = {"means": [], "variances": []}
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        got = decoded(plan.spec, [sum(v) for v in zip(*noisy, strict=True)], enc, noisy=True)
        for key in errors:
            errors[key].append(np.subtract(got[key], exact[key]))
    preview = noise_preview(plan, rows=len(x), means=exact["means"], variances=exact["variances"])
    for key, field in (("means", "mean_std_error"), ("variances", "variance_std_error")):
        measured = np.std(np.array(errors[key]), axis=0)
        predicted = np.array([preview[field][f] for f in ("a", "b")])
        np.testing.assert_allclose(measured, predicted, rtol=0.2, err_msg=key)
    # the noise of the sums themselves
    sigma = preview["noise_std_per_sum"]
    assert sigma == plan.dp.noise_std(plan.dp.quorum, enc.scale_bits)


def test_stats_dry_run_prints_the_preview_and_contacts_nobody(capsys):
    """No aggregator runs here: the command plans locally and exits 0; without DP it says what
    to give instead."""
    import json

    from leteo_fed.cli.main import main

    argv = ["stats", "--features", "a,b", "--aggregator", "127.0.0.1:1", "--insecure"]
    dp = ["--dp-epsilon", "1", "--row-norm-bound", "10"]
    assert main([*argv, *dp, "--dry-run", "--rows", "5000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert set(doc["mean_std_error"]) == {"a", "b"} and doc["quorum"] == 3
    assert "mean of a +/-" in err and "variance of b +/-" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --dp-epsilon" in capsys.readouterr().err


def test_a_noisy_variance_is_never_zero_or_negative():
    """A column with (almost) no spread and few rows: the noise can push the raw variance below
    0; the release keeps it at its own standard error instead (post-processing)."""
    protocol = registry.get("weighted_stats")
    plan = protocol.plan(
        WeightedStatsRequest(features=("a",)),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 10.0)),
    )
    enc = plan.encoding
    x = np.full((30, 1), 2.0)  # variance exactly 0
    shares = [encode_sums(plan.spec, p, enc) for p in np.array_split(x, 3)]
    sigma = plan.dp.noise_std(3, enc.scale_bits)
    got = []
    for _ in range(50):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        totals = [sum(v) for v in zip(*noisy, strict=True)]
        try:
            got.append(decoded(plan.spec, totals, enc, True, sigma)["variances"][0])
        except DataError:  # a noisy total weight at or below 0: refused, as documented
            continue
    assert got and min(got) > 0
