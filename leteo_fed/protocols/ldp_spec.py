"""The wire types of an LDP collection (its request and the public spec owners perturb with),
and the checks every kind of report statistic shares (`leteo_fed.protocols.reports`).

`LdpRequest` and `LdpSpec` are the proto messages of the same names, field for field: every
kind (frequency oracles, numeric means, geo points, naive Bayes) fills the fields it uses and
leaves the others at their defaults, so a spec's digest is the same whatever module built it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from leteo_fed.errors import DataError
from leteo_fed.privacy.budget import check_epsilon

CHUNK_REPORTS = 65_536  # an owner perturbs and sends its records this many at a time
MAX_POINTS = 1_000_000  # perturbed points are kept for the data user; refuse more
REPORT_DTYPES = frozenset({"<i4", "<i8", "|u1", "<f8"})  # what a report batch may carry


@dataclass(frozen=True)
class FeatureDomain:
    """One categorical feature of a naive Bayes round and its public values (LdpFeatureDomain)."""

    name: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NbConditional:
    """P(value | class) of one feature: a probability per value, in `values` order, per class."""

    values: tuple[str, ...]
    by_class: dict[str, list[float]]


@dataclass(frozen=True)
class LdpRequest:
    """What the data user asks (the wire's LdpRequest)."""

    column: str = ""
    mechanism: str = ""
    epsilon: float = 0.0
    domain: tuple[str, ...] = ()
    lower: float | None = None
    upper: float | None = None
    consistency: bool = False
    columns: tuple[str, ...] = ()
    box_lower: tuple[float, ...] = ()
    box_upper: tuple[float, ...] = ()
    box_fit: str = ""  # geo: remap (default) | resample
    bins: int = 0  # geo: density grid bins per axis (0: the default)
    label_column: str = ""  # set: an LDP naive Bayes round (mechanism is its frequency oracle)
    classes: tuple[str, ...] = ()
    features: tuple[FeatureDomain, ...] = ()


@dataclass(frozen=True)
class LdpSpec:
    """The public parameters every owner perturbs with (the wire's LdpSpec)."""

    column: str
    mechanism: str
    epsilon: float
    domain: tuple[str, ...] = ()
    lower: float = 0.0
    upper: float = 0.0
    theta: float = 0.0  # THE threshold (0 = mechanism default)
    olh_g: int = 0  # OLH hash range (0 = default)
    columns: tuple[str, ...] = ()
    box_lower: tuple[float, ...] = ()
    box_upper: tuple[float, ...] = ()
    box_fit: str = ""
    bins: int = 0
    label_column: str = ""
    classes: tuple[str, ...] = ()
    features: tuple[FeatureDomain, ...] = ()


def column_spec(request: LdpRequest) -> LdpSpec:
    """The spec of a round over `column` (every kind but naive Bayes): the column named and
    epsilon valid; the kind fills in the rest."""
    if not request.column:
        raise DataError("name the column to collect", field="column")
    eps = check_epsilon(request.epsilon)
    return LdpSpec(column=request.column, mechanism=request.mechanism, epsilon=eps)


def no_geo_fields(request: LdpRequest) -> None:
    if request.box_fit or request.bins:
        raise DataError("box_fit and bins are for geo collections", field="box_fit")


def box_spec(request: LdpRequest, spec: LdpSpec) -> LdpSpec:
    """Columns in a public box (geo points, several numeric columns): distinct columns, finite
    bounds with lower < upper for every one, and no domain."""
    columns = list(request.columns) or [request.column]
    lo, hi = list(request.box_lower), list(request.box_upper)
    if len(set(columns)) != len(columns):
        raise DataError("columns contains duplicates", field="columns")
    if len(lo) != len(columns) or len(hi) != len(columns):
        raise DataError("geo needs box_lower and box_upper for every column", field="box_lower")
    if not all(
        math.isfinite(a) and math.isfinite(b) and a < b for a, b in zip(lo, hi, strict=True)
    ):
        raise DataError("box bounds must be finite with lower < upper", field="box_lower")
    if request.domain or request.consistency:
        raise DataError("geo takes columns and a box, not a domain", field="domain")
    return replace(
        spec, column=columns[0], columns=tuple(columns), box_lower=tuple(lo), box_upper=tuple(hi)
    )
