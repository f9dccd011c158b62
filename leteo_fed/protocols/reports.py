"""What a report statistic declares: the small interface of a local-DP collection's kind.

In a report round every owner perturbs each of its records on its own (per-record epsilon-LDP)
and sends only the reports; the aggregator folds them, a chunk at a time, into an accumulator
and estimates at the end. A kind of collection (frequency oracles, numeric means, geo points,
naive Bayes: one module each) states:

- its **spec** (`spec`): the data user's `LdpRequest` validated into the public `LdpSpec`
  owners perturb with, DataError naming the field otherwise;
- its **mechanism** (`mechanism`): the oracle or numeric mechanism the spec defines (refusing
  a spec no owner should perturb with);
- how an owner turns its records into **reports** (`reports`: a `ColumnReports` reads its
  column(s), `encode`s them, and `perturb`s them `CHUNK_REPORTS` records at a time);
- its **accumulator** (`accumulator`, a `ReportAccumulator`): the check of a report batch,
  a batch's contribution (`partial`, what Spark computes per partition from spilled batches),
  `fold`, `add` (a contribution computed elsewhere) and the estimate (`result`);
- its **result** type, its **noise preview** and the **release warnings** of its figures.

`leteo_fed.protocols.ldp_round.ReportRoundProtocol` runs any of them: plan, charge, ledger
text, the owner's reports, the aggregator's accumulator and the published result. Kinds are
found through a table, by whether the spec names a label column and by its mechanism
(`statistic_for`), and a result document by the figures it carries (`statistic_of_result`).
"""

from __future__ import annotations

import importlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.protocols.ldp_spec import CHUNK_REPORTS, LdpRequest, LdpSpec
from leteo_fed.protocols.results import ReportTimings, Result

if TYPE_CHECKING:
    from leteo_fed.privacy.noise_gate import ReleaseWarning
    from leteo_fed.protocols.round_types import SiteTable

ROUND_LABEL = "ldp"  # the round label (owner policies, jobs, result file) of most kinds
BUILT_IN = ("ldp_frequency", "ldp_mean", "ldp_geo", "ldp_naive_bayes")  # modules of the kinds


class ReportAccumulator(Protocol):
    """The aggregator's running state of one report round: every batch is checked before it
    is folded, so a malformed batch changes nothing."""

    spec: LdpSpec
    n: int
    engine: str  # "spark" once a contribution computed with Spark was added

    @property
    def keeps_points(self) -> bool:
        """Points, vectors or per-type supports are kept: no batch is spilled to Spark."""
        ...

    def check(self, reports: np.ndarray) -> None:
        """The refusals of `partial`, without computing anything (batches folded later)."""
        ...

    def partial(self, reports: np.ndarray) -> Any:
        """What a batch contributes (validated)."""
        ...

    def fold(self, part: Any) -> None: ...

    def add(self, n: int, contribution: Any, engine: str) -> None:
        """Fold a contribution computed elsewhere (Spark, from spilled batches)."""
        ...

    def result(self, consistency: bool = False) -> dict:
        """The estimate: the fields of the kind's result type, but the round's facts."""
        ...


