"""Disclosure measures of a synthetic release: distance to closest record and a membership test.

These are the two measures synthetic-data papers report beside utility (e.g. Park et al.,
"Data synthesis based on generative adversarial networks", VLDB 2018, for the distance to the
closest record; Platzer and Reutterer, "Holdout-based empirical assessment of mixed-type
synthetic data", Frontiers in Big Data 2021, for the training-vs-hold-out share; Chen et al.,
"GAN-Leaks", CCS 2020, for the distance-based membership attack). They are empirical: a low
score does not prove privacy, and a DP release needs none of them for its guarantee. They say
whether a generator copies its training rows, which a broken implementation would.

Encoding (the same for real and synthetic rows): a numeric column is clipped to its public
bounds [lo, hi] and scaled to [0, 1]; a categorical column is a mismatch distance (0 when equal,
1 otherwise), implemented as a one-hot block scaled by 1/sqrt(2) so that the squared Euclidean
distance of two rows is

    d(x, y)^2 = sum over numeric columns (u_x - u_y)^2 + number of categorical columns that differ.

Distances are computed in blocks (``block_rows`` x ``block_cols`` at a time) so a 30k x 30k
comparison never holds more than one block in memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from leteo_fed.errors import DataError

BLOCK_ROWS = 1024
BLOCK_COLS = 8192  # 1024 x 8192 float64 = 64 MiB per block
_HALF_SQRT = 1.0 / math.sqrt(2.0)


@dataclass(frozen=True)
class Schema:
    """The public description the distances use: numeric bounds and categorical domains."""

    numeric: Mapping[str, tuple[float, float]]
    categorical: Mapping[str, Sequence[str]]

    def __post_init__(self) -> None:
        if not self.numeric and not self.categorical:
            raise DataError("the disclosure schema names no column")
        both = set(self.numeric) & set(self.categorical)
        if both:
            raise DataError(f"columns {sorted(both)} are both numeric and categorical")
        for name, (lo, hi) in self.numeric.items():
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise DataError(f"column {name!r}: public bounds need lo < hi, got [{lo}, {hi}]")
        for name, cats in self.categorical.items():
            if len(cats) == 0:
                raise DataError(f"column {name!r}: empty categorical domain")


def encode(table: Mapping[str, Any], schema: Schema) -> np.ndarray:
    """Rows of `table` (column name -> values) as the distance encoding described above.

    A categorical value outside its public domain is refused by name; so is a missing column,
    a numeric value that is not a finite number, or columns of unequal length.
    """
    parts: list[np.ndarray] = []
    n: int | None = None
    for name, (lo, hi) in schema.numeric.items():
        if name not in table:
            raise DataError(f"column {name!r} is not in the table", field=name)
        try:
            x = np.asarray(table[name], dtype=np.float64)
        except ValueError as exc:
            raise DataError(f"numeric column {name!r} holds values that are not numbers") from exc
        if not np.isfinite(x).all():
            raise DataError(f"numeric column {name!r} holds NaN or infinite values", field=name)
        n = _same_length(n, x.shape[0], name)
        parts.append(((np.clip(x, lo, hi) - lo) / (hi - lo))[:, None])
    for name, cats in schema.categorical.items():
        if name not in table:
            raise DataError(f"column {name!r} is not in the table", field=name)
        values = np.asarray(table[name]).astype(str)
        n = _same_length(n, values.shape[0], name)
        domain = np.asarray([str(c) for c in cats])
        order = np.argsort(domain)
        pos = np.searchsorted(domain[order], values)
        pos = np.minimum(pos, domain.shape[0] - 1)
        idx = order[pos]
        bad = domain[idx] != values
        if bad.any():
            examples = sorted(set(values[bad].tolist()))[:3]
            raise DataError(
                f"column {name!r} holds values outside its public domain, e.g. {examples}",
                field=name,
            )
        block = np.zeros((values.shape[0], domain.shape[0]), dtype=np.float64)
        block[np.arange(values.shape[0]), idx] = _HALF_SQRT
        parts.append(block)
    return np.hstack(parts) if parts else np.zeros((0, 0))


def _same_length(n: int | None, m: int, name: str) -> int:
    if n is not None and m != n:
        raise DataError(f"column {name!r} has {m} values, the others {n}", field=name)
    return m


def nearest_distance(
    queries: np.ndarray,
    reference: np.ndarray,
    *,
    block_rows: int = BLOCK_ROWS,
    block_cols: int = BLOCK_COLS,
) -> np.ndarray:
    """For each query row, the Euclidean distance to its nearest reference row (blocked).

    Uses |a - b|^2 = |a|^2 + |b|^2 - 2 a.b, clamped at 0 against rounding; an exact copy gives
    a distance of at most ~1e-7 (use :func:`copies` for an exact test).
    """
    queries = np.asarray(queries, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if queries.ndim != 2 or reference.ndim != 2 or queries.shape[1] != reference.shape[1]:
        raise DataError(
            f"queries {queries.shape} and reference {reference.shape} must be 2-D with the "
            "same number of encoded columns"
        )
    if reference.shape[0] == 0:
        raise DataError("the reference set is empty: no nearest record")
    qn = np.einsum("ij,ij->i", queries, queries)
    rn = np.einsum("ij,ij->i", reference, reference)
    best = np.full(queries.shape[0], np.inf)
    for i in range(0, queries.shape[0], block_rows):
        q = queries[i : i + block_rows]
        for j in range(0, reference.shape[0], block_cols):
            r = reference[j : j + block_cols]
            d2 = qn[i : i + block_rows, None] + rn[None, j : j + block_cols] - 2.0 * (q @ r.T)
            np.minimum(best[i : i + block_rows], d2.min(axis=1), out=best[i : i + block_rows])
    return np.sqrt(np.maximum(best, 0.0))


def copies(queries: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Boolean per query row: is it byte-for-byte equal (after encoding) to a reference row?"""
    q = np.ascontiguousarray(queries, dtype=np.float64)
    r = np.ascontiguousarray(reference, dtype=np.float64)
    row = np.dtype((np.void, q.dtype.itemsize * q.shape[1]))
    return np.isin(q.view(row).ravel(), r.view(row).ravel())


