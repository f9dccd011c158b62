"""Federated k-means as a multi-round protocol of the engine: one secure-sum round per iteration.

Each iteration publishes the current centers; owners send the encrypted per-cluster sums and
counts of ALL k clusters (`kmeans`); the engine reveals the exact totals and this protocol
updates the centers, stopping after T iterations or once no center moves more than the
tolerance. DP jobs calibrate each iteration's noise so that the T iterations together meet
(epsilon, delta) by Renyi composition, and every owner's ledger is charged once per iteration it
takes part in (its Skellam event; a basic ledger the increment of the RDP bound).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed.encoding.share import ShareEncoding, require_bound
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, kmeans, registry
from leteo_fed.protocols.dp_facts import clip_note, truth_fields
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    clip_count_value,
    clip_for_release,
    owner_noise_bound,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.interface import (
    MultiRoundJob,
    SecureSumRounds,
)
from leteo_fed.protocols.requests import Common, check_features
from leteo_fed.protocols.results import EncodingFacts, ReleaseNoiseFacts, Result, result_type
from leteo_fed.protocols.round_types import Outcome, RoundPlan, SiteData, Step

EMPTY_CLUSTER_RULE = "an empty cluster (no rows; with DP a noisy count below 1) keeps its center"
SNAPSHOT_VERSION = 1  # of `KmeansProtocol.snapshot`'s document


@dataclass(frozen=True)
class KmeansRequest:
    k: int = 0
    centers: tuple[float, ...] = ()
    iterations: int = 0
    tolerance: float = 0.0
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class KmeansIteration:
    job_id: str
    iteration: int
    iterations: int
    k: int
    centers: tuple[float, ...]
    features: tuple[str, ...]


@dataclass(frozen=True)
class KmeansPlan:
    features: tuple[str, ...]
    k: int
    centers: np.ndarray  # initial centers, k x d (validated)
    iterations: int  # maximum number of iterations T
    tolerance: float
    min_owners: int
    deadline_seconds: float  # per iteration
    encoding: ShareEncoding
    dp: DpSpec | None = None  # every iteration's noise; (epsilon, delta) of the T together
    dp_total: tuple[float, float] | None = None  # the job's (epsilon, delta)
    sensitivity: noise.Sensitivity | None = None
    label: str = kmeans.PROTOCOL


@result_type
@dataclass(frozen=True, kw_only=True)
class KmeansIterationResult(Result):
    """One iteration as published to the owners: the new centers only."""

    wire: ClassVar[str] = "kmeans_iteration"
    protocol: str
    method: str
    job_id: str
    iteration: int
    iterations: int
    features: list[str]
    k: int
    centers: list[list[float]]
    center_shift: float
    round_id: str
    owners: list[str]


@dataclass(frozen=True, kw_only=True)
class KmeansIterationTimings:
    round_seconds: float
    owners: dict[str, dict[str, float]]
    aggregator: dict[str, float]
    csp: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class KmeansIterationSummary:
    iteration: int
    round_id: str
    contributors: list[str]
    declined: dict[str, str]
    missing: list[str]
    center_shift: float
    counts: list[int]
    empty_clusters: list[int]
    centers: list[list[float]]
    timings: KmeansIterationTimings


@dataclass(frozen=True, kw_only=True)
class KmeansJobTimings:
    total_seconds: float
    iteration_seconds: list[float]
    mean_iteration_seconds: float | None


@dataclass(frozen=True, kw_only=True)
class KmeansDpFacts(ReleaseNoiseFacts):
    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    composition: str
    accountant: str
    iterations_budgeted: int
    epsilon_per_iteration: float
    delta_per_iteration: float
    epsilon_spent: float
    delta_spent: float
    skellam_mu_per_iteration: float
    noise_std_sum_with_quorum: float
    noise_std_count_with_quorum: float
    post_processing: str
    note: str


@result_type
@dataclass(frozen=True, kw_only=True)
class KmeansJobResult(Result):
    wire: ClassVar[str] = "kmeans_job"
    method: str
    protocol: str
    job_id: str
    features: list[str]
    k: int
    centers: list[list[float]]
    initial_centers: list[list[float]]
    counts: list[int]
    epsilon: float | None
    delta: float | None
    iterations_run: int
    max_iterations: int
    tolerance: float
    converged: bool
    empty_cluster_rule: str
    invited: list[str]
    owners: list[str]
    iterations: list[KmeansIterationSummary]
    encoding: EncodingFacts
    dp: KmeansDpFacts | None
    timings: KmeansJobTimings

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per cluster: its center and its (noisy, with DP) row count."""
        cols: dict[str, list] = {
            f: [c[j] for c in self.centers] for j, f in enumerate(self.features)
        }
        cols["count"] = list(self.counts)
        return cols, list(range(len(self.centers))), "cluster"


