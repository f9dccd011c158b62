"""Mondrian's cut decisions for a whole round at once, as array operations.

Both engines of the job feed this planner the same per-round histograms, so they release the same
table by construction: the in-process engine (:mod:`engines.local.mondrian`) computes them with
NumPy, the Spark engine (:mod:`engines.spark.mondrian`) with one aggregation per round. The rules
are those of the per-partition reference ``Planner`` (``tests/leteo_fed/anonymize/
reference_mondrian.py``, which the tests hold this planner to), evaluated for every active
partition and every quasi-identifier together:

* candidates: a numeric QI whose values differ, scored (max - min) / (table max - min); a
  categorical QI whose lowest common ancestor (LCA) is above the leaves, scored |leaves under the
  LCA| / |hierarchy leaves|; tried by decreasing score, ties in configuration order;
* a numeric cut is at the lower median (left <= m < right) and needs a non-empty right side; a
  categorical cut goes to the children of the LCA present in the partition;
* a cut is allowed only when every part meets k, l and t; the first allowed candidate is taken
  and a partition without one is final.

Child ids are handed out as the reference does (partitions in id order; numeric children left
then right, categorical children by label), so the two produce the same partition tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, format_interval
from leteo_fed.anonymize.models.privacy import Combo, PrivacyModel
from leteo_fed.errors import DataError

_BLOCK = 1 << 22  # cells per (parts x combos) matrix handed to the privacy model


@dataclass(frozen=True)
class MondrianStats:
    """What a Mondrian run did: rows, final partitions (equivalence classes), rounds."""

    n_rows: int
    n_partitions: int
    rounds: int
    n_suppressed: int = 0  # strict Mondrian never needs to suppress


@dataclass(frozen=True)
class QIRound:
    """One QI's histogram over the round's active partitions: (pid, value, combo) -> rows.

    ``value`` is the number (numeric QI) or the hierarchy leaf index (categorical QI).
    """

    pid: np.ndarray
    value: np.ndarray
    combo: np.ndarray
    count: np.ndarray


@dataclass(frozen=True)
class Cuts:
    """A round's decisions: numeric cuts, categorical cuts, and the partitions now final."""

    num_pid: np.ndarray
    num_attr: np.ndarray
    num_threshold: np.ndarray
    num_left: np.ndarray
    num_right: np.ndarray
    cat_pid: np.ndarray  # one row per (cut partition, leaf present in it)
    cat_attr: np.ndarray
    cat_leaf: np.ndarray
    cat_child: np.ndarray
    children: np.ndarray  # the new partitions (next round's active set), ascending

    @property
    def n_cuts(self) -> int:
        return int(self.num_pid.size + np.unique(self.cat_pid).size)


class _Tree:
    """A categorical QI's hierarchy as integer node ids (ordered like their labels)."""

    def __init__(self, h: Hierarchy) -> None:
        table = h.table.astype(str)
        self.names, codes = np.unique(table, return_inverse=True)
        self.anc = codes.reshape(table.shape).astype(np.int64)  # (leaves, levels)
        self.levels = table.shape[1]
        self.n_leaves = len(h.leaves)
        self.under = np.stack(  # (levels, nodes): leaves whose ancestor at that level is the node
            [np.bincount(self.anc[:, lv], minlength=self.names.size) for lv in range(self.levels)]
        )
        self.leaves = np.array(h.leaves, dtype=object)
        self.leaf_of = {leaf: i for i, leaf in enumerate(h.leaves)}
        self.column = h.column

    def leaf_index(self, labels: Sequence[str]) -> np.ndarray:
        try:
            return np.array([self.leaf_of[v] for v in labels], dtype=np.int64)
        except KeyError as exc:
            raise DataError(
                f"value {exc.args[0]!r} of column {self.column!r} is not in its hierarchy",
                field=self.column,
            ) from None


