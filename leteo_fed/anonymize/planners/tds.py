"""Top-down specialization (Fung et al.) with k / l / t checks on every step.

Every quasi-identifier starts fully generalized (the root of its :class:`Taxonomy`); each round
picks one node X of one QI's current cut and replaces it by its children, greedily by

    gain = information gain / (1 + anonymity gain)

where the anonymity gain is A(before) - A(after), A = the smallest equivalence class (clamped at
0: with suppression, A may grow), and the information gain is either the rise in Shannon entropy
(bits) of the released QI tuples, or the fall of the mean squared normalized distance between
original values and their released generalization (see :mod:`models.taxonomy`). The seed writes
the entropy gain as E(before) - E(after), which is never positive for a specialization; we use
E(after) - E(before). A specialization is allowed only if every resulting class meets k,
l-diversity and t-closeness, or the rows of those that do not fit in the suppression budget
(``suppression_limit`` x rows; such classes are withheld from the release).

The rounds only read a *records* table: for the current classes (``j = -1``) and for each QI j,
the classes the table would have if every node of j's cut were specialized, each split by
sensitive combination, with row counts. :class:`TdsPlanner` turns records into decisions;
:func:`specialize` computes records with NumPy from the distinct rows (for the in-process engine,
:mod:`engines.local.tds`, and the tests' reference ``reference_tds.py``), :mod:`engines.spark.tds`
with one Spark aggregation per round. Records are put in a canonical order first, so all three
make bit-identical decisions.

Specializations that leave every class's rows unchanged (all rows of X fall under one child) are
applied together in one round: they change no other candidate's score and stay valid forever, so
the greedy would take them anyway; this only saves rounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from leteo_fed.anonymize.arrays import unique_rows
from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.privacy import Combo, PrivacyModel
from leteo_fed.anonymize.models.taxonomy import Taxonomy, taxonomy_for
from leteo_fed.errors import DataError

_BLOCK = 1 << 22  # cells per (classes x combos) block handed to the privacy model


def suppression_budget(config: AnonymizationConfig, n_rows: int) -> int:
    """Rows that may be withheld: floor(suppression_limit x rows)."""
    return int(math.floor(config.suppression_limit * n_rows + 1e-9))


def privacy_model(
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    numeric_sensitive: Sequence[bool],
    combos: Sequence[Combo],
    counts: np.ndarray,
) -> PrivacyModel:
    """The models TDS checks, with t tightened by the most the suppression budget can shift."""
    n = int(np.sum(counts))
    budget = suppression_budget(config, n)
    margin = budget / (n - budget) if budget else 0.0
    return PrivacyModel(config, hierarchies, numeric_sensitive, combos, counts, t_margin=margin)


@dataclass(frozen=True)
class Records:
    """(j, class node tuple, sensitive combo) -> rows, aggregated and canonically ordered."""

    j: np.ndarray
    tup: np.ndarray  # (R, m) node ids
    combo: np.ndarray
    count: np.ndarray

    @classmethod
    def aggregate(
        cls, j: np.ndarray, tup: np.ndarray, combo: np.ndarray, count: np.ndarray
    ) -> Records:
        keys = np.column_stack([j, tup, combo]).astype(np.int64)
        uniq, inv = unique_rows(keys)
        summed = np.bincount(inv, weights=count, minlength=len(uniq))
        return cls(uniq[:, 0], uniq[:, 1:-1], uniq[:, -1], np.rint(summed).astype(np.int64))

    def select(self, j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sel = self.j == j
        return self.tup[sel], self.combo[sel], self.count[sel]


@dataclass(frozen=True)
class Specialization:
    """Replace ``node`` of QI ``attr`` by its children; the scores it was chosen with."""

    attr: int
    node: int
    gain: float
    info_gain: float
    anonymity_gain: float


@dataclass(frozen=True)
class TdsStats:
    """What a TDS run did (either engine)."""

    n_rows: int
    n_partitions: int  # released equivalence classes
    rounds: int
    n_suppressed: int
    distinct_rows: int
    history: list[Specialization]


@dataclass(frozen=True)
class _Classes:
    keys: np.ndarray  # (classes, m)
    sizes: np.ndarray
    ok: np.ndarray


def _nlogn(x: np.ndarray) -> np.ndarray:
    x = x.astype(float)
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def _group_min(index: np.ndarray, values: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, np.inf)
    np.minimum.at(out, index[mask], values[mask].astype(float))
    return out


@dataclass
class TdsPlanner:
    """Greedy TDS decisions from per-round records (shared by the NumPy and Spark drivers)."""

    config: AnonymizationConfig
    taxonomies: Sequence[Taxonomy]
    model: PrivacyModel
    code_counts: Sequence[np.ndarray]  # per QI: rows per leaf code
    n_rows: int
    rounds: int = 0
    history: list[Specialization] = field(default_factory=list)
    suppressed_keys: np.ndarray | None = None
    n_classes: int = 0
    n_suppressed: int = 0

    def __post_init__(self) -> None:
        self.cut: list[set[int]] = [{0} for _ in self.taxonomies]
        self.budget = suppression_budget(self.config, self.n_rows)
        self._sq: dict[tuple[int, int], float] = {}

    def _classes(self, tup: np.ndarray, combo: np.ndarray, count: np.ndarray) -> _Classes:
        keys, inv = unique_rows(tup)
        n, c = len(keys), len(self.model.combos)
        sizes = np.bincount(inv, weights=count, minlength=n)
        ok = np.empty(n, dtype=bool)
        order = np.argsort(inv, kind="stable")
        inv_s, combo_s, count_s = inv[order], combo[order], count[order]
        step = max(1, _BLOCK // max(c, 1))
        bounds = np.searchsorted(inv_s, np.arange(0, n + step, step).clip(max=n))
        for b, lo in enumerate(range(0, n, step)):
            hi = min(lo + step, n)
            s, e = bounds[b], bounds[b + 1]
            mat = np.zeros((hi - lo, c))
            np.add.at(mat, (inv_s[s:e] - lo, combo_s[s:e]), count_s[s:e])
            ok[lo:hi] = self.model.satisfied(mat)
        return _Classes(keys, np.rint(sizes).astype(np.int64), ok)

    def _sq_gain(self, j: int, node: int) -> float:
        key = (j, node)
        if key not in self._sq:
            self._sq[key] = self.taxonomies[j].sq_gain(node, self.code_counts[j])
        return self._sq[key]

    def _candidates(
        self, j: int, records: Records, cur: _Classes
    ) -> list[tuple[Specialization, bool]]:
        """Valid specializations on QI j, each with "leaves every class's rows unchanged"."""
        tup, combo, count = records.select(j)
        if tup.size == 0:
            return []
        new = self._classes(tup, combo, count)
        tax = self.taxonomies[j]
        x_new = tax.parent[new.keys[:, j]]
        nodes, idx = np.unique(x_new, return_inverse=True)
        idx = idx.reshape(-1)
        k = len(nodes)
        s_new = np.bincount(idx, weights=_nlogn(new.sizes), minlength=k)
        v_new = np.bincount(idx, weights=new.sizes * ~new.ok, minlength=k)
        a_new = _group_min(idx, new.sizes, new.ok, k)
        n_new = np.bincount(idx, minlength=k)

        x_cur = cur.keys[:, j]
        pos = np.searchsorted(nodes, x_cur).clip(max=k - 1)
        inside = nodes[pos] == x_cur
        s_old = np.bincount(pos[inside], weights=_nlogn(cur.sizes[inside]), minlength=k)
        v_old = np.bincount(pos[inside], weights=(cur.sizes * ~cur.ok)[inside], minlength=k)
        n_old = np.bincount(pos[inside], minlength=k)
        # smallest kept class outside X: the two smallest per-node minima of the current cut
        all_nodes, aidx = np.unique(x_cur, return_inverse=True)
        mins = _group_min(aidx.reshape(-1), cur.sizes, cur.ok, len(all_nodes))
        order = np.argsort(mins, kind="stable")
        m1 = mins[order[0]]
        m2 = mins[order[1]] if len(order) > 1 else np.inf
        a_rest = np.where(nodes == all_nodes[order[0]], m2, m1)

        v_cur = float((cur.sizes * ~cur.ok).sum())
        a_cur = float(cur.sizes[cur.ok].min())
        a_after = np.minimum(a_rest, a_new)
        valid = (v_cur - v_old + v_new <= self.budget + 0.5) & np.isfinite(a_after)
        if self.config.info_gain == "entropy":
            info = (s_old - s_new) / self.n_rows / math.log(2)
        else:
            m = len(self.taxonomies)
            info = np.array([self._sq_gain(j, int(x)) for x in nodes]) / (self.n_rows * m)
        anon = np.maximum(a_cur - a_after, 0.0)
        gain = info / (1.0 + anon)
        same = n_new == n_old
        return [
            (
                Specialization(j, int(nodes[i]), float(gain[i]), float(info[i]), float(anon[i])),
                bool(same[i]),
            )
            for i in np.flatnonzero(valid)
        ]

    def choose(self, records: Records) -> list[Specialization]:
        """This round's specializations (empty: TDS is finished; call :meth:`finish`)."""
        cur = self._classes(*records.select(-1))
        if self.rounds == 0:
            if int(cur.sizes.sum()) != self.n_rows:
                raise DataError(f"records cover {int(cur.sizes.sum())} of {self.n_rows} rows")
            if not cur.ok.all():
                extra = (
                    " with the configured l-diversity / t-closeness"
                    if self.n_rows >= self.config.k
                    else ""
                )
                raise DataError(
                    f"no output can reach k={self.config.k}{extra}: the whole table "
                    f"({self.n_rows} rows) does not satisfy the privacy models"
                )
        self.rounds += 1
        cands = [c for j in range(len(self.taxonomies)) for c in self._candidates(j, records, cur)]
        free = [c for c, same in cands if same]
        if free:
            picked = free
        elif cands:
            picked = [min((c for c, _ in cands), key=lambda c: (-c.gain, c.attr, c.node))]
        else:
            self.suppressed_keys = cur.keys[~cur.ok]
            self.n_classes = int(cur.ok.sum())
            self.n_suppressed = int(cur.sizes[~cur.ok].sum())
            return []
        for c in picked:
            self.cut[c.attr].remove(c.node)
            self.cut[c.attr].update(self.taxonomies[c.attr].children[c.node])
        self.history.extend(picked)
        return picked

    def final_ranges(self, j: int) -> list[tuple[int, int, int]]:
        """(lo, hi, node) of QI j's final cut, in leaf-code order."""
        tax = self.taxonomies[j]
        return sorted((int(tax.lo[x]), int(tax.hi[x]), x) for x in self.cut[j])

    def describe(self, picked: Sequence[Specialization]) -> str:
        parts = []
        for c in picked[:3]:
            tax = self.taxonomies[c.attr]
            parts.append(f"{tax.column} {tax.labels[c.node]} -> {len(tax.children[c.node])} parts")
        more = f" (+{len(picked) - 3} more)" if len(picked) > 3 else ""
        return f"tds round {self.rounds}: " + ", ".join(parts) + more