@dataclass
class KmeansState:
    job_id: str
    invited: list[str]
    centers: np.ndarray
    encoding: EncodingFacts | None = None
    iterations: list[KmeansIterationSummary] = field(default_factory=list)
    converged: bool = False
    clipped_rows: float | None = None  # bounded DP: the last iteration's noisy count
    started: float = field(default_factory=time.perf_counter)
    opened: float = field(default_factory=time.perf_counter)


def kmeans_noise_preview(
    plan: KmeansPlan,
    rows: int | None = None,
    counts: Sequence[float] | None = None,
    centers: np.ndarray | None = None,
) -> dict:
    """What the noise of a DP k-means iteration will do, from public parameters only.

    Each iteration releases per-cluster sums (noise std sigma_s = sqrt(2 mu) / 2^f per
    coordinate) and counts (sigma_n = sqrt(2 mu) / 2^f_count rows, then rounded to whole rows).
    To first order a new center c_j = S_j / N_j moves by sqrt(d sigma_s^2 + |c_j|^2 sigma_n^2)
    / N_j (root mean square, in the features' units): the analyst's guesses of the cluster sizes
    and centers if given, else rows / k rows each and centers at 0 (the smallest error).
    """
    if plan.dp is None:
        raise DataError("a preview is of DP noise: give dp_epsilon", field="dp_epsilon")
    dp, enc = plan.dp, plan.encoding
    d = len(plan.features)
    sigma_s = kmeans.noise_std(dp.mu, dp.quorum, dp.quorum, enc.scale_bits)
    sigma_n = kmeans.noise_std(dp.mu, dp.quorum, dp.quorum, enc.count_scale_bits)
    doc: dict = {
        "epsilon": dp.epsilon,
        "delta": dp.delta,
        "accountant": "rdp",
        # one iteration alone, at the job's delta (T of them compose to epsilon by RDP)
        "epsilon_per_iteration": _alone(plan),
        "iterations": plan.iterations,
        "row_norm_bound": dp.row_norm_bound,
        "quorum": dp.quorum,
        "noise_std_per_sum": sigma_s,
        "noise_std_per_count_rows": sigma_n,
    }
    if rows is None and counts is None:
        return doc
    n = list(counts) if counts is not None else [rows / plan.k] * plan.k  # type: ignore[operator]
    c = np.asarray(centers, dtype=np.float64) if centers is not None else np.zeros((plan.k, d))
    if any(v <= 0 for v in n):
        raise DataError("every cluster needs a positive row count", field="rows")
    doc["center_rms_error"] = [
        math.sqrt(d * sigma_s**2 + float(cj @ cj) * sigma_n**2) / nj
        for nj, cj in zip(n, c, strict=True)
    ]
    smallest = int(np.argmin(n))  # rows clipped to C: a center lies within C of 0
    checks = [
        SignalCheck("rows per cluster", sigma_n, float(n[smallest])),
        SignalCheck("center", doc["center_rms_error"][smallest], dp.row_norm_bound),
    ]
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


