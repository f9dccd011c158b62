"""What a secure-sum statistic declares: the one interface a protocol author (or a plugin) writes.

A secure-sum statistic is additive: each owner sums something over its rows, the CSP reveals
only the total over a quorum of owners, and the aggregator turns the totals into a result. So a
statistic states four things and nothing else:

- its **layout**: the blocks of values one share carries (`Block`), each with the most one row
  can add to a value (`row_bound`, which sizes the encoding) and how far one row can move the
  block (`l1`, `l2`: the DP sensitivity), both at a public bound on the row's values;
- its **sums** over an owner's rows (`sums`), vectorized, one array per block;
- how the released totals become its **result** (`result`), and the **figures** that result
  states (what the DP preview and the release's noise report speak of);
- its request and spec types (frozen dataclasses; the spec is what owners receive).

Optional hooks, each documented where `SecureSumStatistic` declares it, say what only some
statistics need (a row bound fixed for counts, a column clipped on its own, a spec a DP
request completes, another layout in DP rounds, blocks of which one row moves only one group
(one per class), columns it clips itself, settings only the aggregator reads, a Spark engine,
a noise report in closed form, a preview and a dry run of their own, a figure); none is needed
by a plain sum of features.

`leteo_fed.protocols.secure_sum.SecureSumProtocol` does everything else once, for every
statistic: planning, the owner's replay of the spec, clipping and public bounds, the fixed-point
encoding and its bounds, the DP calibration, the owner's check of the announced noise, the
charge, the ledger text, the noise preview and the release's noise report. The test kit
(`leteo_fed.testing.statistic_kit`) checks a declaration by brute force.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import check_row_count
from leteo_fed.errors import ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import ReleaseWarning

SUM: Literal["sum"] = "sum"  # a real-valued sum, encoded at 2^scale_bits
COUNT: Literal["count"] = "count"  # a count of rows, encoded exactly (at 2^count_scale_bits)

RequestT = TypeVar("RequestT")
SpecT = TypeVar("SpecT")


@dataclass(frozen=True)
class Block:
    """A run of `size` values in one share.

    `row_bound`: the largest |value| one row adds to any value of the block (a count: 1), at the
    round's bound b on every feature value (|x_j| <= b; a DP round's rows have L2 norm <= b).
    `l1`, `l2`: how far adding or removing one row moves the block, as L1 and L2 norms, in
    real units, at a DP round's row-norm bound b. Both are the statistic's promise, checked by
    the test kit by brute force."""

    name: str
    size: int
    row_bound: float
    l1: float
    l2: float
    kind: Literal["sum", "count"] = SUM

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ProtocolError(f"block {self.name!r} has no values")
        if self.kind not in (SUM, COUNT):
            raise ProtocolError(f"block {self.name!r}: kind must be {SUM!r} or {COUNT!r}")
        for what in ("row_bound", "l1", "l2"):
            value = getattr(self, what)
            if not (math.isfinite(value) and value >= 0):
                raise ProtocolError(f"block {self.name!r}: {what} must be finite and >= 0")


def n_values(blocks: Sequence[Block]) -> int:
    return sum(b.size for b in blocks)


@dataclass(frozen=True)
class Rows:
    """An owner's rows as a statistic reads them: `x` the feature columns, then the bounded
    columns (n x d, clipped and, with public bounds, scaled to [-1, 1] in a DP round; no
    columns and no rows for a statistic without either, which reads `table` itself), `table`
    the site's table for its other columns (labels, weights), `bound` the round's bound on
    every feature value, `max_rows` the round's most rows per owner."""

    x: np.ndarray
    table: Any  # leteo_fed.protocols.round_types.SiteTable
    bound: float
    dp: bool = False
    max_rows: int = 0

    @property
    def n(self) -> int:
        return int(self.x.shape[0])

    def check_count(self, n: int) -> None:
        """The count of rows a statistic read itself: refused beyond the round's limit."""
        check_row_count(n, self.max_rows)

    def column(self, name: str) -> np.ndarray:
        """A numeric column outside the features, as float64 (check its own bounds)."""
        return np.asarray(self.table.matrix([name])[:, 0], dtype=np.float64)

    def labels(self, name: str) -> list[str]:
        return list(self.table.labels(name))


