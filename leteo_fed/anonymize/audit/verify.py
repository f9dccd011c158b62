"""Independent checks of a released (anonymized) table, written apart from the algorithms.

The anonymizers must not grade their own homework: these functions only look at the released
table (and, for truthfulness / information loss, the original with the same row order) and
recompute k, l, t and the utility metrics from scratch. Tables are ``dict[str, array]`` or
``pyarrow.Table``; ``suppressed`` is a boolean row mask (or ``None``) of rows withheld from the
release, which are excluded from equivalence classes. Group-bys use ``np.unique(...,
return_inverse=True)`` so cost is O(n log n) in numpy, with Python loops only over distinct values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed.anonymize.models.config import QuasiIdentifier
from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, as_labels, parse_interval
from leteo_fed.errors import DataError

Table = Mapping[str, Any]  # dict column -> array-like, or a pyarrow.Table

_BLOCK = 1 << 22  # cells per (classes x values) matrix block in t-closeness


def _n_rows(table: Any) -> int:
    if hasattr(table, "num_rows"):
        return int(table.num_rows)
    if not table:
        raise DataError("table has no columns")
    return len(np.asarray(next(iter(table.values()))))


def _column(table: Any, name: str) -> np.ndarray:
    """One column as a numpy array; DataError naming the column when it is missing."""
    if hasattr(table, "num_rows"):  # pyarrow.Table
        if name not in table.column_names:
            raise DataError(f"column {name!r} not in table {table.column_names}", field=name)
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False))
    if name not in table:
        raise DataError(f"column {name!r} not in table {sorted(table)}", field=name)
    return np.asarray(table[name])


def _mask(suppressed: Any, n: int) -> np.ndarray:
    if suppressed is None:
        return np.zeros(n, dtype=bool)
    mask = np.asarray(suppressed, dtype=bool)
    if mask.shape != (n,):
        raise DataError(f"suppressed mask has shape {mask.shape}, table has {n} rows")
    return mask


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique values, inverse codes); object/mixed columns are compared as strings."""
    arr = values if values.dtype.kind in "biufUS" else as_labels(values).astype(str)
    uniq, inv = np.unique(arr, return_inverse=True)
    return uniq, inv.reshape(-1)


# ---------------------------------------------------------------------------- classes


@dataclass(frozen=True)
class EquivalenceClasses:
    """Row -> class id (-1 for suppressed rows), class sizes and each class's released QI tuple."""

    ids: np.ndarray
    sizes: np.ndarray
    keys: list[tuple[Any, ...]]
    n_suppressed: int

    @property
    def n_classes(self) -> int:
        return int(self.sizes.size)


