"""The plugin's own tests: LETEO-Fed's statistic test kit on its declaration."""

import numpy as np
import pytest
from leteo_skewness import SkewnessRequest, SkewnessStatistic
from scipy import stats

from leteo_fed.testing.statistic_kit import check_statistic

RNG = np.random.default_rng(7)
X = np.column_stack([RNG.gamma(2.0, 3.0, 150), RNG.normal(50, 10, 150)])
SITES = [{"score": X[i, 0], "age": X[i, 1]} for i in np.array_split(np.arange(150), 3)]


def reference(pooled):
    x = np.column_stack([pooled["score"], pooled["age"]])
    skew, kurt = stats.skew(x, bias=True), stats.kurtosis(x, bias=True)
    return {
        "skewness": {"score": skew[0], "age": skew[1]},
        "excess_kurtosis": {"score": kurt[0], "age": kurt[1]},
    }


def test_the_kit_passes():
    request = SkewnessRequest(features=("score", "age"))
    check_statistic(SkewnessStatistic(), request, SITES, reference=reference)


def test_a_constant_column_is_refused():
    sites = [{"score": np.ones(5), "age": np.arange(5.0)} for _ in range(2)]
    with pytest.raises(Exception, match="constant"):
        check_statistic(SkewnessStatistic(), SkewnessRequest(features=("score",)), sites)