class KmeansProtocol(MultiRoundJob, SecureSumRounds):
    name = "kmeans"
    takes_bounds = True
    request_type = KmeansRequest
    spec_type = KmeansIteration
    multi_round = True

    def job_timeout(self, request: KmeansRequest, deadline_seconds: float) -> float:
        """Every iteration is a round that may use its deadline."""
        return (request.iterations or kmeans.DEFAULT_ITERATIONS) * (deadline_seconds + 30)

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: KmeansRequest, common: Common) -> KmeansPlan:
        """Validate a k-means job; every refusal names its field."""
        features = check_features(tuple(request.features), "cluster")
        k = request.k
        if not 1 <= k <= kmeans.MAX_K:
            raise DataError(f"kmeans.k must be in 1..{kmeans.MAX_K}, got {k}", field="kmeans.k")
        iterations = request.iterations or kmeans.DEFAULT_ITERATIONS
        if not 1 <= iterations <= kmeans.MAX_ITERATIONS:
            raise DataError(
                f"kmeans.iterations must be in 1..{kmeans.MAX_ITERATIONS}, got {iterations}",
                field="kmeans.iterations",
            )
        tolerance = request.tolerance
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise DataError(
                f"kmeans.tolerance must be a finite number >= 0, got {tolerance}",
                field="kmeans.tolerance",
            )
        min_owners, deadline = common.quorum(), common.deadline()
        d = len(features)
        # slots sized for the invited owners: the CSP sums at most one share of each
        max_owners = common.n_invited
        dp, dp_total, sens = None, None, None
        if common.dp is None:
            enc = kmeans.encoding(
                common.scale_bits or kmeans.DEFAULT_SCALE_BITS,
                common.value_bound or kmeans.DEFAULT_VALUE_BOUND,
                max_owners=max_owners,
            )
        else:
            bounds = common.dp.release_bounds(features)
            c = common.dp.norm_for(d) if bounds else common.dp.row_norm_bound
            f = common.scale_bits or kmeans.DP_DEFAULT_SCALE_BITS
            it = kmeans.calibrate_iteration(
                common.dp.epsilon, common.dp.delta, iterations, c, f, d, k, clip_count=bool(bounds)
            )
            sens = noise.Sensitivity(it.l1, it.l2)
            dp = DpSpec(
                it.epsilon,
                it.delta,
                c,
                it.mu,
                min_owners,
                compositions=iterations if iterations > 1 else 0,
                bounds=bounds,
            )
            noise_bound = owner_noise_bound(
                it.mu,
                min_owners,
                kmeans.n_values(k, d) + (1 if bounds else 0),
                "lower scale_bits, raise dp_epsilon or run fewer iterations",
            )
            dp_total = (common.dp.epsilon, common.dp.delta)
            # clipped rows have |x_i| <= C
            enc = kmeans.encoding(
                f,
                c,
                max_owners=max_owners,
                count_scale_bits=it.count_scale_bits,
                noise_bound=noise_bound,
            )
        given = request.centers
        if dp is not None and dp.bounds:  # the analyst's centers are in natural units
            given = tuple(scaled_centers(request.centers, dp.bounds, k, d).ravel().tolist())
        centers = kmeans.validate_centers(given, k, d, enc.value_bound, field="kmeans.centers")
        return KmeansPlan(
            features,
            k,
            centers,
            iterations,
            tolerance,
            min_owners,
            deadline,
            enc,
            dp,
            dp_total,
            sens,
        )

    def start(self, plan: KmeansPlan, job_id: str, invited: list[str]) -> KmeansState:
        return KmeansState(job_id, list(invited), plan.centers.copy())

    def next_round(self, plan: KmeansPlan, state: KmeansState, index: int) -> RoundPlan:
        state.opened = time.perf_counter()
        spec = KmeansIteration(
            job_id=state.job_id,
            iteration=index,
            iterations=plan.iterations,
            k=plan.k,
            centers=tuple(state.centers.ravel().tolist()),
            features=plan.features,
        )
        n_values = kmeans.n_values(plan.k, len(plan.features))
        n_values += 1 if plan.dp is not None and plan.dp.counts_clipped else 0
        return RoundPlan(
            spec, kmeans.PROTOCOL, plan.encoding, n_values, plan.dp, dimension=len(plan.features)
        )

    def preview_data(
        self, plan: KmeansPlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's rows: k clusters of equal size around the initial centers, each
        column spread around its center as the assumption says."""
        centers = natural_centers(plan, plan.centers)
        n = len(next(iter(columns.values())))
        index = rng.integers(0, plan.k, size=n)
        moved = {
            f: centers[index, i] + (columns[f] - columns[f].mean())
            for i, f in enumerate(plan.features)
        }
        return columns | moved, (
            f"the rows in {plan.k} clusters of equal size around the initial centers"
        )

    def max_rounds(self, plan: KmeansPlan) -> int:
        return plan.iterations

    def expected_round(
        self, plan: KmeansPlan, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """Iteration 1 uses the signed initial centers; later ones the centers the aggregator
        computed from the earlier iterations' totals, which no owner can check (only their
        shape and bound): `chosen_by_aggregator`."""
        state = self.start(plan, job_id, invited)
        if index > 1:
            state.centers = kmeans.validate_centers(
                received.centers,
                plan.k,
                len(plan.features),
                plan.encoding.value_bound,
                field="kmeans.centers",
            )
        return self.next_round(plan, state, index)

    def chosen_by_aggregator(self, spec: KmeansIteration) -> bool:
        return spec.iteration > 1

    def progress(self, plan: KmeansPlan, index: int, round_id: str) -> str:
        return f"iteration {index} of {plan.iterations} open ({round_id})"

    def failure(self, plan: KmeansPlan, index: int, message: str) -> str:
        return f"iteration {index} of {plan.iterations} failed: {message}"

    def finish_round(self, plan: KmeansPlan, state: KmeansState, outcome: Outcome) -> Step:
        """Update the centers; owners receive the new centers only (no counts, no per-owner
        facts); the job keeps the iteration's summary for its result."""
        start = time.perf_counter()
        dp = plan.dp
        released, clipped = split_clip_count(
            outcome.require_totals(), dp, plan.encoding.count_scale_bits
        )
        if clipped is not None:
            state.clipped_rows = clipped
        decoded = kmeans.decode_totals(
            released,
            plan.k,
            len(plan.features),
            plan.encoding,
            noisy=dp is not None,
        )
        previous = state.centers
        upd = kmeans.update_centers(
            decoded, previous, clip_norm=dp.row_norm_bound if dp is not None else None
        )
        if dp is not None and dp.bounds:  # post-processing: centers within the bounds' box
            upd = dataclasses.replace(upd, centers=np.clip(upd.centers, -1.0, 1.0))
        outcome.timings["update_seconds"] = time.perf_counter() - start
        index = len(state.iterations) + 1
        state.iterations.append(
            KmeansIterationSummary(
                iteration=index,
                round_id=outcome.round_id,
                contributors=sorted(outcome.submitted),
                declined=dict(outcome.declined),
                missing=outcome.missing,
                center_shift=upd.shift,
                counts=list(upd.counts),
                empty_clusters=list(upd.empty),
                centers=upd.centers.tolist(),
                timings=KmeansIterationTimings(
                    round_seconds=time.perf_counter() - state.opened,
                    owners={s: dict(t) for s, t in outcome.submitted.items()},
                    aggregator=dict(outcome.timings),
                    csp=dict(outcome.csp),
                ),
            )
        )
        state.centers = upd.centers
        state.encoding = outcome.encoding
        state.converged = upd.shift <= plan.tolerance
        done = state.converged or index >= plan.iterations
        result = KmeansIterationResult(
            protocol=kmeans.PROTOCOL,
            method=kmeans.METHOD,
            job_id=state.job_id,
            iteration=index,
            iterations=plan.iterations,
            features=list(plan.features),
            k=plan.k,
            centers=natural_centers(plan, upd.centers).tolist(),
            center_shift=upd.shift,
            round_id=outcome.round_id,
            owners=sorted(outcome.submitted),
        )
        if done:
            how = "converged" if state.converged else "reached the iteration limit"
            message = f"{index} iteration(s), {how}"
        else:
            message = (
                f"iteration {index} of {plan.iterations} done with {len(outcome.submitted)} "
                f"owner(s); max center shift {upd.shift:.6g}"
            )
        return Step(result, done, message)

    def job_result(self, plan: KmeansPlan, state: KmeansState, last: Step) -> KmeansJobResult:
        its = state.iterations
        seconds = [it.timings.round_seconds for it in its]
        eps, delta = plan.dp_total if plan.dp_total else (None, None)
        if state.encoding is None:
            raise ProtocolError(f"k-means job {state.job_id} ran no iteration")
        return KmeansJobResult(
            method=kmeans.METHOD,
            protocol=kmeans.PROTOCOL,
            job_id=state.job_id,
            features=list(plan.features),
            k=plan.k,
            centers=natural_centers(plan, state.centers).tolist(),
            initial_centers=natural_centers(plan, plan.centers).tolist(),
            counts=list(its[-1].counts) if its else [],
            epsilon=eps,
            delta=delta,
            iterations_run=len(its),
            max_iterations=plan.iterations,
            tolerance=plan.tolerance,
            converged=state.converged,
            empty_cluster_rule=EMPTY_CLUSTER_RULE,
            invited=list(state.invited),
            owners=sorted({s for it in its for s in it.contributors}),
            iterations=[
                dataclasses.replace(
                    it, centers=natural_centers(plan, np.asarray(it.centers)).tolist()
                )
                for it in its
            ],
            encoding=state.encoding,
            dp=self._dp_facts(plan, len(its), its[-1] if its else None, state.clipped_rows),
            timings=KmeansJobTimings(
                total_seconds=time.perf_counter() - state.started,
                iteration_seconds=seconds,
                mean_iteration_seconds=sum(seconds) / len(seconds) if seconds else None,
            ),
        )

    def snapshot(self, state: KmeansState) -> dict[str, Any]:
        """The job after its last completed iteration, as JSON data: centers, every iteration's
        summary, the encoding facts, whether it converged and how long it has run."""
        return {
            "version": SNAPSHOT_VERSION,
            "job_id": state.job_id,
            "invited": list(state.invited),
            "centers": np.asarray(state.centers, dtype=np.float64).tolist(),
            "iterations": [_plain(dataclasses.asdict(it)) for it in state.iterations],
            "encoding": _plain(dataclasses.asdict(state.encoding)) if state.encoding else None,
            "converged": bool(state.converged),
            "elapsed_seconds": time.perf_counter() - state.started,
        }

    def restore(
        self, plan: KmeansPlan, job_id: str, invited: list[str], snapshot: dict[str, Any]
    ) -> KmeansState:
        """The state of `snapshot`, checked against the plan (planned again from the request)."""
        try:
            if snapshot.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"version {snapshot.get('version')!r}, not {SNAPSHOT_VERSION}")
            if snapshot["job_id"] != job_id:
                raise ValueError(f"it is job {snapshot['job_id']!r}'s")
            centers = np.array(snapshot["centers"], dtype=np.float64)
            if centers.shape != plan.centers.shape or not np.all(np.isfinite(centers)):
                raise ValueError(
                    f"centers of shape {centers.shape}, the plan has {plan.centers.shape}"
                )
            iterations = [_summary(it) for it in snapshot["iterations"]]
            if [it.iteration for it in iterations] != list(range(1, len(iterations) + 1)):
                raise ValueError("the iterations are not numbered 1, 2, ...")
            if len(iterations) > plan.iterations:
                raise ValueError(f"{len(iterations)} iterations, the plan allows {plan.iterations}")
            encoding = snapshot["encoding"]
            elapsed = float(snapshot.get("elapsed_seconds", 0.0))
            state = KmeansState(
                job_id,
                list(invited),
                centers,
                EncodingFacts(**encoding) if encoding is not None else None,
                iterations,
                bool(snapshot["converged"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"the snapshot of k-means job {job_id} is unusable: {exc}") from exc
        state.started = time.perf_counter() - max(0.0, elapsed)  # the time before the restart
        return state

    @staticmethod
    def _truth(
        plan: KmeansPlan, last: KmeansIterationSummary, clipped_rows: float | None = None
    ) -> dp_release.Truth:
        """What the last iteration's centers and counts say of their noise: each count's noise
        (rows), each center coordinate's to first order, sqrt(s^2 + c^2 s_n^2) / N (the noisy
        sum over the noisy count), and the clusters the noise buries or empties."""
        dp = plan.dp
        assert dp is not None
        n = len(last.contributors)
        f, fc = plan.encoding.scale_bits, plan.encoding.count_scale_bits
        s_sum = kmeans.noise_std(dp.mu, dp.quorum, n, f)
        s_count = kmeans.noise_std(dp.mu, dp.quorum, n, fc)
        figures: dict[str, float] = {}
        noise: dict[str, float] = {}
        warnings = []
        half = np.ones(len(plan.features))
        if dp.bounds:
            half = bounds_of.centers_halves(dp.bounds)[1]
        natural = natural_centers(plan, np.asarray(last.centers))
        for j, (center, count) in enumerate(zip(last.centers, last.counts, strict=True)):
            name = f"rows in cluster {j}"
            figures[name], noise[name] = float(count), s_count
            for i, (feature, c) in enumerate(zip(plan.features, center, strict=True)):
                key = f"center {j} {feature}"
                figures[key] = float(natural[j, i])
                noise[key] = half[i] * math.sqrt(s_sum**2 + (c * s_count) ** 2) / max(count, 1)
            if count <= dp_release.NOISE_MULTIPLE * s_count:
                warnings.append(
                    ReleaseWarning(
                        f"cluster {j}",
                        f"cluster {j} has {count} rows +/- {s_count:.2g} by the noise: it may "
                        "be empty, and its center "
                        + (
                            "was kept from the iteration before"
                            if j in last.empty_clusters
                            else "is mostly noise"
                        )
                        + " (fewer clusters, raise epsilon, or pool more rows)",
                    )
                )
            elif not dp.bounds and float(np.linalg.norm(center)) >= dp.row_norm_bound * (1 - 1e-9):
                warnings.append(
                    ReleaseWarning(
                        f"cluster {j}",
                        f"cluster {j}'s center was projected onto the clipping ball (norm "
                        f"{dp.row_norm_bound:g}): the noise pushed it outside the data's range",
                    )
                )
        # a center coordinate near 0 is no warning: the signal of a center is where it lies
        # among the others, not its distance from the origin
        warnings = [*dp_release.clipping_warning(clipped_rows, sum(last.counts)), *warnings]
        return dp_release.Truth(noise, warnings, clipped_rows, figures)

    @staticmethod
    def _dp_facts(
        plan: KmeansPlan,
        iterations_run: int,
        last: KmeansIterationSummary | None = None,
        clipped_rows: float | None = None,
    ) -> KmeansDpFacts | None:
        dp = plan.dp
        if dp is None or plan.sensitivity is None or plan.dp_total is None:
            return None
        truth = KmeansProtocol._truth(plan, last, clipped_rows) if last is not None else None
        eps, delta = plan.dp_total
        q = dp.quorum
        f, fc = plan.encoding.scale_bits, plan.encoding.count_scale_bits
        return KmeansDpFacts(
            mechanism="distributed Skellam noise on every per-cluster sum and count",
            epsilon=eps,
            delta=delta,
            row_norm_bound=dp.row_norm_bound,
            quorum=q,
            sensitivity_l1=plan.sensitivity.l1,
            sensitivity_l2=plan.sensitivity.l2,
            composition="Renyi (RDP): the T iterations' curves added and converted once at "
            "delta; each iteration's noise calibrated so that T of them are (epsilon, delta)-DP",
            accountant="rdp",
            iterations_budgeted=plan.iterations,
            epsilon_per_iteration=_alone(plan),
            delta_per_iteration=dp.delta,
            epsilon_spent=kmeans.rdp_epsilon(dp.mu, plan.sensitivity, delta, iterations_run),
            delta_spent=delta if iterations_run else 0.0,
            skellam_mu_per_iteration=dp.mu,
            noise_std_sum_with_quorum=kmeans.noise_std(dp.mu, q, q, f),
            noise_std_count_with_quorum=kmeans.noise_std(dp.mu, q, q, fc),
            post_processing="noisy counts rounded to whole rows; centers projected onto the "
            "ball of radius row_norm_bound",
            note="rows clipped to row_norm_bound at each owner; every owner charges its "
            "ledger once per iteration it takes part in",
            **truth_fields(dp, truth),
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: KmeansIteration) -> list[str]:
        return list(spec.features)

    def request_columns(self, request: KmeansRequest) -> list[str]:
        return list(request.features)

    def check(
        self, spec: KmeansIteration, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None:
            raise ProtocolError("a k-means round needs an encoding")
        if enc.rotation_dimension:
            raise ProtocolError("k-means rounds have no rotated encoding")
        bound = kmeans.data_bound(
            enc.value_bound, enc.max_rows_per_owner, enc.scale_bits, enc.count_scale_bits
        )
        require_bound(enc, bound)
        d = len(spec.features)
        kmeans.validate_centers(spec.centers, spec.k, d, enc.value_bound, field="centers")
        if not site.is_local or site.uses_spark:
            raise DataError(
                "k-means rounds are computed with the numpy engine on a local file only"
            )
        if dp is not None:
            if dp.releases != max(1, spec.iterations):
                raise ProtocolError(
                    f"the round's noise is accounted for {dp.releases} iteration(s), the job "
                    f"declares {spec.iterations}"
                )
            verify_dp(
                dp,
                spec.features,
                kmeans.dp_sensitivity(dp, enc, d, spec.k),
                kmeans.n_values(spec.k, d),
                enc,
            )

    def dp_sensitivity(
        self, spec: KmeansIteration, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a k-means round needs an encoding")
        return kmeans.dp_sensitivity(dp, enc, len(spec.features), spec.k)

    def iterations_of(self, spec: Any) -> tuple[int, int]:
        return spec.iteration, spec.iterations

    def describe(self, spec: KmeansIteration, dp: DpSpec | None) -> str:
        what = f"kmeans job {spec.job_id} iteration {spec.iteration}/{spec.iterations}"
        return what + f" on {len(spec.features)} features" + clip_note(dp)

    def share_values(
        self,
        spec: KmeansIteration,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        """Assign every row to the nearest center and encode the per-cluster sums and counts of
        ALL k clusters: not even this site's row count leaves in the clear."""
        features = list(spec.features)
        centers = kmeans.validate_centers(
            spec.centers, spec.k, len(features), enc.value_bound, field="centers"
        )
        start = time.perf_counter()
        x = site.read(features).matrix(features)
        clipped = np.zeros(len(x), dtype=bool)
        if dp is not None:  # (bounds: scaled to [-1, 1];) rows clipped to norm C
            x, clipped = clip_for_release(x, features, dp)
        enc.check_rows(x, features)
        timings["read_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        sums, counts = kmeans.cluster_stats(x, kmeans.assign(x, centers), spec.k)
        timings["assign_seconds"] = time.perf_counter() - start
        values = kmeans.encode_cluster_stats(sums, counts, enc)
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values


def scaled_centers(
    centers: Sequence[float], bounds: Sequence[ColumnBounds], k: int, d: int
) -> np.ndarray:
    """The analyst's initial centers (natural units) in the owners' scaled columns."""
    c = np.asarray(centers, dtype=np.float64)
    if c.size != k * d or not np.all(np.isfinite(c)):
        raise DataError(
            f"kmeans.centers must hold k x d = {k * d} finite numbers", field="kmeans.centers"
        )
    center, half = bounds_of.centers_halves(bounds)
    return np.clip((c.reshape(k, d) - center) / half, -1.0, 1.0)


def natural_centers(plan: KmeansPlan, centers: np.ndarray) -> np.ndarray:
    """Centers as the analyst reads them: scaled ones mapped back to natural units."""
    c = np.asarray(centers, dtype=np.float64)
    if plan.dp is None or not plan.dp.bounds:
        return c
    center, half = bounds_of.centers_halves(plan.dp.bounds)
    return center + half * c


def _alone(plan: KmeansPlan) -> float:
    """Epsilon of one iteration alone at the job's delta."""
    dp, sens = plan.dp, plan.sensitivity
    if dp is None or sens is None:
        raise DataError("a preview is of DP noise: give dp_epsilon", field="dp_epsilon")
    return kmeans.rdp_epsilon(dp.mu, sens, dp.delta, 1)


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars as Python numbers (dicts and lists walked)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _summary(doc: dict[str, Any]) -> KmeansIterationSummary:
    """One iteration's summary from its snapshot document (the nested timings too)."""
    fields = dict(doc)
    timings = fields.pop("timings")
    return KmeansIterationSummary(
        **{
            **fields,
            "centers": [[float(v) for v in row] for row in fields["centers"]],
            "counts": [int(c) for c in fields["counts"]],
            "empty_clusters": [int(j) for j in fields["empty_clusters"]],
        },
        timings=KmeansIterationTimings(**timings),
    )


PROTOCOL = registry.register(KmeansProtocol())