@dataclass
class _QIView:
    """One QI over the active partitions: per-partition summary and per-candidate parts."""

    candidate: np.ndarray  # (P,) bool
    score: np.ndarray  # (P,) float
    valid: np.ndarray  # (P,) bool: the cut exists and every part is allowed
    label: np.ndarray | None  # (P,) release label if the partition ends now (None: numeric)
    extra: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class RoundPlanner:
    """Vectorized Mondrian planner; call :meth:`start`, then :meth:`plan` once per round."""

    config: AnonymizationConfig
    hierarchies: Mapping[str, Hierarchy]
    numeric_sensitive: Sequence[bool]
    next_id: int = 1
    rounds: int = 0
    model: PrivacyModel | None = None

    def __post_init__(self) -> None:
        self.qis = self.config.quasi_identifiers
        self.trees: list[_Tree | None] = []
        for q in self.qis:
            if q.type == "categorical":
                h = self.hierarchies.get(q.column)
                if h is None:
                    raise DataError(
                        f"categorical QI {q.column!r} needs a hierarchy", field=q.column
                    )
                self.trees.append(_Tree(h))
            elif q.type == "numeric":
                self.trees.append(None)
            else:
                raise DataError(f"unknown QI type {q.type!r}", field=q.column)
        self._span: list[float] = []
        self._final_pid: list[np.ndarray] = []
        self._final_labels: list[list[np.ndarray]] = []

    # ------------------------------------------------------------------ setup

    def start(self, root_combos: Sequence[Combo], root_counts: np.ndarray) -> PrivacyModel:
        """Fix the table-wide sensitive distribution from the root's (combo, count) pairs."""
        self.model = PrivacyModel(
            self.config, self.hierarchies, self.numeric_sensitive, root_combos, root_counts
        )
        return self.model

    def leaf_index(self, j: int, labels: Sequence[str]) -> np.ndarray:
        """Hierarchy leaf indices of categorical QI ``j``'s labels (refuses unknown labels)."""
        tree = self.trees[j]
        assert tree is not None, f"QI #{j} is numeric"
        return tree.leaf_index(labels)

    def leaf_labels(self, j: int, leaf: np.ndarray) -> np.ndarray:
        """The hierarchy labels of categorical QI ``j``'s leaf indices."""
        tree = self.trees[j]
        assert tree is not None, f"QI #{j} is numeric"
        return tree.leaves[leaf]

    def final(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """(final partition ids ascending, per QI their release labels)."""
        if not self._final_pid:
            return np.zeros(0, np.int64), [np.zeros(0, object) for _ in self.qis]
        pid = np.concatenate(self._final_pid)
        order = np.argsort(pid, kind="stable")
        labels = [
            np.concatenate([f[j] for f in self._final_labels])[order] for j in range(len(self.qis))
        ]
        return pid[order], labels

    @property
    def n_final(self) -> int:
        return int(sum(p.size for p in self._final_pid))

    # ------------------------------------------------------------------ checks

    def _groups_ok(
        self, group: np.ndarray, combo: np.ndarray, count: np.ndarray, n_groups: int
    ) -> np.ndarray:
        """Whether each part (rows of ``group``) meets k, l and t, in bounded blocks."""
        assert self.model is not None, "call start() first"
        c = len(self.model.combos)
        ok = np.ones(n_groups, dtype=bool)
        if n_groups == 0:
            return ok
        order = np.argsort(group, kind="stable")
        g, cb, ct = group[order], combo[order], count[order]
        step = max(1, _BLOCK // max(c, 1))
        bounds = np.searchsorted(g, np.arange(0, n_groups + step, step).clip(max=n_groups))
        for b, lo in enumerate(range(0, n_groups, step)):
            hi = min(lo + step, n_groups)
            s, e = bounds[b], bounds[b + 1]
            mat = np.zeros((hi - lo, c))
            np.add.at(mat, (g[s:e] - lo, cb[s:e]), ct[s:e])
            ok[lo:hi] = self.model.satisfied(mat)
        return ok

    def _first_round(self, hists: Sequence[QIRound]) -> None:
        assert self.model is not None, "call start() first"
        if np.any(hists[0].pid != 0):
            raise DataError("the first round must see exactly the root partition 0")
        for j, q in enumerate(self.qis):
            vals = hists[j].value.astype(float)
            self._span.append(float(vals.max() - vals.min()) if q.type == "numeric" else 0.0)
        full = np.bincount(hists[0].combo, weights=hists[0].count, minlength=len(self.model.combos))
        if not self.model.satisfied(full)[0]:
            n = int(full.sum())
            extra = " with the configured l-diversity / t-closeness" if n >= self.config.k else ""
            raise DataError(
                f"no output can reach k={self.config.k}{extra}: the whole table "
                f"({n} rows) does not satisfy the privacy models"
            )

    # ------------------------------------------------------------------ per QI

    def _numeric(self, j: int, h: QIRound, pi: np.ndarray, n_parts: int) -> _QIView:
        starts = np.searchsorted(pi, np.arange(n_parts))
        ends = np.searchsorted(pi, np.arange(n_parts), side="right") - 1
        value = h.value.astype(float)
        lo, hi = value[starts], value[ends]
        span = self._span[j]
        candidate = hi > lo
        score = (hi - lo) / span if span > 0 else np.zeros(n_parts)
        # lower median per partition: first (pid, value) whose running count reaches (n-1)//2+1
        new_group = np.ones(value.size, dtype=bool)
        new_group[1:] = (pi[1:] != pi[:-1]) | (value[1:] != value[:-1])
        gstart = np.flatnonzero(new_group)
        per_value = np.add.reduceat(h.count, gstart)
        gpart = pi[gstart]
        running = np.cumsum(per_value)
        before = np.concatenate([[0], running])[np.searchsorted(gpart, np.arange(n_parts))]
        within = running - before[gpart]
        total = np.bincount(gpart, weights=per_value, minlength=n_parts).astype(np.int64)
        target = (total - 1) // 2 + 1
        reach = np.flatnonzero(within >= target[gpart])
        first = reach[np.searchsorted(gpart[reach], np.arange(n_parts))]
        median = value[gstart[first]]
        left = value <= median[pi]
        candidate &= hi > median  # a cut needs rows on the right
        live = candidate[pi]
        group = pi * 2 + (~left).astype(np.int64)
        ok = self._groups_ok(group[live], h.combo[live], h.count[live], 2 * n_parts)
        valid = candidate & ok[0::2] & ok[1::2]
        return _QIView(candidate, score, valid, None, {"median": median, "lo": lo, "hi": hi})

    def _categorical(self, j: int, h: QIRound, pi: np.ndarray, n_parts: int) -> _QIView:
        tree = self.trees[j]
        assert tree is not None
        leaf = h.value.astype(np.int64)
        anc = tree.anc[leaf]  # (rows, levels)
        starts = np.searchsorted(pi, np.arange(n_parts))
        same = np.minimum.reduceat(anc, starts, axis=0) == np.maximum.reduceat(anc, starts, axis=0)
        lca = np.where(same.any(axis=1), same.argmax(axis=1), tree.levels)
        top = lca >= tree.levels
        node = anc[starts, np.minimum(lca, tree.levels - 1)]
        under = np.where(top, tree.n_leaves, tree.under[np.minimum(lca, tree.levels - 1), node])
        labels = np.where(top, TOP, tree.names[node].astype(object))
        candidate = lca > 0
        score = under / tree.n_leaves
        # parts: the children of the LCA (one level down) present in the partition
        child = anc[np.arange(leaf.size), np.maximum(lca[pi], 1) - 1]
        live = candidate[pi]
        key = pi * tree.names.size + child
        keys, group = np.unique(key[live], return_inverse=True)
        ok = self._groups_ok(group.reshape(-1), h.combo[live], h.count[live], keys.size)
        part_of_key = keys // tree.names.size
        bad = np.bincount(part_of_key, weights=~ok, minlength=n_parts) > 0
        valid = candidate & ~bad
        extra = {"child": child, "group_key": keys}
        return _QIView(candidate, score, valid, labels.astype(object), extra)

    # ------------------------------------------------------------------ the round

    def plan(self, hists: Sequence[QIRound]) -> Cuts:
        """One round over the active partitions named in ``hists`` (one histogram per QI)."""
        if len(hists) != len(self.qis):
            raise DataError(f"expected {len(self.qis)} histograms, got {len(hists)}")
        if self.rounds == 0:
            self._first_round(hists)
        self.rounds += 1
        hists = [_canonical(h) for h in hists]
        parts = np.unique(hists[0].pid)
        n_parts = parts.size
        views: list[_QIView] = []
        for j, q in enumerate(self.qis):
            h = hists[j]
            pi = np.searchsorted(parts, h.pid)
            if q.type == "numeric":
                views.append(self._numeric(j, h, pi, n_parts))
            else:
                views.append(self._categorical(j, h, pi, n_parts))
        m = len(self.qis)
        score = np.stack([np.where(v.candidate, v.score, -np.inf) for v in views], axis=1)
        valid = np.stack([v.valid for v in views], axis=1)
        order = np.argsort(-score, axis=1, kind="stable")  # ties: configuration order
        ranked = np.take_along_axis(valid, order, axis=1)
        cut: np.ndarray = np.asarray(ranked.any(axis=1), dtype=bool)
        attr = order[np.arange(n_parts), ranked.argmax(axis=1)] if m else np.zeros(0, np.int64)

        final = np.flatnonzero(~cut)
        self._final_pid.append(parts[final])
        self._final_labels.append([_labels(v, final) for v in views])
        return self._cuts(hists, parts, cut, attr, views)

    def _cuts(
        self,
        hists: Sequence[QIRound],
        parts: np.ndarray,
        cut: np.ndarray,
        attr: np.ndarray,
        views: list[_QIView],
    ) -> Cuts:
        """Number the children and describe how rows move to them."""
        cut_idx = np.flatnonzero(cut)
        n_children = np.full(cut_idx.size, 2, dtype=np.int64)
        cat_groups: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for j, q in enumerate(self.qis):
            if q.type == "numeric":
                continue
            keys = views[j].extra["group_key"]
            part = keys // self.trees[j].names.size  # type: ignore[union-attr]
            per_part = np.bincount(part, minlength=parts.size)
            mine = attr[cut_idx] == j
            n_children[mine] = per_part[cut_idx[mine]]
            cat_groups[j] = (keys, part)
        first_child = self.next_id + np.concatenate([[0], np.cumsum(n_children)[:-1]])
        self.next_id += int(n_children.sum())
        start_of = np.full(parts.size, -1, dtype=np.int64)
        start_of[cut_idx] = first_child

        numeric_qi = np.array([q.type == "numeric" for q in self.qis], dtype=bool)
        num = cut_idx[numeric_qi[attr[cut_idx]]]
        num_attr = attr[num]
        medians = np.stack([v.extra.get("median", np.full(parts.size, np.nan)) for v in views])
        thresholds = medians[num_attr, num]
        cat_pid, cat_attr, cat_leaf, cat_child = [], [], [], []
        for j, (keys, part) in cat_groups.items():
            chosen = cut & (attr == j)
            if not chosen.any():
                continue
            tree = self.trees[j]
            assert tree is not None
            h = hists[j]
            pi = np.searchsorted(parts, h.pid)
            rows = np.flatnonzero(chosen[pi])
            pairs = np.unique(pi[rows] * tree.n_leaves + h.value[rows].astype(np.int64))
            p_of, leaf = pairs // tree.n_leaves, pairs % tree.n_leaves
            child_node = views[j].extra["child"]
            key = (
                p_of * tree.names.size
                + child_node[rows][
                    np.searchsorted(
                        pi[rows] * tree.n_leaves + h.value[rows].astype(np.int64), pairs
                    )
                ]
            )
            rank = np.searchsorted(keys, key) - np.searchsorted(part, p_of)
            cat_pid.append(parts[p_of])
            cat_attr.append(np.full(pairs.size, j, dtype=np.int64))
            cat_leaf.append(leaf)
            cat_child.append(start_of[p_of] + rank)
        children = np.arange(int(first_child[0]) if cut_idx.size else self.next_id, self.next_id)
        return Cuts(
            num_pid=parts[num],
            num_attr=num_attr.astype(np.int64),
            num_threshold=thresholds,
            num_left=start_of[num],
            num_right=start_of[num] + 1,
            cat_pid=_cat(cat_pid),
            cat_attr=_cat(cat_attr),
            cat_leaf=_cat(cat_leaf),
            cat_child=_cat(cat_child),
            children=children,
        )


def _labels(view: _QIView, rows: np.ndarray) -> np.ndarray:
    """Release labels of the given partitions: the LCA label, or the interval [min, max]."""
    if view.label is not None:
        return view.label[rows]
    pairs, inverse = np.unique(
        np.stack([view.extra["lo"][rows], view.extra["hi"][rows]], axis=1),
        axis=0,
        return_inverse=True,
    )
    text = np.array([format_interval(a, b) for a, b in pairs.tolist()], dtype=object)
    return text[inverse.reshape(-1)]


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


def _canonical(h: QIRound) -> QIRound:
    """Rows sorted by (pid, value, combo), so every sum runs in the same order in both engines."""
    order = np.lexsort((h.combo, h.value, h.pid))
    return QIRound(
        h.pid[order].astype(np.int64),
        h.value[order],
        h.combo[order].astype(np.int64),
        h.count[order].astype(np.int64),
    )
