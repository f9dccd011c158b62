"""Generalization hierarchies (ARX CSV format) and numeric interval labels.

An ARX hierarchy file has one line per original value; the columns, separated by ``;``, are the
value's ancestors from level 0 (the value itself) to the most general level (usually ``*``). The
file is refused unless it describes a tree: each label at level i has exactly one parent at
level i+1, and a label reused across levels must cover the same leaves. Only then are "the label
of a set of values" (:meth:`Hierarchy.lca`) and "label covers value" well defined.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from leteo_fed.errors import DataError

TOP = "*"


def as_labels(values: Sequence[object] | np.ndarray) -> np.ndarray:
    """Values as strings matching hierarchy labels: integral floats print as ints (17.0 -> "17")."""
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if finite.all() and np.all(arr == np.round(arr)):
            return arr.astype(np.int64).astype(str).astype(object)
    if arr.dtype.kind == "O":
        return np.array([_label(v) for v in arr.tolist()], dtype=object) if arr.size else arr
    return arr.astype(str).astype(object)


def _label(value: object) -> str:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)


class Hierarchy:
    """A validated value-generalization tree for one column."""

    def __init__(
        self, rows: Sequence[Sequence[str]], column: str, source: str = "<memory>"
    ) -> None:
        self.column = column
        if not rows:
            raise DataError(f"hierarchy for column {column!r} ({source}) is empty", field=column)
        width = len(rows[0])
        table: list[list[str]] = []
        seen: dict[str, int] = {}
        for lineno, row in enumerate(rows, start=1):
            cells = [c.strip() for c in row]
            if len(cells) != width:
                raise DataError(
                    f"hierarchy for column {column!r} ({source}) line {lineno}: {len(cells)} "
                    f"levels, expected {width} like line 1",
                    field=column,
                )
            if any(not c for c in cells):
                raise DataError(
                    f"hierarchy for column {column!r} ({source}) line {lineno}: empty label",
                    field=column,
                )
            if cells[0] in seen:
                raise DataError(
                    f"hierarchy for column {column!r} ({source}): value {cells[0]!r} appears on "
                    f"lines {seen[cells[0]]} and {lineno}",
                    field=column,
                )
            seen[cells[0]] = lineno
            table.append(cells)
        self._table = np.array(table, dtype=object)  # shape (n_leaves, levels)
        self._leaf_index = {leaf: i for i, leaf in enumerate(self._table[:, 0])}

        # A tree: every label at level i has a single parent at level i + 1.
        for i in range(width - 1):
            parent: dict[str, str] = {}
            for child, up in zip(self._table[:, i], self._table[:, i + 1], strict=True):
                if parent.setdefault(child, up) != up:
                    raise DataError(
                        f"hierarchy for column {column!r} ({source}) is not a tree: label "
                        f"{child!r} at level {i} has parents {parent[child]!r} and {up!r} "
                        f"at level {i + 1}",
                        field=column,
                    )
        # A label reused on several levels must name the same set of leaves.
        leaves: dict[str, frozenset[str]] = {}
        for i in range(width):
            groups: dict[str, set[str]] = {}
            for leaf, lab in zip(self._table[:, 0], self._table[:, i], strict=True):
                groups.setdefault(lab, set()).add(leaf)
            for lab, group in groups.items():
                fs = frozenset(group)
                if leaves.setdefault(lab, fs) != fs:
                    raise DataError(
                        f"hierarchy for column {column!r} ({source}): label {lab!r} covers "
                        f"different values on different levels",
                        field=column,
                    )
        self._leaves = leaves

    @classmethod
    def from_csv(cls, path: str | Path, column: str) -> Hierarchy:
        """Parse an ARX hierarchy file (``;``-separated, no header)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise DataError(
                f"hierarchy file for column {column!r} not found: {path}", field=column
            ) from exc
        rows = [
            r for r in csv.reader(text.splitlines(), delimiter=";") if any(c.strip() for c in r)
        ]
        return cls(rows, column, str(path))

    @property
    def levels(self) -> int:
        """Number of levels including level 0 (ARX's "height")."""
        return int(self._table.shape[1])

    @property
    def height(self) -> int:
        """Highest generalization level (``levels - 1``)."""
        return self.levels - 1

    @property
    def leaves(self) -> list[str]:
        """Original values, in file order."""
        return list(self._table[:, 0])

    @property
    def table(self) -> np.ndarray:
        """The (n_values, levels) label matrix; row i holds value i's ancestors."""
        return self._table.copy()

    def labels(self) -> set[str]:
        """Every label of the tree (plus the implicit top ``*``)."""
        return set(self._leaves) | {TOP}

    def _indices(self, values: Iterable[object] | np.ndarray) -> np.ndarray:
        labels = as_labels(
            np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=object)
        )
        uniq, inv = np.unique(labels.astype(str), return_inverse=True)
        idx = np.empty(len(uniq), dtype=np.int64)
        for j, u in enumerate(uniq):
            if u not in self._leaf_index:
                raise DataError(
                    f"value {u!r} of column {self.column!r} is not in its hierarchy",
                    field=self.column,
                )
            idx[j] = self._leaf_index[u]
        return idx[inv.reshape(-1)]

    def generalize(self, values: Iterable[object] | np.ndarray, level: int) -> np.ndarray:
        """Map original values to their ancestor labels at ``level`` (vectorized)."""
        if not 0 <= level <= self.height:
            raise DataError(
                f"level {level} out of range 0..{self.height} for column {self.column!r}",
                field=self.column,
            )
        return self._table[self._indices(values), level]

    def lca(self, values: Iterable[object] | np.ndarray) -> str:
        """Label of the lowest common ancestor of a non-empty set of original values (``*`` at most)."""
        idx = np.unique(self._indices(values))
        if idx.size == 0:
            raise DataError(f"lca of an empty set for column {self.column!r}", field=self.column)
        sub = self._table[idx]
        for level in range(self.levels):
            if np.all(sub[:, level] == sub[0, level]):
                return str(sub[0, level])
        return TOP

    def leaves_under(self, label: str) -> frozenset[str]:
        """Original values covered by ``label`` (all of them for ``*``)."""
        if label == TOP:
            return frozenset(self._leaf_index)
        try:
            return self._leaves[label]
        except KeyError:
            raise DataError(
                f"label {label!r} is not in the hierarchy of column {self.column!r}",
                field=self.column,
            ) from None

    def covers(self, label: str, value: object) -> bool:
        """Whether ``label`` is ``value`` itself or one of its ancestors."""
        if label == TOP:
            return True
        leaves = self._leaves.get(label)
        return leaves is not None and _label(value) in leaves

    def __repr__(self) -> str:
        return f"Hierarchy({self.column!r}, values={len(self._leaf_index)}, levels={self.levels})"


