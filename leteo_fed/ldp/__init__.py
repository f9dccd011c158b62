"""Local differential privacy: frequency oracles, numeric means, geo-indistinguishability.

Owner agents call the client-side `perturb*` functions and send only the reports; the aggregator
accumulates `support` (frequency) or `sums` (numeric) chunk by chunk and calls `estimate`.
Each mechanism is a class carrying its sampler, its estimator and its privacy map
(`frequency.ORACLES`, `numeric.MECHANISMS`); `make_oracle` / `make_numeric` build them from a
name. Every function takes an injected `np.random.Generator`. Formulas and the textbook
pitfalls avoided are documented in each module.
"""

from __future__ import annotations

from leteo_fed.ldp._checks import EPSILON_MAX
from leteo_fed.ldp.frequency import (
    FREQUENCY_MECHANISMS,
    HASH_PRIME,
    FrequencyEstimate,
    FrequencyOracle,
    hash_collision_probability,
    hash_params,
    make_oracle,
    optimal_theta,
    the_pq,
)
from leteo_fed.ldp.geo import (
    nd_laplace,
    planar_laplace,
    planar_radius_cdf,
    remap_to_box,
    resample_in_box,
)
from leteo_fed.ldp.numeric import (
    HM_EPSILON_STAR,
    NUMERIC_MECHANISMS,
    MeanEstimate,
    NumericMechanism,
    default_k,
    duchi_multi_bound,
    from_unit,
    make_numeric,
    perturb_multi,
    to_unit,
)

__all__ = [
    "EPSILON_MAX",
    "FREQUENCY_MECHANISMS",
    "HASH_PRIME",
    "HM_EPSILON_STAR",
    "NUMERIC_MECHANISMS",
    "FrequencyEstimate",
    "FrequencyOracle",
    "MeanEstimate",
    "NumericMechanism",
    "default_k",
    "duchi_multi_bound",
    "from_unit",
    "hash_collision_probability",
    "hash_params",
    "make_numeric",
    "make_oracle",
    "nd_laplace",
    "optimal_theta",
    "perturb_multi",
    "planar_laplace",
    "planar_radius_cdf",
    "remap_to_box",
    "resample_in_box",
    "the_pq",
    "to_unit",
]
