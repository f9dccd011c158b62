"""k-anonymity, l-diversity and t-closeness as one vectorized test both anonymizers call.

The algorithms see candidate equivalence classes only as *combo histograms*: for each class, the
number of rows per sensitive-value tuple ("combo"). :class:`PrivacyModel` fixes the combos and the
table-wide sensitive distributions once (from the root histogram) and then answers, for a whole
matrix of classes at once, which of them meet every configured model. This module is the
algorithms' own check; :mod:`audit.verify` re-measures their output independently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.anonymize.models.config import AnonymizationConfig, SensitiveAttribute
from leteo_fed.anonymize.models.hierarchy import TOP, Hierarchy, as_labels
from leteo_fed.errors import DataError

T_SLACK = 1e-12  # t is checked as emd <= t - slack, so float rounding can only make us stricter

# A sensitive value: a float for a numeric column, a string label otherwise (one type per column,
# so a column's values sort), and a combo: one value per sensitive column.
SensitiveValue = float | str
Combo = tuple[SensitiveValue, ...]


@dataclass(frozen=True)
class _Sensitive:
    spec: SensitiveAttribute
    to_value: np.ndarray  # (n_combos, n_values) 0/1: combo -> its value of this column
    q: np.ndarray  # table-wide distribution over the column's sorted distinct values
    distance: str | None  # t-closeness distance, None without t-closeness
    levels: list[_Level]  # hierarchical: per level, the child -> parent map


@dataclass(frozen=True)
class _Level:
    """Children -> parents of one hierarchy level: ``sum_up(x)`` adds each parent's children.

    Summed with ``np.add.reduceat`` over each parent's (contiguous) children, so every row of a
    matrix gets the same additions in the same order however many rows there are: a class is
    judged alike whether it is checked alone or in a batch (a matrix product would not promise
    that, BLAS picks its kernels by shape).
    """

    order: np.ndarray  # children sorted by parent
    starts: np.ndarray  # first position of each parent in ``order``

    @classmethod
    def of(cls, above: np.ndarray) -> _Level:
        order = np.argsort(above, kind="stable")
        starts = np.searchsorted(above[order], np.arange(int(above.max()) + 1))
        return cls(order, starts)

    def sum_up(self, x: np.ndarray) -> np.ndarray:
        return np.add.reduceat(x[:, self.order], self.starts, axis=1)


def _hierarchy_levels(h: Hierarchy, values: Sequence[SensitiveValue], column: str) -> list[_Level]:
    """Child -> parent maps from the sensitive values up to a single root."""
    table = h.table
    index = {v: r for r, v in enumerate(table[:, 0])}
    labels = as_labels(np.array(values, dtype=object)).tolist()
    missing = [v for v in labels if v not in index]
    if missing:
        raise DataError(
            f"value {missing[0]!r} of column {column!r} is not in its hierarchy", field=column
        )
    paths = table[[index[v] for v in labels]]
    if np.unique(paths[:, -1].astype(str)).size > 1:
        paths = np.concatenate([paths, np.full((len(labels), 1), TOP, dtype=object)], axis=1)
    maps = []
    _, below = np.unique(paths[:, 0].astype(str), return_inverse=True)
    for level in range(1, paths.shape[1]):
        _, above = np.unique(paths[:, level].astype(str), return_inverse=True)
        parent = np.zeros(below.max() + 1, dtype=np.int64)
        parent[below] = above
        maps.append(_Level.of(parent))
        below = above
    return maps


class PrivacyModel:
    """The configured privacy models over a fixed list of sensitive combos.

    ``combos`` are all sensitive-value tuples of the table (sorted); ``combo_index`` maps them to
    the column positions of the count matrices passed to :meth:`satisfied`.

    ``t_margin`` tightens t-closeness when rows may be suppressed: withholding B of N rows moves
    the released table's sensitive distribution by at most B / (N - B) in total variation, which
    bounds its move in EMD (every ground distance here is <= 1), so checking
    EMD(class, table) <= t - B / (N - B) keeps the release t-close to its *own* distribution.
    """

    def __init__(
        self,
        config: AnonymizationConfig,
        hierarchies: Mapping[str, Hierarchy],
        numeric_sensitive: Sequence[bool],
        root_combos: Sequence[Combo],
        root_counts: np.ndarray,
        *,
        t_margin: float = 0.0,
    ) -> None:
        self.k = config.k
        self.t_margin = t_margin
        agg: dict[Combo, int] = {}
        for c, n in zip(root_combos, np.asarray(root_counts).tolist(), strict=True):
            agg[c] = agg.get(c, 0) + int(n)
        self.combos: list[Combo] = sorted(agg)
        self.combo_index = {c: i for i, c in enumerate(self.combos)}
        self.root_counts = np.array([agg[c] for c in self.combos], dtype=float)
        self._sens = [
            self._sensitive(i, spec, hierarchies, numeric_sensitive[i])
            for i, spec in enumerate(config.sensitive)
        ]

    def _sensitive(
        self, i: int, spec: SensitiveAttribute, hierarchies: Mapping[str, Hierarchy], numeric: bool
    ) -> _Sensitive:
        values = sorted({c[i] for c in self.combos})
        pos = {v: j for j, v in enumerate(values)}
        to_value = np.zeros((len(self.combos), len(values)))
        to_value[np.arange(len(self.combos)), [pos[c[i]] for c in self.combos]] = 1.0
        q = self.root_counts @ to_value
        q = q / q.sum()
        distance = spec.t_closeness.distance if spec.t_closeness else None
        h = hierarchies.get(spec.column)
        if spec.t_closeness is not None and distance is None:
            distance = "hierarchical" if h is not None else ("ordered" if numeric else "equal")
        if distance == "ordered" and not numeric:
            raise DataError(
                f"ordered t-closeness distance needs a numeric column ({spec.column!r})",
                field=spec.column,
            )
        levels: list[_Level] = []
        if distance == "hierarchical":
            if h is None:
                raise DataError("hierarchical t-closeness needs a hierarchy", field=spec.column)
            levels = _hierarchy_levels(h, values, spec.column)
        return _Sensitive(spec, to_value, q, distance, levels)

    def combo_codes(self, combos: Sequence[Combo]) -> np.ndarray:
        """Column positions of sensitive tuples; a tuple unseen at the root is an error."""
        try:
            return np.array([self.combo_index[c] for c in combos], dtype=np.int64)
        except KeyError as exc:
            raise DataError(f"sensitive combination {exc.args[0]!r} not seen at the root") from None

    @staticmethod
    def _emd(s: _Sensitive, p: np.ndarray) -> np.ndarray:
        """Earth mover's distance of each row of ``p`` to the table-wide distribution."""
        diff = p - s.q[None, :]
        m = diff.shape[1]
        if s.distance == "ordered":
            return (
                np.abs(np.cumsum(diff, axis=1)).sum(axis=1) / (m - 1) if m > 1 else diff[:, 0] * 0
            )
        if s.distance == "equal":
            return 0.5 * np.abs(diff).sum(axis=1)
        height = len(s.levels)
        total = np.zeros(diff.shape[0])
        extra = diff
        for level, up in enumerate(s.levels, start=1):
            pos = up.sum_up(np.clip(extra, 0, None))
            neg = up.sum_up(np.clip(-extra, 0, None))
            total += level / height * np.minimum(pos, neg).sum(axis=1)
            extra = up.sum_up(extra)
        return total

    def satisfied(self, counts: np.ndarray) -> np.ndarray:
        """Which classes (rows of a (classes, combos) count matrix) meet k, l and t."""
        counts = np.atleast_2d(np.asarray(counts, dtype=float))
        size = counts.sum(axis=1)
        ok = size >= self.k
        with np.errstate(divide="ignore", invalid="ignore"):
            for s in self._sens:
                per_value = counts @ s.to_value
                ld = s.spec.l_diversity
                if ld is not None:
                    if ld.variant == "distinct":
                        ok &= (per_value > 0).sum(axis=1) >= ld.l
                    elif ld.variant == "entropy":
                        p = per_value / size[:, None]
                        h = -np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0).sum(axis=1)
                        ok &= h >= math.log(ld.l)
                    else:  # recursive (c, l): r1 < c * (r_l + ... + r_m)
                        assert ld.c is not None
                        ranked = -np.sort(-per_value, axis=1)
                        tail = ranked[:, ld.l - 1 :].sum(axis=1)
                        ok &= ranked[:, 0] < ld.c * tail
                tc = s.spec.t_closeness
                if tc is not None:
                    live = size > 0
                    emd = np.full(size.shape, np.inf)
                    emd[live] = self._emd(s, per_value[live] / size[live, None])
                    ok &= emd <= tc.t - self.t_margin - T_SLACK
        return ok
