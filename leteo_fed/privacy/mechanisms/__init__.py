"""Central DP mechanisms, each carrying its privacy map and its sampler.

Every mechanism is a small frozen dataclass holding its noise parameter, with
`privacy_map(...) -> Budget` (the guarantee this noise gives at a sensitivity),
`calibrate(budget, ...)` (a classmethod: the least noise whose map fits the budget; it applies
the one epsilon cap, since it configures a single release), `sample(size, rng=None)` and
`variance`:

- `Skellam(mu)`: integer noise for secure sums, RDP-accounted (`skellam`);
- `Laplace(scale)`: pure DP at L1 sensitivity (`laplace`);
- `Gaussian(sigma)`: analytic (epsilon, delta) at L2 sensitivity, plus `gdp_mu` (`gaussian`);
- `NoisyMax(scale)`: pure DP selection of the best candidate, `select(utilities)` (`noisy_max`).

`CENTRAL_MECHANISMS` maps each name to its class. Local-DP mechanisms live in `leteo_fed.ldp`.
"""

from __future__ import annotations

from leteo_fed.privacy.mechanisms._params import (
    Sensitivity,
    new_rng,
    positive_finite,
    positive_int,
)
from leteo_fed.privacy.mechanisms.gaussian import Gaussian, gdp_mu
from leteo_fed.privacy.mechanisms.laplace import Laplace
from leteo_fed.privacy.mechanisms.noisy_max import NoisyMax
from leteo_fed.privacy.mechanisms.rdp import CONVERSIONS, DEFAULT_ALPHAS, rdp_to_dp
from leteo_fed.privacy.mechanisms.skellam import Skellam

CENTRAL_MECHANISMS: dict[str, type[Skellam] | type[Laplace] | type[Gaussian]] = {
    "skellam": Skellam,
    "laplace": Laplace,
    "gaussian": Gaussian,
}

__all__ = [
    "CENTRAL_MECHANISMS",
    "CONVERSIONS",
    "DEFAULT_ALPHAS",
    "Gaussian",
    "Laplace",
    "NoisyMax",
    "Sensitivity",
    "Skellam",
    "gdp_mu",
    "new_rng",
    "positive_finite",
    "positive_int",
    "rdp_to_dp",
]
