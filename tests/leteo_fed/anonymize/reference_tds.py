"""TDS on in-memory columns: the NumPy REFERENCE the tests hold both engines to (small data).

It drives the planner of :mod:`planners.tds` over columns checked by
:mod:`reference_table`, exactly as the in-process engine does over Arrow columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from reference_table import read_columns

from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.taxonomy import leaf_codes
from leteo_fed.anonymize.planners.tds import (
    Specialization,
    TdsPlanner,
    build_taxonomies,
    privacy_model,
    specialize,
)


@dataclass(frozen=True)
class TdsResult:
    """Released columns (QIs generalized, others unchanged) and the withheld rows."""

    released: dict[str, np.ndarray]
    suppressed: np.ndarray
    n_classes: int
    rounds: int
    history: list[Specialization]


def anonymize(
    columns: dict[str, np.ndarray],
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    progress: Callable[[str], None] | None = None,
) -> TdsResult:
    """TDS on in-memory columns (reference implementation; small data)."""
    table = read_columns(columns, config)
    n, qvals = table.n, table.qi_values
    distinct = [np.unique(v, return_counts=True) for v in qvals]
    taxonomies = build_taxonomies(config, hierarchies, distinct)
    codes = np.column_stack([leaf_codes(t, v) for t, v in zip(taxonomies, qvals, strict=True)])
    code_counts = [np.bincount(codes[:, j], minlength=t.n_codes) for j, t in enumerate(taxonomies)]

    model = privacy_model(
        config, hierarchies, table.numeric_sensitive, table.row_combos, np.ones(n)
    )
    combo = model.combo_codes(table.row_combos)

    planner = TdsPlanner(config, taxonomies, model, code_counts, n)
    nodes, inv = specialize(codes, combo, taxonomies, planner, progress)

    released = {name: np.asarray(col) for name, col in columns.items()}
    for j, (q, t) in enumerate(zip(config.quasi_identifiers, taxonomies, strict=True)):
        labels = np.array(t.labels, dtype=object)
        released[q.column] = labels[nodes[inv, j]]
    assert planner.suppressed_keys is not None
    gone = {tuple(k) for k in planner.suppressed_keys.tolist()}
    suppressed_c = np.array([tuple(r) in gone for r in nodes.tolist()], dtype=bool)
    return TdsResult(
        released, suppressed_c[inv], planner.n_classes, planner.rounds, list(planner.history)
    )
