"""Turning a data user's round request into a validated plan (pure; no network)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from leteo_fed.errors import DataError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import METHODS, discriminant, pca
from leteo_fed.protocols.moments import ALL_ROWS, Grouping

MIN_QUORUM = 2  # one share alone would reveal that owner's statistics to the data user
DEFAULT_DEADLINE_SECONDS = 120.0
MAX_DEADLINE_SECONDS = 24 * 3600.0
_LABELS_NEEDED = {"pca": 0, "dca": 1, "lda": 1, "mdr": 2}


@dataclass(frozen=True)
class RoundPlan:
    method: str
    features: list[str]
    components: int
    min_owners: int
    deadline_seconds: float
    standardize: bool
    groupings: tuple[Grouping, ...]  # effective: (ALL_ROWS,) for PCA
    declared_groupings: tuple[Grouping, ...]  # what travels in the round spec
    ridge: discriminant.Ridge
    encoding: pca.PcaEncoding
    projection_only: bool = False


def plan_round(request: pb.RoundRequest, n_invited: int) -> RoundPlan:
    method = request.method or pca.PROTOCOL
    if method not in METHODS:
        raise DataError(f"unknown method {method!r}; expected one of {METHODS}", field="method")
    features = list(request.features)
    if not features:
        raise DataError("features is empty: name the columns to analyse", field="features")
    if len(set(features)) != len(features):
        raise DataError("features contains duplicates", field="features")

    declared = tuple(_grouping(g, features) for g in request.groupings)
    needed = _LABELS_NEEDED[method]
    if len(declared) != needed:
        what = {
            0: "no label column",
            1: "one label column",
            2: "a utility and a privacy label column",
        }
        raise DataError(f"{method} takes {what[needed]}, got {len(declared)}", field="groupings")
    if needed == 2 and declared[0].label_column == declared[1].label_column:
        raise DataError(
            "the utility and privacy labels must be different columns", field="groupings"
        )
    groupings = declared or (ALL_ROWS,)

    d = len(features)
    default_k = (
        min(2, d) if method == pca.PROTOCOL else min(d, max(1, len(declared[0].classes) - 1))
    )
    components = request.components or default_k
    if not 1 <= components <= d:
        raise DataError(f"components must be in 1..{d}, got {components}", field="components")
    if request.standardize and method != pca.PROTOCOL:
        raise DataError("standardize applies to PCA only", field="standardize")
    if request.standardize and request.projection_only:
        raise DataError(
            "standardize is not available in projection-only mode (correlation is not "
            "rotation-equivariant)",
            field="standardize",
        )

    min_owners = request.min_owners or MIN_QUORUM
    if min_owners < MIN_QUORUM:
        raise DataError(
            f"min_owners must be at least {MIN_QUORUM}: a single share would be revealed",
            field="min_owners",
        )
    deadline = request.deadline_seconds or DEFAULT_DEADLINE_SECONDS
    if not 0 < deadline <= MAX_DEADLINE_SECONDS:
        raise DataError(
            f"deadline_seconds must be in (0, {MAX_DEADLINE_SECONDS:.0f}]", field="deadline_seconds"
        )
    ridge = discriminant.Ridge(
        _ridge_value(request, "rho", non_negative=True),
        _ridge_value(request, "rho_prime", non_negative=False),
    )
    encoding = pca.PcaEncoding(
        scale_bits=request.scale_bits or pca.DEFAULT_SCALE_BITS,
        value_bound=request.value_bound or pca.DEFAULT_VALUE_BOUND,
        max_owners=max(pca.DEFAULT_MAX_OWNERS, n_invited),
        rotation_dimension=d if request.projection_only else 0,
    )
    return RoundPlan(
        method,
        features,
        components,
        min_owners,
        deadline,
        request.standardize,
        groupings,
        declared,
        ridge,
        encoding,
        request.projection_only,
    )


def _grouping(msg: pb.Grouping, features: list[str]) -> Grouping:
    label = msg.label_column
    if not label:
        raise DataError("a grouping needs a label column", field="groupings.label_column")
    if label in features:
        raise DataError(f"label column '{label}' is also a feature", field="groupings.label_column")
    classes = tuple(msg.classes)
    if len(classes) < 2 or any(not c for c in classes):
        raise DataError(
            f"label column '{label}' needs at least 2 non-empty class names",
            field="groupings.classes",
        )
    return Grouping(label, classes)


def _ridge_value(request: pb.RoundRequest, name: str, non_negative: bool) -> float | None:
    if not request.HasField(name):
        return None
    value = getattr(request, name)
    if not math.isfinite(value) or (non_negative and value < 0):
        raise DataError(
            f"{name} must be a finite{' non-negative' if non_negative else ''} number", field=name
        )
    return value
