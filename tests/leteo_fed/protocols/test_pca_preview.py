"""`leteo-fed pca --dry-run`: the preview's eigenvalue errors are the errors a DP PCA round has.

Repeated releases through the protocol's own code: three owners encode their moments
(`moments.local_moments`, `moments.encode_moments`, as the owner agent does) and add their
Skellam shares (`add_owner_noise`); the aggregator's decoding (`moments.decode_totals`,
`pca.pca_from_moments` with the PSD projection of DP rounds) gives the eigenvalues. The standard
deviation of each eigenvalue's error over 300 repetitions must match the preview's first-order
standard error (at the true eigenpairs and mean) within 20%: with 300 repetitions the estimate
of a standard deviation has a relative standard error of about 4%. Seeded data.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import moments, pca, registry
from leteo_fed.protocols.moments_preview import pca_noise_preview
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.moments_statistic import groupings
from leteo_fed.protocols.requests import Common, DpRequest

REPEATS = 300
FEATURES = ["a", "b", "c"]


def test_the_preview_matches_the_measured_error_of_the_eigenvalues():
    rng = np.random.default_rng(21)
    cov = np.array([[4.0, 1.2, 0.3], [1.2, 2.0, 0.2], [0.3, 0.2, 0.5]])
    x = rng.multivariate_normal([0.8, -0.4, 0.2], cov, size=20000)
    x = x[np.linalg.norm(x, axis=1) <= 10.0]  # within the row norm bound: nothing clipped
    protocol = registry.get("moments")
    plan = protocol.plan(
        MomentsRequest(method="pca", features=tuple(FEATURES), components=2),
        Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 10.0)),
    )
    enc = plan.encoding
    shares = []
    for part in np.array_split(x, 3):
        mom = moments.local_moments(part, [None], groupings(plan.spec))
        shares.append(
            moments.encode_moments(
                mom, enc.scale_bits, enc.data_bound, enc.max_rows_per_owner, enc.count_scale_bits
            )
        )

    def eigenvalues(totals: list[int], noisy: bool) -> np.ndarray:
        agg = moments.decode_totals(
            totals, 3, groupings(plan.spec), enc.scale_bits, enc.count_scale_bits, noisy=noisy
        )
        res = pca.pca_from_moments(agg, FEATURES, 2, psd_project=noisy)
        return np.array(res.eigenvalues), np.array(res.components)

    exact, comps = eigenvalues([sum(v) for v in zip(*shares, strict=True)], False)
    errors = []
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        got, _ = eigenvalues([sum(v) for v in zip(*noisy, strict=True)], True)
        errors.append(got - exact)
    measured = np.std(np.array(errors), axis=0)
    preview = pca_noise_preview(
        plan, rows=len(x), eigenvalues=exact, components=comps, mean=x.mean(axis=0)
    )
    np.testing.assert_allclose(measured, preview["eigenvalue_std_error"], rtol=0.2)


def test_pca_dry_run_prints_the_preview_and_contacts_nobody(capsys):
    import json

    from leteo_fed.cli.main import main

    argv = ["pca", "--features", "a,b,c", "--aggregator", "127.0.0.1:1", "--insecure"]
    dp = ["--dp-epsilon", "1", "--row-norm-bound", "10"]
    assert main([*argv, *dp, "--dry-run", "--rows", "20000"]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert len(doc["eigenvalue_std_error"]) >= 1 and doc["noise_std_per_value"] > 0
    assert "eigenvalue 1: +/-" in err
    assert main([*argv, "--dry-run"]) == 2
    assert "give --dp-epsilon" in capsys.readouterr().err
