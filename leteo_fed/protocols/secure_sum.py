"""One adapter runs every declared secure-sum statistic (`statistic.SecureSumStatistic`).

It is the `FederatedProtocol` of a statistic: everything a secure-sum round needs beyond the
statistic's own math, written once. The aggregator's side: the request validated into a plan
(quorum, deadline, the fixed-point encoding sized from the declared blocks, the Skellam noise
calibrated at the declared sensitivity), the spec of the round, the result from the released
totals with each figure's noise (`dp_release`). The owner's side, from the spec alone: the
encoding's bound recomputed, the announced noise verified at the recomputed sensitivity, rows
clipped (and scaled to public bounds) as the spec says, the statistic's sums encoded, the clipped
rows counted, the charge and the ledger's text.

Every party learns the secure sum's: each owner nothing; the CSP masked plaintexts only; the
aggregator the totals over a quorum of owners (noisy in a DP round), never one site's.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed import defaults
from leteo_fed.encoding.share import (
    ShareEncoding,
    require_bound,
)
from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols.block_encoding import (
    data_bound,
    encode_blocks,
    integer_sensitivity,
    owner_rows,
    statistic_encoding,
)
from leteo_fed.protocols.dp_facts import clip_note, dp_facts, preview_facts, round_truth
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    clip_count_value,
    plan_dp,
    require_same_count_scale,
    split_clip_count,
    verify_dp,
)
from leteo_fed.protocols.dp_release import stated_truth
from leteo_fed.protocols.interface import SecureSumRounds
from leteo_fed.protocols.requests import Common
from leteo_fed.protocols.results import DpFacts, StatisticResult
from leteo_fed.protocols.round_types import Outcome, RoundPlan, SiteData, Step
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    NoiseReport,
    Release,
    SecureSumStatistic,
    Totals,
    n_values,
)


@dataclass(frozen=True)
class StatisticPlan:
    """A validated request: the spec owners receive, the statistic's aggregator-only
    `settings`, and how its round is encoded and noised."""

    label: str
    spec: Any
    min_owners: int
    deadline_seconds: float
    encoding: ShareEncoding
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None
    settings: Any = None


class SecureSumProtocol(SecureSumRounds):
    """The `FederatedProtocol` of one declared statistic."""

    def __init__(self, statistic: SecureSumStatistic, *, plugin: bool = False) -> None:
        self.statistic = statistic
        self.name = statistic.name  # type: ignore[misc]
        self.request_type = statistic.request_type  # type: ignore[misc]
        self.spec_type = statistic.spec_type  # type: ignore[misc]
        self.takes_bounds = statistic.takes_bounds  # type: ignore[misc]
        self.plot_file = statistic.plot_file  # type: ignore[misc]
        self.fixed_row_norm_bound = statistic.fixed_row_norm_bound  # type: ignore[misc]
        self.plugin = plugin

    def result_file(self, label: str) -> str | None:
        if label != self.statistic.name:
            return None
        return self.statistic.output_file or f"{self.statistic.name}.json"

    def layout(self, spec: Any, bound: float, dp: bool) -> tuple[Block, ...]:
        """The share's blocks at `bound`: the DP layout in a DP round."""
        if dp:
            return self.statistic.dp_blocks(spec, bound)
        return self.statistic.blocks(spec, bound)

    def sensitivity(
        self, spec: Any, bound: float, scale_bits: int, count_bits: int
    ) -> noise.Sensitivity:
        """A DP share's integer sensitivity at row-norm bound `bound`: the statistic's own in
        closed form (`share_sensitivity`), else its DP layout's, groups of which one row moves
        a single one counted once (`exclusive_blocks`)."""
        own = self.statistic.share_sensitivity(spec, bound, scale_bits, count_bits)
        if own is not None:
            return own
        blocks = self.layout(spec, bound, True)
        exclusive = self.statistic.exclusive_blocks(spec)
        return integer_sensitivity(blocks, scale_bits, count_bits, exclusive)

    def numeric(self, spec: Any) -> tuple[list[str], dict[str, float]]:
        """The columns read into x: the features, then the bounded columns and their bounds."""
        return list(self.statistic.features(spec)), dict(self.statistic.bounded_columns(spec))

    # ---------------------------------------------------------------- aggregator side

    def encoding(
        self, spec: Any, common: Common, dp: bool, noise_bound: int = 0, bound: float = 0.0
    ) -> ShareEncoding:
        """The share encoding of a plan: the scale, the value bound (a DP round's: its
        row-norm bound), slots for the invited owners (the CSP sums at most one share of each).
        A statistic of counts only encodes them at the one scale, whole counts without DP."""
        fixed = self.statistic.fixed_row_norm_bound
        b = bound or fixed or common.value_bound or defaults.DEFAULT_VALUE_BOUND
        blocks = self.layout(spec, b, dp)
        counts = all(blk.kind == COUNT for blk in blocks)
        st = self.statistic
        f = common.scale_bits or (
            st.dp_default_scale_bits if dp else 0 if counts else st.default_scale_bits
        )
        return statistic_encoding(
            blocks,
            scale_bits=f,
            value_bound=b,
            max_owners=common.n_invited,
            count_scale_bits=f if dp or counts else 0,
            noise_bound=noise_bound,
        )

    def plan(self, request: Any, common: Common) -> StatisticPlan:
        spec = self.statistic.spec(request)
        settings = self.statistic.settings(request)
        fixed = self.statistic.fixed_row_norm_bound
        if fixed is not None and common.value_bound:
            raise DataError(
                f"a {self.statistic.name} round takes no value_bound: its values are counts",
                field="value_bound",
            )
        dp_request = common.dp
        if dp_request is not None and fixed is not None:  # nothing to clip or scale: counts
            dp_request = dataclasses.replace(dp_request, row_norm=fixed, bounds=())
        if dp_request is not None and dp_request.bounds and not self.statistic.takes_bounds:
            raise DataError(
                f"{self.statistic.name} takes no per-column bounds (give row_norm_bound)",
                field="bounds",
            )
        spec = self.statistic.spec_for(spec, dp_request)
        min_owners, deadline = common.quorum(), common.deadline()
        if dp_request is None:
            enc = self.encoding(spec, common, dp=False)
            return StatisticPlan(
                self.statistic.name, spec, min_owners, deadline, enc, settings=settings
            )
        f = common.scale_bits or self.statistic.dp_default_scale_bits
        features, bounded = self.numeric(spec)
        dp, noise_bound, sens, _ = plan_dp(
            dp_request,
            [*features, *bounded],
            lambda c: self.sensitivity(spec, c, f, f),
            n_values(self.layout(spec, 1.0, True)),
            f,
            min_owners,
            norm_columns=len(features),  # bounded columns are clipped on their own
        )
        enc = self.encoding(spec, common, True, noise_bound, dp.row_norm_bound)
        return StatisticPlan(
            self.statistic.name, spec, min_owners, deadline, enc, dp, sens, settings
        )

    def next_round(self, plan: StatisticPlan, state: None, index: int) -> RoundPlan:
        blocks = self.layout(plan.spec, plan.encoding.value_bound, plan.dp is not None)
        n_vals = n_values(blocks) + (1 if plan.dp is not None and plan.dp.counts_clipped else 0)
        return RoundPlan(
            plan.spec,
            plan.label,
            plan.encoding,
            n_vals,
            plan.dp,
            dimension=self.dimension(plan.spec),
        )

    def finish_round(self, plan: StatisticPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        totals, release = self.released(plan, outcome.require_totals(), outcome.n_owners)
        fields = self.statistic.result(plan.spec, totals, release)
        outcome.timings["statistics_seconds"] = time.perf_counter() - start
        dp = None
        if plan.dp is not None and plan.sensitivity is not None:
            start = time.perf_counter()
            report = self.statistic.noise_report(plan.spec, fields, totals, release)
            n_rows = float(fields.get(self.statistic.rows_field, 0) or 0)
            if report.figure_noise is None:
                truth = round_truth(
                    plan.dp,
                    outcome,
                    lambda t: self.release_figures(plan, t, outcome.n_owners),
                    n_rows,
                    plan.encoding.count_scale_bits,
                    report.warnings,
                )
            else:  # the statistic knows each figure's noise in closed form
                _, clipped = split_clip_count(
                    outcome.require_totals(), plan.dp, plan.encoding.count_scale_bits
                )
                figures = self.statistic.figures(plan.spec, fields)
                truth = stated_truth(figures, report.figure_noise, n_rows, clipped, report.warnings)
            fields = self.statistic.with_noise(plan.spec, fields, truth.figure_noise_std)
            outcome.timings["noise_bootstrap_seconds"] = time.perf_counter() - start
            dp = self.release_facts(plan, outcome.n_owners, truth, report)
        return Step(self.make_result(plan, fields, outcome, dp))

    def release_facts(
        self,
        plan: StatisticPlan,
        n_owners: int,
        truth: Any = None,
        report: NoiseReport | None = None,
    ) -> DpFacts | None:
        """What a DP result says of its noise (None without DP): the round's noise at the
        owners summed, with the release's `truth` (`dp_release.Truth`) and the statistic's
        `report` texts if given."""
        if plan.dp is None or plan.sensitivity is None:
            return None
        report = report or NoiseReport()
        texts = {"post_processing": report.post_processing} if report.post_processing else {}
        return dp_facts(
            report.mechanism or "distributed Skellam noise on every encoded total",
            plan.dp,
            plan.sensitivity,
            truth,
            skellam_mu_aggregate=plan.dp.aggregate_mu(n_owners),
            noise_std_per_value=plan.dp.noise_std(n_owners, plan.encoding.scale_bits),
            note=report.note
            or (
                "every value clipped to its column's public bounds and scaled to [-1, 1], "
                if plan.dp.bounds
                else ""
            )
            + "rows clipped to row_norm_bound at each owner; every owner charged its ledger",
            **texts,
        )

    def make_result(self, plan: StatisticPlan, fields: dict, outcome: Outcome, dp: Any) -> Any:
        if self.statistic.result_type is None:
            figures = self.statistic.figures(plan.spec, fields)
            return StatisticResult.of(self.statistic, fields, figures, outcome.facts(), dp)
        return self.statistic.result_type(
            protocol=self.statistic.name, **fields, **outcome.facts(), dp=dp
        )

    def released(
        self, plan: StatisticPlan, totals: list[int], n_owners: int
    ) -> tuple[Totals, Release]:
        """A round's totals as the statistic reads them (the clipped-rows count of a bounded
        release set aside), and what the aggregator knows of the release."""
        enc = plan.encoding
        totals, _ = split_clip_count(totals, plan.dp, enc.count_scale_bits)
        blocks = self.layout(plan.spec, enc.value_bound, plan.dp is not None)
        release = Release(
            noisy=plan.dp is not None,
            noise_std=plan.dp.noise_std(n_owners, enc.scale_bits) if plan.dp is not None else 0.0,
            bounds=plan.dp.bounds if plan.dp is not None else (),
            n_owners=n_owners,
            bound=enc.value_bound,
            settings=plan.settings,
            quorum_noise_std=plan.dp.noise_std(plan.dp.quorum, enc.scale_bits) if plan.dp else 0.0,
        )
        return Totals(blocks, totals, enc.scale_bits, enc.count_scale_bits), release

    def result_of(self, plan: StatisticPlan, totals: list[int], n_owners: int) -> dict[str, Any]:
        """The statistic's result fields from a round's totals."""
        return self.statistic.result(plan.spec, *self.released(plan, totals, n_owners))

    def release_figures(self, plan: StatisticPlan, totals: list[int], n_owners: int) -> dict:
        return self.statistic.figures(plan.spec, self.result_of(plan, totals, n_owners))

    def preview_data(
        self, plan: StatisticPlan, columns: dict[str, np.ndarray], rng: np.random.Generator
    ) -> tuple[dict[str, np.ndarray], str]:
        return self.statistic.preview_data(plan.spec, columns, rng)

    def noise_preview(self, plan: StatisticPlan, rows: int | None = None) -> dict:
        """What the noise of a DP round does, from public parameters only: the noise std per
        released value, and per block whether it exceeds the largest total `rows` rows can
        give (the check a real round meets before anyone is invited)."""
        if rows is not None and rows < 1:
            raise DataError("rows must be at least 1", field="rows")
        own = self.statistic.preview(plan, rows)
        if own is not None:
            return own
        doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
        doc["noise_std_per_value"] = sigma
        if rows is None:
            return doc
        blocks = self.layout(plan.spec, plan.encoding.value_bound, plan.dp is not None)
        # counts are encoded at the sums' scale in a DP round: one noise std fits both
        checks = [SignalCheck(f"total {b.name}", sigma, rows * b.row_bound) for b in blocks]
        doc["signal_checks"] = [c.to_dict() for c in checks]
        return doc

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: Any) -> list[str]:
        features, bounded = self.numeric(spec)
        return [*features, *bounded, *self.statistic.other_columns(spec)]

    def request_columns(self, request: Any) -> list[str]:
        return self.columns(self.statistic.spec(request))

    def dimension(self, spec: Any) -> int:
        """Values per row: the numeric columns read into x, else every column read."""
        features, bounded = self.numeric(spec)
        return len(features) + len(bounded) or len(self.columns(spec))

    def check(
        self, spec: Any, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError(f"a {self.statistic.name} round needs a plain encoding")
        self.statistic.check_spec(spec)
        blocks = self.layout(spec, enc.value_bound, dp is not None)
        if dp is not None or all(b.kind == COUNT for b in blocks):
            require_same_count_scale(enc)
        require_bound(
            enc, data_bound(blocks, enc.max_rows_per_owner, enc.scale_bits, enc.count_scale_bits)
        )
        if dp is None:
            return
        if enc.value_bound != (self.statistic.fixed_row_norm_bound or dp.row_norm_bound):
            # the plan sizes a DP encoding at the round's bound: another is a forged one
            raise ProtocolError("a DP round's encoding must be sized at its row-norm bound")
        if self.statistic.spark_engine and site.uses_spark:
            raise DataError(
                'DP rounds are computed with the numpy engine only (engine = "spark" is set)'
            )
        features, bounded = self.numeric(spec)
        for name, b in bounded.items():
            if not (math.isfinite(b) and b > 0):
                raise ProtocolError(f"a DP round needs a positive bound on column '{name}'")
        columns = [*features, *bounded]
        verify_dp(dp, columns, self.dp_sensitivity(spec, enc, dp), n_values(blocks), enc)

    def dp_sensitivity(self, spec: Any, enc: ShareEncoding | None, dp: DpSpec) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError(f"a {self.statistic.name} round needs an encoding")
        bound = self.statistic.fixed_row_norm_bound or dp.row_norm_bound
        return self.sensitivity(spec, bound, enc.scale_bits, enc.count_scale_bits)

    def describe(self, spec: Any, dp: DpSpec | None) -> str:
        if self.statistic.fixed_row_norm_bound is not None:  # nothing is clipped
            return self.statistic.describe(spec)
        if self.statistic.clips_itself:  # to its own bounds, not to a row norm
            return self.statistic.describe(spec)
        _, bounded = self.numeric(spec)
        if dp is None or not bounded:
            return self.statistic.describe(spec) + clip_note(dp)
        side = "".join(f", {name} to +/-{b:g}" for name, b in bounded.items())
        return f"{self.statistic.describe(spec)}, features clipped to {dp.row_norm_bound:g}{side}"

    def share_values(
        self,
        spec: Any,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        blocks = self.layout(spec, enc.value_bound, dp is not None)
        if dp is None and self.statistic.spark_engine and site.uses_spark:
            sums = self.statistic.spark_sums(spec, site, enc.value_bound)
            clipped = np.zeros(0, dtype=bool)
        else:
            features, bounded = self.numeric(spec)
            table = site.read(self.columns(spec))
            rows, clipped = owner_rows(table, features, bounded, enc, dp)
            sums = self.statistic.sums(spec, rows)
        timings["statistics_seconds"] = time.perf_counter() - start
        values = encode_blocks(blocks, sums, enc)
        if dp is not None and dp.counts_clipped:
            values.append(clip_count_value(clipped, enc.count_scale_bits))
        return values
