"""Federated k-means as a multi-round protocol of the engine: one secure-sum round per iteration.

Each iteration publishes the current centers; owners send the encrypted per-cluster sums and
counts of ALL k clusters (`kmeans`); the engine reveals the exact totals and this protocol
updates the centers, stopping after T iterations or once no center moves more than the
tolerance. DP jobs calibrate each iteration's noise so that the T iterations together meet
(epsilon, delta) by Renyi composition, and every owner's ledger is charged once per iteration it
takes part in (its Skellam event; a basic ledger the increment of the RDP bound).

The protocol is an `iterative.IterativeStatistic` (`Kmeans`): an iteration's spec carries its
centers, and the next iteration's follow from its totals by one Lloyd step (`kmeans`, the
math); `iterative_protocol.IterativeSecureSumProtocol` runs the job, `kmeans_results` states it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import kmeans, kmeans_centers, registry
from leteo_fed.protocols.iterative import (
    Iterate,
    IterativeJob,
    IterativePlan,
    IterativeStatistic,
    plain,
)
from leteo_fed.protocols.iterative_protocol import IterativeSecureSumProtocol
from leteo_fed.protocols.kmeans_request import DESCRIPTION, KmeansRequest
from leteo_fed.protocols.kmeans_results import (
    EMPTY_CLUSTER_RULE,
    KmeansIterationResult,
    KmeansIterationSummary,
    KmeansIterationTimings,
    KmeansJobResult,
    KmeansJobTimings,
    job_dp_facts,
    kmeans_noise_preview,
    natural_centers,
    scaled_centers,
    summary_from,
)
from leteo_fed.protocols.requests import check_features
from leteo_fed.protocols.results import EncodingFacts
from leteo_fed.protocols.round_types import Outcome, SiteData, Step
from leteo_fed.protocols.statistic import COUNT, Block, Release, Rows, Totals


@dataclass(frozen=True)
class KmeansIteration:
    job_id: str
    iteration: int
    iterations: int
    k: int
    centers: tuple[float, ...]
    features: tuple[str, ...]


class Kmeans(IterativeStatistic):
    """Federated k-means: one Lloyd step per iteration (see the module's docstring)."""

    name = kmeans.PROTOCOL
    request_type = KmeansRequest
    spec_type = KmeansIteration
    result_type = KmeansJobResult
    output_file = "kmeans.json"
    title = "k-means"
    of = "of"
    limit_note = "reached the iteration limit"
    default_iterations = kmeans.DEFAULT_ITERATIONS
    default_scale_bits = kmeans.DEFAULT_SCALE_BITS
    dp_default_scale_bits = kmeans.DP_DEFAULT_SCALE_BITS
    counts_at_sum_scale = False  # DP counts at 2^count_scale_bits (`kmeans.dp_count_scale_bits`)
    noise_remedy = "lower scale_bits, raise dp_epsilon or run fewer iterations"
    summary = ("job_id", "owners", "iterations_run", "converged", "centers")
    help = "run a federated k-means job against running services"
    description = DESCRIPTION
    round_help = ("quorum per iteration", "deadline of each iteration, s")
    noise_of = "each center"
    spellings = {"dp_epsilon": ("epsilon", "dp_epsilon"), "dp_delta": ("delta", "dp_delta")}

    # ---------------------------------------------------------------- what is asked

    def spec(self, request: KmeansRequest) -> KmeansIteration:
        """Iteration 1 at the analyst's centers (validated once the encoding is known,
        `plan_spec`); every refusal names its field."""
        features = check_features(tuple(request.features), "cluster")
        k = request.k
        if not 1 <= k <= kmeans_centers.MAX_K:
            raise DataError(
                f"kmeans.k must be in 1..{kmeans_centers.MAX_K}, got {k}", field="kmeans.k"
            )
        iterations = request.iterations or kmeans.DEFAULT_ITERATIONS
        if not 1 <= iterations <= kmeans.MAX_ITERATIONS:
            raise DataError(
                f"kmeans.iterations must be in 1..{kmeans.MAX_ITERATIONS}, got {iterations}",
                field="kmeans.iterations",
            )
        return KmeansIteration("", 1, iterations, k, tuple(request.centers), features)

    def settings(self, request: KmeansRequest) -> float:
        """The tolerance: the aggregator's alone (when to stop)."""
        tolerance = request.tolerance
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise DataError(
                f"kmeans.tolerance must be a finite number >= 0, got {tolerance}",
                field="kmeans.tolerance",
            )
        return float(tolerance)

    def plan_spec(self, spec: KmeansIteration, dp: Any, encoding: Any) -> KmeansIteration:
        """The analyst's centers, in the owners' scaled columns with public bounds, within
        the job's value bound."""
        k, d = spec.k, len(spec.features)
        given: Sequence[float] = spec.centers
        if dp is not None and dp.bounds:  # the analyst's centers are in natural units
            given = tuple(scaled_centers(spec.centers, dp.bounds, k, d).ravel().tolist())
        centers = kmeans_centers.validate_centers(
            given, k, d, encoding.value_bound, field="kmeans.centers"
        )
        return dataclasses.replace(spec, centers=tuple(centers.ravel().tolist()))

    def request_columns(self, request: KmeansRequest) -> list[str]:
        return list(request.features)

    def features(self, spec: KmeansIteration) -> tuple[str, ...]:
        return tuple(spec.features)

    def check_state(self, spec: KmeansIteration, encoding: Any) -> None:
        """The centers: k x d finite values within the encoding's value bound."""
        d = len(spec.features)
        kmeans_centers.validate_centers(
            spec.centers, spec.k, d, encoding.value_bound, field="centers"
        )

    def follow(self, plan: IterativePlan, spec: KmeansIteration, received: Any) -> KmeansIteration:
        """A later iteration's centers, as the aggregator computed them: shape and bound."""
        centers = kmeans_centers.validate_centers(
            received.centers,
            spec.k,
            len(spec.features),
            plan.encoding.value_bound,
            field="kmeans.centers",
        )
        return dataclasses.replace(spec, centers=tuple(centers.ravel().tolist()))

    def check_site(self, site: SiteData) -> None:
        if not site.is_local or site.uses_spark:
            raise DataError(
                "k-means rounds are computed with the numpy engine on a local file only"
            )

    def describe(self, spec: KmeansIteration) -> str:
        what = f"kmeans job {spec.job_id} iteration {spec.iteration}/{spec.iterations}"
        return what + f" on {len(spec.features)} features"

    # ---------------------------------------------------------------- what an owner sends

    def blocks(self, spec: KmeansIteration, bound: float) -> tuple[Block, ...]:
        """Per cluster j, for ALL k clusters: its sum S_j (d values) and its count N_j. One
        row moves exactly one cluster's sum (by at most its norm) and count (by 1): the
        share's sensitivity is `kmeans.sensitivity`, not the blocks' sum."""
        d = len(spec.features)
        out: list[Block] = []
        for j in range(spec.k):
            out.append(Block(f"sum {j}", d, bound, math.sqrt(d) * bound, bound))
            out.append(Block(f"count {j}", 1, 1.0, 1.0, 1.0, kind=COUNT))
        return tuple(out)

    def count_scale_bits(self, spec: KmeansIteration, scale_bits: int, bound: float) -> int:
        return kmeans.dp_count_scale_bits(bound, scale_bits, len(spec.features))

    def share_bound(
        self, spec: Any, value_bound: float, max_rows: int, scale_bits: int, count_bits: int
    ) -> int:
        return kmeans.data_bound(value_bound, max_rows, scale_bits, count_bits)

    def integer_sensitivity(
        self, spec: KmeansIteration, bound: float, scale_bits: int, count_bits: int
    ) -> noise.Sensitivity:
        return kmeans.sensitivity(bound, scale_bits, len(spec.features), spec.k, count_bits)

    def sums(self, spec: KmeansIteration, rows: Rows) -> Mapping[str, np.ndarray]:
        """Every row assigned to its nearest center; the per-cluster sums and counts of ALL
        k clusters: not even this site's row count leaves in the clear."""
        d = len(spec.features)
        centers = kmeans_centers.validate_centers(
            spec.centers, spec.k, d, rows.bound, field="centers"
        )
        sums, counts = kmeans.cluster_stats(rows.x, kmeans.assign(rows.x, centers), spec.k)
        out: dict[str, np.ndarray] = {}
        for j in range(spec.k):
            out[f"sum {j}"], out[f"count {j}"] = sums[j], counts[j : j + 1]
        return out

    # ---------------------------------------------------------------- what the totals give

    def iterate(
        self,
        plan: IterativePlan,
        job: IterativeJob,
        spec: KmeansIteration,
        totals: Totals,
        release: Release,
        outcome: Outcome,
    ) -> Iterate:
        """Update the centers; owners receive the new centers only (no counts, no per-owner
        facts); the job keeps the iteration's summary for its result."""
        start = time.perf_counter()
        dp, k, d = plan.dp, spec.k, len(spec.features)
        flat: list[int] = []
        for j in range(k):
            flat += totals.encoded(f"sum {j}")[0] + totals.encoded(f"count {j}")[0]
        decoded = kmeans.decode_totals(flat, k, d, plan.encoding, noisy=dp is not None)
        previous = np.asarray(spec.centers, dtype=np.float64).reshape(k, d)
        upd = kmeans.update_centers(
            decoded, previous, clip_norm=dp.row_norm_bound if dp is not None else None
        )
        if dp is not None and dp.bounds:  # post-processing: centers within the bounds' box
            upd = dataclasses.replace(upd, centers=np.clip(upd.centers, -1.0, 1.0))
        outcome.timings["update_seconds"] = time.perf_counter() - start
        index = len(job.records) + 1
        record = KmeansIterationSummary(
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
                round_seconds=time.perf_counter() - job.opened,
                owners={s: dict(t) for s, t in outcome.submitted.items()},
                aggregator=dict(outcome.timings),
                csp=dict(outcome.csp),
            ),
        )
        result = KmeansIterationResult(
            protocol=kmeans.PROTOCOL,
            method=kmeans.METHOD,
            job_id=job.job_id,
            iteration=index,
            iterations=spec.iterations,
            features=list(spec.features),
            k=k,
            centers=natural_centers(plan, upd.centers).tolist(),
            center_shift=upd.shift,
            round_id=outcome.round_id,
            owners=sorted(outcome.submitted),
        )
        return Iterate(
            record,
            dataclasses.replace(spec, centers=tuple(upd.centers.ravel().tolist())),
            upd.shift <= plan.settings,
            result,
            f"max center shift {upd.shift:.6g}",
        )

    def job_result(self, plan: IterativePlan, job: IterativeJob, last: Step) -> KmeansJobResult:
        its: list[KmeansIterationSummary] = job.records
        seconds = [it.timings.round_seconds for it in its]
        eps, delta = plan.dp_total if plan.dp_total else (None, None)
        if job.encoding is None:
            raise ProtocolError(f"k-means job {job.job_id} ran no iteration")
        spec = plan.spec
        return KmeansJobResult(
            method=kmeans.METHOD,
            protocol=kmeans.PROTOCOL,
            job_id=job.job_id,
            features=list(spec.features),
            k=spec.k,
            centers=natural_centers(plan, _centers(job.spec)).tolist(),
            initial_centers=natural_centers(plan, _centers(spec)).tolist(),
            counts=list(its[-1].counts) if its else [],
            epsilon=eps,
            delta=delta,
            iterations_run=len(its),
            max_iterations=spec.iterations,
            tolerance=plan.settings,
            converged=job.converged,
            empty_cluster_rule=EMPTY_CLUSTER_RULE,
            invited=list(job.invited),
            owners=sorted({s for it in its for s in it.contributors}),
            iterations=[
                dataclasses.replace(
                    it, centers=natural_centers(plan, np.asarray(it.centers)).tolist()
                )
                for it in its
            ],
            encoding=job.encoding,
            dp=job_dp_facts(plan, len(its), its[-1] if its else None, job.clipped_rows),
            timings=KmeansJobTimings(
                total_seconds=time.perf_counter() - job.started,
                iteration_seconds=seconds,
                mean_iteration_seconds=sum(seconds) / len(seconds) if seconds else None,
            ),
        )

    # ---------------------------------------------------------------- snapshots

    def keep(self, job: IterativeJob) -> dict[str, Any]:
        """The centers and the last iteration's encoding facts."""
        return {
            "centers": _centers(job.spec).tolist(),
            "encoding": plain(dataclasses.asdict(job.encoding)) if job.encoding else None,
        }

    def resume(self, plan: IterativePlan, job: IterativeJob, doc: Mapping[str, Any]) -> None:
        centers = np.array(doc["centers"], dtype=np.float64)
        shape = (plan.spec.k, len(plan.spec.features))
        if centers.shape != shape or not np.all(np.isfinite(centers)):
            raise ValueError(f"centers of shape {centers.shape}, the plan has {shape}")
        job.spec = dataclasses.replace(job.spec, centers=tuple(centers.ravel().tolist()))
        encoding = doc["encoding"]
        job.encoding = EncodingFacts(**encoding) if encoding is not None else None

    def record(self, doc: Mapping[str, Any]) -> KmeansIterationSummary:
        return summary_from(dict(doc))

    # ---------------------------------------------------------------- the preview

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return kmeans_noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        """What the noise of each iteration does to the centers."""
        lines = [
            f"each iteration adds noise of std {doc['noise_std_per_sum']:.4g} to every cluster "
            f"sum and {doc['noise_std_per_count_rows']:.4g} rows to every count; the "
            f"{doc['iterations']} iterations together are (epsilon {doc['epsilon']:g}, delta "
            f"{doc['delta']:g})-DP by Renyi composition ({doc['accountant']} accountant; one "
            f"iteration alone: epsilon {doc['epsilon_per_iteration']:.4g})"
        ]
        if rows is not None:
            errors = doc["center_rms_error"]
            lines.append(
                f"  each center moves by about {errors[0]:.4g} per iteration (RMS, for clusters "
                f"of {rows / len(errors):.0f} rows near 0; smaller clusters and centers far from "
                "0 are noisier)"
            )
        return lines

    def preview_rows(
        self, plan: IterativePlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        """The preview's rows: k clusters of equal size around the initial centers, each
        column spread around its center as the assumption says."""
        spec = plan.spec
        centers = natural_centers(plan, _centers(spec))
        n = len(next(iter(columns.values())))
        index = rng.integers(0, spec.k, size=n)
        moved = {
            f: centers[index, i] + (columns[f] - columns[f].mean())
            for i, f in enumerate(spec.features)
        }
        return columns | moved, (
            f"the rows in {spec.k} clusters of equal size around the initial centers"
        )


def _centers(spec: KmeansIteration) -> np.ndarray:
    """A spec's centers, k x d."""
    return np.asarray(spec.centers, dtype=np.float64).reshape(spec.k, len(spec.features))


PROTOCOL = registry.register(IterativeSecureSumProtocol(Kmeans()))
