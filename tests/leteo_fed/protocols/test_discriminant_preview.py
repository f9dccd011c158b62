"""`leteo-fed dca --dry-run`: the preview's class-mean errors are the errors a DP round has.

Repeated releases through the protocol's own code, as in test_pca_preview: three owners encode
their per-class moments and add their Skellam shares; the aggregator decodes the totals
(`moments.decode_totals`, counts rounded to whole rows) and each class mean is V_c / N_c. The
root mean square of each class mean's distance from the exact one, over 300 repetitions, must
match the preview within 20% (estimated from 300 x d draws: a relative standard error under 3%). The class means are near 0, where the preview's first-order formula is meant
to hold. Seeded data.
"""

from __future__ import annotations

import numpy as np

from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import moments, registry
from leteo_fed.protocols.moments_preview import discriminant_noise_preview
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.moments_statistic import groupings
from leteo_fed.protocols.requests import Common, DpRequest

REPEATS = 300
FEATURES = ("a", "b", "c")
CLASSES = ("0", "1", "2")


def test_the_preview_matches_the_measured_error_of_the_class_means():
    rng = np.random.default_rng(31)
    sizes = (900, 600, 300)
    x = np.vstack([rng.normal(0.02 * c, 0.5, size=(n, 3)) for c, n in enumerate(sizes)])
    labels = np.repeat(np.arange(3), sizes)
    plan = registry.get("moments").plan(
        MomentsRequest(method="dca", features=FEATURES, groupings=(LabelClasses("y", CLASSES),)),
        Common(n_invited=3, min_owners=3, dp=DpRequest(2.0, 1e-6, 3.0)),
    )
    enc = plan.encoding
    order = rng.permutation(len(x))
    shares = []
    for part in np.array_split(order, 3):
        mom = moments.local_moments(x[part], [labels[part]], groupings(plan.spec))
        shares.append(
            moments.encode_moments(
                mom, enc.scale_bits, enc.data_bound, enc.max_rows_per_owner, enc.count_scale_bits
            )
        )

    def class_means(totals: list[int], noisy: bool) -> np.ndarray:
        agg = moments.decode_totals(
            totals, 3, groupings(plan.spec), enc.scale_bits, enc.count_scale_bits, noisy=noisy
        )
        v = np.array([[int(e) for e in row] for row in agg.v[0]], dtype=np.float64)
        return v / 2**enc.scale_bits / np.array(agg.m[0], dtype=np.float64)[:, None]

    exact = class_means([sum(v) for v in zip(*shares, strict=True)], False)
    errors = []
    for _ in range(REPEATS):
        noisy = [add_owner_noise(s, plan.dp) for s in shares]
        errors.append(class_means([sum(v) for v in zip(*noisy, strict=True)], True) - exact)
    # root mean square of each class mean's distance from the exact one
    measured = np.sqrt(np.mean(np.sum(np.square(np.array(errors)), axis=2), axis=0))
    preview = discriminant_noise_preview(plan, class_sizes=sizes)
    predicted = [preview["class_mean_rms_error"]["y"][c] for c in CLASSES]
    np.testing.assert_allclose(measured, predicted, rtol=0.2)
