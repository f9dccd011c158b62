"""Running a secure-sum release without a network: the protocols' own code on simulated or
real rows, for the preview of a bounded release and for measurements that repeat releases.

`run_in_process` is the engine's loop without a network: every round's owner checks and shares
(noised as owners noise them), their sum, the aggregator's finish. `preview_release` draws rows
under the stated assumption (`dp_release.Assumption`) and runs the round, or the whole job, with
the round's exact noise many times (`dp_release.simulate_preview`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from leteo_fed.errors import DataError, LeteoError
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.dp_release import (
    ArraySite,
    Assumption,
    buried,
    simulate_preview,
    spread,
)
from leteo_fed.protocols.round_types import Outcome

KEY_BITS = 2048  # the key size in-process runs report (no key is made)


def run_in_process(
    protocol, plan, sites: Sequence[ArraySite], rng: np.random.Generator | None = None
):
    """A whole job through the protocol's own code without a network: every round's owner
    checks and shares (noised as owners noise them, from `rng` when given), their sum, the
    aggregator's finish; the last result. For measurements that repeat releases; the summed
    integers are what the CSP would reveal (packing and masking are exact)."""
    state = protocol.start(plan, "in-process", [])
    index = 1
    while True:
        rnd = protocol.next_round(plan, state, index)
        enc = rnd.share_encoding
        totals = None
        for site in sites:
            protocol.check(rnd.spec, enc, rnd.dp, site)
            values = protocol.share_values(rnd.spec, enc, rnd.dp, site, {})
            if rnd.dp is not None and rng is not None:
                z = Skellam(rnd.dp.mu).owner_share(rnd.dp.quorum).sample(len(values), rng)
                values = [v + int(e) for v, e in zip(values, z.tolist(), strict=True)]
            elif rnd.dp is not None:
                values = add_owner_noise(values, rnd.dp)
            totals = (
                values if totals is None else [a + b for a, b in zip(totals, values, strict=True)]
            )
        outcome = Outcome(
            f"in-process-{index}", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {}
        )
        outcome.totals = totals
        outcome.encoding = encoding_facts(enc, enc.layout(KEY_BITS), rnd.n_values, KEY_BITS)
        step = protocol.finish_round(plan, state, outcome)
        if step.done:
            return protocol.job_result(plan, state, step)
        index += 1


def preview_release(protocol, plan, rows: int, assumption: Assumption) -> dict:
    """`simulate_preview` of a secure-sum protocol's bounded DP plan, through its own owner
    code (`share_values`) and aggregator code (`release_figures`); a multi-round job is run
    whole (`run_in_process`) on the simulated rows, its figures those its result states."""
    dp = plan.dp
    if protocol.multi_round:
        return _preview_job(protocol, plan, rows, assumption)
    rnd = protocol.next_round(plan, protocol.start(plan, "preview", []), 1)
    enc = rnd.share_encoding

    def share_of(site: ArraySite) -> list[int]:
        return protocol.share_values(rnd.spec, enc, rnd.dp, site, {})

    def figures_of(totals: list[int]) -> dict[str, float]:
        return protocol.release_figures(plan, totals, dp.quorum)

    def shape(columns: dict, rng: np.random.Generator) -> tuple[dict, str]:
        return protocol.preview_data(plan, columns, rng)

    return simulate_preview(share_of, figures_of, dp.bounds, dp.mu, rows, assumption, shape)


class NoNoise:
    """Draws of 0 in place of a generator: a job's noise-free run on the same plan (Skellam
    draws Poisson twice), the reference its noisy runs are measured against."""

    def poisson(self, lam, size=None):
        return np.zeros(size, dtype=np.int64)


def _preview_job(protocol, plan, rows: int, assumption: Assumption, repeats: int = 40) -> dict:
    """A multi-round job's preview: the whole job on simulated rows, `repeats` times with the
    round's noise; each figure's spread around the noise-free job."""
    if rows < 2:
        raise DataError("rows must be at least 2", field="rows")
    rng = np.random.default_rng(0)
    columns = {}
    for b in plan.dp.bounds:
        mean, std = assumption.of(b)
        columns[b.column] = rng.normal(mean, std, size=rows)
    columns, added = protocol.preview_data(plan, columns, rng)
    parts = np.array_split(np.arange(rows), max(1, plan.dp.quorum))  # the quorum's shares
    sites = [ArraySite({c: v[p] for c, v in columns.items()}) for p in parts]
    exact = dict(run_in_process(protocol, plan, sites, NoNoise()).dp.figures)  # type: ignore[arg-type]
    draws = []
    for _ in range(repeats):
        try:
            draws.append(dict(run_in_process(protocol, plan, sites, rng).dp.figures))
        except LeteoError:
            continue
    errors = spread(draws, exact)
    return {
        "assumption": assumption.describe(plan.dp.bounds) + (f"; {added}" if added else ""),
        "assumed_rows": rows,
        "expected_figures": exact,
        "expected_error": errors,
        "refused_draws": repeats - len(draws),
        "noise_buries": [w.figure for w in buried(exact, errors)],
    }


__all__ = ["KEY_BITS", "NoNoise", "preview_release", "run_in_process"]
