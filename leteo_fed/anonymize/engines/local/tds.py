"""Top-down specialization in process: the shared :class:`~planners.tds.TdsPlanner` on NumPy
records.

Like the Spark engine (:mod:`engines.spark.tds`), the rows are first compacted to distinct (leaf
codes, sensitive combo) rows with a weight, each round's records are aggregated from those, and
the release maps each distinct QI value to the label of the final cut node holding it. Taxonomies,
leaf codes and the privacy model are built from the same distinct values and counts as the Spark
engine builds them, so the planner makes the same choices on both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pyarrow as pa

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.engines.local.table import Coded, Sensitive, labels, numbers
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.taxonomy import Taxonomy, leaf_codes
from leteo_fed.anonymize.planners.tds import (
    TdsPlanner,
    TdsStats,
    build_taxonomies,
    privacy_model,
    specialize,
)


def _suppressed_rows(nodes: np.ndarray, gone: np.ndarray | None) -> np.ndarray:
    """Which compact rows lie in a withheld class (its node tuple is one of ``gone``)."""
    if gone is None or len(gone) == 0:
        return np.zeros(len(nodes), dtype=bool)
    _, inverse = unique_rows(np.concatenate([np.asarray(gone, dtype=np.int64), nodes]))
    return np.isin(inverse[len(gone) :], inverse[: len(gone)])


def anonymize_table(
    table: pa.Table,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    sens: Sensitive,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[pa.Array], np.ndarray, TdsStats]:
    """TDS over the table's QIs; each QI's release labels, the withheld rows, and stats."""
    n = table.num_rows
    coded: list[Coded] = []
    for q in config.quasi_identifiers:
        as_double = q.type == "numeric" and q.column not in hierarchies
        column = table.column(q.column)
        coded.append(numbers(column) if as_double else labels(column))
    distinct = [(c.values, c.counts) for c in coded]
    taxonomies = build_taxonomies(config, hierarchies, distinct)
    value_codes = [leaf_codes(t, c.values) for t, c in zip(taxonomies, coded, strict=True)]
    code_counts = [
        np.bincount(vc, weights=c.counts, minlength=t.n_codes).astype(int)
        for vc, c, t in zip(value_codes, coded, taxonomies, strict=True)
    ]
    model = privacy_model(config, hierarchies, sens.numeric, sens.combos, sens.counts)
    combo = model.combo_codes(sens.combos)[sens.code]

    rows = np.column_stack([vc[c.codes] for vc, c in zip(value_codes, coded, strict=True)])
    planner = TdsPlanner(config, taxonomies, model, code_counts, n)
    nodes, inverse = specialize(rows, combo, taxonomies, planner, progress)

    out = []
    for j, (t, c) in enumerate(zip(taxonomies, coded, strict=True)):
        node = Taxonomy.pick(planner.final_ranges(j), value_codes[j])
        words = pa.array([t.labels[x] for x in node.tolist()], pa.string())
        out.append(pa.DictionaryArray.from_arrays(pa.array(c.codes), words).dictionary_decode())
    withheld = _suppressed_rows(nodes, planner.suppressed_keys)[inverse]
    stats = TdsStats(
        n,
        planner.n_classes,
        planner.rounds,
        planner.n_suppressed,
        len(nodes),
        list(planner.history),
    )
    return out, withheld, stats
