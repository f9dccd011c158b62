"""Re-identification risk of a release, from its equivalence class sizes (ARX's sample-based
measures).

An attacker who knows a person's quasi-identifiers finds the person's class in the release; if
the person is in the release (the prosecutor model), each of the class's f records is theirs
with probability 1/f. The marketer re-identifies as many records as possible: on average one per
class. Population models (journalist risk, population uniques) need a population table or
model this job does not have; they are not reported. Measured on the published rows only:
suppressed rows are not in the release and carry no risk there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from leteo_fed.errors import ConfigError

DEFAULT_THRESHOLD = 0.2  # a record is "at risk" above it: in a class of fewer than 5 rows


def check_threshold(value: float, field: str) -> float:
    if not 0 < value <= 1:
        raise ConfigError(f"'{field}' must be in (0, 1], got {value}", field=field)
    return float(value)


def reidentification_risk(
    sizes: np.ndarray, threshold: float = DEFAULT_THRESHOLD
) -> dict[str, Any]:
    """Prosecutor and marketer risk and sample uniques of classes of `sizes` rows.

    prosecutor: `highest` = 1 / smallest class; `average` = classes / rows (the expected share
    of targets re-identified); `records_at_risk` = share of rows whose risk 1/f exceeds
    `threshold` (f * threshold < 1, exact for integer f); `records_at_highest_risk` = share of
    rows in the smallest classes. marketer: classes / rows. sample_uniques: share of rows alone
    in their class.
    """
    f = np.asarray(sizes, dtype=np.int64)
    if f.size == 0 or f.min() < 1:
        raise ValueError("class sizes must be positive and at least one class given")
    n = int(f.sum())
    classes = int(f.size)
    smallest = int(f.min())
    at_risk = int(f[f * threshold < 1].sum())
    return {
        "measured_on": "published rows",
        "prosecutor": {
            "highest": 1.0 / smallest,
            "average": classes / n,
            "threshold": threshold,
            "records_at_risk": at_risk / n,
            "records_at_highest_risk": int(f[f == smallest].sum()) / n,
        },
        "marketer": {"average": classes / n},
        "sample_uniques": int(f[f == 1].sum()) / n,
    }
