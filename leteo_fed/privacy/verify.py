"""An owner's side of a DP round: check the announced accounting, then add its share of noise.

An owner never trusts the aggregator's arithmetic with its own budget. The caller recomputes the
sensitivity of its share from the public round parameters (row-norm bound, scale, dimension,
class counts) and the room its encoding leaves; `verify_release` then recomputes the epsilon
that the announced Skellam parameter mu actually gives, and refuses a round whose noise is
smaller than claimed or whose encoding has no room for the noise.

`dp` is any object with the attributes mechanism, epsilon, delta, mu and quorum, and optionally
compositions (a protocol message or a plan); this module does not depend on the protocols. With
compositions = T > 1 the announced (epsilon, delta) is what T rounds with this noise give
together (Renyi composition, a multi-round job): the epsilon is recomputed for T compositions.
"""

from __future__ import annotations

from collections.abc import Sequence

from leteo_fed.errors import LeteoError, ProtocolError
from leteo_fed.privacy.budget import Budget, check_epsilon
from leteo_fed.privacy.mechanisms import Sensitivity, Skellam

MECHANISM = "skellam"
REL_SLACK = 1e-6  # accounting is recomputed in floating point: allow this relative difference


def verify_release(dp, sensitivity: Sensitivity, n_values: int, noise_bound: int) -> None:
    """Refuse (ProtocolError) a DP round whose announced noise does not deliver the announced
    (epsilon, delta), or whose encoding (`noise_bound` per value, over `n_values` values) has no
    room for this owner's share of it."""
    if dp.mechanism != MECHANISM:
        raise ProtocolError(f"unknown DP mechanism {dp.mechanism!r}")
    if dp.quorum < 2 or not dp.mu > 0:
        raise ProtocolError("DP round with no noise or a quorum below 2")
    try:
        noise = Skellam(dp.mu)
        share = noise.owner_share(dp.quorum)
        announced = Budget(dp.epsilon, dp.delta)
        check_epsilon(announced.epsilon)  # a single release: the one cap applies
        compositions = int(getattr(dp, "compositions", 0) or 0)
        if compositions < 0:
            raise ProtocolError("a DP round's compositions cannot be negative")
        achieved = noise.epsilon(sensitivity, announced.delta, compositions=max(1, compositions))
    except LeteoError as exc:
        raise ProtocolError(
            f"the round's DP parameters are not valid: {exc}", field=exc.field
        ) from exc
    if achieved > announced.epsilon * (1 + REL_SLACK):
        over = f" over {compositions} rounds" if compositions > 1 else ""
        raise ProtocolError(
            f"the round's noise gives epsilon {achieved:.4g}{over}, more than the announced "
            f"{dp.epsilon:.4g}"
        )
    needed = share.magnitude_bound(n_values)
    if noise_bound < needed:
        raise ProtocolError("the round's encoding leaves no room for the DP noise")


def add_owner_noise(values: Sequence[int], dp) -> list[int]:
    """This owner's share of the aggregate noise: Skellam(mu / quorum) on every value.

    The values are Python ints (encoded shares may exceed int64), hence the list; the noise
    itself is drawn in one vectorised call from a cryptographically seeded generator.
    """
    z = Skellam(dp.mu).owner_share(dp.quorum).sample(len(values))
    return [v + int(e) for v, e in zip(values, z.tolist(), strict=True)]


__all__ = ["MECHANISM", "REL_SLACK", "add_owner_noise", "verify_release"]
