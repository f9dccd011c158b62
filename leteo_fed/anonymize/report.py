"""What a release achieves, measured on the released rows with Spark, never taken from the algorithm.

Spark groups the output by QI tuple (class sizes) and by (QI tuple, sensitive value) (the count
matrix l and t need), and by each QI label (for NCP); only those summaries reach the driver, as
Arrow tables. The arithmetic is :mod:`verify`'s, run on the same count matrices, so the in-memory
verifier and this report cannot disagree on what k, l, t or NCP mean.

Classes are keyed on the driver by a 64-bit hash of the QI tuple (Spark's ``xxhash64``); the class
table proves the hash collision-free for this release before any count matrix is trusted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from leteo_fed.anonymize import verify
from leteo_fed.anonymize.config import AnonymizationConfig, SensitiveAttribute
from leteo_fed.anonymize.hierarchy import Hierarchy
from leteo_fed.errors import DataError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

_CID = "_leteo_class"
_N = "_leteo_n"
T_TOLERANCE = 1e-9  # float rounding slack when comparing a measured EMD with the configured t


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _finite(x: float) -> float | None:
    """JSON has no infinity: an unbounded score is reported as null."""
    return float(x) if math.isfinite(x) else None


def _values(table: pa.Table, name: str) -> np.ndarray:
    """One Arrow column as NumPy: numbers stay numeric (ordered distance needs them sorted)."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


@dataclass(frozen=True)
class Classes:
    """Equivalence classes of the release, sorted by their hash id."""

    ids: np.ndarray  # xxhash64 of the QI tuple, ascending
    sizes: np.ndarray
    keys: list[dict[str, Any]]  # released QI labels per class

    def index_of(self, ids: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ids, ids)


def _class_id(qi: list[str]) -> Column:
    from pyspark.sql import functions as F

    return F.xxhash64(*[_col(c) for c in qi]).alias(_CID)


def equivalence_classes(released: DataFrame, qi: list[str]) -> Classes:
    """Class sizes and labels from one Spark group-by; refuses a hash collision."""
    from pyspark.sql import functions as F

    table = (
        released.groupBy(*[_col(c) for c in qi])
        .agg(F.count(F.lit(1)).alias(_N))
        .select(_class_id(qi), _N, *[_col(c) for c in qi])
        .toArrow()
    )
    ids = _values(table, _CID).astype(np.int64)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    if ids.size and np.unique(ids).size != ids.size:
        raise DataError("two equivalence classes share a 64-bit class hash; cannot measure")
    labels = {c: table.column(c).to_pylist() for c in qi}
    keys = [{c: labels[c][i] for c in qi} for i in order.tolist()]
    return Classes(ids, _values(table, _N).astype(np.int64)[order], keys)


def count_matrix(
    released: DataFrame, qi: list[str], sensitive: str, classes: Classes
) -> verify.CountMatrix:
    """(class, sensitive value) -> count, from one Spark group-by."""
    from pyspark.sql import functions as F

    table = (
        released.groupBy(_class_id(qi), _col(sensitive).alias("_s"))
        .agg(F.count(F.lit(1)).alias(_N))
        .toArrow()
    )
    values = _values(table, "_s")
    if values.dtype.kind == "O" and any(v is None for v in values.tolist()):
        raise DataError(f"sensitive column {sensitive!r} has missing values", field=sensitive)
    uniq, val = np.unique(values, return_inverse=True)
    cls = classes.index_of(_values(table, _CID).astype(np.int64))
    return verify.CountMatrix(
        cls, val.reshape(-1), _values(table, _N).astype(np.int64), classes.sizes, uniq
    )


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
    released: DataFrame,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    spans: Mapping[str, float],
    rows_in: int,
    n_suppressed: int,
) -> dict[str, float]:
    """NCP per QI over the input rows (a suppressed row costs 1), from per-label counts."""
    from pyspark.sql import functions as F

    per: dict[str, float] = {}
    for q in config.quasi_identifiers:
        table = released.groupBy(_col(q.column).alias("_l")).agg(F.count(F.lit(1)).alias(_N))
        table = table.toArrow()
        labels = np.asarray(table.column("_l").to_pylist(), dtype=object)
        counts = _values(table, _N).astype(float)
        pen = verify.label_penalties(
            labels, q.type, spans.get(q.column, 0.0), hierarchies.get(q.column), q.column
        )
        per[q.column] = float((pen * counts).sum() + n_suppressed) / rows_in if rows_in else 0.0
    return per


def measure_release(
    released: DataFrame,
    config: AnonymizationConfig,
    hierarchies: Mapping[str, Hierarchy],
    *,
    rows_in: int,
    spans: Mapping[str, float],
) -> dict[str, Any]:
    """The measured part of the report: rows, classes, privacy models, information loss.

    ``released`` holds only the published rows; ``rows_in`` and ``spans`` (numeric QI max - min
    of the input) come from the input, for suppression counts and NCP.
    """
    qi = config.qi_columns
    classes = equivalence_classes(released, qi)
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
        cm = count_matrix(released, qi, spec.column, classes)
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
    ncp = information_loss(released, config, hierarchies, spans, rows_in, n_suppressed)
    return {
        "rows": {"in": rows_in, "out": rows_out, "suppressed": n_suppressed},
        "classes": {
            "count": n_classes,
            "min_size": k_min,
            "max_size": int(classes.sizes.max()),
            "mean_size": rows_out / n_classes,
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
    }
