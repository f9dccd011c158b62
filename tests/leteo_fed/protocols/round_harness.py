"""One secure-sum round of any single-round protocol, in process: the engine's loop without a
network (plan, the owners' check and shares noised as owners noise them, the slot-wise sum,
finish), the result as the analyst receives it after the wire. For tests that repeat releases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.dp_release import ArraySite
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.transport.rounds import result_from_proto, result_to_proto


def sites_of(parts: Sequence[Mapping[str, np.ndarray]]) -> list[ArraySite]:
    return [ArraySite(p) for p in parts]


def run_round(
    request: Any,
    sites: Sequence[ArraySite],
    dp: DpRequest | None = None,
    rng: np.random.Generator | None = None,
) -> Any:
    """`rng`: the owners' noise drawn from it (a seeded test), else as owners draw it."""
    protocol = registry.for_request(request)
    common = Common(n_invited=len(sites), min_owners=len(sites), dp=dp)
    plan = protocol.plan(request, common)
    rnd = protocol.next_round(plan, protocol.start(plan, "job", []), 1)
    enc = rnd.share_encoding
    shares = []
    for s in sites:
        protocol.check(rnd.spec, enc, rnd.dp, s)
        values = protocol.share_values(rnd.spec, enc, rnd.dp, s, {})
        assert len(values) == rnd.n_values
        if rnd.dp is not None and rng is not None:
            z = Skellam(rnd.dp.mu).owner_share(rnd.dp.quorum).sample(len(values), rng)
            values = [v + int(e) for v, e in zip(values, z.tolist(), strict=True)]
        elif rnd.dp is not None:
            values = add_owner_noise(values, rnd.dp)
        shares.append(values)
    layout = enc.layout(2048)
    summed = [sum(col) for col in zip(*(pack(v, layout) for v in shares), strict=True)]
    outcome = Outcome("r1", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {})
    outcome.totals = slot_totals(unpack(summed, rnd.n_values, layout), len(sites), layout)
    outcome.encoding = encoding_facts(enc, layout, rnd.n_values, 2048)
    result = protocol.finish_round(plan, None, outcome).result
    return result_from_proto(result_to_proto(result))


# ------------------------------------------------------------------ a declared statistic's math


def statistic_share(
    statistic: Any, spec: Any, x: np.ndarray, others: Mapping, enc: Any, dp: bool = False
) -> list:
    """One owner's encoded share of a declared statistic (`SecureSumStatistic`) on rows `x`
    (the features, as a round hands them over) and its other columns: the owner's own code
    (`dp`: a DP round's layout and sums, rows as given)."""
    from leteo_fed.protocols.secure_sum import encode_blocks
    from leteo_fed.protocols.statistic import Rows

    table = ArraySite(dict(others)).read([])
    rows = Rows(np.asarray(x, dtype=np.float64), table, enc.value_bound, dp, enc.max_rows_per_owner)
    blocks = (
        statistic.dp_blocks(spec, enc.value_bound)
        if dp
        else statistic.blocks(spec, enc.value_bound)
    )
    return encode_blocks(blocks, statistic.sums(spec, rows), enc)


def statistic_totals(
    statistic: Any, spec: Any, totals: Sequence[int], enc: Any, dp: bool = False
) -> Any:
    """Summed shares as the `Totals` the statistic's `result` reads (`dp`: a DP round's)."""
    from leteo_fed.protocols.statistic import Totals

    blocks = (
        statistic.dp_blocks(spec, enc.value_bound)
        if dp
        else statistic.blocks(spec, enc.value_bound)
    )
    return Totals(blocks, list(totals), enc.scale_bits, enc.count_scale_bits)
