"""The results of a federated k-means job (`kmeans_round`): each iteration's published centers,
the job's document, and what its DP release says of its noise (pure functions of the plan and
the last iteration)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, kmeans
from leteo_fed.protocols.dp_facts import truth_fields
from leteo_fed.protocols.iterative import COMPOSITION, IterativePlan, job_epsilon
from leteo_fed.protocols.results import (
    EncodingFacts,
    IterationDpFacts,
    Result,
    result_type,
)

EMPTY_CLUSTER_RULE = "an empty cluster (no rows; with DP a noisy count below 1) keeps its center"


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
class KmeansDpFacts(IterationDpFacts):
    noise_std_sum_with_quorum: float
    noise_std_count_with_quorum: float


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


def job_truth(
    plan: IterativePlan, last: KmeansIterationSummary, clipped_rows: float | None = None
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
    half = np.ones(len(plan.spec.features))
    if dp.bounds:
        half = bounds_of.centers_halves(dp.bounds)[1]
    natural = natural_centers(plan, np.asarray(last.centers))
    for j, (center, count) in enumerate(zip(last.centers, last.counts, strict=True)):
        name = f"rows in cluster {j}"
        figures[name], noise[name] = float(count), s_count
        for i, (feature, c) in enumerate(zip(plan.spec.features, center, strict=True)):
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


def job_dp_facts(
    plan: IterativePlan,
    iterations_run: int,
    last: KmeansIterationSummary | None = None,
    clipped_rows: float | None = None,
) -> KmeansDpFacts | None:
    dp = plan.dp
    if dp is None or plan.sensitivity is None or plan.dp_total is None:
        return None
    truth = job_truth(plan, last, clipped_rows) if last is not None else None
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
        composition=COMPOSITION,
        accountant="rdp",
        iterations_budgeted=plan.iterations,
        epsilon_per_iteration=job_epsilon(plan, 1),
        delta_per_iteration=dp.delta,
        epsilon_spent=job_epsilon(plan, iterations_run),
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


def natural_centers(plan: IterativePlan, centers: np.ndarray) -> np.ndarray:
    """Centers as the analyst reads them: scaled ones mapped back to natural units."""
    c = np.asarray(centers, dtype=np.float64)
    if plan.dp is None or not plan.dp.bounds:
        return c
    center, half = bounds_of.centers_halves(plan.dp.bounds)
    return center + half * c


def summary_from(doc: dict[str, Any]) -> KmeansIterationSummary:
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


def kmeans_noise_preview(
    plan: IterativePlan,
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
    d, k = len(plan.spec.features), plan.spec.k
    sigma_s = kmeans.noise_std(dp.mu, dp.quorum, dp.quorum, enc.scale_bits)
    sigma_n = kmeans.noise_std(dp.mu, dp.quorum, dp.quorum, enc.count_scale_bits)
    doc: dict = {
        "epsilon": dp.epsilon,
        "delta": dp.delta,
        "accountant": "rdp",
        # one iteration alone, at the job's delta (T of them compose to epsilon by RDP)
        "epsilon_per_iteration": job_epsilon(plan, 1),
        "iterations": plan.iterations,
        "row_norm_bound": dp.row_norm_bound,
        "quorum": dp.quorum,
        "noise_std_per_sum": sigma_s,
        "noise_std_per_count_rows": sigma_n,
    }
    if rows is None and counts is None:
        return doc
    n = list(counts) if counts is not None else [rows / k] * k
    c = np.asarray(centers, dtype=np.float64) if centers is not None else np.zeros((k, d))
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
