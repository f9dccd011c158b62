"""`leteo-fed kmeans --dry-run`: the preview's center errors are the errors a DP iteration has.

Repeated iterations through the protocol's own code at fixed centers: three owners assign their
rows and encode the per-cluster sums and counts (`kmeans.assign`, `cluster_stats`,
`encode_cluster_stats`, as the owner agent does) and add their Skellam shares
(`add_owner_noise`); the aggregator decodes (`decode_totals`) and moves the centers
(`update_centers`, with the DP projection). The root-mean-square error of each new center over
300 repetitions must match the preview (at the true cluster sizes and centers) within 20%
(relative standard error of an RMS estimate from 300 draws of d = 2 coordinates: about 3%).
Seeded data, clusters near the origin and well inside the row norm bound.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import kmeans, registry
from leteo_fed.protocols.kmeans_round import KmeansRequest, kmeans_noise_preview
from leteo_fed.protocols.requests import Common, DpRequest

REPEATS = 300


def test_the_preview_matches_the_measured_error_of_the_new_centers():
    rng = np.random.default_rng(22)
    truth = np.array([[-1.0, 0.5], [1.0, -0.5]])
    x = np.vstack([rng.normal(c, 0.4, size=(15000, 2)) for c in truth])
    start = truth + 0.1
    protocol = registry.get("kmeans")
    plan = protocol.plan(
        KmeansRequest(k=2, centers=tuple(start.ravel()), iterations=5, features=("a", "b")),
        Common(n_invited=3, min_owners=3, dp=DpRequest(5.0, 1e-6, 10.0)),
    )
    enc = plan.encoding
    shares = []
    for part in np.array_split(rng.permutation(x), 3):
        sums, counts = kmeans.cluster_stats(part, kmeans.assign(part, start), 2)
        shares.append(kmeans.encode_cluster_stats(sums, counts, enc))

    def step(totals: list[int], noisy: bool):
        decoded = kmeans.decode_totals(totals, 2, 2, enc, noisy=noisy)
        clip = plan.dp.row_norm_bound if noisy else None
        return kmeans.update_centers(decoded, start, clip_norm=clip)

    exact = step([sum(v) for v in zip(*shares, strict=True)], False)
    errors = []
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        got = step([sum(v) for v in zip(*noisy, strict=True)], True)
        errors.append(got.centers - exact.centers)
    measured = np.sqrt(np.mean(np.sum(np.array(errors) ** 2, axis=2), axis=0))
    preview = kmeans_noise_preview(plan, counts=exact.counts, centers=exact.centers)
    np.testing.assert_allclose(measured, preview["center_rms_error"], rtol=0.2)


def test_kmeans_dry_run_prints_the_preview_and_contacts_nobody(capsys):
    import json

    from leteo_fed.cli.main import main

    argv = ["kmeans", "--features", "a,b", "--k", "2", "--init-bounds", "0,1"]
    argv += ["--aggregator", "127.0.0.1:1", "--insecure"]
    dp = ["--epsilon", "5", "--row-norm-bound", "10"]
    assert main([*argv, *dp, "--dry-run", "--rows", "30000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert len(doc["center_rms_error"]) == 2 and doc["accountant"] == "rdp"
    # 10 iterations compose to epsilon 5 by RDP: one alone is more than the even share 0.5
    assert 0.5 < doc["epsilon_per_iteration"] < 5.0
    assert "each center moves by about" in err and "Renyi composition" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --epsilon" in capsys.readouterr().err
