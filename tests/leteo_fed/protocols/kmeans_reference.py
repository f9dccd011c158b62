"""Reference DP calibration of a federated k-means job, for the tests only.

The services calibrate a k-means job's noise through `iterative_protocol.IterativeSecureSumProtocol` (at
`kmeans.sensitivity`); `calibrate_iteration` computes the same Skellam mu directly from the
job's parameters, and `dp_sensitivity` / `round_increment` restate what an owner checks and
charges, so that the tests can compare the two.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.protocols import kmeans as km


@dataclass(frozen=True)
class IterationNoise:
    """Calibrated noise of one DP iteration of a job of `iterations` iterations."""

    epsilon: float  # of the whole job: `iterations` iterations together (Renyi composition)
    delta: float
    mu: float  # aggregate Skellam parameter with exactly `quorum` shares
    l1: float
    l2: float
    count_scale_bits: int
    iterations: int = 1

    @property
    def sensitivity(self) -> noise.Sensitivity:
        return noise.Sensitivity(self.l1, self.l2)

    def epsilon_after(self, t: int) -> float:
        """Epsilon at the job's delta of t iterations (0 for none), by RDP composition."""
        return rdp_epsilon(self.mu, self.sensitivity, self.delta, t)


def calibrate_iteration(
    epsilon: float,
    delta: float,
    iterations: int,
    row_norm_bound: float,
    scale_bits: int,
    d: int,
    k: int,
    count_scale_bits: int | None = None,
    clip_count: bool = False,
) -> IterationNoise:
    """Skellam mu so that T = `iterations` iterations are together (epsilon, delta)-DP by Renyi
    composition (their RDP curves added, converted once at delta). `clip_count`: the share
    carries one more count, the rows clipped to public bounds (one row moves it by one)."""
    km.split_budget(epsilon, delta, iterations)  # validates iterations
    if count_scale_bits is None:
        count_scale_bits = km.dp_count_scale_bits(row_norm_bound, scale_bits, d)
    sens = km.sensitivity(row_norm_bound, scale_bits, d, k, count_scale_bits)
    if clip_count:
        unit = float(2**count_scale_bits)
        sens = noise.Sensitivity(sens.l1 + unit, math.hypot(sens.l2, unit))
    mu = noise.calibrate_mu(epsilon, delta, sens.l1, sens.l2, compositions=iterations)
    return IterationNoise(epsilon, delta, mu, sens.l1, sens.l2, count_scale_bits, iterations)


def rdp_epsilon(mu: float, sens: noise.Sensitivity, delta: float, rounds: int) -> float:
    """Epsilon at delta of `rounds` releases with Skellam(mu) noise at this sensitivity (RDP
    composition, the accounting every owner recomputes); 0 for no round."""
    if rounds < 1:
        return 0.0
    return Skellam(mu).epsilon(sens, delta, compositions=rounds)


def round_increment(mu: float, sens: noise.Sensitivity, delta: float, index: int) -> Budget:
    """What round `index` of a job adds under basic composition: eps(index) - eps(index - 1) of
    the RDP bound, with the job's delta in round 1 (the charges of rounds 1..t add up to
    (eps(t), delta), a valid bound for t rounds)."""
    step = rdp_epsilon(mu, sens, delta, index) - rdp_epsilon(mu, sens, delta, index - 1)
    return Budget(max(step, math.ulp(0.0)), delta if index == 1 else 0.0)


def dp_sensitivity(dp, enc: ShareEncoding, d: int, k: int) -> noise.Sensitivity:
    """Owner side: the sensitivity of this site's share in a DP iteration, from the public
    round parameters (what `verify_dp` checks the noise against and what the ledger charges)."""
    if enc.count_scale_bits < enc.scale_bits:
        raise ProtocolError("DP rounds must encode counts at least at the scale of sums")
    if not enc.value_bound >= dp.row_norm_bound:
        raise ProtocolError("the encoding's value bound is below the DP row-norm bound")
    return km.sensitivity(dp.row_norm_bound, enc.scale_bits, d, k, enc.count_scale_bits)