class ReportStatistic(ABC):
    """One kind of LDP collection (module doc). `mechanisms`: the spec mechanisms it runs;
    `labelled`: its rounds name a `label_column`; `marks`: a key only its result documents
    carry; `label`: its rounds' label."""

    kind: ClassVar[str]
    mechanisms: ClassVar[tuple[str, ...]]
    labelled: ClassVar[bool] = False
    marks: ClassVar[tuple[str, ...]]
    label: ClassVar[str] = ROUND_LABEL

    @abstractmethod
    def spec(self, request: LdpRequest) -> LdpSpec:
        """The request validated into the public spec (DataError naming the field)."""

    @abstractmethod
    def mechanism(self, spec: LdpSpec) -> Any:
        """The mechanism the spec defines; refuses a spec no owner may perturb with."""

    def columns(self, spec: LdpSpec) -> list[str]:
        """The site columns an owner reads."""
        return list(spec.columns) or [spec.column]

    def describe(self, spec: LdpSpec) -> str:
        """The ledger note of a charge."""
        return f"column {spec.column}, one report per record"

    @abstractmethod
    def reports(
        self, spec: LdpSpec, table: SiteTable, rng: np.random.Generator
    ) -> tuple[int, list[np.ndarray]]:
        """An owner's reports of its records: (records, the batches to send)."""

    @abstractmethod
    def accumulator(self, spec: LdpSpec) -> ReportAccumulator: ...

    @abstractmethod
    def result_type(self, spec: LdpSpec) -> type[ReportFacts]: ...

    @abstractmethod
    def preview(self, doc: dict, spec: LdpSpec, rows: int | None, expect: Expectation) -> dict:
        """`doc` (the mechanism, epsilon, quorum and fixes) completed with the expected error
        of every released figure over `rows` reports (`ldp_noise.noise_preview`)."""

    @abstractmethod
    def release_warnings(self, doc: Mapping[str, Any]) -> list[ReleaseWarning]:
        """The released figures the noise buries, from a result document."""


