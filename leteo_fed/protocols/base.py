"""What a federated protocol is: the small interface the round engine and the owners call.

A protocol is one object with two faces and no network code:

- aggregator side: `plan` a validated job from the analyst's request, give the spec of each
  `next_round`, and `finish_round` from the revealed totals (or the report accumulator), which
  either ends the job or asks for another round (k-means iterations);
- owner side: the `columns` a round reads, `check` of a spec before anything is computed
  (encoding, DP accounting, engine), what the round `charge`s against the owner's budget, and
  the share itself: `share_values` (encoded integers for the secure sum) or `reports` (LDP).

Requests and specs are frozen dataclasses whose field names match the protocol's proto payload
messages, so the transport converts them generically (`leteo_fed.transport.codec`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.packing import SlotLayout, check_finite_and_bounded
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.accounting import ApproxEvent, PrivacyEvent, SkellamEvent
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.budget import Budget, check_delta, check_epsilon
from leteo_fed.privacy.verify import verify_release
from leteo_fed.protocols import dp_release
from leteo_fed.protocols.results import DpFacts, EncodingFacts, RoundTimings

SECURE_SUM = "secure_sum"  # owners send Paillier-encrypted, packed integers; the engine sums them
REPORTS = "reports"  # owners send perturbed reports; the engine folds them into an accumulator


# ------------------------------------------------------------------ what the analyst asks


@dataclass(frozen=True)
class DpRequest:
    """A DP release: the budget, and what bounds a row: public bounds per column (values
    clipped and scaled to [-1, 1], `leteo_fed.privacy.bounds`) and/or an L2 bound every row is
    clipped to (0: derived from the bounds, sqrt(d) for d bounded columns)."""

    epsilon: float
    delta: float
    row_norm: float
    bounds: tuple[ColumnBounds, ...] = ()

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def row_norm_bound(self) -> float:
        """The L2 bound of a protocol that takes no per-column bounds."""
        if self.row_norm <= 0:
            raise DataError(
                "this protocol clips whole rows: give row_norm_bound",
                field="row_norm_bound",
            )
        return self.row_norm

    def release_bounds(self, columns: Sequence[str]) -> tuple[ColumnBounds, ...]:
        """The bounds of the numeric `columns` a release reads, in order; () without bounds."""
        if not self.bounds:
            return ()
        return bounds_of.for_columns(self.bounds, columns)

    def norm_for(self, d: int) -> float:
        """The L2 bound of rows of d columns: the one given, else sqrt(d) (every scaled value
        in [-1, 1]). With bounds, a given bound is in the scaled units."""
        if self.row_norm > 0:
            return self.row_norm
        return math.sqrt(d)


MAX_SCALE_BITS = 64  # fixed-point fraction bits any encoding accepts (encoding.share)


@dataclass(frozen=True)
class Common:
    """Round parameters every protocol shares (the request's fields outside its payload)."""

    n_invited: int
    min_owners: int = 0  # 0: the protocol's default quorum
    deadline_seconds: float = 0.0  # 0: the default deadline
    scale_bits: int = 0  # 0: the protocol's default
    value_bound: float = 0.0  # 0: the protocol's default
    dp: DpRequest | None = None

    def __post_init__(self) -> None:
        # checked here, before any protocol derives a bound or a sensitivity from it
        if not 0 <= self.scale_bits <= MAX_SCALE_BITS:
            raise DataError(
                f"scale_bits must be in 0..{MAX_SCALE_BITS} (0: the protocol's default), got "
                f"{self.scale_bits}",
                field="scale_bits",
            )

    def quorum(self, minimum: int = defaults.MIN_QUORUM) -> int:
        """The request's quorum; without one, DEFAULT_QUORUM (what the owners' default policy
        asks), or every invited owner if fewer are invited (never below `minimum`)."""
        default = minimum  # LDP: every report is private on its own
        if minimum >= defaults.MIN_QUORUM:  # a secure sum
            default = max(minimum, min(defaults.DEFAULT_QUORUM, self.n_invited))
        q = self.min_owners or default
        if q < minimum:
            why = "a single share would be revealed" if minimum >= 2 else "no owner"
            raise DataError(f"min_owners must be at least {minimum}: {why}", field="min_owners")
        return q

    def deadline(self) -> float:
        d = self.deadline_seconds or defaults.DEFAULT_DEADLINE_SECONDS
        if not (math.isfinite(d) and 0 < d <= defaults.MAX_DEADLINE_SECONDS):
            raise DataError(
                f"deadline_seconds must be in (0, {defaults.MAX_DEADLINE_SECONDS:.0f}]",
                field="deadline_seconds",
            )
        return d

    def no_dp(self, protocol: str) -> None:
        if self.dp is not None:
            raise DataError(f"{protocol} rounds take no dp_epsilon", field="dp_epsilon")


def check_features(features: tuple[str, ...], purpose: str) -> tuple[str, ...]:
    """The request's feature columns: at least one, at most MAX_FEATURES, no duplicates."""
    if not features:
        raise DataError(f"features is empty: name the columns to {purpose}", field="features")
    if len(features) > defaults.MAX_FEATURES:
        raise DataError(
            f"features names {len(features)} columns; a request may name at most "
            f"{defaults.MAX_FEATURES}",
            field="features",
        )
    if len(set(features)) != len(features):
        raise DataError("features contains duplicates", field="features")
    return features


def dp_request(
    epsilon: float | None,
    delta: float | None,
    row_norm_bound: float | None,
    bounds: Sequence[ColumnBounds] = (),
) -> DpRequest | None:
    """The request's DP fields, validated (one validator for every protocol)."""
    if epsilon is None:
        if delta is not None or row_norm_bound is not None or bounds:
            raise DataError(
                "dp_delta, row_norm_bound and `bounds` need dp_epsilon", field="dp_epsilon"
            )
        return None
    bounds = bounds_of.check_unique(bounds)
    eps = check_epsilon(epsilon, field="dp_epsilon")
    dlt = defaults.DEFAULT_DP_DELTA if delta is None else check_delta(delta, field="dp_delta")
    if dlt > defaults.MAX_DP_DELTA:  # a larger delta allows leaking a row outright
        raise DataError(
            f"dp_delta must be in (0, {defaults.MAX_DP_DELTA:g}], got {delta}", field="dp_delta"
        )
    if row_norm_bound is None:
        if bounds:
            return DpRequest(eps, dlt, 0.0, bounds)
        raise DataError(
            "a DP round needs public bounds per column (`bounds`) or "
            "row_norm_bound (rows are clipped to it)",
            field="row_norm_bound",
        )
    if not (math.isfinite(row_norm_bound) and row_norm_bound > 0):
        raise DataError(
            f"row_norm_bound must be a positive number, got {row_norm_bound}",
            field="row_norm_bound",
        )
    return DpRequest(eps, dlt, float(row_norm_bound), bounds)


# ------------------------------------------------------------------ what owners receive


@dataclass(frozen=True)
class LedgerCharge:
    """A round's charge as the owner's ledger takes it (`PrivacyLedger.reserve`)."""

    budget: Budget  # the release alone; a job's round: the job's (epsilon, delta)
    event: PrivacyEvent | None  # its RDP curve (None: an ApproxEvent of `budget`)
    job: str = ""  # the multi-round job it is a round of ("" for a single release)
    further: int = 0  # later rounds of the job that must fit too


@dataclass(frozen=True)
class DpSpec:
    """Distributed Skellam noise of a DP round (the wire's DpSpec).

    (epsilon, delta) is what `compositions` rounds with this noise give together (0 or 1: a
    single release; a multi-round job: its T rounds, calibrated by Renyi composition)."""

    epsilon: float
    delta: float
    row_norm_bound: float
    mu: float  # aggregate Skellam parameter with exactly `quorum` shares
    quorum: int
    mechanism: str = "skellam"
    compositions: int = 0
    bounds: tuple[ColumnBounds, ...] = ()  # owners clip and scale these columns; +1 value

    @property
    def counts_clipped(self) -> bool:
        """A release with public bounds carries one more value: the rows clipped."""
        return bool(self.bounds)

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def releases(self) -> int:
        """How many rounds with this noise the (epsilon, delta) covers."""
        return max(1, int(self.compositions))

    def aggregate_mu(self, n_shares: int) -> float:
        """The released sum's Skellam parameter with `n_shares` owners' noise in it."""
        return noise.effective_mu(self.mu, self.quorum, n_shares)

    def noise_std(self, n_shares: int, scale_bits: int) -> float:
        """Standard deviation of the aggregate noise per value, in real units at that scale."""
        return math.sqrt(2 * noise.effective_mu(self.mu, self.quorum, n_shares)) / 2**scale_bits


MAX_OWNER_MU = 1e17  # numpy's exact Poisson sampler stops near 9e18


def skellam_plan(
    dp: DpRequest,
    sensitivity: noise.Sensitivity,
    quorum: int,
    n_values: int,
    *,
    row_norm_bound: float | None = None,
    bounds: tuple[ColumnBounds, ...] = (),
    compositions: int = 1,
    remedy: str | None = None,
) -> tuple[DpSpec, int]:
    """Calibrate the aggregate Skellam noise so that `compositions` releases with it are
    together (epsilon, delta)-DP (Renyi composition); (spec, per-owner noise bound).

    With `bounds` the owners clip and scale those columns and add the count of clipped rows as
    one more value: `sensitivity` and `n_values` must already count it (`with_clip_count`)."""
    mu = noise.calibrate_mu(
        dp.epsilon, dp.delta, sensitivity.l1, sensitivity.l2, compositions=compositions
    )
    spec = DpSpec(
        dp.epsilon,
        dp.delta,
        dp.row_norm_bound if row_norm_bound is None else row_norm_bound,
        mu,
        quorum,
        compositions=compositions if compositions > 1 else 0,
        bounds=bounds,
    )
    if remedy is None:
        return spec, owner_noise_bound(mu, quorum, n_values)
    return spec, owner_noise_bound(mu, quorum, n_values, remedy)


def plan_dp(
    dp: DpRequest,
    columns: Sequence[str],
    sensitivity_of: Callable[[float], noise.Sensitivity],
    n_values: int,
    count_scale_bits: int,
    quorum: int,
    norm_columns: int | None = None,
    compositions: int = 1,
) -> tuple[DpSpec, int, noise.Sensitivity, int]:
    """The DP part of a secure-sum plan, the same for every protocol: the public bounds of the
    numeric `columns` (if the request has bounds), the row-norm bound C (given, or derived for
    `norm_columns` scaled columns), the sensitivity at C (one more count for the clipped
    rows), the calibrated noise. Returns (spec, per-owner noise bound, sensitivity, values)."""
    bounds = dp.release_bounds(columns)
    c = dp.norm_for(len(columns) if norm_columns is None else norm_columns)
    if not bounds:
        c = dp.row_norm_bound
    sens, n_vals = with_clip_count(sensitivity_of(c), n_values, count_scale_bits, bool(bounds))
    spec, noise_bound = skellam_plan(
        dp, sens, quorum, n_vals, row_norm_bound=c, bounds=bounds, compositions=compositions
    )
    return spec, noise_bound, sens, n_vals


def verify_dp(
    dp: DpSpec,
    columns: Sequence[str],
    sensitivity: noise.Sensitivity,
    n_values: int,
    encoding: ShareEncoding,
) -> None:
    """The owner's side of `plan_dp`: the bounds are the signed request's for exactly these
    columns, and the announced noise delivers the announced budget at the sensitivity the owner
    recomputed (`verify_release`), with room in the encoding."""
    if dp.bounds:
        bounds_of.for_columns(dp.bounds, columns)
    sens, n_vals = with_clip_count(
        sensitivity, n_values, encoding.count_scale_bits, dp.counts_clipped
    )
    verify_release(dp, sens, n_vals, encoding.noise_bound)


def with_clip_count(
    sensitivity: noise.Sensitivity, n_values: int, count_scale_bits: int, bounded: bool
) -> tuple[noise.Sensitivity, int]:
    """A bounded release's share has one more value, the rows this owner clipped (encoded as
    a count, 2^count_scale_bits per row): one row moves it by at most one count."""
    if not bounded:
        return sensitivity, n_values
    unit = float(2**count_scale_bits)
    return (
        noise.Sensitivity(sensitivity.l1 + unit, math.hypot(sensitivity.l2, unit)),
        n_values + 1,
    )


def split_clip_count(
    totals: list[int], dp: DpSpec | None, count_scale_bits: int
) -> tuple[list[int], float | None]:
    """The released totals without the clipped-rows value, and that (noisy) count."""
    if dp is None or not dp.counts_clipped:
        return totals, None
    return totals[:-1], totals[-1] / 2**count_scale_bits


def clip_for_release(
    x: np.ndarray, columns: Sequence[str], dp: DpSpec, bounded: Mapping[str, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """An owner's rows as a DP release reads them: any finite value accepted; with public
    bounds each column clipped and scaled to [-1, 1]; every row then clipped to L2 norm
    `row_norm_bound`. `bounded`: columns after `columns` in x, each clipped to [-B, B] on its
    own instead (e.g. a regression's label). Returns the rows and which of them were clipped."""
    side = dict(bounded or {})
    names = [*columns, *side]
    check_finite_and_bounded(x, names, np.inf)
    if x.shape[0] == 0:
        raise DataError("the data source has no rows", rule="rows")
    clipped = np.zeros(x.shape[0], dtype=bool)
    if dp.bounds:
        x, clipped = bounds_of.scale_columns(x, bounds_of.for_columns(dp.bounds, names))
    if not side:
        clipped |= np.linalg.norm(x, axis=1) > dp.row_norm_bound
        return noise.clip_rows(x, dp.row_norm_bound), clipped
    d = len(columns)
    clipped |= np.linalg.norm(x[:, :d], axis=1) > dp.row_norm_bound
    out = [noise.clip_rows(x[:, :d], dp.row_norm_bound)]
    for j, b in enumerate(side.values()):
        clipped |= np.abs(x[:, d + j]) > b
        out.append(np.clip(x[:, d + j], -b, b)[:, None])
    return np.hstack(out), clipped


def clip_count_value(clipped: np.ndarray, count_scale_bits: int) -> int:
    return int(np.count_nonzero(clipped)) << count_scale_bits


def owner_noise_bound(
    mu: float,
    quorum: int,
    n_values: int,
    remedy: str = "give public `bounds` per column (data in natural units), or rescale the "
    "columns so rows have norms near 1 and lower row_norm_bound to match, lower scale_bits, "
    "or raise dp_epsilon",
) -> int:
    """The slot room one owner's Skellam(mu / quorum) noise needs, refusing noise too large to
    sample exactly."""
    owner_mu = mu / quorum
    if owner_mu > MAX_OWNER_MU:
        raise DataError(
            f"the noise (Skellam mu {owner_mu:.3g} per owner) is too large to sample exactly: "
            f"{remedy}",
            field="scale_bits",
        )
    return noise.skellam_magnitude_bound(owner_mu, n_values)


def preview_facts(dp: DpSpec | None, scale_bits: int) -> tuple[dict, float]:
    """The public facts every noise preview starts with, and the noise std per released value
    in real units (with the quorum's shares); DataError without DP."""
    if dp is None:
        raise DataError("a preview is of DP noise: give dp_epsilon", field="dp_epsilon")
    facts = {
        "epsilon": dp.epsilon,
        "delta": dp.delta,
        "row_norm_bound": dp.row_norm_bound,
        "quorum": dp.quorum,
    }
    return facts, dp.noise_std(dp.quorum, scale_bits)


def clip_note(dp: DpSpec | None) -> str:
    """The ledger note's tail for a DP round."""
    return f", rows clipped to {dp.row_norm_bound:g}" if dp is not None else ""


def require_same_count_scale(encoding: ShareEncoding) -> None:
    """One noise level fits every coordinate only if counts are scaled like the sums."""
    if encoding.count_scale_bits != encoding.scale_bits:
        raise ProtocolError("DP rounds must encode counts at the same scale as sums")


def dp_facts(
    mechanism: str, dp: DpSpec, sensitivity: noise.Sensitivity, truth: Any = None, **more
) -> DpFacts:
    """What a result says about its noise (shared by the secure-sum protocols); `truth` a
    `dp_release.Truth`: each figure's noise, the warnings, the clipped rows."""
    more |= truth_fields(dp, truth)
    return DpFacts(
        mechanism=mechanism,
        epsilon=dp.epsilon,
        delta=dp.delta,
        row_norm_bound=dp.row_norm_bound,
        quorum=dp.quorum,
        sensitivity_l1=sensitivity.l1,
        sensitivity_l2=sensitivity.l2,
        **more,
    )


def round_truth(
    dp: DpSpec,
    outcome: Outcome,
    figures_of: Callable[[list[int]], dict[str, float]],
    n_rows: float,
    count_scale_bits: int,
    extra: Sequence[Any] = (),
) -> Any:
    """What a secure-sum release says of its noise (`dp_release.release_truth`), the same for
    every protocol: its figures from the released totals (`figures_of`, the protocol's own
    aggregator code), each one's noise redrawn at the round's aggregate noise, the rows clipped
    (a bounded release's last value), the warnings (plus the protocol's `extra` ones)."""
    totals = outcome.require_totals()
    _, clipped = split_clip_count(totals, dp, count_scale_bits)
    return dp_release.release_truth(
        figures_of,
        totals,
        dp.aggregate_mu(outcome.n_owners),
        outcome.round_id,
        n_rows,
        clipped,
        extra,
    )


def truth_fields(dp: DpSpec, truth: Any = None) -> dict[str, Any]:
    """The `ReleaseNoiseFacts` of a release: its bounds and, with a `dp_release.Truth`, each
    figure's noise, the warnings and the clipped rows."""
    out: dict[str, Any] = {"bounds": list(dp.bounds)}
    if truth is not None:
        out |= {
            "figure_noise_std": dict(truth.figure_noise_std),
            "warnings": list(truth.warnings),
            "clipped_rows": truth.clipped_rows,
            "figures": dict(truth.figures),
        }
    return out


def encoding_facts(
    encoding: ShareEncoding, layout: SlotLayout, n_values: int, key_bits: int
) -> EncodingFacts:
    """The public encoding and key facts every secure-sum result reports."""
    return EncodingFacts(
        scale_bits=encoding.scale_bits,
        count_scale_bits=encoding.count_scale_bits,
        value_bound=encoding.value_bound,
        slot_bits=layout.slot_bits,
        slots_per_ciphertext=layout.slots_per_ciphertext,
        mask_bits=layout.mask_bits,
        statistical_security_bits=layout.statistical_security,
        values_per_share=n_values,
        ciphertexts_per_share=layout.n_ciphertexts(n_values),
        paillier_bits=key_bits,
    )


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


# ------------------------------------------------------------------ owner side


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


# ------------------------------------------------------------------ the interface


class FederatedProtocol(ABC):
    """One protocol; `name` is its payload field in RoundRequest and RoundSpec."""

    name: ClassVar[str]
    request_type: ClassVar[type]
    spec_type: ClassVar[type]
    kind: ClassVar[str] = SECURE_SUM
    multi_round: ClassVar[bool] = False  # a job of several rounds (round ids get "-it<t>")
    plot_file: ClassVar[str | None] = None  # the figure the CLI draws of a result, if any
    # A protocol where a row adds at most one count to each released value (crosstab,
    # quantiles) has its DP bound fixed: a DP request that names none gets this one.
    fixed_row_norm_bound: ClassVar[float | None] = None
    # A protocol whose DP release reads numeric columns it can clip and scale to public
    # per-column bounds (`DpRequest.release_bounds`); others refuse a request with bounds.
    takes_bounds: ClassVar[bool] = False

    def result_file(self, label: str) -> str | None:
        """The file the CLI writes a result of a job labelled `label` (RoundStatus.protocol)
        to; None: not a label of this protocol."""
        return f"{self.name}.json" if label == self.name else None

    def output_file(self, request: Any) -> str:
        """The file the CLI writes the result of `request` to."""
        return self.result_file(self.name) or f"{self.name}.json"

    def wire_request(self, request: Any) -> Any:
        """The request as its payload travels (a plugin's own request wraps into the
        `statistic` payload, `plugins`)."""
        return request

    # ---------------------------------------------------------------- aggregator side

    @abstractmethod
    def plan(self, request: Any, common: Common) -> Any:
        """Validate a request into a plan with `label`, `min_owners` and `deadline_seconds`;
        DataError naming the field otherwise."""

    def start(self, plan: Any, job_id: str, invited: list[str]) -> Any:
        """The job's mutable state (None for single-round protocols)."""
        return None

    @abstractmethod
    def next_round(self, plan: Any, state: Any, index: int) -> RoundPlan:
        """The plan of round `index` (1-based)."""

    @abstractmethod
    def finish_round(self, plan: Any, state: Any, outcome: Outcome) -> Step:
        """The result of a completed round; `Step.done` False asks for another round."""

    def job_result(self, plan: Any, state: Any, last: Step) -> Any:
        """The job's result once done (single-round: the round's)."""
        return last.result

    def snapshot(self, state: Any) -> dict[str, Any] | None:
        """The job's state after a completed round as plain JSON data (no pickle), kept by the
        aggregator so that after a restart the job resumes from there; None: the job cannot
        resume (single-round protocols have nothing between rounds)."""
        return None

    def restore(self, plan: Any, job_id: str, invited: list[str], snapshot: dict[str, Any]) -> Any:
        """The state a `snapshot` describes, for the job planned again from its request;
        ProtocolError if the snapshot does not fit the plan."""
        raise ProtocolError(f"{self.name} jobs cannot resume from a snapshot")

    def new_accumulator(self, plan: Any) -> Any:
        """Report protocols: the accumulator the round's reports are folded into."""
        raise NotImplementedError(f"{self.name} takes no reports")

    def projection_query(self, plan: Any, state: Any, n_owners: int) -> ProjectionQuery:
        raise NotImplementedError(f"{self.name} has no projection-only mode")

    def progress(self, plan: Any, index: int, round_id: str) -> str:
        return ""

    # ---------------------------------------------------------------- what owners verify

    def job_timeout(self, request: Any, deadline_seconds: float) -> float:
        """How long the analyst waits for a job of this request whose rounds each have
        `deadline_seconds` (single-round protocols: the deadline)."""
        return deadline_seconds

    def max_rounds(self, plan: Any) -> int:
        """The most rounds a job planned from this request may have (k-means: T iterations)."""
        return 1

    def expected_round(
        self, plan: Any, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """The round `index` an owner expects: the aggregator's own `start` and `next_round`
        replayed from the signed request. A protocol whose round depends on something only the
        aggregator can choose (a secret rotation, centers computed from earlier results) takes
        it from `received`, the spec as relayed, once it has checked its shape; everything
        else must come out equal to what was relayed."""
        return self.next_round(plan, self.start(plan, job_id, invited), index)

    def chosen_by_aggregator(self, spec: Any) -> bool:
        """Whether what this round releases depends on values the aggregator chose and no owner
        can verify (k-means centers after the first iteration): owners count such a round as a
        release of its own."""
        return False

    def failure(self, plan: Any, index: int, message: str) -> str:
        """The job's message when round `index` failed."""
        return message

    # ---------------------------------------------------------------- owner side

    @abstractmethod
    def columns(self, spec: Any) -> list[str]:
        """The site columns the round reads."""

    @abstractmethod
    def request_columns(self, request: Any) -> list[str]:
        """The site columns the analyst's request names. An owner reads only columns its
        analyst signed for: `columns(spec)` of every round planned from the request must be
        among these, whatever the aggregator relays."""

    def request_budget(self, request: Any, dp: DpRequest | None) -> Budget | None:
        """The most a job planned from this request may charge each owner (None: the analyst
        asked for no DP), compared by owners with `job_budget` of the spec they receive."""
        return dp.budget if dp is not None else None

    def job_budget(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What the whole job of this round charges an owner, as the spec declares it (a
        multi-round protocol counts every round); None: nothing."""
        return self.charge(spec, dp)

    def dimension(self, spec: Any) -> int:
        """Features per row, declared in the share's header."""
        return len(self.columns(spec))

    def reveal_mode(self, spec: Any) -> str:
        """How the CSP may reveal this round's sum, read from the spec by the owner and signed
        in its share statement, so the aggregator cannot open the round in another mode."""
        return "blinded"

    def check(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        """Refuse (LeteoError) a spec this owner must not or cannot compute."""
        return None

    def dp_sensitivity(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity | None:
        """Secure-sum protocols: the L1/L2 sensitivity (integer units) of this site's share,
        recomputed from the public round parameters: what `check` verifies the announced noise
        against and what the round's privacy event is charged at. None: the protocol has no
        DP share (then the charge is an ApproxEvent of `charge`)."""
        return None

    def charge(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What this round spends from the owner's budget under basic composition (None:
        nothing). A job's round (`charge_job`): the increment of the job's Renyi composition
        at the job's delta, eps(i) - eps(i - 1), the delta with round 1."""
        return dp.budget if dp is not None else None

    def charge_event(
        self, spec: Any, encoding: ShareEncoding | None, dp: DpSpec | None
    ) -> PrivacyEvent | None:
        """The round's privacy event, what an RDP ledger composes (None: no DP charge).
        Default: the Skellam noise of the round at the quorum (never less than what is added)
        and the sensitivity the owner recomputes (`dp_sensitivity`)."""
        if dp is None:
            return None
        sens = self.dp_sensitivity(spec, encoding, dp)
        if sens is None:
            charge = self.charge(spec, dp)
            return ApproxEvent(charge.epsilon, charge.delta) if charge is not None else None
        if dp.counts_clipped:  # the clipped-rows count rides in the same noisy share
            if encoding is None:
                raise ProtocolError("a bounded DP round needs an encoding")
            sens, _ = with_clip_count(sens, 0, encoding.count_scale_bits, True)
        return SkellamEvent(dp.mu, sens.l1, sens.l2)

    def ledger_charge(
        self,
        spec: Any,
        encoding: ShareEncoding | None,
        dp: DpSpec | None,
        *,
        ahead: bool = False,
    ) -> LedgerCharge | None:
        """What the owner's ledger is asked for this round (None: nothing): its budget alone
        and its event; `ahead`: with every later round of its job that the owner must still
        afford to take part (`budget_needed`)."""
        budget = self.charge(spec, dp)
        if budget is None:
            return None
        return LedgerCharge(budget, self.charge_event(spec, encoding, dp))

    def budget_needed(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """What the owner must still have to take part (k-means: every remaining iteration)."""
        return self.charge(spec, dp)

    def mechanism(self, spec: Any, dp: DpSpec | None) -> str:
        """The mechanism name a charge is recorded under in the ledger."""
        return dp.mechanism if dp is not None else self.name

    def describe(self, spec: Any, dp: DpSpec | None) -> str:
        """The ledger note of a charge."""
        return f"{self.name} on {', '.join(self.columns(spec))}"

    def share_values(
        self,
        spec: Any,
        encoding: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        """Secure-sum protocols: this site's encoded statistics (before noise)."""
        raise NotImplementedError(f"{self.name} sends no encrypted share")

    def preview_data(
        self, plan: Any, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's simulated rows made fit for this protocol (e.g. a label that depends
        on the features), and what that adds to the stated assumption ("" : nothing)."""
        return columns, ""

    def release_figures(self, plan: Any, totals: list[int], n_owners: int) -> dict[str, float]:
        """Secure-sum DP releases with public bounds: the figures the round's (noisy) totals
        give, in natural units, by name (`dp_release`: the preview and the stated noise)."""
        raise NotImplementedError(f"{self.name} states no release figures")

    def reports(
        self, spec: Any, site: SiteData, rng: np.random.Generator, timings: dict[str, float]
    ) -> ReportStream:
        """Report protocols: this site's perturbed reports."""
        raise NotImplementedError(f"{self.name} sends no reports")


class MultiRoundJob:
    """The budget of a multi-round DP job (k-means, logistic regression), for a
    `FederatedProtocol` whose spec says its iteration and the job's T (`iterations_of`): each
    round's noise is calibrated so that the T rounds together give the signed (epsilon, delta)
    (Renyi composition, `DpSpec.compositions`), which every owner verifies in `check`."""

    name: ClassVar[str]

    def iterations_of(self, spec: Any) -> tuple[int, int]:
        """(this round's iteration, the job's T) as the spec declares them."""
        raise NotImplementedError

    def charge(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The iteration's share of the job's signed (epsilon, delta), against the analyst's
        authorization: T shares make the job's budget (the ledger charges by its accountant,
        `ledger_charge`)."""
        return dp.budget.split(max(1, self.iterations_of(spec)[1])) if dp is not None else None

    def job_budget(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The job's (epsilon, delta): what its T iterations give together."""
        return dp.budget if dp is not None else None

    def budget_needed(self, spec: Any, dp: DpSpec | None) -> Budget | None:
        """The job's budget: take part only if the ledger covers this and every later
        iteration (`ledger_charge(..., ahead=True)`)."""
        return dp.budget if dp is not None else None

    def ledger_charge(
        self,
        spec: Any,
        encoding: ShareEncoding | None,
        dp: DpSpec | None,
        *,
        ahead: bool = False,
    ) -> LedgerCharge | None:
        """The iteration's event, as a round of job `<name>:<job id>` whose budget is the
        job's (epsilon, delta); `ahead`: with the later iterations."""
        if dp is None:
            return None
        iteration, iterations = self.iterations_of(spec)
        return LedgerCharge(
            dp.budget,
            self.charge_event(spec, encoding, dp),  # type: ignore[attr-defined]
            job=f"{self.name}:{spec.job_id}",
            further=max(0, iterations - iteration) if ahead else 0,
        )