class Totals:
    """The released totals of a round, block by block: exact integers and their real values."""

    def __init__(
        self, blocks: Sequence[Block], totals: Sequence[int], scale_bits: int, count_bits: int
    ) -> None:
        if len(totals) != n_values(blocks):
            raise ProtocolError(f"expected {n_values(blocks)} totals, got {len(totals)}")
        self._parts: dict[str, tuple[list[int], int]] = {}
        start = 0
        for b in blocks:
            bits = count_bits if b.kind == COUNT else scale_bits
            self._parts[b.name] = (list(totals[start : start + b.size]), bits)
            start += b.size

    def exact(self, name: str) -> list[Fraction]:
        """A block's totals as exact rationals (what integer arithmetic on them needs)."""
        values, bits = self._parts[name]
        return [Fraction(v, 1 << bits) for v in values]

    def real(self, name: str) -> np.ndarray:
        """A block's totals in real units (one rounding per value)."""
        values, bits = self._parts[name]
        return np.array([math.ldexp(float(v), -bits) for v in values], dtype=np.float64)

    def count(self, name: str) -> float:
        """A one-value block (a row count) in real units."""
        return float(self.real(name)[0])

    def encoded(self, name: str) -> tuple[list[int], int]:
        """A block's totals as summed (integers) and their scale bits, for exact arithmetic of
        the statistic's own (e.g. a moments decoder)."""
        values, bits = self._parts[name]
        return list(values), bits


@dataclass(frozen=True)
class Release:
    """What the aggregator knows of a round when it turns totals into a result: whether the
    totals are noisy, the noise's std per sum value in real units (0 without DP), the public
    bounds the features were scaled from (empty: natural units or no DP), the owners summed."""

    noisy: bool
    noise_std: float
    bounds: tuple[ColumnBounds, ...]
    n_owners: int
    bound: float  # the bound every feature value met (the row-norm bound of a DP round)
    settings: Any = None  # the statistic's `settings` of the request (aggregator-only)
    # the noise std per sum value with the quorum's shares alone (0 without DP): what the plan
    # knew before the round, e.g. for a post-processing sized to the noise ahead of time
    quorum_noise_std: float = 0.0


@dataclass(frozen=True)
class NoiseReport:
    """What a DP release says of its noise beyond the adapter's (`noise_report`): each figure's
    noise std in closed form (None: redrawn around the released totals), the statistic's own
    warnings (beside the figures the noise buries), and the noise facts' texts ("" : the
    adapter's)."""

    figure_noise: Mapping[str, float] | None = None
    warnings: Sequence[ReleaseWarning] = ()
    mechanism: str = ""
    post_processing: str = ""
    note: str = ""


@dataclass(frozen=True)
class Command:
    """One of several commands of a statistic (`SecureSumStatistic.commands`), each a form of
    its request: `name` (also the label its jobs' result file is found by), `help`,
    `description`, the request fields it sets itself (`fixed`, by name: no flag), the flags'
    defaults it changes (`defaults`, by field name), the fields it offers no flag for
    (`omit`) and what its dry run gives the expected error of (`previews`)."""

    name: str
    help: str
    description: str = ""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    omit: tuple[str, ...] = ()
    previews: str = "each released figure"