def equivalence_classes(
    released: Table, qi_columns: Sequence[str], suppressed: Any = None
) -> EquivalenceClasses:
    """Group non-suppressed rows by their released QI values."""
    n = _n_rows(released)
    mask = _mask(suppressed, n)
    keep = np.flatnonzero(~mask)
    ids = np.full(n, -1, dtype=np.int64)
    if not qi_columns:
        raise DataError("no quasi-identifier columns given")
    if keep.size == 0:
        return EquivalenceClasses(ids, np.zeros(0, dtype=np.int64), [], int(mask.sum()))
    cols = [_column(released, c)[keep] for c in qi_columns]
    codes = np.stack([_codes(c)[1] for c in cols], axis=1)
    _, first, inv, sizes = np.unique(
        codes, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    ids[keep] = inv.reshape(-1)
    keys = [tuple(c[i].item() if hasattr(c[i], "item") else c[i] for c in cols) for i in first]
    return EquivalenceClasses(ids, sizes.astype(np.int64), keys, int(mask.sum()))


@dataclass(frozen=True)
class KAnonymityReport:
    """Smallest class size; ``below_k`` lists classes (QI tuple, size) smaller than a target k."""

    k: int
    n_classes: int
    smallest: list[tuple[Any, ...]]
    below_k: list[tuple[tuple[Any, ...], int]]


def k_anonymity(
    released: Table, qi_columns: Sequence[str], suppressed: Any = None, *, k: int | None = None
) -> KAnonymityReport:
    """Minimum equivalence-class size over non-suppressed rows (0 when every row is suppressed)."""
    ec = equivalence_classes(released, qi_columns, suppressed)
    if ec.n_classes == 0:
        return KAnonymityReport(0, 0, [], [])
    kmin = int(ec.sizes.min())
    smallest = [ec.keys[i] for i in np.flatnonzero(ec.sizes == kmin)]
    below = [(ec.keys[i], int(ec.sizes[i])) for i in np.flatnonzero(ec.sizes < k)] if k else []
    return KAnonymityReport(kmin, ec.n_classes, smallest, below)


# ---------------------------------------------------------------------------- l-diversity


@dataclass(frozen=True)
class LDiversityReport:
    """``value``: distinct -> min #distinct; entropy -> min exp(H); recursive -> max r1/(r_l+..+r_m).

    ``satisfied`` compares ``value`` with ``l`` (``>= l``) or, for recursive, ``value < c``;
    ``worst_class`` is the QI tuple attaining ``value``.
    """

    variant: str
    value: float
    satisfied: bool | None
    worst_class: tuple[Any, ...] | None


@dataclass(frozen=True)
class CountMatrix:
    """Sparse (class, sensitive value) -> count entries: all that l and t need to know.

    The in-memory checks build it from rows; the Spark report builds it from a group-by, so both
    grade releases with the same arithmetic. ``values`` are the sorted distinct sensitive values
    that ``val`` indexes; ``sizes`` are the class sizes that ``cls`` indexes.
    """

    cls: np.ndarray
    val: np.ndarray
    counts: np.ndarray
    sizes: np.ndarray
    values: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(self.sizes.size)


def _class_value_counts(
    released: Table, qi_columns: Sequence[str], sensitive: str, suppressed: Any
) -> tuple[EquivalenceClasses, CountMatrix]:
    """Per (class, sensitive value) counts of the non-suppressed rows."""
    ec = equivalence_classes(released, qi_columns, suppressed)
    keep = ec.ids >= 0
    uniq, codes = _codes(_column(released, sensitive)[keep])
    m = max(int(uniq.size), 1)
    pair = ec.ids[keep] * m + codes
    pairs, counts = np.unique(pair, return_counts=True)
    return ec, CountMatrix(pairs // m, pairs % m, counts, ec.sizes, uniq)


@dataclass(frozen=True)
class LScores:
    """Per-class l-diversity scores (see :class:`LDiversityReport` for ``value``'s meaning)."""

    per_class: np.ndarray
    worst: int
    value: float
    satisfied: bool | None


def l_diversity_of_counts(
    cm: CountMatrix,
    variant: str,
    *,
    l: int | None = None,  # noqa: E741
    c: float | None = None,
) -> LScores:
    """Distinct / entropy / recursive (c, l)-diversity of a non-empty count matrix."""
    cls, counts, nc = cm.cls, cm.counts, cm.n_classes
    if nc == 0:
        raise DataError("l-diversity of an empty release (every row suppressed)")
    if variant == "distinct":
        per = np.bincount(cls, minlength=nc).astype(float)
        worst = int(np.argmin(per))
        value = float(per[worst])
        ok = None if l is None else value >= l
    elif variant == "entropy":
        p = counts / cm.sizes[cls]
        h = -np.bincount(cls, weights=p * np.log(p), minlength=nc)
        per = np.exp(h)
        worst = int(np.argmin(per))
        value = float(per[worst])
        # exp(H) >= l  <=>  H >= log l; tolerate float rounding on exact ties.
        ok = None if l is None else bool(h[worst] >= math.log(l) - 1e-12)
    elif variant == "recursive":
        if l is None or c is None:
            raise DataError("recursive (c, l)-diversity needs both l and c")
        order = np.lexsort((-counts, cls))  # by class, then count descending
        cls_s, cnt_s = cls[order], counts[order]
        start = np.searchsorted(cls_s, cls_s, side="left")
        rank = np.arange(cls_s.size) - start  # 0 for r1
        r1 = cnt_s[rank == 0].astype(float)  # one per class, classes in order 0..nc-1
        tail = np.bincount(cls_s, weights=cnt_s * (rank >= l - 1), minlength=nc)
        with np.errstate(divide="ignore"):
            per = np.where(tail > 0, r1 / np.where(tail > 0, tail, 1), np.inf)
        worst = int(np.argmax(per))
        value = float(per[worst])
        ok = bool(np.all(r1 < c * tail))
    else:
        raise DataError(f"unknown l-diversity variant {variant!r} (distinct|entropy|recursive)")
    return LScores(per, worst, value, ok)


def l_diversity(
    released: Table,
    qi_columns: Sequence[str],
    sensitive: str,
    variant: str = "distinct",
    *,
    l: int | None = None,  # noqa: E741
    c: float | None = None,
    suppressed: Any = None,
) -> LDiversityReport:
    """Recompute distinct / entropy / recursive (c, l)-diversity of the released table."""
    ec, cm = _class_value_counts(released, qi_columns, sensitive, suppressed)
    scores = l_diversity_of_counts(cm, variant, l=l, c=c)
    return LDiversityReport(variant, scores.value, scores.satisfied, ec.keys[scores.worst])


# ---------------------------------------------------------------------------- t-closeness


@dataclass(frozen=True)
class TClosenessReport:
    """Largest per-class EMD to the released table's sensitive distribution, and where."""

    t: float
    worst_class: tuple[Any, ...] | None
    per_class: np.ndarray
    distance: str


def _hier_emd(diff: np.ndarray, hierarchy: Hierarchy, leaf_order: np.ndarray) -> np.ndarray:
    """Li et al. 2007 hierarchical EMD; ``diff`` = P_class - Q over ``leaf_order`` (rows = classes).

    Each internal node N at level h costs h/H * min(positive, negative extra of its children),
    where extra(child) is the net surplus of the subtree; a missing single root is added as ``*``.
    """
    table = hierarchy.table
    index = {v: i for i, v in enumerate(table[:, 0])}
    rows = np.array([index[str(v)] for v in leaf_order])
    paths = table[rows]  # (m, levels): ancestors of each sensitive value present
    if np.unique(paths[:, -1]).size > 1:
        paths = np.concatenate([paths, np.full((len(rows), 1), TOP, dtype=object)], axis=1)
    height = paths.shape[1] - 1
    if height == 0:
        return np.zeros(diff.shape[0])
    extra = diff  # per node at current level, starting from leaves
    child_nodes = paths[:, 0]
    total = np.zeros(diff.shape[0])
    for level in range(1, height + 1):
        # node ids at this level and the child -> parent map
        _, parent_of_leaf = np.unique(paths[:, level].astype(str), return_inverse=True)
        _, child_of_leaf = np.unique(child_nodes.astype(str), return_inverse=True)
        n_child, n_parent = child_of_leaf.max() + 1, parent_of_leaf.max() + 1
        parent_of_child = np.empty(n_child, dtype=np.int64)
        parent_of_child[child_of_leaf] = parent_of_leaf
        onehot = np.zeros((n_child, n_parent))
        onehot[np.arange(n_child), parent_of_child] = 1.0
        pos = np.clip(extra, 0, None) @ onehot
        neg = np.clip(-extra, 0, None) @ onehot
        total += (level / height) * np.minimum(pos, neg).sum(axis=1)
        extra = extra @ onehot
        child_nodes = paths[:, level]
    return total


def resolve_distance(
    values: np.ndarray, distance: str | None, hierarchy: Hierarchy | None, column: str
) -> str:
    """The EMD ground distance to use: the configured one, checked, or the default by type.

    Default: hierarchical when a hierarchy is given, ordered for numeric values, equal otherwise.
    """
    numeric = values.dtype.kind in "biuf"
    if distance is None:
        if hierarchy is not None:
            distance = "hierarchical"
        elif numeric:
            distance = "ordered"
        else:
            distance = "equal"
    if distance not in ("ordered", "equal", "hierarchical"):
        raise DataError(f"unknown t-closeness distance {distance!r} (ordered|equal|hierarchical)")
    if distance == "hierarchical" and hierarchy is None:
        raise DataError("hierarchical t-closeness distance needs a hierarchy", field=column)
    if distance == "ordered" and not numeric:
        raise DataError(
            f"ordered distance needs a numeric sensitive column; {column!r} is {values.dtype}",
            field=column,
        )
    return distance


def t_closeness_of_counts(
    cm: CountMatrix, distance: str, hierarchy: Hierarchy | None = None
) -> np.ndarray:
    """Per-class EMD between each class's sensitive distribution and the whole release's.

    ``distance`` must already be resolved (:func:`resolve_distance`); ordered distance needs
    ``cm.values`` sorted ascending. Classes are processed in blocks to bound memory.
    """
    cls, val, counts = cm.cls, cm.val, cm.counts
    nc, m = cm.n_classes, int(cm.values.size)
    if nc == 0:
        raise DataError("t-closeness of an empty release (every row suppressed)")
    q = np.bincount(val, weights=counts, minlength=m)
    q = q / q.sum()
    per = np.empty(nc)
    block = max(1, _BLOCK // max(m, 1))
    order = np.argsort(cls, kind="stable")
    cls_s, val_s, cnt_s = cls[order], val[order], counts[order]
    bounds = np.searchsorted(cls_s, np.arange(0, nc + block, block).clip(max=nc))
    for b, lo in enumerate(range(0, nc, block)):
        hi = min(lo + block, nc)
        s, e = bounds[b], bounds[b + 1]
        mat = np.zeros((hi - lo, m))
        mat[cls_s[s:e] - lo, val_s[s:e]] = cnt_s[s:e]
        diff = mat / cm.sizes[lo:hi, None] - q[None, :]
        if distance == "ordered":
            per[lo:hi] = np.abs(np.cumsum(diff, axis=1)).sum(axis=1) / (m - 1) if m > 1 else 0.0
        elif distance == "equal":
            per[lo:hi] = 0.5 * np.abs(diff).sum(axis=1)
        else:
            if hierarchy is None:
                raise DataError("hierarchical t-closeness distance needs a hierarchy")
            per[lo:hi] = _hier_emd(diff, hierarchy, as_labels(cm.values))
    return per


def t_closeness(
    released: Table,
    qi_columns: Sequence[str],
    sensitive: str,
    *,
    distance: str | None = None,
    hierarchy: Hierarchy | None = None,
    suppressed: Any = None,
) -> TClosenessReport:
    """Max over classes of EMD(class distribution, distribution over all released rows).

    ``distance``: ``ordered`` (numeric: d_ij = |i-j|/(m-1) over the m sorted distinct values),
    ``equal`` (categorical: half L1), ``hierarchical`` (needs ``hierarchy``). Default: ordered for
    numeric columns, hierarchical when a hierarchy is given, equal otherwise.
    """
    values = _column(released, sensitive)
    distance = resolve_distance(values, distance, hierarchy, sensitive)
    ec, cm = _class_value_counts(released, qi_columns, sensitive, suppressed)
    per = t_closeness_of_counts(cm, distance, hierarchy)
    worst = int(np.argmax(per))
    return TClosenessReport(float(per[worst]), ec.keys[worst], per, distance)


# ---------------------------------------------------------------------------- truthfulness


@dataclass(frozen=True)
class Violation:
    """A released value that does not cover the original one."""

    row: int
    column: str
    original: Any
    released: Any
    reason: str


def _qi_types(qi_specs: Sequence[QuasiIdentifier] | Mapping[str, str]) -> dict[str, str]:
    if isinstance(qi_specs, Mapping):
        return dict(qi_specs)
    return {q.column: q.type for q in qi_specs}


def _released_bounds(rel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row (lo, hi) of released numeric labels, plus a row mask of unparseable labels."""
    uniq, inv = _codes(rel)
    lo = np.empty(uniq.size)
    hi = np.empty(uniq.size)
    bad = np.zeros(uniq.size, dtype=bool)
    for j, u in enumerate(uniq.tolist()):
        try:
            lo[j], hi[j] = parse_interval(u)
        except DataError:
            lo[j], hi[j], bad[j] = np.nan, np.nan, True
    return lo[inv], hi[inv], bad[inv]


def _covered_by_hierarchy(orig: np.ndarray, rel: np.ndarray, h: Hierarchy) -> np.ndarray:
    o, r = as_labels(orig).astype(str), as_labels(rel).astype(str)
    pairs, inv = np.unique(np.stack([o, r], axis=1), axis=0, return_inverse=True)
    ok = np.array([h.covers(rl, ol) for ol, rl in pairs.tolist()], dtype=bool)
    return ok[inv.reshape(-1)]


def truthful(
    original: Table,
    released: Table,
    qi_specs: Sequence[QuasiIdentifier] | Mapping[str, str],
    hierarchies: Mapping[str, Hierarchy] | None = None,
    suppressed: Any = None,
) -> Violation | None:
    """First row (lowest index) whose released QI value does not cover the original, or None.

    Covering: ``*``; a closed interval containing the number; the value itself; or a hierarchy
    label that is the value or one of its ancestors. Suppressed rows are not checked.
    """
    hierarchies = hierarchies or {}
    n = _n_rows(released)
    if _n_rows(original) != n:
        raise DataError(f"original has {_n_rows(original)} rows, released has {n}")
    active = ~_mask(suppressed, n)
    first: Violation | None = None
    for column, kind in _qi_types(qi_specs).items():
        orig, rel = _column(original, column), _column(released, column)
        h = hierarchies.get(column)
        if kind == "numeric":
            if orig.dtype.kind not in "biuf":
                raise DataError(f"numeric QI {column!r} has dtype {orig.dtype}", field=column)
            lo, hi, unparsed = _released_bounds(rel)
            ok = ~unparsed & (lo <= orig) & (orig <= hi)
            if h is not None:  # a numeric QI may also be released as a hierarchy label
                ok |= unparsed & _covered_by_hierarchy(orig, rel, h)
        elif kind == "categorical":
            if h is None:
                raise DataError(f"categorical QI {column!r} needs a hierarchy", field=column)
            ok = _covered_by_hierarchy(orig, rel, h)
        else:
            raise DataError(f"unknown QI type {kind!r} for column {column!r}", field=column)
        bad = np.flatnonzero(active & ~ok)
        if bad.size and (first is None or bad[0] < first.row):
            i = int(bad[0])
            reason = (
                "released interval does not contain the original value"
                if kind == "numeric"
                else "released label is not the value or one of its ancestors"
            )
            first = Violation(
                i, column, orig[i].item() if hasattr(orig[i], "item") else orig[i], rel[i], reason
            )
    return first


# ---------------------------------------------------------------------------- information loss


@dataclass(frozen=True)
class InformationLoss:
    """Normalized certainty penalty per QI (row average) and GCP = mean over QIs, both in [0, 1]."""

    per_column: dict[str, float]
    gcp: float


def label_penalties(
    labels: np.ndarray, kind: str, span: float, hierarchy: Hierarchy | None, column: str
) -> np.ndarray:
    """NCP of each released label of one QI, in [0, 1].

    Numeric: (hi - lo) / ``span`` (the original column's max - min; ``*`` costs 1), or the
    hierarchy penalty for labels that are not intervals. Categorical: (|leaves under label| - 1) /
    (|hierarchy leaves| - 1). Called on distinct labels, so it costs O(#labels).
    """
    if kind == "numeric":
        lo, hi, unparsed = _released_bounds(labels)
        if unparsed.any() and hierarchy is None:
            i = int(np.flatnonzero(unparsed)[0])
            raise DataError(f"column {column!r}: cannot parse {labels[i]!r}", field=column)
        with np.errstate(invalid="ignore"):
            width = np.where(np.isinf(hi - lo), span, hi - lo)
        pen = np.where(span > 0, np.minimum(width / span if span > 0 else 0.0, 1.0), 0.0)
        if unparsed.any():
            assert hierarchy is not None
            pen[unparsed] = _label_penalty(labels[unparsed], hierarchy)
        return pen
    if kind != "categorical":
        raise DataError(f"unknown QI type {kind!r} for column {column!r}", field=column)
    if hierarchy is None:
        raise DataError(f"categorical QI {column!r} needs a hierarchy", field=column)
    return _label_penalty(labels, hierarchy)


def ncp(
    original: Table,
    released: Table,
    qi_specs: Sequence[QuasiIdentifier] | Mapping[str, str],
    hierarchies: Mapping[str, Hierarchy] | None = None,
    suppressed: Any = None,
) -> InformationLoss:
    """NCP per QI and GCP; a suppressed row loses everything (penalty 1 on every QI).

    Numeric: (hi - lo) / (max - min of the original column). Categorical: (|leaves under label|
    - 1) / (|hierarchy leaves| - 1).
    """
    hierarchies = hierarchies or {}
    n = _n_rows(released)
    mask = _mask(suppressed, n)
    per: dict[str, float] = {}
    for column, kind in _qi_types(qi_specs).items():
        orig, rel = _column(original, column), _column(released, column)
        span = 0.0
        if kind == "numeric" and n:
            span = float(np.max(orig) - np.min(orig))
        uniq, inv = _codes(rel)
        pen = label_penalties(
            np.asarray(uniq, dtype=object), kind, span, hierarchies.get(column), column
        )[inv]
        pen = np.where(mask, 1.0, pen)
        per[column] = float(pen.mean()) if n else 0.0
    gcp = float(np.mean(list(per.values()))) if per else 0.0
    return InformationLoss(per, gcp)


def _label_penalty(rel: np.ndarray, h: Hierarchy) -> np.ndarray:
    uniq, inv = np.unique(as_labels(rel).astype(str), return_inverse=True)
    domain = len(h.leaves)
    if domain <= 1:
        return np.zeros(len(rel))
    pen = np.array([(len(h.leaves_under(u)) - 1) / (domain - 1) for u in uniq.tolist()])
    return pen[inv.reshape(-1)]


def discernibility(released: Table, qi_columns: Sequence[str], suppressed: Any = None) -> int:
    """Discernibility metric: sum of squared class sizes, plus n for every suppressed row."""
    ec = equivalence_classes(released, qi_columns, suppressed)
    n = ec.ids.size
    return int((ec.sizes.astype(np.int64) ** 2).sum()) + ec.n_suppressed * n


def average_class_size(
    released: Table, qi_columns: Sequence[str], k: int, suppressed: Any = None
) -> float:
    """C_AVG = (released rows / #classes) / k; 1.0 is ideal (every class exactly k)."""
    ec = equivalence_classes(released, qi_columns, suppressed)
    if ec.n_classes == 0:
        return math.inf
    return float(ec.sizes.sum()) / ec.n_classes / k
