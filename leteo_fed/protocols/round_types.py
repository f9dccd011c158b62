"""The round engine's vocabulary, shared by the aggregator, the owners and every protocol:
a round's plan (`RoundPlan`), what a finished round gives (`Outcome`), what the protocol makes of
it (`Step`), and a site's data as protocols read it (`SiteData`, `SiteTable`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import ProtocolError
from leteo_fed.protocols.dp_plan import (
    DpSpec,
)
from leteo_fed.protocols.results import EncodingFacts, RoundTimings

SECURE_SUM = "secure_sum"  # owners send Paillier-encrypted, packed integers; the engine sums them


REPORTS = "reports"  # owners send perturbed reports; the engine folds them into an accumulator


@dataclass(frozen=True)
class RoundPlan:
    """One round as the engine runs it: the payload owners receive and how it is summed."""

    spec: Any  # the protocol's spec dataclass (the RoundSpec payload)
    label: str  # what the round computes, e.g. "pca" (RoundSpec.protocol)
    encoding: ShareEncoding | None = None  # None: a report round
    n_values: int = 0
    dp: DpSpec | None = None
    reveal: str = "blinded"  # "blinded" | "projection" | "reports"
    dimension: int = 0  # features per row, declared in every share's header

    @property
    def share_encoding(self) -> ShareEncoding:
        """The encoding of a secure-sum round (report rounds have none)."""
        if self.encoding is None:
            raise ProtocolError(f"a {self.label} round has no share encoding")
        return self.encoding


@dataclass(frozen=True)
class ProjectionQuery:
    """What the CSP needs to compute directions from a rotated aggregate (no class names)."""

    method: str
    dimension: int
    classes_per_grouping: tuple[int, ...]
    components: int
    rho: float | None
    rho_prime: float | None
    ridge_noise_floor: float


@dataclass(frozen=True)
class ProjectionReply:
    eigenvalues: tuple[float, ...]
    components: tuple[float, ...]  # k x d, row-major, rotated coordinates
    explained_variance_ratio: tuple[float, ...]
    ridge: dict[str, float]
    compute_seconds: float


@dataclass
class Outcome:
    """What one completed round revealed, handed to `finish_round`."""

    round_id: str
    plan: RoundPlan
    invited: list[str]
    submitted: dict[str, dict[str, float]]  # owner -> its phase timings
    declined: dict[str, str]
    totals: list[int] | None = None  # blinded reveal: signed integer totals
    projection: ProjectionReply | None = None
    reports: Any = None  # report rounds: the protocol's accumulator
    timings: dict[str, float] = field(default_factory=dict)  # aggregator phases
    csp: dict[str, float] = field(default_factory=dict)
    encoding: EncodingFacts | None = None  # encoding and key facts (secure-sum rounds)

    @property
    def n_owners(self) -> int:
        return len(self.submitted)

    def require_totals(self) -> list[int]:
        if self.totals is None:
            raise ProtocolError(f"round {self.round_id} revealed no totals")
        return self.totals

    def require_projection(self) -> ProjectionReply:
        if self.projection is None:
            raise ProtocolError(f"round {self.round_id} revealed no projection")
        return self.projection

    @property
    def missing(self) -> list[str]:
        return [s for s in self.invited if s not in self.submitted and s not in self.declined]

    def facts(self) -> dict[str, Any]:
        """round id, owners, declines, encoding and timings: the RoundFacts of a result."""
        if self.encoding is None:
            raise ProtocolError(f"round {self.round_id} has no encoding facts")
        return {
            "round_id": self.round_id,
            "owners": sorted(self.submitted),
            "declined": dict(self.declined),
            "encoding": self.encoding,
            "timings": RoundTimings(
                owners={s: dict(t) for s, t in self.submitted.items()},
                aggregator=dict(self.timings),
                csp=dict(self.csp),
            ),
        }


@dataclass(frozen=True)
class Step:
    """The end of one round: its published result, and whether the job is done."""

    result: Any  # the protocol's result dataclass (leteo_fed.protocols.results)
    done: bool = True
    message: str = ""


class SiteTable(Protocol):
    """Rows read once from the site's data (numpy engine)."""

    def matrix(self, columns: Sequence[str]) -> np.ndarray: ...

    def labels(self, column: str) -> list[str]: ...


class SiteData(Protocol):
    """The owner's data as protocols see it; the owner agent implements it."""

    @property
    def is_local(self) -> bool:
        """Read by the agent itself: a local file or a database (not a Spark URI)."""
        ...

    @property
    def uses_spark(self) -> bool:
        """Statistics are computed with Spark."""
        ...

    def read(self, columns: Sequence[str]) -> SiteTable: ...

    def spark_moments(self, features: Sequence[str], groupings: Sequence, value_bound: float): ...


@dataclass
class ReportStream:
    """An LDP owner's upload: report chunks and their count."""

    n_reports: int
    chunks: Iterator[np.ndarray]