class SecureSumStatistic(ABC, Generic[RequestT, SpecT]):
    """A secure-sum statistic as its author declares it (see the module's docstring).

    Class attributes: `name` (the registry and payload name), `version` (signed in a plugin's
    round: owners refuse a round of another version), `request_type` and `spec_type` (frozen
    dataclasses), `result_type` (a `results.Result` dataclass built from `result`'s fields, with its proto
    message; a plugin has none and gets `results.StatisticResult`),
    `summary` (the result fields the CLI prints on one line) and `help` (the command's text),
    `plot_file` (the figure the command draws, by the plotter of the result's wire name),
    `commands` (several commands of one statistic: `Command`; none: one, from `command`,
    `help` and `description`), `rows_field` (the result field counting the rows released)."""

    name: ClassVar[str]
    version: ClassVar[str] = "1"
    request_type: ClassVar[type]
    spec_type: ClassVar[type]
    result_type: ClassVar[type | None] = None  # None: `results.StatisticResult`
    output_file: ClassVar[str] = ""  # "" : <name>.json
    summary: ClassVar[tuple[str, ...]] = ()
    command: ClassVar[str] = ""  # "" : the name, "_" as "-"
    help: ClassVar[str] = ""
    description: ClassVar[str] = ""
    takes_bounds: ClassVar[bool] = True  # DP features may be clipped to public bounds
    plot_file: ClassVar[str | None] = None  # the command's figure (cli.jobs.PLOTTERS)
    commands: ClassVar[tuple[Command, ...]] = ()  # () : one command
    rows_field: ClassVar[str] = "n_rows"  # the result's count of rows (the DP noise report's)
    # A statistic of counts (a row adds at most one to each value) clips nothing: its DP rounds
    # have this row bound whatever the request says, and it takes no value_bound.
    fixed_row_norm_bound: ClassVar[float | None] = None
    # Non-DP rounds on a Spark site take `spark_sums`; DP rounds clip rows in memory, so a
    # Spark site refuses them.
    spark_engine: ClassVar[bool] = False
    # the command's wording: what its dry run previews the noise of, and the help of its
    # quorum and deadline flags ("" : the shared wording; a multi-round job's are per iteration)
    noise_of: ClassVar[str] = "each released figure"
    # fixed-point fraction bits of a round that names none, without and with DP (a statistic
    # of counts alone encodes whole counts without DP)
    default_scale_bits: ClassVar[int] = defaults.PCA_DEFAULT_SCALE_BITS
    dp_default_scale_bits: ClassVar[int] = defaults.DP_DEFAULT_SCALE_BITS
    round_help: ClassVar[tuple[str, str]] = ("", "")
    # the names the command's flag of a shared parameter is spelled by, the first the one shown
    # (e.g. {"dp_epsilon": ("epsilon", "dp_epsilon")}; none: the parameter's own name)
    spellings: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # A statistic that reads its own columns (no `features`) and clips them itself to public
    # bounds its request states (naive Bayes' per-feature bounds) takes no row-norm bound from
    # the analyst's command: a DP request carries `implied_row_norm_bound` of the request.
    clips_itself: ClassVar[bool] = False

    # ---------------------------------------------------------------- what is asked

    @abstractmethod
    def spec(self, request: RequestT) -> SpecT:
        """The spec owners receive for a request, validated (DataError naming the field)."""

    @abstractmethod
    def features(self, spec: SpecT) -> tuple[str, ...]:
        """The numeric columns a round reads as x (bounded, clipped and scaled in DP)."""

    def other_columns(self, spec: SpecT) -> tuple[str, ...]:
        """Columns read beside the features (labels, weights): the statistic bounds them."""
        return ()

    def bounded_columns(self, spec: SpecT) -> Mapping[str, float]:
        """Numeric columns read after the features into x, each clipped on its own to [-B, B]
        in a DP round (e.g. a regression's label), by name: with public bounds they are scaled
        like the features; outside the row norm; a clipped one counts its row as clipped."""
        return {}

    def spec_for(self, spec: SpecT, dp: Any) -> SpecT:
        """The spec of a round with this DP request (`base.DpRequest`, None: without DP): what
        only a DP round fixes, e.g. a clipping bound (DataError naming the field)."""
        return spec

    def settings(self, request: RequestT) -> Any:
        """What the aggregator alone uses of a request (e.g. which percentiles to read off a
        histogram), validated: `Release.settings` and `StatisticPlan.settings`."""
        return None

    def implied_row_norm_bound(self, request: RequestT) -> float:
        """`clips_itself`: the row-norm bound a DP request of `request` carries (e.g. the
        largest |bound| the request states), what its spec falls back on."""
        raise NotImplementedError(f"{self.name} takes its row-norm bound from the request")

    def check_spec(self, spec: SpecT) -> None:
        """The owner's check of a spec as relayed, beyond the replay (ProtocolError)."""
        return None

    # ---------------------------------------------------------------- what an owner sends

    @abstractmethod
    def blocks(self, spec: SpecT, bound: float) -> tuple[Block, ...]:
        """The share's layout at a bound b on every feature value (a DP round: on each row's
        L2 norm): each block's size, most one row adds, and sensitivity."""

    def dp_blocks(self, spec: SpecT, bound: float) -> tuple[Block, ...]:
        """A DP round's layout, when it differs (e.g. every node of a tree of counts)."""
        return self.blocks(spec, bound)

    def exclusive_blocks(self, spec: SpecT) -> Sequence[Sequence[str]]:
        """Groups of blocks (by name) of which one row moves a single group's values and leaves
        every other group's bit-identical (e.g. a group per class, each class's sums
        accumulated apart): the share's DP sensitivity is the largest group's plus that of the
        blocks outside every group, not their sum. (): one row may move every block."""
        return ()

    def share_sensitivity(
        self, spec: SpecT, bound: float, scale_bits: int, count_bits: int
    ) -> noise.Sensitivity | None:
        """The integer sensitivity of a DP round's share at row-norm bound `bound`, in closed
        form, where the sum over the blocks (`block_encoding.integer_sensitivity`) overstates it: e.g. blocks
        of which one row moves only one (a class's sums). None: the blocks' sum."""
        return None

    @abstractmethod
    def sums(self, spec: SpecT, rows: Rows) -> Mapping[str, np.ndarray]:
        """This owner's sums, one array per block (by name), real units; counts as numbers."""

    def spark_sums(self, spec: SpecT, site: Any, bound: float) -> Mapping[str, np.ndarray]:
        """A non-DP round's sums on a Spark site (`spark_engine`), by its engine."""
        raise NotImplementedError(f"{self.name} has no Spark engine")

    # ---------------------------------------------------------------- what the totals give

    @abstractmethod
    def result(self, spec: SpecT, totals: Totals, release: Release) -> dict[str, Any]:
        """The result's fields from the released totals (noisy ones post-processed: DataError
        if the noise leaves nothing to release)."""

    @abstractmethod
    def figures(self, spec: SpecT, result: Mapping[str, Any]) -> dict[str, float]:
        """The figures a result states, by name: what the release's noise report and the
        preview give the noise of."""

    def with_noise(
        self, spec: SpecT, result: dict[str, Any], noise_std: Mapping[str, float]
    ) -> dict[str, Any]:
        """A DP result once each figure's noise std is known (e.g. intervals widened by it)."""
        return result

    def noise_report(
        self, spec: SpecT, result: Mapping[str, Any], totals: Totals, release: Release
    ) -> NoiseReport:
        """What a DP release says of its noise beyond the adapter's (`NoiseReport`)."""
        return NoiseReport()

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any] | None:
        """A DP round's preview from public parameters (`secure_sum.StatisticPlan`): the
        statistic's own (its figures' expected errors under `expected_error`, the checks a real
        round meets under `signal_checks`), or None for the adapter's: each block's total
        against its largest value. Bounded releases are simulated instead (`dp_release`)."""
        return None

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str] | None:
        """What the command's dry run says of the statistic's own `preview` doc (None: the
        noise per value and each `expected_error`)."""
        return None

    def notes(self, result: Mapping[str, Any]) -> list[str]:
        """What the command says after printing a result (e.g. a job that did not converge)."""
        return []

    def describe(self, spec: SpecT) -> str:
        """The ledger's note of a round."""
        return f"{self.name} of {len(self.features(spec))} column(s)"

    def preview_data(
        self, spec: SpecT, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's simulated rows made fit for this statistic (e.g. a label column), and
        what that adds to the stated assumption."""
        return columns, ""
