"""The measured part of the job's report, from summaries of the written release.

An engine summarizes what it wrote (:class:`ReleaseSummary`: class sizes and labels, per
sensitive column the (class, value) count matrix, per QI the count of every label) and this
module does all the arithmetic, with :mod:`audit.verify`'s functions, so the Spark report, the
in-process report and the in-memory verifier grade a release alike. Every summary comes in one
canonical order (classes by their QI labels, matrix entries by (class, value), labels sorted):
floating-point sums then run in the same order whichever engine produced them, and ties (the
"smallest" or "worst" class) go to the first class in label order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import AnonymizationConfig, SensitiveAttribute
from leteo_fed.anonymize.models.hierarchy import Hierarchy
from leteo_fed.anonymize.models.risk import reidentification_risk
from leteo_fed.errors import DataError

T_TOLERANCE = 1e-9  # float rounding slack when comparing a measured EMD with the configured t


@dataclass(frozen=True)
class Classes:
    """Equivalence classes of a release, sorted by their QI labels."""

    sizes: np.ndarray
    keys: list[dict[str, Any]]  # released QI labels per class


class ReleaseSummary(Protocol):
    """What an engine reports about a written release (published rows only)."""

    classes: Classes

    def count_matrix(self, sensitive: str) -> verify.CountMatrix:
        """(class, sensitive value) -> rows, entries sorted by (class, value)."""
        ...

    def label_counts(self, qi: str) -> tuple[np.ndarray, np.ndarray]:
        """(distinct labels of the QI sorted, rows per label)."""
        ...


def label_order(columns: list[np.ndarray]) -> np.ndarray:
    """The permutation that sorts rows by their labels (first column first, string order)."""
    codes = [
        np.unique(np.asarray(c).astype(str), return_inverse=True)[1].reshape(-1) for c in columns
    ]
    return np.lexsort(codes[::-1])


def sorted_matrix(
    cls: np.ndarray, values: np.ndarray, counts: np.ndarray, sizes: np.ndarray, column: str
) -> verify.CountMatrix:
    """A count matrix from (class, raw value, count) entries, in canonical order."""
    if values.dtype.kind == "O" and any(v is None for v in values.tolist()):
        raise DataError(f"sensitive column {column!r} has missing values", field=column)
    uniq, val = np.unique(values, return_inverse=True)
    val = val.reshape(-1)
    order = np.lexsort((val, cls))
    return verify.CountMatrix(
        cls[order], val[order], np.asarray(counts, dtype=np.int64)[order], sizes, uniq
    )


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unbounded score is reported as null."""
    return float(x) if math.isfinite(x) else None


def _l_entry(cm: verify.CountMatrix, spec: SensitiveAttribute, classes: Classes) -> dict[str, Any]:
    ld = spec.l_diversity
    variant = ld.variant if ld else "distinct"
    scores = verify.l_diversity_of_counts(
        cm, variant, l=ld.l if ld else None, c=ld.c if ld else None
    )
    return {
        "variant": variant,
        "required_l": ld.l if ld else None,
        "c": ld.c if ld else None,
        "achieved": _finite(scores.value),
        "holds": scores.satisfied if ld else None,
        "worst_class": classes.keys[scores.worst],
    }


def _t_entry(
    cm: verify.CountMatrix,
    spec: SensitiveAttribute,
    classes: Classes,
    hierarchy: Hierarchy | None,
) -> dict[str, Any]:
    tc = spec.t_closeness
    distance = verify.resolve_distance(
        cm.values, tc.distance if tc else None, hierarchy, spec.column
    )
    per = verify.t_closeness_of_counts(cm, distance, hierarchy)
    worst = int(np.argmax(per))
    value = float(per[worst])
    return {
        "distance": distance,
        "required_t": tc.t if tc else None,
        "achieved": value,
        "holds": (value <= tc.t + T_TOLERANCE) if tc else None,
        "worst_class": classes.keys[worst],
    }


def information_loss(
    summary: ReleaseSummary,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    spans: Mapping[str, float],
    rows_in: int,
    n_suppressed: int,
) -> dict[str, float]:
    """NCP per QI over the input rows (a suppressed row costs 1), from per-label counts."""
    per: dict[str, float] = {}
    for q in config.quasi_identifiers:
        labels, counts = summary.label_counts(q.column)
        pen = verify.label_penalties(
            np.asarray(labels, dtype=object),
            q.type,
            spans.get(q.column, 0.0),
            hierarchies.get(q.column),
            q.column,
        )
        total = float((pen * np.asarray(counts, dtype=float)).sum() + n_suppressed)
        per[q.column] = total / rows_in if rows_in else 0.0
    return per


def _size_distribution(sizes: np.ndarray) -> dict[str, list[int]]:
    """How many classes have each size: the release report's risk figure, without the classes."""
    size, count = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    return {"size": size.tolist(), "classes": count.tolist()}


def measure_release(
    summary: ReleaseSummary,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    *,
    rows_in: int,
    spans: Mapping[str, float],
) -> dict[str, Any]:
    """Rows, classes, privacy models, information loss and re-identification risk of a
    summarized release.

    ``rows_in`` and ``spans`` (numeric QI max - min of the input) come from the input, for the
    suppression count and NCP.
    """
    classes = summary.classes
    rows_out = int(classes.sizes.sum())
    n_classes = int(classes.sizes.size)
    if n_classes == 0:
        raise DataError("the release is empty: every row was suppressed")
    n_suppressed = rows_in - rows_out
    k_min = int(classes.sizes.min())
    smallest = int(np.argmin(classes.sizes))
    l_div: dict[str, Any] = {}
    t_clo: dict[str, Any] = {}
    for spec in config.sensitive:
        cm = summary.count_matrix(spec.column)
        l_div[spec.column] = _l_entry(cm, spec, classes)
        t_clo[spec.column] = _t_entry(cm, spec, classes, hierarchies.get(spec.column))
    k_entry = {
        "required": config.k,
        "achieved": k_min,
        "holds": k_min >= config.k,
        "smallest_class": classes.keys[smallest],
    }
    configured = [k_entry["holds"]] + [
        e["holds"] for e in (*l_div.values(), *t_clo.values()) if e["holds"] is not None
    ]
    ncp = information_loss(summary, config, hierarchies, spans, rows_in, n_suppressed)
    return {
        "rows": {"in": rows_in, "out": rows_out, "suppressed": n_suppressed},
        "classes": {
            "count": n_classes,
            "min_size": k_min,
            "max_size": int(classes.sizes.max()),
            "mean_size": rows_out / n_classes,
            "size_distribution": _size_distribution(classes.sizes),
        },
        "privacy": {
            "k_anonymity": k_entry,
            "l_diversity": l_div,
            "t_closeness": t_clo,
            "all_hold": all(configured),
        },
        "information_loss": {
            "ncp": ncp,
            "gcp": float(np.mean(list(ncp.values()))),
            "discernibility": int((classes.sizes**2).sum()) + n_suppressed * rows_in,
            "average_class_size": rows_out / n_classes / config.k,
        },
        "risk": reidentification_risk(classes.sizes, config.risk_threshold),
    }
