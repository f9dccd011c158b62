"""Bookkeeping of a federated k-means job: one round per iteration, the centers, the outcome.

The job runs in its own thread at the aggregator (`AggregatorService._run_kmeans`). Each
iteration is an ordinary round (`aggregator.rounds.Round`, protocol "kmeans") with its own round
id, CSP announcement, deadline and quorum; `IterationContext` carries the centers the owners
assign to and, once the round is computed, the center update. The job answers `GetRound(job id)`
with its own status; its result lists, per iteration, who contributed.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from aggregator.plan import KmeansPlan
from aggregator.rounds import COMPLETED, OPEN, Round
from leteo_fed.crypto.paillier import PublicKey
from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols import kmeans

EMPTY_CLUSTER_RULE = "an empty cluster (no rows; with DP a noisy count below 1) keeps its center"


@dataclass
class IterationContext:
    job_id: str
    iteration: int
    centers: np.ndarray  # what the owners assign their rows to
    opened: float = field(default_factory=time.perf_counter)
    update: kmeans.CenterUpdate | None = None
    timings: dict[str, float] = field(default_factory=dict)  # aggregator phases
    csp_seconds: float = 0.0


@dataclass
class KmeansJob:
    job_id: str
    plan: KmeansPlan
    invited: list[str]
    public: PublicKey
    layout: SlotLayout
    centers: np.ndarray
    started: float = field(default_factory=time.perf_counter)
    state: str = OPEN
    message: str = "starting"
    iterations: list[dict] = field(default_factory=list)
    converged: bool = False
    result: dict | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def last_contributors(self) -> list[str]:
        return self.iterations[-1]["contributors"] if self.iterations else []

    def status(self) -> pb.RoundStatus:
        with self.lock:
            submitted = self.last_contributors
            return pb.RoundStatus(
                round_id=self.job_id,
                protocol=kmeans.PROTOCOL,
                state=self.state,
                message=self.message,
                invited=self.invited,
                submitted=submitted,
                missing=[s for s in self.invited if s not in submitted],
                result_json=json.dumps(self.result) if self.result else "",
            )

    def progress(self, message: str) -> None:
        with self.lock:
            self.message = message

    def record(self, rnd: Round) -> dict:
        """Fold a completed iteration round into the job; returns its summary."""
        assert rnd.state == COMPLETED and rnd.kmeans is not None
        ctx: IterationContext = rnd.kmeans
        upd = ctx.update
        contributors = sorted(rnd.submitted)
        entry = {
            "iteration": ctx.iteration,
            "round_id": rnd.round_id,
            "contributors": contributors,
            "declined": dict(rnd.declined),
            "missing": [s for s in rnd.invited if s not in rnd.submitted and s not in rnd.declined],
            "center_shift": upd.shift,
            "counts": list(upd.counts),
            "empty_clusters": list(upd.empty),
            "centers": upd.centers.tolist(),
            "timings": {
                "round_seconds": time.perf_counter() - ctx.opened,
                "owners": {s: dict(t) for s, t in rnd.submitted.items()},
                "aggregator": dict(ctx.timings),
                "csp": {"decrypt_seconds": ctx.csp_seconds},
            },
        }
        with self.lock:
            self.iterations.append(entry)
            self.centers = upd.centers
            self.message = (
                f"iteration {ctx.iteration} of {self.plan.iterations} done with "
                f"{len(contributors)} owner(s); max center shift {upd.shift:.6g}"
            )
        return entry

    def finish(self, state: str, message: str, result: dict | None = None) -> None:
        with self.lock:
            self.state, self.message, self.result = state, message, result
        self.done.set()

    def result_doc(self) -> dict:
        plan = self.plan
        its = self.iterations
        seconds = [it["timings"]["round_seconds"] for it in its]
        total = time.perf_counter() - self.started
        eps, delta = plan.dp_total if plan.dp_total else (None, None)
        owners = sorted({s for it in its for s in it["contributors"]})
        return {
            "method": kmeans.METHOD,
            "protocol": kmeans.PROTOCOL,
            "job_id": self.job_id,
            "features": plan.features,
            "k": plan.k,
            "centers": self.centers.tolist(),
            "initial_centers": plan.centers.tolist(),
            "counts": its[-1]["counts"] if its else [],
            "epsilon": eps,
            "delta": delta,
            "iterations_run": len(its),
            "max_iterations": plan.iterations,
            "tolerance": plan.tolerance,
            "converged": self.converged,
            "empty_cluster_rule": EMPTY_CLUSTER_RULE,
            "invited": list(self.invited),
            "owners": owners,
            "iterations": its,
            "encoding": {
                "scale_bits": plan.encoding.scale_bits,
                "count_scale_bits": plan.encoding.count_scale_bits,
                "value_bound": plan.encoding.value_bound,
                "slot_bits": self.layout.slot_bits,
                "slots_per_ciphertext": self.layout.slots_per_ciphertext,
                "mask_bits": self.layout.mask_bits,
                "statistical_security_bits": self.layout.statistical_security,
                "values_per_share": kmeans.n_values(plan.k, len(plan.features)),
                "ciphertexts_per_share": self.layout.n_ciphertexts(
                    kmeans.n_values(plan.k, len(plan.features))
                ),
                "paillier_bits": self.public.bits,
            },
            "dp": self._dp_facts(),
            "timings": {
                "total_seconds": total,
                "iteration_seconds": seconds,
                "mean_iteration_seconds": sum(seconds) / len(seconds) if seconds else None,
            },
        }

    def _dp_facts(self) -> dict | None:
        plan = self.plan
        dp = plan.dp
        if dp is None:
            return None
        eps, delta = plan.dp_total
        q = dp.quorum
        f, fc = plan.encoding.scale_bits, plan.encoding.count_scale_bits
        return {
            "mechanism": "distributed Skellam noise on every per-cluster sum and count (SPEC P5)",
            "epsilon": eps,
            "delta": delta,
            "composition": "basic sequential: T iterations, each (epsilon/T, delta/T)-DP",
            "iterations_budgeted": plan.iterations,
            "epsilon_per_iteration": dp.epsilon,
            "delta_per_iteration": dp.delta,
            "epsilon_spent": dp.epsilon * len(self.iterations),
            "delta_spent": dp.delta * len(self.iterations),
            "row_norm_bound": dp.row_norm_bound,
            "quorum": q,
            "skellam_mu_per_iteration": dp.mu,
            "noise_std_sum_with_quorum": kmeans.noise_std(dp.mu, q, q, f),
            "noise_std_count_with_quorum": kmeans.noise_std(dp.mu, q, q, fc),
            "sensitivity_l1": dp.l1,
            "sensitivity_l2": dp.l2,
            "post_processing": "noisy counts rounded to whole rows; centers projected onto the "
            "ball of radius row_norm_bound",
            "note": "rows clipped to row_norm_bound at each owner; every owner charges its ledger "
            "once per iteration it takes part in",
        }
