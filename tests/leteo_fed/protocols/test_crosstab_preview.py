"""`leteo-fed crosstab --dry-run`: the preview's noise is the noise a DP round has.

Repeated releases through the protocol's own code: each of three owners counts its rows
(`Crosstab.sums`, encoded by the adapter's `encode_blocks`) and adds its Skellam share with
`add_owner_noise`, exactly as an owner agent does; the totals are decoded as the aggregator
does (`released_counts`). The standard deviation of the error of each raw cell, each margin and
the row count over the repetitions must match the preview within 20% (400 repetitions: the
relative standard error of a standard deviation estimate is about 3.5%, so 20% is more than
five of them). The released
(post-processed) counts are non-negative and no further from the truth, on average, than the
raw noisy cells. Seeded data; the noise itself comes from the owners' sampler.
"""

from __future__ import annotations

import math

import numpy as np
from round_harness import statistic_share

from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import crosstab as ct
from leteo_fed.protocols import crosstab_grid as grid
from leteo_fed.protocols import noisy_counts
from leteo_fed.protocols.requests import Common, DpRequest

REPEATS = 400


def test_the_preview_matches_the_measured_noise_of_cells_margins_and_row_count():
    rng = np.random.default_rng(22)
    n = 3000
    data = {
        "g": rng.choice(["a", "b", "c"], n, p=[0.7, 0.25, 0.05]),
        "x": rng.exponential(10.0, n),
    }
    columns = (ct.CrosstabColumn("g", domain=("a", "b", "c")),)
    columns += (ct.CrosstabColumn("x", edges=(0.0, 5.0, 10.0, 20.0, 50.0, 1000.0)),)
    plan = ct.PROTOCOL.plan(
        ct.CrosstabRequest(columns=columns),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 1.0)),
    )
    enc = plan.encoding
    parts = [{k: v[idx] for k, v in data.items()} for idx in np.array_split(np.arange(n), 3)]
    stat = ct.Crosstab()
    # an owner's share of its rows in a DP round (rows outside the grid dropped)
    shares = [
        statistic_share(stat, plan.spec, np.empty((0, 0)), part, enc, dp=True) for part in parts
    ]
    exact = np.array([sum(v) for v in zip(*shares, strict=True)]) / 2**enc.scale_bits
    raw, released = [], []
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        totals = [sum(v) for v in zip(*noisy, strict=True)]
        raw.append(np.array(totals) / 2**enc.scale_bits - exact)
        released.append(
            noisy_counts.released_counts(totals, enc.count_scale_bits, noisy=True) - exact
        )
    raw_err, rel_err = np.array(raw), np.array(released)
    preview = ct.noise_preview(plan, rows=n)
    sigma = preview["noise_std_per_cell"]
    assert sigma == plan.dp.noise_std(plan.dp.quorum, enc.scale_bits)
    np.testing.assert_allclose(raw_err.std(axis=0), sigma, rtol=0.2)
    shape = grid.grid_shape(plan.spec.columns)
    for j, c in enumerate(plan.spec.columns):
        others = tuple(a + 1 for a in range(len(shape)) if a != j)
        margin_err = raw_err.reshape(REPEATS, *shape).sum(axis=others)
        np.testing.assert_allclose(
            margin_err.std(axis=0), preview["noise_std_of_margins"][c.name], rtol=0.2
        )
    assert math.isclose(raw_err.sum(axis=1).std(), preview["noise_std_of_row_count"], rel_tol=0.2)
    print(
        f"cell std: preview {sigma:.4g}, measured {raw_err.std(axis=0).min():.4g}.."
        f"{raw_err.std(axis=0).max():.4g}; row count std: preview "
        f"{preview['noise_std_of_row_count']:.4g}, measured {raw_err.sum(axis=1).std():.4g}"
    )
    # post-processing: the released counts are never negative, and their RMS error over the
    # whole table is at most that of the raw noisy cells (it removes noise below 0)
    assert (rel_err + exact).min() >= 0
    assert np.sqrt((rel_err**2).mean()) <= np.sqrt((raw_err**2).mean()) * 1.05
    assert [c["statistic"] for c in preview["signal_checks"]][0] == "each cell count"
    assert not any(c["drowned"] for c in preview["signal_checks"])
