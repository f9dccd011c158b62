"""An owner's side of a DP round: check the round's accounting, clip, add its share of noise.

An owner never trusts the aggregator's arithmetic with its own budget: it recomputes the
sensitivity of the share from the public parameters (row-norm bound C, scale, dimension, class
counts) and the epsilon that the announced Skellam parameter mu actually gives, and refuses a
round whose noise is smaller than claimed or whose encoding has no room for the noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols.moments import Grouping
from leteo_fed.protocols.pca import PcaEncoding

MECHANISM = "skellam"
_SLACK = 1e-6  # accounting is recomputed in floating point: allow this relative difference


def verify(dp, enc: PcaEncoding, d: int, groupings: Sequence[Grouping], n_values: int) -> None:
    """Refuse a DP round whose announced noise does not deliver the announced (epsilon, delta)."""
    if dp.mechanism != MECHANISM:
        raise ProtocolError(f"unknown DP mechanism {dp.mechanism!r}")
    if dp.quorum < 2 or not dp.mu > 0:
        raise ProtocolError("DP round with no noise or a quorum below 2")
    if enc.count_scale_bits != enc.scale_bits:
        raise ProtocolError("DP rounds must encode counts at the same scale as sums")
    sens = noise.sensitivities_for_scatter(
        dp.row_norm_bound,
        enc.scale_bits,
        d,
        len(groupings),
        n_classes=[len(g.classes) for g in groupings],
        count_scale_bits=enc.count_scale_bits,
    )
    achieved = noise.skellam_epsilon(dp.mu, dp.delta, sens.l1, sens.l2)
    if achieved > dp.epsilon * (1 + _SLACK):
        raise ProtocolError(
            f"the round's noise gives epsilon {achieved:.4g}, more than the announced {dp.epsilon:.4g}"
        )
    needed = noise.skellam_magnitude_bound(dp.mu / dp.quorum, n_values)
    if enc.noise_bound < needed:
        raise ProtocolError("the round's encoding leaves no room for the DP noise")


def add_noise(values: Sequence[int], dp) -> list[int]:
    """This owner's share of the aggregate noise: Skellam(mu / quorum) on every value."""
    z = noise.owner_noise(dp.mu, dp.quorum, len(values))
    return [v + int(e) for v, e in zip(values, z.tolist(), strict=True)]


def clip(x: np.ndarray, row_norm_bound: float) -> np.ndarray:
    return noise.clip_rows(x, row_norm_bound)
