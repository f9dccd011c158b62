"""LDP collections for their callers: the wire types and every kind's entry points in one place.

The kinds of collection are report statistics (`leteo_fed.protocols.reports`), one module each:
frequency oracles (`ldp_frequency`), numeric means (`ldp_mean`), geo points (`ldp_geo`) and
naive Bayes (`ldp_naive_bayes`); `ldp_round` runs them as rounds. The functions here find a
spec's kind and ask it: the owner's encoding and perturbation, the aggregator's accumulator.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from leteo_fed.ldp import frequency
from leteo_fed.protocols.ldp_frequency import check_reports
from leteo_fed.protocols.ldp_geo import GEO, draw_epsilon, geo_estimate, geo_noise_variance
from leteo_fed.protocols.ldp_mean import is_multi
from leteo_fed.protocols.ldp_naive_bayes import (
    NbAccumulator,
    naive_bayes_model,
    nb_predict,
    nb_report_rows,
)
from leteo_fed.protocols.ldp_spec import (
    CHUNK_REPORTS,
    MAX_POINTS,
    REPORT_DTYPES,
    FeatureDomain,
    LdpRequest,
    LdpSpec,
    NbConditional,
)
from leteo_fed.protocols.reports import (
    ReportAccumulator,
    column_statistic,
    mechanisms,
    new_accumulator,
    spec_from_request,
    statistic_for,
)

__all__ = [
    "CHUNK_REPORTS",
    "GEO",
    "MAX_POINTS",
    "REPORT_DTYPES",
    "FeatureDomain",
    "LdpRequest",
    "LdpSpec",
    "NbAccumulator",
    "NbConditional",
    "ReportAccumulator",
    "check_reports",
    "draw_epsilon",
    "encode_column",
    "geo_estimate",
    "geo_noise_variance",
    "is_frequency",
    "is_multi",
    "is_naive_bayes",
    "mechanism_for",
    "mechanisms",
    "naive_bayes_model",
    "nb_predict",
    "nb_report_rows",
    "new_accumulator",
    "perturb_chunks",
    "spec_from_request",
]


def is_frequency(mechanism: str) -> bool:
    return mechanism in frequency.FREQUENCY_MECHANISMS


def is_naive_bayes(spec: LdpSpec) -> bool:
    return statistic_for(spec).labelled


def mechanism_for(spec: LdpSpec) -> Any:
    """The frequency oracle or numeric mechanism a round's public parameters define (naive
    Bayes: its unfitted model, one oracle per report type; geo: None)."""
    return statistic_for(spec).mechanism(spec)


def encode_column(values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
    """An owner's column values as its kind's mechanism takes them (`ColumnReports.encode`)."""
    return column_statistic(spec).encode(values, spec)


def perturb_chunks(
    encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
) -> Iterator[np.ndarray]:
    """Per-record perturbation, CHUNK_REPORTS records at a time."""
    return column_statistic(spec).perturb(encoded, spec, rng)