class ColumnReports(ReportStatistic):
    """A kind whose owner sends one report per record of its column(s): read, encode,
    perturb in batches of `CHUNK_REPORTS` records."""

    @abstractmethod
    def read(self, spec: LdpSpec, table: SiteTable) -> Sequence | np.ndarray:
        """The records' values, as `encode` takes them."""

    @abstractmethod
    def encode(self, values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
        """The mechanism's input. A value beyond public bounds is clipped to them (refusing it
        would tell the aggregator the site holds one); one outside a domain is refused."""

    @abstractmethod
    def perturb_chunk(
        self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
    ) -> np.ndarray:
        """The reports of one batch of encoded records."""

    def perturb(
        self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
    ) -> Iterator[np.ndarray]:
        """Per-record perturbation, `CHUNK_REPORTS` records at a time."""
        for start in range(0, len(encoded), CHUNK_REPORTS):
            yield self.perturb_chunk(encoded[start : start + CHUNK_REPORTS], spec, rng)

    def reports(
        self, spec: LdpSpec, table: SiteTable, rng: np.random.Generator
    ) -> tuple[int, list[np.ndarray]]:
        encoded = self.encode(self.read(spec, table), spec)
        return len(encoded), list(self.perturb(encoded, spec, rng))


def finite(values: Sequence | np.ndarray, column: str, problem: str) -> np.ndarray:
    """Values as float64, DataError `problem` if one is missing or not finite."""
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise DataError(problem, field=column, rule="values")
    return x


def facts(spec: LdpSpec, n: int, column: str | None = None) -> dict[str, Any]:
    """The fields every kind's result document opens with; DataError without reports."""
    if n < 1:
        raise DataError("no reports were collected")
    return {
        "protocol": "ldp",
        "mechanism": spec.mechanism,
        "epsilon": spec.epsilon,
        "column": spec.column if column is None else column,
        "n": n,
    }


# ------------------------------------------------------------------ the preview's input


@dataclass(frozen=True)
class Expectation:
    """What the analyst expects of the data, to replace the preview's worst case.

    frequencies: value -> expected share (frequency oracles; values left out: worst case).
    mean, std: the expected mean and standard deviation of the column, in its units (numeric
    mechanisms; several columns: one value for all or one per column).
    priors: class -> expected share (naive Bayes).
    """

    frequencies: Mapping[str, float] = field(default_factory=dict)
    mean: Sequence[float] = ()
    std: Sequence[float] = ()
    priors: Mapping[str, float] = field(default_factory=dict)

    def given(self) -> bool:
        return bool(self.frequencies or self.mean or self.std or self.priors)


# ------------------------------------------------------------------ the result's facts


@dataclass(frozen=True, kw_only=True)
class ReportFacts(Result):
    """What every LDP result states besides its estimate."""

    protocol: str
    mechanism: str
    epsilon: float
    column: str
    n: int
    engine: str
    estimator: str
    round_id: str
    owners: list[str]
    declined: dict[str, str]
    timings: ReportTimings

    def release_warnings(self) -> list:
        """The figures the local noise buries (its kind's `release_warnings`)."""
        doc = self.to_dict()
        return statistic_of_result(doc).release_warnings(doc)


# ------------------------------------------------------------------ the table of kinds

StatisticT = TypeVar("StatisticT", bound=ReportStatistic)
_TABLE: dict[tuple[bool, str], ReportStatistic] = {}
_KINDS: list[ReportStatistic] = []
_loaded = False
_lock = threading.RLock()  # a kind's module may look the table up as it loads
_UNKNOWN = {  # the refusal of a mechanism no kind runs, for rounds without and with a label
    False: "unknown mechanism {mechanism!r}; expected one of {known}",
    True: "naive Bayes reports through one of {known}, got {mechanism!r}",
}


def register(statistic: StatisticT) -> StatisticT:
    """Add a kind to the table under each of its mechanisms."""
    for mechanism in statistic.mechanisms:
        key = (statistic.labelled, mechanism)
        if key in _TABLE and type(_TABLE[key]) is not type(statistic):
            raise RuntimeError(f"two report statistics run {mechanism!r}")
        _TABLE[key] = statistic
    if all(type(k) is not type(statistic) for k in _KINDS):
        _KINDS.append(statistic)
    return statistic


def _load() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        for name in BUILT_IN:
            importlib.import_module(f"leteo_fed.protocols.{name}")
        modules = [f"leteo_fed.protocols.{name}" for name in BUILT_IN]
        _KINDS.sort(key=lambda k: [*modules, type(k).__module__].index(type(k).__module__))
        _loaded = True


def mechanisms(labelled: bool = False) -> tuple[str, ...]:
    """The mechanisms of rounds without (or with) a label column, in the kinds' order."""
    _load()
    return tuple(m for k in _KINDS if k.labelled == labelled for m in k.mechanisms)


def statistic_for(spec: LdpSpec | LdpRequest) -> ReportStatistic:
    """The kind that runs a spec (or a request): by its label column and its mechanism."""
    _load()
    statistic = _TABLE.get((bool(spec.label_column), spec.mechanism))
    if statistic is None:
        known = mechanisms(bool(spec.label_column))
        raise DataError(
            f"unknown mechanism {spec.mechanism!r}; expected one of {known}", field="mechanism"
        )
    return statistic


def statistic_of_result(doc: Mapping[str, Any]) -> ReportStatistic:
    """The kind whose result document (or the figures of one) `doc` is, by its `marks`."""
    _load()
    for statistic in _KINDS:
        if any(mark in doc for mark in statistic.marks):
            return statistic
    raise ProtocolError("not the result of an LDP collection")


def spec_from_request(request: LdpRequest) -> LdpSpec:
    """Validate a data user's request into the public round parameters owners receive."""
    labelled = bool(request.label_column)
    if not labelled and (request.classes or request.features):
        raise DataError(
            "classes and features are for naive Bayes: name its label_column", field="label_column"
        )
    _load()
    statistic = _TABLE.get((labelled, request.mechanism))
    if statistic is None:
        known = mechanisms(labelled)
        message = _UNKNOWN[labelled].format(mechanism=request.mechanism, known=known)
        raise DataError(message, field="mechanism")
    return statistic.spec(request)


def new_accumulator(spec: LdpSpec) -> ReportAccumulator:
    """The accumulator a round of `spec` folds its reports into."""
    return statistic_for(spec).accumulator(spec)


def column_statistic(spec: LdpSpec) -> ColumnReports:
    statistic = statistic_for(spec)
    if not isinstance(statistic, ColumnReports):
        raise ProtocolError(f"{statistic.kind} rounds do not report a column's values")
    return statistic