@dataclass(frozen=True)
class DCR:
    """Distance to closest record of the synthetic rows (see :func:`dcr`)."""

    train_p5: float
    train_median: float
    holdout_p5: float
    holdout_median: float
    exact_copy_share: float
    dcr_share: float
    rows: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def dcr(synthetic: np.ndarray, train: np.ndarray, holdout: np.ndarray) -> DCR:
    """DCR of each synthetic row to the training rows and to the hold-out rows.

    ``dcr_share``: the share of synthetic rows strictly closer to the training set than to the
    hold-out set, a tie counting one half. With training and hold-out sets of equal size drawn
    from the same population, a generator that does not memorise gives about 0.5 (each synthetic
    row is as likely to fall nearer either set); one that copies training rows gives about 1.
    ``exact_copy_share``: synthetic rows identical (after encoding) to some training row.
    """
    if synthetic.shape[0] == 0:
        raise DataError("no synthetic rows to measure")
    d_train = nearest_distance(synthetic, train)
    d_hold = nearest_distance(synthetic, holdout)
    share = float(np.mean(d_train < d_hold) + 0.5 * np.mean(d_train == d_hold))
    return DCR(
        train_p5=float(np.percentile(d_train, 5)),
        train_median=float(np.median(d_train)),
        holdout_p5=float(np.percentile(d_hold, 5)),
        holdout_median=float(np.median(d_hold)),
        exact_copy_share=float(copies(synthetic, train).mean()),
        dcr_share=share,
        rows=int(synthetic.shape[0]),
    )


