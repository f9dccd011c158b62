"""DP k-means centers' error on held-out UCI Adult, natural units with public bounds: 20
iterations at (epsilon 1, delta 1e-6) with each iteration's noise calibrated by Renyi
composition (how jobs run now) against the old even split (epsilon / 20, delta / 20 each).

The same owners' and aggregator's code runs in process; only mu differs (more noise passes the
owners' check). 20 seeded jobs each; the error is the RMS distance of the released centers to
those of the same job without noise.

    .venv/bin/python benchmarks/kmeans_rdp_bench.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.protocols import kmeans, registry
from leteo_fed.protocols.dp_plan import owner_noise_bound
from leteo_fed.protocols.dp_release import ArraySite
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.release_preview import NoNoise, run_in_process
from leteo_fed.protocols.requests import Common, DpRequest

COLUMNS = ["age", "education-num", "hours-per-week"]
BOUNDS = (
    ColumnBounds("age", 17, 90),
    ColumnBounds("education-num", 1, 16),
    ColumnBounds("hours-per-week", 1, 99),
)
INIT = (25.0, 9.0, 40.0, 45.0, 13.0, 45.0, 60.0, 10.0, 30.0)
ITERATIONS, JOBS = 20, 20


def main() -> None:
    data = read_adult(locate_wheel())
    x = np.column_stack([data[c].astype(float) for c in COLUMNS])
    x = x[np.random.default_rng(0).permutation(len(x))[:15060]]
    sites = [ArraySite({c: p[:, j] for j, c in enumerate(COLUMNS)}) for p in np.array_split(x, 3)]
    request = KmeansRequest(k=3, centers=INIT, iterations=ITERATIONS, features=tuple(COLUMNS))
    protocol = registry.for_request(request)
    plan = protocol.plan(
        request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 0.0, BOUNDS))
    )
    reference = np.array(run_in_process(protocol, plan, sites, NoNoise()).centers)
    sens = plan.sensitivity
    eps, delta = kmeans.split_budget(1.0, 1e-6, ITERATIONS)
    mu_split = noise.calibrate_mu(eps, delta, sens.l1, sens.l2)
    room = owner_noise_bound(mu_split, 3, kmeans.n_values(3, len(COLUMNS)) + 1)
    split = dataclasses.replace(
        plan,
        dp=dataclasses.replace(plan.dp, mu=mu_split),
        encoding=dataclasses.replace(plan.encoding, noise_bound=room),
    )
    print(
        f"Skellam mu per iteration: Renyi {plan.dp.mu:.4g}, even split {mu_split:.4g}: "
        f"{mu_split / plan.dp.mu:.1f}x less noise variance per iteration"
    )
    for name, chosen in (("Renyi", plan), ("even split", split)):
        rng = np.random.default_rng(7)
        errors = []
        for _ in range(JOBS):
            centers = np.array(run_in_process(protocol, chosen, sites, rng).centers)
            errors.append(float(np.sqrt(np.mean(np.sum((centers - reference) ** 2, axis=1)))))
        se = np.std(errors, ddof=1) / np.sqrt(JOBS)
        print(
            f"{name:>10}: RMS center distance to the noise-free job {np.mean(errors):.3f} (s.e. {se:.3f})"
        )


if __name__ == "__main__":
    main()
