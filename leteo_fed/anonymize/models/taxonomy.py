"""Specialization trees for top-down specialization: one per quasi-identifier.

TDS (Fung et al.) refines, per quasi-identifier, a partition of its domain with a partitioning
function p_i. We make p_i a fixed tree built before the first round:

* a categorical QI (or a numeric one given a hierarchy file) uses its hierarchy, with chains of
  single children collapsed (specializing them would change nothing but the label, so we start
  from the most specific label of the chain);
* a numeric QI without hierarchy uses a binary tree of value ranges, each range split at its
  row-weighted lower median (left: values <= median), so both halves hold rows.

Leaves are numbered in depth-first order, so every node covers a *contiguous* range of leaf codes
``[lo, hi]``; "which child of X holds this row" is then a comparison of the row's leaf code with a
few range ends, cheap both in NumPy (``searchsorted``) and in a Spark SQL ``CASE``.

Each tree also carries the normalized distance d(value, node) in [0, 1] used by the
squared-distance information gain: for a numeric range, |value - midpoint| / (column max - min);
for a hierarchy node, its level / the hierarchy's height (the generalization-lattice distance).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, as_labels, format_interval
from leteo_fed.errors import DataError


@dataclass(frozen=True)
class Taxonomy:
    """A QI's specialization tree. Node 0 is the root; leaves are original values."""

    column: str
    keys: list[Hashable]  # leaf code -> original value (float, or hierarchy leaf label)
    labels: list[str]  # node -> release label
    lo: np.ndarray  # node -> first leaf code it covers
    hi: np.ndarray  # node -> last leaf code it covers
    parent: np.ndarray  # node -> parent node (-1 for the root)
    children: list[tuple[int, ...]]  # node -> child nodes, in leaf-code order
    level: np.ndarray  # node -> normalized lattice distance to its leaves (categorical)
    values: np.ndarray | None = None  # numeric: leaf code -> value
    span: float = 0.0  # numeric: max - min

    @property
    def n_nodes(self) -> int:
        return len(self.labels)

    @property
    def n_codes(self) -> int:
        return len(self.keys)

    def is_leaf(self, node: int) -> bool:
        return not self.children[node]

    def child_ranges(self, node: int) -> list[tuple[int, int, int]]:
        """(lo, hi, child) for the children of ``node``, or the node itself when it is a leaf."""
        if self.is_leaf(node):
            return [(int(self.lo[node]), int(self.hi[node]), node)]
        return [(int(self.lo[c]), int(self.hi[c]), c) for c in self.children[node]]

    def next_ranges(self, node: int) -> list[tuple[int, int, int]]:
        """After specializing ``node``: (lo, hi, next candidate) within each of its children."""
        return [r for c in self.children[node] for r in self.child_ranges(c)]

    @staticmethod
    def pick(ranges: list[tuple[int, int, int]], codes: np.ndarray) -> np.ndarray:
        """The node of the (sorted, contiguous) range holding each code."""
        ends = np.array([hi for _, hi, _ in ranges])
        ids = np.array([c for _, _, c in ranges], dtype=np.int64)
        return ids[np.searchsorted(ends, codes, side="left")]

    def distance(self, codes: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """d(value of each code, node) in [0, 1]."""
        if self.values is None:
            return self.level[nodes]
        if self.span <= 0:
            return np.zeros(len(codes))
        mid = (self.values[self.lo[nodes]] + self.values[self.hi[nodes]]) / 2
        return np.abs(self.values[codes] - mid) / self.span

    def sq_gain(self, node: int, code_counts: np.ndarray) -> float:
        """Sum over the rows under ``node`` of d^2(value, node) - d^2(value, child holding it)."""
        codes = np.arange(int(self.lo[node]), int(self.hi[node]) + 1)
        child = self.pick(self.child_ranges(node), codes)
        here = self.distance(codes, np.full(codes.size, node))
        below = self.distance(codes, child)
        return float((code_counts[codes] * (here**2 - below**2)).sum())


class _Builder:
    def __init__(self) -> None:
        self.labels: list[str] = []
        self.lo: list[int] = []
        self.hi: list[int] = []
        self.parent: list[int] = []
        self.children: list[list[int]] = []
        self.level: list[float] = []

    def add(self, label: str, lo: int, hi: int, parent: int, level: float) -> int:
        node = len(self.labels)
        self.labels.append(label)
        self.lo.append(lo)
        self.hi.append(hi)
        self.parent.append(parent)
        self.children.append([])
        self.level.append(level)
        if parent >= 0:
            self.children[parent].append(node)
        return node

    def build(self, column: str, keys: list[Hashable], **extra: object) -> Taxonomy:
        return Taxonomy(
            column=column,
            keys=keys,
            labels=self.labels,
            lo=np.array(self.lo, dtype=np.int64),
            hi=np.array(self.hi, dtype=np.int64),
            parent=np.array(self.parent, dtype=np.int64),
            children=[tuple(c) for c in self.children],
            level=np.array(self.level, dtype=float),
            **extra,  # type: ignore[arg-type]
        )


def numeric_taxonomy(column: str, values: np.ndarray, counts: np.ndarray) -> Taxonomy:
    """Binary median-split tree over the sorted distinct ``values`` (with row ``counts``)."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.int64)
    if values.size == 0:
        raise DataError(f"numeric QI {column!r} has no values", field=column)
    if np.any(np.diff(values) <= 0):
        raise DataError(f"values of {column!r} must be sorted and distinct", field=column)
    cum = np.concatenate([[0], np.cumsum(counts)])
    b = _Builder()
    stack = [(0, values.size - 1, -1)]
    while stack:
        lo, hi, parent = stack.pop()
        node = b.add(format_interval(values[lo], values[hi]), lo, hi, parent, 0.0)
        if lo == hi:
            continue
        rows = cum[hi + 1] - cum[lo]
        # lower median: the value holding row number (rows - 1) // 2 (0-based) of the range
        split = int(np.searchsorted(cum, cum[lo] + (rows - 1) // 2, side="right")) - 1
        split = min(max(split, lo), hi - 1)  # both halves non-empty
        stack.extend([(split + 1, hi, node), (lo, split, node)])  # left popped first
    return b.build(
        column, [float(v) for v in values], values=values, span=float(values[-1] - values[0])
    )


def hierarchy_taxonomy(h: Hierarchy) -> Taxonomy:
    """The hierarchy as a tree (adding a ``*`` root if the top level has several labels)."""
    table = h.table.astype(str)
    if np.unique(table[:, -1]).size > 1:
        table = np.concatenate([table, np.full((table.shape[0], 1), TOP, dtype=object)], axis=1)
    height = table.shape[1] - 1
    b = _Builder()
    keys: list[Hashable] = []

    def visit(rows: np.ndarray, level: int, parent: int) -> None:
        # collapse chains: go down while every row shares one label below
        while level > 0 and np.unique(table[rows, level - 1]).size == 1:
            level -= 1
        lo = len(keys)
        if level == 0:
            keys.append(str(table[rows[0], 0]))
            b.add(str(table[rows[0], 0]), lo, lo, parent, 0.0)
            return
        node = b.add(str(table[rows[0], level]), lo, lo, parent, level / height if height else 0.0)
        labels = table[rows, level - 1]
        _, first = np.unique(labels, return_index=True)
        for label in labels[np.sort(first)]:  # children in file order
            visit(rows[labels == label], level - 1, node)
        b.hi[node] = len(keys) - 1

    visit(np.arange(table.shape[0]), height, -1)
    return b.build(h.column, keys)


def taxonomy_for(
    column: str,
    kind: str,
    hierarchy: Hierarchy | None,
    values: np.ndarray,
    counts: np.ndarray,
) -> Taxonomy:
    """The tree for one QI given its distinct values (sorted) and their row counts."""
    if hierarchy is not None:
        taxonomy = hierarchy_taxonomy(hierarchy)
        known = set(taxonomy.keys)
        labels = as_labels(np.asarray(values, dtype=object)).astype(str)
        missing = [v for v in labels.tolist() if v not in known]
        if missing:
            raise DataError(
                f"value {missing[0]!r} of column {column!r} is not in its hierarchy", field=column
            )
        return taxonomy
    if kind != "numeric":
        raise DataError(f"categorical QI {column!r} needs a hierarchy", field=column)
    return numeric_taxonomy(column, values, counts)


def leaf_codes(t: Taxonomy, values: np.ndarray) -> np.ndarray:
    """Leaf code of each value (numeric: by value; hierarchy: by label)."""
    if t.values is not None:
        codes = np.searchsorted(t.values, np.asarray(values, dtype=float))
        codes = np.minimum(codes, t.n_codes - 1)
        if not np.array_equal(t.values[codes], np.asarray(values, dtype=float)):
            raise DataError(f"a value of {t.column!r} is not in its taxonomy", field=t.column)
        return codes
    index = {k: i for i, k in enumerate(t.keys)}
    labels = as_labels(np.asarray(values, dtype=object)).astype(str)
    uniq, inv = np.unique(labels, return_inverse=True)
    try:
        codes = np.array([index[u] for u in uniq.tolist()], dtype=np.int64)
    except KeyError as exc:
        raise DataError(
            f"value {exc.args[0]!r} of column {t.column!r} is not in its hierarchy", field=t.column
        ) from None
    return codes[inv.reshape(-1)]
