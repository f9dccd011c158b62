"""The test kit a statistic's author runs: does the declaration keep its promises?

`check_statistic(MyStatistic(), request, sites)` runs every check below on the author's own
rows, through the adapter the services run (`secure_sum.SecureSumProtocol`) and the real
fixed-point encoding and slot packing, with no network; each failure is an AssertionError (or
the LeteoError the owner would raise) that says what broke. Use it from pytest:

    def test_my_statistic():
        check_statistic(MyStatistic(), MyRequest(features=("a", "b")), sites)

- **round trip**: the shares of several sites, packed and summed slot-wise as the homomorphic
  sum adds them, give the same figures as the pooled rows (and as `reference`, your independent
  computation on the pooled rows, if given);
- **bounds**: no row adds more to a value than its block's `row_bound`, at the bound the
  encoding is sized for (rows scaled to reach it; a statistic without `features`, reading its
  own columns, on the author's rows as they are, which must lie within that bound, 3);
- **sensitivity**: removing any one row (rows clipped as a DP round clips them, and the same
  rows pushed to the clipping norm) moves no block by more than its declared `l1` / `l2`, nor the
  encoded share by more than the adapter's integer sensitivity;
- **noise**: an owner refuses a DP spec announcing half the noise its budget needs;
- **wire**: the request and the spec survive their JSON form (what a plugin's round carries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from leteo_fed.encoding.packing import pack, slot_totals, unpack
from leteo_fed.errors import ProtocolError
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.protocols.dp_facts import encoding_facts
from leteo_fed.protocols.dp_plan import clip_for_release
from leteo_fed.protocols.dp_release import ArraySite
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.round_types import Outcome
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import Rows, SecureSumStatistic

KEY_BITS = 2048
ROW_NORM = 4.0  # the kit's DP rounds clip rows to this L2 norm
SLACK = 1e-9  # relative room for float rounding in the bound checks

Columns = Mapping[str, np.ndarray]


def check_statistic(
    statistic: SecureSumStatistic,
    request: Any,
    sites: Sequence[Columns],
    *,
    reference: Callable[[dict[str, np.ndarray]], Mapping[str, Any]] | None = None,
    rtol: float = 1e-9,
    atol: float = 1e-9,
) -> None:
    """Every check of the kit (the module's docstring), on at least two sites' columns."""
    if len(sites) < 2:
        raise ValueError("give at least 2 sites: the round trip sums several shares")
    protocol = SecureSumProtocol(statistic)
    check_wire(protocol, request)
    check_round_trip(protocol, request, sites, reference=reference, rtol=rtol, atol=atol)
    check_bounds(protocol, request, sites)
    check_sensitivity(protocol, request, sites[0])
    check_noise_is_verified(protocol, request, sites[0])


def pooled(sites: Sequence[Columns]) -> dict[str, np.ndarray]:
    return {c: np.concatenate([np.asarray(s[c]) for s in sites]) for c in sites[0]}


def secure_sum(shares: Sequence[list[int]], layout: Any) -> list[int]:
    """Slot-wise sum of the packed shares (what the CSP's homomorphic sum adds), offsets off."""
    n_values = len(shares[0])
    packed = [pack(v, layout) for v in shares]
    summed = [sum(col) for col in zip(*packed, strict=True)]
    return slot_totals(unpack(summed, n_values, layout), len(shares), layout)


def run_round(protocol: SecureSumProtocol, request: Any, sites: Sequence[Columns]) -> Any:
    """One round without a network: plan, every site's share, their packed sum, the result
    (one site: the pooled rows' share alone, planned as a round of two)."""
    quorum = max(2, len(sites))
    plan = protocol.plan(request, Common(n_invited=quorum, min_owners=quorum))
    rnd = protocol.next_round(plan, None, 1)
    enc = rnd.share_encoding
    arrays = [ArraySite(s) for s in sites]
    for site in arrays:
        protocol.check(rnd.spec, enc, rnd.dp, site)
    shares = [protocol.share_values(rnd.spec, enc, rnd.dp, s, {}) for s in arrays]
    outcome = Outcome("kit-1", rnd, [], {f"site-{i}": {} for i in range(len(sites))}, {})
    outcome.totals = secure_sum(shares, enc.layout(KEY_BITS))
    outcome.encoding = encoding_facts(enc, enc.layout(KEY_BITS), rnd.n_values, KEY_BITS)
    return plan, protocol.finish_round(plan, None, outcome).result


def _close(a: Any, b: Any, rtol: float, atol: float, what: str) -> None:
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or set(a) != set(b):
            raise AssertionError(f"{what}: {a!r} and {b!r} do not have the same keys")
        for key in a:
            _close(a[key], b[key], rtol, atol, f"{what}[{key!r}]")
        return
    try:
        np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol, atol)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None


def check_round_trip(
    protocol: SecureSumProtocol,
    request: Any,
    sites: Sequence[Columns],
    *,
    reference: Callable[[dict[str, np.ndarray]], Mapping[str, Any]] | None = None,
    rtol: float = 1e-9,
    atol: float = 1e-9,
) -> None:
    """The sites' summed shares give the pooled rows' figures (and `reference`'s fields)."""
    statistic = protocol.statistic
    plan, federated = run_round(protocol, request, sites)
    fields = federated.to_dict()
    mine = statistic.figures(plan.spec, fields)
    _, alone = run_round(protocol, request, [pooled(sites)])
    once = statistic.figures(plan.spec, alone.to_dict())
    for name, value in mine.items():
        _close(value, once[name], rtol, atol, f"figure {name!r}: sites summed vs pooled rows")
    if reference is not None:
        for name, value in reference(pooled(sites)).items():
            _close(fields[name], value, rtol, atol, f"field {name!r} vs your reference")


def _features(columns: Columns, features: Sequence[str]) -> np.ndarray:
    """The feature columns as a matrix (no columns: a statistic reading its own)."""
    if not features:
        return np.empty((len(np.asarray(next(iter(columns.values())))), 0))
    return np.column_stack([np.asarray(columns[f], dtype=np.float64) for f in features])


def _rows(columns: Columns, x: np.ndarray, bound: float) -> Rows:
    return Rows(x, ArraySite(columns).read([]), bound, dp=True)


def _block_arrays(protocol: SecureSumProtocol, spec: Any, rows: Rows) -> dict[str, np.ndarray]:
    sums = protocol.statistic.sums(spec, rows)
    return {k: np.asarray(v, dtype=np.float64).ravel() for k, v in sums.items()}


def _one_row(columns: Columns, i: int) -> dict[str, np.ndarray]:
    return {c: np.asarray(v)[i : i + 1] for c, v in columns.items()}


def check_bounds(protocol: SecureSumProtocol, request: Any, sites: Sequence[Columns]) -> None:
    """No row adds more than `row_bound` to a value, with the features scaled so that the
    largest |value| is the bound b the encoding is sized for."""
    statistic = protocol.statistic
    spec = statistic.spec(request)
    features = list(statistic.features(spec))
    columns = pooled(sites)
    x = _features(columns, features)
    b = 3.0
    if features:
        x = x / (float(np.max(np.abs(x))) or 1.0) * b
    blocks = statistic.blocks(spec, b)
    for i in range(x.shape[0]):
        one = _one_row(columns, i)
        sums = _block_arrays(protocol, spec, _rows(one, x[i : i + 1], b))
        for block in blocks:
            worst = float(np.max(np.abs(sums[block.name])))
            if worst > block.row_bound * (1 + SLACK) + SLACK:
                raise AssertionError(
                    f"block {block.name!r}: row {i} adds {worst:.6g}, more than its declared "
                    f"row_bound {block.row_bound:.6g} at b = {b}"
                )


def check_sensitivity(protocol: SecureSumProtocol, request: Any, site: Columns) -> None:
    """Removing any one row moves each block by at most its declared l1 / l2 (real units) and
    the encoded share by at most the adapter's integer sensitivity; on the rows clipped to C
    and on the same rows pushed out to norm C (where the worst case usually is)."""
    statistic = protocol.statistic
    spec = statistic.spec(request)
    features = list(statistic.features(spec))
    c = ROW_NORM
    dp = DpRequest(1.0, 1e-6, c)
    plan = protocol.plan(request, Common(n_invited=3, min_owners=3, scale_bits=8, dp=dp))
    rnd = protocol.next_round(plan, None, 1)
    enc = rnd.share_encoding
    assert rnd.dp is not None
    x = _features(site, features)
    clipped, _ = clip_for_release(x, features, rnd.dp)
    norms = np.linalg.norm(clipped, axis=1, keepdims=True)
    on_sphere = np.where(norms > 0, clipped / np.where(norms > 0, norms, 1) * c, clipped)
    spec = rnd.spec  # as the DP round's `spec_for` completes it
    blocks = protocol.layout(spec, c, True)
    integer = protocol.dp_sensitivity(rnd.spec, enc, rnd.dp)
    for rows_x in (clipped, on_sphere):
        full = _block_arrays(protocol, spec, _rows(site, rows_x, c))
        share_full = _encoded(protocol, spec, enc, full)
        for i in range(rows_x.shape[0]):
            rest = {k: np.delete(np.asarray(v), i, 0) for k, v in site.items()}
            part = _block_arrays(protocol, spec, _rows(rest, np.delete(rows_x, i, 0), c))
            for block in blocks:
                diff = full[block.name] - part[block.name]
                l1, l2 = float(np.abs(diff).sum()), float(np.linalg.norm(diff))
                if l1 > block.l1 * (1 + SLACK) + SLACK or l2 > block.l2 * (1 + SLACK) + SLACK:
                    raise AssertionError(
                        f"block {block.name!r}: removing row {i} moves it by L1 {l1:.6g}, L2 "
                        f"{l2:.6g}; declared l1 {block.l1:.6g}, l2 {block.l2:.6g} at C = {c}"
                    )
            share_diff = np.array(
                [
                    float(a - b)
                    for a, b in zip(share_full, _encoded(protocol, spec, enc, part), strict=True)
                ]
            )
            if np.abs(share_diff).sum() > integer.l1 or np.linalg.norm(share_diff) > integer.l2:
                raise AssertionError(
                    f"removing row {i} moves the encoded share beyond the integer sensitivity "
                    f"({np.abs(share_diff).sum():.6g} > {integer.l1:.6g} or "
                    f"{np.linalg.norm(share_diff):.6g} > {integer.l2:.6g})"
                )


def _encoded(
    protocol: SecureSumProtocol, spec: Any, enc: Any, sums: Mapping[str, np.ndarray]
) -> list[int]:
    from leteo_fed.protocols.secure_sum import encode_blocks

    return encode_blocks(protocol.layout(spec, enc.value_bound, True), sums, enc)


def check_noise_is_verified(protocol: SecureSumProtocol, request: Any, site: Columns) -> None:
    """An owner accepts the honest DP spec and refuses one announcing half its noise, with
    and without public bounds."""
    statistic = protocol.statistic
    spec = statistic.spec(request)
    features = list(statistic.features(spec))
    bounded = tuple(
        ColumnBounds(f, float(np.min(site[f])) - 1.0, float(np.max(site[f])) + 1.0)
        for f in features
    )
    requests = [DpRequest(1.0, 1e-6, ROW_NORM)]
    if bounded:  # a statistic without features has none to bound
        requests.append(DpRequest(1.0, 1e-6, 0.0, bounded))
    for dp in requests:
        plan = protocol.plan(request, Common(n_invited=3, min_owners=3, dp=dp))
        rnd = protocol.next_round(plan, None, 1)
        assert rnd.dp is not None
        arrays = ArraySite(site)
        protocol.check(rnd.spec, rnd.encoding, rnd.dp, arrays)
        weaker = dataclasses.replace(rnd.dp, mu=rnd.dp.mu / 2)
        try:
            protocol.check(rnd.spec, rnd.encoding, weaker, arrays)
        except ProtocolError:
            continue
        raise AssertionError("an owner accepted a DP spec announcing half the noise it needs")


def check_wire(protocol: SecureSumProtocol, request: Any) -> None:
    """The request and its spec come back equal from their canonical JSON (a plugin round's
    payload), and every column the spec reads is one the request names."""
    from leteo_fed.protocols.plugin_loader import canonical_json, from_json

    statistic = protocol.statistic
    spec = statistic.spec(request)
    for value, cls in ((request, statistic.request_type), (spec, statistic.spec_type)):
        back = from_json(cls, canonical_json(value), cls.__name__)
        if back != value:
            raise AssertionError(f"{cls.__name__} does not survive its JSON form: {back!r}")
    if not set(protocol.columns(spec)) <= set(protocol.request_columns(request)):
        raise AssertionError("the spec reads a column the request does not name")


__all__ = [
    "check_bounds",
    "check_noise_is_verified",
    "check_round_trip",
    "check_sensitivity",
    "check_statistic",
    "check_wire",
]
