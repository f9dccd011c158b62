"""The multi-round job of an `iterative.IterativeStatistic`, written once.

`IterativeSecureSumProtocol` runs an iterative statistic as one multi-round job, written once: the
iterations as rounds (`MultiRoundJob`: each iteration's noise calibrated so that the signed T
iterations together meet the job's (epsilon, delta) by Renyi composition, each owner charged
once per iteration it takes part in), the owner's checks of a relayed iteration (its number
within the signed T, its noise accounted for T, its state's shape and bounds), the snapshot
document and its restore, the progress and failure texts. Everything else (encoding, the
owner's sums and clipping, the DP verification) is `secure_sum.SecureSumProtocol`'s.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import (
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
    require_bound,
)
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    require_same_count_scale,
    skellam_plan,
    split_clip_count,
    verify_dp,
    with_clip_count,
)
from leteo_fed.protocols.interface import MultiRoundJob
from leteo_fed.protocols.iterative import (
    IterativeJob,
    IterativePlan,
    IterativeStatistic,
    plain,
)
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.round_types import Outcome, RoundPlan, SiteData, Step
from leteo_fed.protocols.secure_sum import (
    SecureSumProtocol,
)
from leteo_fed.protocols.statistic import (
    n_values,
)

SNAPSHOT_VERSION = 1  # of `IterativeSecureSumProtocol.snapshot`'s document


SNAPSHOT_VERSION = 1  # of `IterativeSecureSumProtocol.snapshot`'s document


class IterativeSecureSumProtocol(MultiRoundJob, SecureSumProtocol):
    """The multi-round `FederatedProtocol` of one `IterativeStatistic`."""

    multi_round = True
    statistic: IterativeStatistic

    def __init__(self, statistic: IterativeStatistic) -> None:
        super().__init__(statistic)

    # ---------------------------------------------------------------- aggregator side

    def job_timeout(self, request: Any, deadline_seconds: float) -> float:
        """Every iteration is a round that may use its deadline."""
        return self.statistic.iterations_asked(request) * (deadline_seconds + 30)

    def max_rounds(self, plan: IterativePlan) -> int:
        return self.iterations_of(plan.spec)[1]

    def iterations_of(self, spec: Any) -> tuple[int, int]:
        return int(spec.iteration), int(getattr(spec, self.statistic.iterations_field))

    def encoding(
        self, spec: Any, common: Common, dp: bool, noise_bound: int = 0, bound: float = 0.0
    ) -> ShareEncoding:
        """A job's encoding: every iteration's (the statistic's scales and bound)."""
        value_bound = bound or common.value_bound or defaults.DEFAULT_VALUE_BOUND
        st = self.statistic
        f = common.scale_bits or (st.dp_default_scale_bits if dp else st.default_scale_bits)
        count_bits = self.statistic.count_scale_bits(spec, f, value_bound) if dp else 0
        return self._encoding(spec, f, value_bound, common.n_invited, count_bits, noise_bound)

    def _encoding(
        self,
        spec: Any,
        f: int,
        value_bound: float,
        max_owners: int,
        count_bits: int,
        noise_bound: int,
    ) -> ShareEncoding:
        rows = DEFAULT_MAX_ROWS_PER_OWNER
        check_parameters(f, value_bound, rows, max_owners, count_bits)
        return ShareEncoding(
            scale_bits=f,
            value_bound=value_bound,
            data_bound=self.statistic.share_bound(spec, value_bound, rows, f, count_bits),
            max_rows_per_owner=rows,
            max_owners=max_owners,
            count_scale_bits=count_bits,
            noise_bound=noise_bound,
        )

    def plan(self, request: Any, common: Common) -> IterativePlan:
        """Validate a job: iteration 1's spec, each iteration's encoding and noise (the T
        iterations together meet the request's (epsilon, delta) by Renyi composition)."""
        spec = self.statistic.spec(request)
        settings = self.statistic.settings(request)
        min_owners, deadline = common.quorum(), common.deadline()
        t = self.iterations_of(spec)[1]
        if common.dp is None:
            enc = self.encoding(spec, common, dp=False)
            spec = self.statistic.plan_spec(spec, None, enc)
            return IterativePlan(
                self.statistic.name,
                spec,
                min_owners,
                deadline,
                enc,
                settings=settings,
                iterations=t,
            )
        # `base.plan_dp` with the statistic's count scale (it may depend on the row-norm bound)
        # and its remedy for too much noise
        f = common.scale_bits or self.statistic.dp_default_scale_bits
        features = list(self.statistic.features(spec))
        bounds = common.dp.release_bounds(features)
        c = common.dp.norm_for(len(features)) if bounds else common.dp.row_norm_bound
        count_bits = self.statistic.count_scale_bits(spec, f, c)
        sens, n_vals = with_clip_count(
            self.statistic.integer_sensitivity(spec, c, f, count_bits),
            n_values(self.layout(spec, c, True)),
            count_bits,
            bool(bounds),
        )
        remedy = {"remedy": self.statistic.noise_remedy} if self.statistic.noise_remedy else {}
        dp, noise_bound = skellam_plan(
            common.dp,
            sens,
            min_owners,
            n_vals,
            row_norm_bound=c,
            bounds=bounds,
            compositions=t,
            **remedy,
        )
        enc = self._encoding(spec, f, c, common.n_invited, count_bits, noise_bound)
        spec = self.statistic.plan_spec(spec, dp, enc)
        total = (common.dp.epsilon, common.dp.delta)
        return IterativePlan(
            self.statistic.name, spec, min_owners, deadline, enc, dp, sens, settings, total, t
        )

    def start(self, plan: IterativePlan, job_id: str, invited: list[str]) -> IterativeJob:
        return IterativeJob(job_id, list(invited), dataclasses.replace(plan.spec, job_id=job_id))

    def next_round(self, plan: Any, state: Any, index: int) -> RoundPlan:
        state.opened = time.perf_counter()
        spec = dataclasses.replace(state.spec, job_id=state.job_id, iteration=index)
        blocks = self.layout(spec, plan.encoding.value_bound, plan.dp is not None)
        n_vals = n_values(blocks) + (1 if plan.dp is not None and plan.dp.counts_clipped else 0)
        return RoundPlan(
            spec, plan.label, plan.encoding, n_vals, plan.dp, dimension=self.dimension(spec)
        )

    def expected_round(
        self, plan: IterativePlan, job_id: str, invited: list[str], index: int, received: Any
    ) -> RoundPlan:
        """Iteration 1 at the signed start; later ones at the state the aggregator computed
        from earlier totals, which no owner can check beyond its shape and bounds
        (`chosen_by_aggregator`)."""
        job = self.start(plan, job_id, invited)
        if index > 1:
            job.spec = self.statistic.follow(plan, job.spec, received)
        return self.next_round(plan, job, index)

    def chosen_by_aggregator(self, spec: Any) -> bool:
        return int(spec.iteration) > 1

    def progress(self, plan: IterativePlan, index: int, round_id: str) -> str:
        return f"iteration {index} {self.statistic.of} {self.max_rounds(plan)} open ({round_id})"

    def failure(self, plan: IterativePlan, index: int, message: str) -> str:
        return f"iteration {index} {self.statistic.of} {self.max_rounds(plan)} failed: {message}"

    def finish_round(self, plan: Any, state: Any, outcome: Outcome) -> Step:
        """The next iteration's state from the revealed totals; every iteration publishes its
        result."""
        enc = plan.encoding
        totals, release = self.released(plan, outcome.require_totals(), outcome.n_owners)
        _, clipped = split_clip_count(outcome.require_totals(), plan.dp, enc.count_scale_bits)
        if clipped is not None:
            state.clipped_rows = clipped
        step = self.statistic.iterate(plan, state, outcome.plan.spec, totals, release, outcome)
        state.records.append(step.record)
        state.spec = step.spec
        state.encoding = outcome.encoding
        state.converged = step.converged
        index = len(state.records)
        done = step.converged or index >= self.max_rounds(plan)
        if done:
            how = "converged" if step.converged else self.statistic.limit_note
            message = f"{index} iteration(s), {how}"
        else:
            message = (
                f"iteration {index} {self.statistic.of} {self.max_rounds(plan)} done with "
                f"{len(outcome.submitted)} owner(s); {step.note}"
            )
        return Step(step.result, done, message)

    def job_result(self, plan: IterativePlan, state: IterativeJob, last: Step) -> Any:
        return self.statistic.job_result(plan, state, last)

    def snapshot(self, state: IterativeJob) -> dict[str, Any]:
        """The job after its last completed iteration, as JSON data: its state, every
        iteration's record, whether it converged and how long it has run."""
        return {
            "version": SNAPSHOT_VERSION,
            "job_id": state.job_id,
            "invited": list(state.invited),
            **self.statistic.keep(state),
            "iterations": [plain(dataclasses.asdict(r)) for r in state.records],
            "converged": bool(state.converged),
            "elapsed_seconds": time.perf_counter() - state.started,
        }

    def restore(
        self, plan: IterativePlan, job_id: str, invited: list[str], snapshot: dict[str, Any]
    ) -> IterativeJob:
        """The job of `snapshot`, checked against the plan (planned again from the request)."""
        job = self.start(plan, job_id, invited)
        try:
            if snapshot.get("version") != SNAPSHOT_VERSION:
                raise ValueError(f"version {snapshot.get('version')!r}, not {SNAPSHOT_VERSION}")
            if snapshot["job_id"] != job_id:
                raise ValueError(f"it is job {snapshot['job_id']!r}'s")
            self.statistic.resume(plan, job, snapshot)
            job.records = [self.statistic.record(it) for it in snapshot["iterations"]]
            if [r.iteration for r in job.records] != list(range(1, len(job.records) + 1)):
                raise ValueError("the iterations are not numbered 1, 2, ...")
            if len(job.records) > self.max_rounds(plan):
                raise ValueError(
                    f"{len(job.records)} iterations, the plan allows {self.max_rounds(plan)}"
                )
            job.converged = bool(snapshot["converged"])
            elapsed = float(snapshot.get("elapsed_seconds", 0.0))
        except (KeyError, TypeError, ValueError, DataError) as exc:
            raise ProtocolError(
                f"the snapshot of {self.statistic.title} job {job_id} is unusable: {exc}"
            ) from exc
        job.started = time.perf_counter() - max(0.0, elapsed)  # the time before the restart
        return job

    def noise_preview(self, plan: Any, rows: int | None = None) -> dict:
        own = self.statistic.preview(plan, rows)
        if own is None:
            raise DataError(f"{self.statistic.name} has no noise preview", field="dp_epsilon")
        return own

    def preview_data(
        self, plan: Any, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        return self.statistic.preview_rows(plan, columns, rng)

    def release_figures(self, plan: Any, totals: list[int], n_owners: int) -> dict[str, float]:
        raise NotImplementedError(f"{self.name} states its figures per job")

    # ---------------------------------------------------------------- owner side

    def request_columns(self, request: Any) -> list[str]:
        return self.statistic.request_columns(request)

    def check(
        self, spec: Any, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        """A relayed iteration: a plain encoding whose bound follows from its parameters, an
        iteration within the signed T, a state of the right shape and bounds, a site the
        statistic computes on; with DP, noise accounted for T iterations and at least what
        the recomputed sensitivity needs."""
        what = self.statistic.title or self.statistic.name
        if enc is None:
            raise ProtocolError(f"a {what} round needs a plain encoding")
        if enc.rotation_dimension:
            raise ProtocolError(f"{what} rounds have no rotated encoding")
        require_bound(
            enc,
            self.statistic.share_bound(
                spec, enc.value_bound, enc.max_rows_per_owner, enc.scale_bits, enc.count_scale_bits
            ),
        )
        iteration, iterations = self.iterations_of(spec)
        if not 1 <= iteration <= iterations:
            raise ProtocolError(f"iteration {iteration} of a job of at most {iterations}")
        self.statistic.check_state(spec, enc)
        self.statistic.check_site(site)
        if dp is None:
            return
        if self.statistic.counts_at_sum_scale:
            require_same_count_scale(enc)
        if dp.releases != max(1, iterations):
            raise ProtocolError(
                f"the round's noise is accounted for {dp.releases} iteration(s), the job "
                f"declares {iterations}"
            )
        blocks = self.layout(spec, enc.value_bound, True)
        verify_dp(
            dp,
            self.statistic.features(spec),
            self.dp_sensitivity(spec, enc, dp),
            n_values(blocks),
            enc,
        )

    def dp_sensitivity(self, spec: Any, enc: ShareEncoding | None, dp: DpSpec) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError(f"a {self.statistic.title} round needs an encoding")
        if enc.count_scale_bits < enc.scale_bits:
            raise ProtocolError("DP rounds must encode counts at least at the scale of sums")
        if not enc.value_bound >= dp.row_norm_bound:
            raise ProtocolError("the encoding's value bound is below the DP row-norm bound")
        return self.statistic.integer_sensitivity(
            spec, dp.row_norm_bound, enc.scale_bits, enc.count_scale_bits
        )

    def share_values(
        self,
        spec: Any,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        self.statistic.check_state(spec, enc)
        return super().share_values(spec, enc, dp, site, timings)
