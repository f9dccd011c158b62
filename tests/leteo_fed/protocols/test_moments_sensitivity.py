"""The L1/L2 sensitivity of a moments share (the statistic of PCA, DCA, LDA and MDR), checked by
hand and against the real encoder; and the noise it implies at epsilon = 1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.distributed_noise import calibrate_mu, clip_rows
from leteo_fed.privacy.mechanisms import Sensitivity, Skellam
from leteo_fed.protocols.moments import (
    ALL_ROWS,
    Grouping,
    encode_moments,
    local_moments,
    sensitivities_for_scatter,
)


def test_sensitivities_hand_example() -> None:
    # d=2, f=0, C=1, one grouping: T = 3 triangle entries.
    #   R: L2 = C^2 + sqrt(3),  L1 = (d+1)/2 C^2 + 3 = 4.5
    #   V: L2 = C + sqrt(2),    L1 = sqrt(2) C + 2
    #   M: 1
    s = sensitivities_for_scatter(1.0, 0, 2, 1)
    assert isinstance(s, Sensitivity)
    l2 = math.sqrt((1 + math.sqrt(3)) ** 2 + (1 + math.sqrt(2)) ** 2 + 1)
    assert s.l2 == pytest.approx(l2, rel=1e-14)
    assert s.l1 == pytest.approx(4.5 + math.sqrt(2) + 2 + 1, rel=1e-14)
    # d=13, f=16, C=1, one grouping (the PCA case of the closing note)
    f = 2.0**16
    s13 = sensitivities_for_scatter(1.0, 16, 13, 1)
    assert s13.l2 == pytest.approx(
        math.sqrt((f + math.sqrt(91)) ** 2 + (f + math.sqrt(13)) ** 2 + 1), rel=1e-14
    )
    assert s13.l1 == pytest.approx(7 * f + 91 + math.sqrt(13) * f + 13 + 1, rel=1e-14)
    # two groupings add one (V, M) block each; other classes' slack when n_classes is given
    s2 = sensitivities_for_scatter(1.0, 0, 2, 2)
    assert s2.l2**2 == pytest.approx(l2**2 + (1 + math.sqrt(2)) ** 2 + 1, rel=1e-14)
    s3 = sensitivities_for_scatter(1.0, 0, 2, 1, n_classes=[3])
    assert s3.l2**2 == pytest.approx(l2**2 + 2 * 2, rel=1e-14)
    assert s3.l1 == pytest.approx(s.l1 + 4, rel=1e-14)
    with pytest.raises(ConfigError):
        sensitivities_for_scatter(1.0, 0, 2, 2, n_classes=[3])


def test_sensitivities_bound_the_real_encoder() -> None:
    # Add one row to a dataset and measure the change of the actual encoded share
    # (protocols.moments.encode_moments): it must stay within the derived bounds, and the R part
    # of the bound must be nearly attained by an axis-aligned row (L2 change C^2 2^f).
    rng = np.random.default_rng(17)
    d, f, c = 4, 12, 1.5
    grouping = Grouping("y", ("a", "b", "c"))
    s = sensitivities_for_scatter(c, f, d, 2)
    base = clip_rows(rng.normal(size=(50, d)), c)
    labels = rng.integers(0, 3, size=51)
    worst_l1 = worst_l2 = 0.0
    extra_rows = [*clip_rows(rng.normal(size=(200, d)) * 3, c), np.array([c, 0.0, 0.0, 0.0])]
    for row in extra_rows:
        enc = []
        for x, lab in ((base, labels[:50]), (np.vstack([base, row]), labels)):
            mom = local_moments(x, [None, lab], [ALL_ROWS, grouping])
            enc.append(np.array(encode_moments(mom, f, 2**60, 10**6), dtype=np.float64))
        diff = enc[1] - enc[0]
        worst_l1 = max(worst_l1, np.abs(diff).sum())
        worst_l2 = max(worst_l2, np.linalg.norm(diff))
    assert worst_l1 <= s.l1 and worst_l2 <= s.l2
    assert worst_l2 >= c * c * 2**f  # the axis row alone changes R[0,0] by C^2 2^f


def test_numbers_for_closing_note() -> None:
    # epsilon=1, delta=1e-6, C=1, f=16, d=13, PCA (one grouping): the released noise has
    # standard deviation sqrt(2 mu) integer units = sqrt(2 mu)/2^16 in real units.
    s = sensitivities_for_scatter(1.0, 16, 13, 1)
    mu = calibrate_mu(1.0, 1e-6, s.l1, s.l2)
    assert Skellam(mu).epsilon(Sensitivity(s.l1, s.l2), 1e-6) <= 1.0
    sigma_real = math.sqrt(2 * mu) / 2**16
    # Gaussian reference: analytic Gaussian at eps=1, delta=1e-6 needs sigma ~ 4.4 D2; the RDP
    # route costs a few percent more, so sigma must be in [4.4, 5.2] * D2 (D2 ~ 1.414 * 2^16).
    ratio = math.sqrt(2 * mu) / s.l2
    assert 4.4 < ratio < 5.2
    assert 6.0 < sigma_real < 7.5
