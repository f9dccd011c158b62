"""Re-identification risk (ARX's sample-based prosecutor and marketer measures) against values
computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from leteo_fed.anonymize.models.config import parse_config
from leteo_fed.anonymize.models.risk import reidentification_risk
from leteo_fed.errors import ConfigError


def test_hand_computed_classes():
    # 20 rows in classes of 1, 2, 3, 4 and 10 rows
    risk = reidentification_risk(np.array([1, 2, 3, 4, 10]))
    p = risk["prosecutor"]
    assert p["highest"] == 1.0  # the unique row is found for sure
    assert p["average"] == 5 / 20  # one success per class
    assert p["threshold"] == 0.2
    assert p["records_at_risk"] == 10 / 20  # rows in classes under 5: 1 + 2 + 3 + 4
    assert p["records_at_highest_risk"] == 1 / 20
    assert risk["marketer"]["average"] == 5 / 20
    assert risk["sample_uniques"] == 1 / 20


def test_the_threshold_is_exclusive_and_exact_for_integer_sizes():
    sizes = np.array([5, 5, 4, 10])  # 24 rows; at 0.2 only the class of 4 is at risk (1/5 is not)
    assert reidentification_risk(sizes, 0.2)["prosecutor"]["records_at_risk"] == 4 / 24
    assert reidentification_risk(sizes, 0.1)["prosecutor"]["records_at_risk"] == 14 / 24
    assert reidentification_risk(sizes, 1.0)["prosecutor"]["records_at_risk"] == 0.0
    k_anonymous = reidentification_risk(np.array([7, 9, 12]))
    assert k_anonymous["prosecutor"]["highest"] == 1 / 7 and k_anonymous["sample_uniques"] == 0.0
    assert k_anonymous["prosecutor"]["records_at_highest_risk"] == 7 / 28


@pytest.mark.parametrize("bad", [0, -0.1, 1.5])
def test_a_threshold_outside_0_1_is_refused_by_name(tmp_path, bad):
    doc = {
        "anonymization": {"algorithm": "mondrian", "k": 2, "risk_threshold": bad},
        "quasi_identifier": [{"column": "age", "type": "numeric"}],
    }
    with pytest.raises(ConfigError, match="anonymization.risk_threshold"):
        parse_config(doc, tmp_path)
    doc["anonymization"]["risk_threshold"] = 0.05
    assert parse_config(doc, tmp_path).risk_threshold == 0.05