def roc_auc(scores_pos: np.ndarray, scores_neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + P(tie) / 2 (Mann-Whitney, mid-ranks)."""
    pos, neg = np.asarray(scores_pos, float), np.asarray(scores_neg, float)
    if pos.size == 0 or neg.size == 0:
        raise DataError("ROC AUC needs at least one positive and one negative")
    allv = np.concatenate([pos, neg])
    order = np.argsort(allv, kind="mergesort")
    sorted_v = allv[order]
    ranks = np.empty(allv.size)
    # mid-ranks: every run of equal values gets the mean of its 1-based positions
    starts = np.flatnonzero(np.r_[True, sorted_v[1:] != sorted_v[:-1]])
    ends = np.r_[starts[1:], allv.size]
    mid = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(mid, ends - starts)
    u = ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2.0
    return float(u / (pos.size * neg.size))


def best_balanced_accuracy(scores_pos: np.ndarray, scores_neg: np.ndarray) -> float:
    """max over thresholds t of (TPR + TNR) / 2 for the rule 'positive when score >= t'."""
    pos, neg = np.asarray(scores_pos, float), np.asarray(scores_neg, float)
    thresholds = np.unique(np.concatenate([pos, neg]))
    pos_s, neg_s = np.sort(pos), np.sort(neg)
    tpr = 1.0 - np.searchsorted(pos_s, thresholds, side="left") / pos.size
    fpr = 1.0 - np.searchsorted(neg_s, thresholds, side="left") / neg.size
    return float(max(0.5, 0.5 * (1.0 + np.max(tpr - fpr))))


def dp_attack_bound(epsilon: float, delta: float = 0.0) -> float:
    """Highest accuracy any membership attack can have at a 50/50 prior under (eps, delta)-DP:
    (e^eps + delta) / (1 + e^eps) (Kairouz, Oh and Viswanath, ICML 2015, hypothesis-testing
    view of DP), capped at 1. Computed as (1 + delta e^-eps) / (1 + e^-eps) to avoid overflow."""
    if not (epsilon >= 0 and math.isfinite(epsilon)) or not 0 <= delta <= 1:
        raise DataError(f"need epsilon >= 0 finite and 0 <= delta <= 1, got {epsilon}, {delta}")
    r = math.exp(-epsilon)
    return min(1.0, (1.0 + delta * r) / (1.0 + r))


@dataclass(frozen=True)
class Membership:
    """The distance-based membership attack (see :func:`membership_inference`)."""

    auc: float
    balanced_accuracy: float
    members: int
    non_members: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def membership_inference(
    synthetic: np.ndarray, train: np.ndarray, holdout: np.ndarray
) -> Membership:
    """Call a real row a member when it lies close to some synthetic row.

    The score of a real row is minus its distance to the closest synthetic row; the AUC is that
    score's ROC AUC between the training rows (members) and the hold-out rows (non-members),
    0.5 meaning no signal; ``balanced_accuracy`` is the attack's at its best threshold (chosen
    with the labels, so above 0.5 by chance when there is no signal: about
    0.5 + 0.31 sqrt(1/n1 + 1/n2), as E[sup of a Brownian bridge] = sqrt(pi / 8) ~ 0.63). Use equal-sized sets for a 50/50 prior.
    """
    s_in = -nearest_distance(train, synthetic)
    s_out = -nearest_distance(holdout, synthetic)
    return Membership(
        auc=roc_auc(s_in, s_out),
        balanced_accuracy=best_balanced_accuracy(s_in, s_out),
        members=int(s_in.size),
        non_members=int(s_out.size),
    )


def measure(
    synthetic: Mapping[str, Any],
    train: Mapping[str, Any],
    holdout: Mapping[str, Any],
    schema: Schema,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
) -> dict[str, Any]:
    """Both measures on tables (column -> values), as one JSON-ready dict; with ``epsilon``, the
    DP bound on any attack's accuracy at a 50/50 prior beside the measured one."""
    s, t, h = encode(synthetic, schema), encode(train, schema), encode(holdout, schema)
    out: dict[str, Any] = {
        "encoding": "numeric scaled to [0, 1] by public bounds; categorical mismatch distance",
        "dcr": dcr(s, t, h).as_dict(),
        "membership": membership_inference(s, t, h).as_dict(),
    }
    if epsilon is not None:
        out["membership"]["dp_accuracy_bound"] = dp_attack_bound(epsilon, delta)
    return out