# ---------------------------------------------------------------------------- the NumPy loop


def compact_records(
    nodes: np.ndarray, child: np.ndarray, combo: np.ndarray, weight: np.ndarray
) -> Records:
    parts_j, parts_t, parts_c, parts_w = [np.full(len(nodes), -1)], [nodes], [combo], [weight]
    for j in range(nodes.shape[1]):
        sel = child[:, j] != nodes[:, j]
        tup = nodes[sel].copy()
        tup[:, j] = child[sel, j]
        parts_j.append(np.full(int(sel.sum()), j))
        parts_t.append(tup)
        parts_c.append(combo[sel])
        parts_w.append(weight[sel])
    return Records.aggregate(
        np.concatenate(parts_j),
        np.concatenate(parts_t),
        np.concatenate(parts_c),
        np.concatenate(parts_w),
    )


def build_taxonomies(
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    distinct: Sequence[tuple[np.ndarray, np.ndarray]],
) -> list[Taxonomy]:
    """One tree per QI from its distinct values (sorted) and their row counts."""
    return [
        taxonomy_for(q.column, q.type, hierarchies.get(q.column), values, counts)
        for q, (values, counts) in zip(config.quasi_identifiers, distinct, strict=True)
    ]


def specialize(
    codes: np.ndarray,
    combo: np.ndarray,
    taxonomies: Sequence[Taxonomy],
    planner: TdsPlanner,
    progress: Callable[[str], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The top-down loop over the distinct (leaf codes, sensitive combo) rows, shared by the
    tests' reference and the in-process engine: the planner picks specializations until none is
    allowed. Returns each distinct row's node per QI, and each input row's distinct row."""
    compact, inverse = unique_rows(np.column_stack([codes, combo]))
    weight = np.bincount(inverse, minlength=len(compact))
    leaf, combo_c = compact[:, :-1], compact[:, -1]
    # annotated: NumPy's stubs resolve np.zeros(<tuple[Any, ...]>) to a 0-d array
    nodes: np.ndarray = np.zeros(leaf.shape, dtype=np.int64)
    child = np.column_stack(
        [t.pick(t.child_ranges(0), leaf[:, j]) for j, t in enumerate(taxonomies)]
    )
    while True:
        picked = planner.choose(compact_records(nodes, child, combo_c, weight))
        if not picked:
            break
        for s in picked:
            hit = nodes[:, s.attr] == s.node
            nodes[hit, s.attr] = child[hit, s.attr]
            tax = taxonomies[s.attr]
            child[hit, s.attr] = tax.pick(tax.next_ranges(s.node), leaf[hit, s.attr])
        if progress is not None:
            progress(planner.describe(picked))
    return nodes, inverse
