"""Mondrian in process: NumPy histograms per round, the shared round planner, row codes.

The rows stay as integer codes (:mod:`engines.local.table`). Each round one histogram per QI over
the rows of the still-splittable partitions goes to :class:`~planners.mondrian.RoundPlanner` (the
same planner the Spark engine feeds), and the rows of cut partitions move to their children with array
look-ups; the release labels come from each final partition. No Python loop runs over rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from leteo_fed.anonymize.engines.local.table import Coded, Sensitive, labels, numbers
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.planners.mondrian import Cuts, MondrianStats, QIRound, RoundPlanner


@dataclass(frozen=True)
class _QI:
    coded: Coded
    numeric: bool
    leaf: np.ndarray | None  # categorical: code -> hierarchy leaf index


def _histogram(
    qi: _QI, rows: np.ndarray, pid: np.ndarray, combo: np.ndarray, n_combos: int
) -> QIRound:
    """(pid, value, combo) -> rows over the given rows, by one sort of a packed int64 key."""
    nv = len(qi.coded.values)
    key = (pid[rows] * nv + qi.coded.codes[rows]) * n_combos + combo[rows]
    uniq, count = np.unique(key, return_counts=True)
    c = uniq % n_combos
    rest = uniq // n_combos
    v, p = rest % nv, rest // nv
    value = qi.coded.values[v].astype(float) if qi.numeric else qi.leaf[v]  # type: ignore[index]
    return QIRound(p, value, c, count)


def _move(pid: np.ndarray, rows: np.ndarray, cuts: Cuts, qis: list[_QI], next_id: int) -> None:
    """Rows of the cut partitions go to their children (in place)."""
    if cuts.num_pid.size:
        at = np.full(next_id, -1, dtype=np.int64)
        at[cuts.num_pid] = np.arange(cuts.num_pid.size)
        r = rows[at[pid[rows]] >= 0]
        i = at[pid[r]]
        value = np.empty(r.size)
        for j in np.unique(cuts.num_attr).tolist():
            mine = cuts.num_attr[i] == j
            value[mine] = qis[j].coded.values[qis[j].coded.codes[r[mine]]]
        pid[r] = np.where(value <= cuts.num_threshold[i], cuts.num_left[i], cuts.num_right[i])
    if cuts.cat_pid.size:
        width = max(len(q.leaf) for q in qis if q.leaf is not None)
        key = cuts.cat_pid * width + cuts.cat_leaf
        order = np.argsort(key)
        key, child = key[order], cuts.cat_child[order]
        attr = np.full(next_id, -1, dtype=np.int64)
        attr[cuts.cat_pid] = cuts.cat_attr
        r = rows[attr[pid[rows]] >= 0]
        leaf = np.empty(r.size, dtype=np.int64)
        a = attr[pid[r]]
        for j in np.unique(a).tolist():
            mine = a == j
            table = qis[j].leaf
            assert table is not None
            leaf[mine] = table[qis[j].coded.codes[r[mine]]]
        pid[r] = child[np.searchsorted(key, pid[r] * width + leaf)]


def anonymize_table(
    table: pa.Table,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    sens: Sensitive,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[pa.Array], MondrianStats]:
    """Mondrian over the table's QIs; returns each QI's release labels (row order) and stats."""
    planner = RoundPlanner(config, hierarchies, sens.numeric)
    model = planner.start(sens.combos, sens.counts)
    combo = model.combo_codes(sens.combos)[sens.code]
    n_combos = len(model.combos)
    qis: list[_QI] = []
    for j, q in enumerate(config.quasi_identifiers):
        if q.type == "numeric":
            qis.append(_QI(numbers(table.column(q.column)), True, None))
        else:
            coded = labels(table.column(q.column))
            qis.append(_QI(coded, False, planner.leaf_index(j, coded.values.tolist())))
    n = table.num_rows
    pid = np.zeros(n, dtype=np.int64)
    active = np.array([0], dtype=np.int64)
    while active.size:
        live = np.zeros(planner.next_id, dtype=bool)
        live[active] = True
        rows = np.flatnonzero(live[pid])
        cuts = planner.plan([_histogram(q, rows, pid, combo, n_combos) for q in qis])
        _move(pid, rows, cuts, qis, planner.next_id)
        active = cuts.children
        if progress is not None:
            progress(f"mondrian round {planner.rounds}: {cuts.n_cuts} cuts")
    final, per_qi = planner.final()
    index = np.searchsorted(final, pid)
    out = [
        pa.DictionaryArray.from_arrays(
            pa.array(index), pa.array(lab.tolist(), pa.string())
        ).dictionary_decode()
        for lab in per_qi
    ]
    return out, MondrianStats(n, int(final.size), planner.rounds)
