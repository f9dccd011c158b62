"""What a DP release says of its noise: the facts of the plan (`preview_facts`), the noise
report of a released round (`dp_facts`, `round_truth`) and the encoding's own facts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import DataError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import dp_release
from leteo_fed.protocols.dp_plan import (
    DpSpec,
    split_clip_count,
)
from leteo_fed.protocols.results import DpFacts, EncodingFacts
from leteo_fed.protocols.round_types import Outcome


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