# ---------------------------------------------------------------------------- numeric intervals

_INTERVAL = re.compile(r"^\[\s*([^,\]]+?)\s*,\s*([^,\]]+?)\s*\]$")


def _fmt_number(x: float) -> str:
    x = float(x)
    if math.isfinite(x) and x.is_integer():
        return str(int(x))
    return repr(x)


def format_interval(lo: float, hi: float) -> str:
    """Release label of a closed interval: ``"[lo, hi]"``, or the value itself when ``lo == hi``."""
    if lo > hi:
        raise DataError(f"interval with lo {lo} > hi {hi}")
    if lo == hi:
        return _fmt_number(lo)
    return f"[{_fmt_number(lo)}, {_fmt_number(hi)}]"


def parse_interval(text: object) -> tuple[float, float]:
    """Inverse of :func:`format_interval`; a bare number is a point, ``*`` the whole line."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        return float(text), float(text)
    s = str(text).strip()
    if s == TOP:
        return -math.inf, math.inf
    m = _INTERVAL.match(s)
    try:
        if m:
            lo, hi = float(m.group(1)), float(m.group(2))
            if lo > hi:
                raise DataError(f"interval {s!r} has lo > hi")
            return lo, hi
        v = float(s)
    except ValueError:
        raise DataError(f"{s!r} is not a number, an interval '[lo, hi]' or '*'") from None
    return v, v
