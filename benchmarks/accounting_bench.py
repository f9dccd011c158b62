"""How many releases fit in a site's budget at a fixed noise: basic composition (epsilons and
deltas added, what the ledger did before) against the Renyi accountant the ledger uses now,
with Google's dp-accounting (RDP and PLD) beside it on the same event sequences.

For each Gaussian noise multiplier z (sigma over L2 sensitivity; our Skellam noise at large mu
is this curve plus a vanishing correction), a budget of (epsilon 1, delta 1e-6): basic counts
releases of (eps_1, delta_1) each, eps_1 the release alone at delta_1 = 1e-7 (a tenth of the
budget's delta); RDP and PLD count the largest k whose composition is within (1, 1e-6).
Also: epsilon of 20 releases at z = 10.

    .venv/bin/python benchmarks/accounting_bench.py
"""

from __future__ import annotations

import dp_accounting
from dp_accounting import pld, rdp

from leteo_fed.privacy.accounting import GaussianEvent, compose_epsilon
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.mechanisms import Gaussian

EPSILON, DELTA, DELTA_ONE = 1.0, 1e-6, 1e-7


def fits(epsilon_of_k, limit: int = 100000) -> int:
    """The largest k with epsilon_of_k(k) <= EPSILON (monotone in k: doubling, then bisection)."""
    if epsilon_of_k(1) > EPSILON:
        return 0
    lo, hi = 1, 2
    while hi <= limit and epsilon_of_k(hi) <= EPSILON:
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if epsilon_of_k(mid) <= EPSILON:
            lo = mid
        else:
            hi = mid
    return lo


def ours(z: float, k: int) -> float:
    return compose_epsilon([GaussianEvent(z, count=k)], DELTA)


def google_rdp(z: float, k: int) -> float:
    acc = rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), k)
    return acc.get_epsilon(DELTA)


def google_pld(z: float, k: int) -> float:
    acc = pld.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(z), k)
    return acc.get_epsilon(DELTA)


def main() -> None:
    print(
        f"budget (epsilon {EPSILON:g}, delta {DELTA:g}); each release alone at delta {DELTA_ONE:g}"
    )
    print(
        f"{'z':>6} {'eps alone':>10} {'basic':>7} {'ours RDP':>9} {'dp-acc RDP':>11} {'dp-acc PLD':>11}"
    )
    for z in (5.0, 10.0, 20.0, 41.0, 100.0):
        alone = Gaussian(z).epsilon(1.0, DELTA_ONE)
        basic = min(int(EPSILON / alone + 1e-9), int(DELTA / DELTA_ONE + 1e-9))
        print(
            f"{z:6g} {alone:10.4f} {basic:7d} {fits(lambda k, z=z: ours(z, k)):9d} "
            f"{fits(lambda k, z=z: google_rdp(z, k)):11d} {fits(lambda k, z=z: google_pld(z, k)):11d}"
        )
    z, k = 10.0, 20
    alone = Gaussian(z).epsilon(1.0, DELTA / k)
    print(
        f"\n{k} releases at z = {z:g}, delta {DELTA:g}: basic {k * alone:.3f} (each at delta/{k}), "
        f"ours {ours(z, k):.4f}, dp-accounting RDP {google_rdp(z, k):.4f}, PLD {google_pld(z, k):.4f}"
    )
    # the k-means job: T = 20 iterations at (1, 1e-6), noise per iteration, old split vs RDP
    split = Gaussian.calibrate(Budget(EPSILON / 20, DELTA / 20), 1.0).sigma
    lo, hi = 1.0, 1000.0
    while hi / lo > 1 + 1e-9:
        mid = (lo * hi) ** 0.5
        lo, hi = (lo, mid) if ours(mid, 20) <= EPSILON else (mid, hi)
    print(
        f"20 iterations in (1, 1e-6): noise std per iteration {split:.2f} (even split) vs "
        f"{hi:.2f} (Renyi): {split**2 / hi**2:.1f}x less noise variance per iteration"
    )


if __name__ == "__main__":
    main()
