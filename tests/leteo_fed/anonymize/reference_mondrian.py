"""Strict multidimensional Mondrian (LeFevre et al. 2006) with k / l / t checks on every cut.

Every partition is processed on its own (top-down), so the result does not depend on the order in
which partitions are visited; we visit them in *rounds* (all partitions created in round r are
examined in round r + 1), which is also how the Spark version (:mod:`engines.spark.mondrian`) works.

The cut decisions only read a per-partition *histogram*: for each quasi-identifier, the counts of
(QI value, sensitive-value tuple) pairs. :class:`Planner` turns such histograms into cuts, one
partition at a time: it is the readable REFERENCE. The job's two engines use
:class:`~planners.mondrian.RoundPlanner`, which applies these rules to a whole
round with array operations, and the tests hold it to this planner (same partitions, same labels).

Rules (per partition):

* attributes are tried by decreasing normalized width (ties: configuration order); numeric width
  is (max - min) / (table max - table min), categorical width is |leaves under the partition's
  LCA| / |hierarchy leaves|;
* numeric cut at the lower median m (left: values <= m, right: values > m), skipped when the right
  side is empty; categorical cut into the children of the LCA present in the partition;
* a cut is taken only if every part has >= k rows and meets the configured l-diversity and
  t-closeness (w.r.t. the whole table's sensitive distribution); otherwise the next attribute is
  tried, and a partition with no allowed cut is final.

Release: numeric QI -> ``format_interval(min, max)`` of the partition, categorical -> LCA label.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from reference_table import read_columns

from leteo_fed.anonymize.models.config import AnonymizationConfig, QuasiIdentifier
from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, format_interval
from leteo_fed.anonymize.models.privacy import Combo, PrivacyModel
from leteo_fed.errors import DataError

# ---------------------------------------------------------------------------- histograms


@dataclass(frozen=True)
class QIHistogram:
    """One partition, one QI: counts of (value, sensitive-combination code) pairs.

    ``values`` are floats (numeric QI) or strings (categorical QI); ``combos`` index the planner's
    global list of sensitive-value tuples.
    """

    values: np.ndarray
    combos: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class Split:
    """A cut of partition ``pid`` on QI ``attr``: each listed value goes to ``children[group]``."""

    pid: int
    attr: int
    threshold: float | None  # numeric: left <= threshold < right
    value_child: dict[Hashable, int]  # categorical: value -> child pid
    children: tuple[int, ...]


@dataclass
class Planner:
    """Turns per-partition histograms into Mondrian cuts and release labels.

    ``numeric_sensitive[i]`` tells whether sensitive column i is numeric (ordered distance by
    default). ``root_combos`` are all sensitive-value tuples of the table (any order).
    """

    config: AnonymizationConfig
    hierarchies: Mapping[str, Hierarchy]
    numeric_sensitive: Sequence[bool]
    labels: dict[int, tuple[str, ...]] = field(default_factory=dict)
    next_id: int = 1
    rounds: int = 0
    _span: list[float] = field(default_factory=list)
    model: PrivacyModel | None = None

    def __post_init__(self) -> None:
        self.qis: tuple[QuasiIdentifier, ...] = self.config.quasi_identifiers
        self._leaf_index: list[dict[str, int] | None] = []
        for q in self.qis:
            if q.type == "categorical":
                h = self.hierarchies.get(q.column)
                if h is None:
                    raise DataError(
                        f"categorical QI {q.column!r} needs a hierarchy", field=q.column
                    )
                self._leaf_index.append({v: i for i, v in enumerate(h.leaves)})
            elif q.type == "numeric":
                self._leaf_index.append(None)
            else:
                raise DataError(f"unknown QI type {q.type!r}", field=q.column)

    # ------------------------------------------------------------------ setup

    @property
    def combos(self) -> list[Combo]:
        assert self.model is not None, "call start() first"
        return self.model.combos

    def combo_codes(self, combos: Sequence[Combo]) -> np.ndarray:
        """Codes of sensitive tuples (after :meth:`start`)."""
        assert self.model is not None, "call start() first"
        return self.model.combo_codes(combos)

    def start(self, root_combos: Sequence[Combo], root_counts: np.ndarray) -> None:
        """Fix the global sensitive distribution from the root's (combo, count) histogram."""
        self.model = PrivacyModel(
            self.config, self.hierarchies, self.numeric_sensitive, root_combos, root_counts
        )

    def satisfies(self, combo_counts: np.ndarray) -> bool:
        """Whether a part with these per-combo counts meets k, l and t."""
        assert self.model is not None, "call start() first"
        return bool(self.model.satisfied(combo_counts)[0])

    # ------------------------------------------------------------------ cuts

    def _lca(self, j: int, values: np.ndarray) -> tuple[int, str, int]:
        """(level, label, #leaves under it) of the LCA of categorical values of QI j."""
        q = self.qis[j]
        h = self.hierarchies[q.column]
        index = self._leaf_index[j]
        assert index is not None
        try:
            rows = [index[v] for v in values.tolist()]
        except KeyError as exc:
            raise DataError(
                f"value {exc.args[0]!r} of column {q.column!r} is not in its hierarchy",
                field=q.column,
            ) from None
        table = h.table
        sub = table[rows]
        for level in range(h.levels):
            if np.all(sub[:, level] == sub[0, level]):
                label = str(sub[0, level])
                return level, label, int(np.sum(table[:, level] == label))
        return h.levels, TOP, table.shape[0]

    def release_labels(self, hists: Sequence[QIHistogram]) -> tuple[str, ...]:
        out = []
        for j, q in enumerate(self.qis):
            vals = np.unique(hists[j].values)
            if q.type == "numeric":
                out.append(format_interval(float(vals[0]), float(vals[-1])))
            else:
                out.append(self._lca(j, vals)[1])
        return tuple(out)

    def _part_counts(self, hist: QIHistogram, member: np.ndarray) -> np.ndarray:
        return np.bincount(
            hist.combos[member], weights=hist.counts[member], minlength=len(self.combos)
        )

    def _try(self, pid: int, hists: Sequence[QIHistogram]) -> Split | None:
        cands: list[tuple[float, int, int | None]] = []  # (score, QI, LCA level or None)
        for j, q in enumerate(self.qis):
            vals = np.unique(hists[j].values)
            if q.type == "numeric":
                lo, hi = float(vals[0]), float(vals[-1])
                if hi > lo:
                    span = self._span[j]
                    cands.append(((hi - lo) / span if span > 0 else 0.0, j, None))
            else:
                lca_level, _, n_under = self._lca(j, vals)
                if lca_level > 0:
                    h = self.hierarchies[q.column]
                    cands.append((n_under / len(h.leaves), j, lca_level))
        cands.sort(key=lambda c: (-c[0], c[1]))
        for _, j, level in cands:
            hist = hists[j]
            if level is None:
                vals, inv = np.unique(hist.values.astype(float), return_inverse=True)
                per_value = np.bincount(inv, weights=hist.counts)
                n = per_value.sum()
                median = float(vals[np.searchsorted(np.cumsum(per_value), (n - 1) // 2 + 1)])
                left = hist.values.astype(float) <= median
                if left.all():
                    continue
                groups = [left, ~left]
                threshold: float | None = median
                keys: list[np.ndarray] = []
            else:
                h = self.hierarchies[self.qis[j].column]
                index = self._leaf_index[j]
                assert index is not None
                table = h.table
                child = table[[index[v] for v in hist.values.tolist()], level - 1].astype(str)
                labels = np.unique(child)
                groups = [child == lab for lab in labels]
                threshold = None
                keys = [np.unique(hist.values[g]) for g in groups]
            if all(self.satisfies(self._part_counts(hist, g)) for g in groups):
                children = tuple(range(self.next_id, self.next_id + len(groups)))
                self.next_id += len(groups)
                value_child = {v: children[g] for g, ks in enumerate(keys) for v in ks.tolist()}
                return Split(pid, j, threshold, value_child, children)
        return None

    def plan(self, parts: Mapping[int, Sequence[QIHistogram]]) -> list[Split]:
        """One round: cut every given partition if possible; the others become final."""
        self.rounds += 1
        if self.rounds == 1:
            if list(parts) != [0]:
                raise DataError("the first round must see exactly the root partition 0")
            root = parts[0]
            for j, q in enumerate(self.qis):
                if q.type == "numeric":
                    vals = root[j].values.astype(float)
                    self._span.append(float(vals.max() - vals.min()))
                else:
                    self._span.append(0.0)
            full = np.bincount(root[0].combos, weights=root[0].counts, minlength=len(self.combos))
            if not self.satisfies(full):
                n = int(full.sum())
                extra = (
                    " with the configured l-diversity / t-closeness" if n >= self.config.k else ""
                )
                raise DataError(
                    f"no output can reach k={self.config.k}{extra}: the whole table "
                    f"({n} rows) does not satisfy the privacy models"
                )
        splits = []
        for pid in sorted(parts):
            split = self._try(pid, parts[pid])
            if split is None:
                self.labels[pid] = self.release_labels(parts[pid])
            else:
                splits.append(split)
        return splits


# ---------------------------------------------------------------------------- NumPy driver


@dataclass(frozen=True)
class MondrianResult:
    """Released columns (QIs generalized, others unchanged), row -> partition (0..n-1)."""

    released: dict[str, np.ndarray]
    partition_id: np.ndarray
    n_partitions: int
    rounds: int


def anonymize(
    columns: dict[str, np.ndarray],
    config: AnonymizationConfig,
    hierarchies: dict[str, Hierarchy],
    progress: Callable[[str], None] | None = None,
) -> MondrianResult:
    """Mondrian on in-memory columns (reference implementation; small data)."""
    table = read_columns(columns, config)
    n, qvals, numeric_sens, row_combos = (
        table.n,
        table.qi_values,
        table.numeric_sensitive,
        table.row_combos,
    )
    planner = Planner(config, hierarchies, numeric_sens)
    planner.start(row_combos, np.ones(n, dtype=np.int64))
    combo = planner.combo_codes(row_combos)

    pid = np.zeros(n, dtype=np.int64)
    active = [0]
    while active:
        parts: dict[int, list[QIHistogram]] = {}
        for p in active:
            rows = np.flatnonzero(pid == p)
            hists = []
            for vals in qvals:
                keys, inv = np.unique(vals[rows], return_inverse=True)
                pairs, counts = np.unique(
                    np.stack([inv.reshape(-1), combo[rows]], axis=1), axis=0, return_counts=True
                )
                hists.append(QIHistogram(keys[pairs[:, 0]], pairs[:, 1], counts))
            parts[p] = hists
        splits = planner.plan(parts)
        for s in splits:
            rows = np.flatnonzero(pid == s.pid)
            v = qvals[s.attr][rows]
            if s.threshold is not None:
                pid[rows] = np.where(v <= s.threshold, s.children[0], s.children[1])
            else:
                pid[rows] = [s.value_child[x] for x in v.tolist()]
        active = sorted(c for s in splits for c in s.children)
        if progress is not None:
            progress(f"mondrian round {planner.rounds}: {len(splits)} cuts")

    leaves = sorted(planner.labels)
    renumber = {p: i for i, p in enumerate(leaves)}
    part = np.array([renumber[p] for p in pid.tolist()], dtype=np.int64)
    released = {name: np.asarray(col) for name, col in columns.items()}
    for j, q in enumerate(config.quasi_identifiers):
        labels = np.array([planner.labels[p][j] for p in leaves], dtype=object)
        released[q.column] = labels[part]
    return MondrianResult(released, part, len(leaves), planner.rounds)
