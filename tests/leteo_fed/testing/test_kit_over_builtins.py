"""The test kit over the built-in statistics: every declaration the services run keeps the
promises a plugin's must keep (round trip vs the pooled rows, row bounds, brute-force
sensitivity of every block and of the encoded share, under-noised specs refused).

It reaches the hooks only built-ins use: a column clipped on its own (linreg's label,
`bounded_columns`), a spec a DP round completes (`spec_for`), settings only the aggregator
reads (quantiles' percentiles, `settings`), another layout in DP rounds (quantiles' tree,
`dp_blocks`), groups of blocks one row moves only one of (naive Bayes' classes,
`exclusive_blocks`) and a closed-form share sensitivity (the moments', `share_sensitivity`).
The wire check is the plugins' JSON form, which built-ins do not travel in (their own proto
messages do; the spec mutation test covers those).
"""

from __future__ import annotations

import numpy as np
import pytest

from leteo_fed.protocols.correlation import CorrelationRequest
from leteo_fed.protocols.crosstab import CrosstabRequest
from leteo_fed.protocols.crosstab_grid import CrosstabColumn
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.moments_statistic import MomentsRequest
from leteo_fed.protocols.naive_bayes import NaiveBayesRequest
from leteo_fed.protocols.quantiles import QuantilesRequest
from leteo_fed.protocols.registry import get
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest
from leteo_fed.testing.statistic_kit import (
    check_bounds,
    check_noise_is_verified,
    check_round_trip,
    check_sensitivity,
)


def _sites(seed: int = 7, sizes: tuple[int, ...] = (14, 11, 9)) -> list[dict[str, np.ndarray]]:
    """Three sites' columns: numeric a, b, c (c correlated with a), a 0/1 label y, a category
    g, a weight w in (0, 1]."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        a, b = rng.normal(0.5, 1.2, n), rng.normal(-0.3, 0.8, n)
        out.append(
            {
                "a": a,
                "b": b,
                "c": 0.6 * a + rng.normal(0, 0.5, n),
                "y": (a + rng.normal(0, 0.7, n) > 0.5).astype(np.float64),
                "g": np.array(["x", "y", "z"])[rng.integers(0, 3, n)],
                "w": rng.uniform(0.1, 1.0, n),
            }
        )
    return out


CASES = {
    "weighted_stats": WeightedStatsRequest(features=("a", "b"), weight_column="w"),
    "correlation": CorrelationRequest(features=("a", "b", "c")),
    "linreg": LinregRequest(features=("a", "b"), label_column="c"),
    "crosstab": CrosstabRequest(columns=(CrosstabColumn("g", domain=("x", "y", "z")),)),
    "quantiles": QuantilesRequest(features=("a",), lower=-6.0, upper=6.0, bins=8),
    "naive_bayes": NaiveBayesRequest(
        features=("a", "b"), label_column="g", classes=("x", "y", "z")
    ),
    "moments": MomentsRequest(method="pca", features=("a", "b", "c")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_builtin_statistic_passes_the_kit(name):
    protocol = get(name)
    request, sites = CASES[name], _sites()
    check_round_trip(protocol, request, sites, rtol=1e-7, atol=1e-7)
    check_bounds(protocol, request, sites)
    check_sensitivity(protocol, request, sites[0])
    check_noise_is_verified(protocol, request, sites[0])


def test_the_cases_cover_every_single_round_builtin():
    from leteo_fed.protocols import registry

    builtins = {p.statistic.name for p in registry.statistics() if not (p.plugin or p.multi_round)}
    assert builtins - set(CASES) == set(), "a built-in statistic the kit does not run on"
