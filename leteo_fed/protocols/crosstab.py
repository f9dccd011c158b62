"""Federated cross-tabulation: counts of 1 to 3 columns over a public grid, optionally DP.

Each column is categorical, over a public domain (its values, compared as the text the owner
reads: 1 and 1.0 both read '1'), or numeric, binned by public edges e_0 < ... < e_k into the
left-closed bins [e_i, e_i+1) (a value equal to the last edge is in none; edges are finite,
so the result is plain JSON). The grid is the product of the columns' categories, at most MAX_CELLS cells.

Owner n sends one count per cell of the WHOLE grid, zeros included, in row-major order (the
last column varies fastest): its share never says which categories the site holds. A missing
or non-numeric value refuses the round (rule `values`); a value outside a domain or the edges
refuses a non-DP round (rule `classes`: every category must be declared) and is dropped in a DP
round (the row is in no cell; refusing would reveal it). The aggregator reveals the exact totals:
equal to `pandas.crosstab` on the pooled rows, reindexed to the grid.

DP rounds add distributed Skellam noise. Adding or removing one row changes one cell by one
count, i.e. the integer share by exactly F = 2^scale_bits in one coordinate: L1 = L2 = F
(`sensitivity`, checked by brute force in the tests). Noisy counts are post-processed (no
privacy cost): the noisy cells y are projected in least squares onto the non-negative tables
with the noisy total T = round(sum y), then rounded to integers keeping T (largest
remainders); margins and n are sums of the released cells, so they agree with them exactly.

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled counts of every cell (noisy in DP rounds), never one site's. Single-round, so one DP
release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from leteo_fed import defaults, extras
from leteo_fed.encoding.share import (
    DEFAULT_MAX_OWNERS,
    DEFAULT_MAX_ROWS_PER_OWNER,
    ShareEncoding,
    check_parameters,
    require_bound,
)
from leteo_fed.errors import DataError, EncodingError, ProtocolError
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, registry
from leteo_fed.protocols.base import (
    Common,
    DpRequest,
    DpSpec,
    FederatedProtocol,
    Outcome,
    RoundPlan,
    SiteData,
    SiteTable,
    Step,
    dp_facts,
    preview_facts,
    require_same_count_scale,
    skellam_plan,
    verify_dp,
)
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type

METHOD = "contingency-table"
MAX_COLUMNS = 3
MAX_CELLS = 10_000  # one encrypted count per cell and owner
DP_DEFAULT_SCALE_BITS = defaults.DP_DEFAULT_SCALE_BITS  # noise resolution 2^-16 of a count
ROW_NORM = 1.0  # a row is a one-hot vector over the cells: its L2 norm is 1, nothing to clip
BINS = (
    "numeric values fall into left-closed bins [e_i, e_i+1); a value below the first edge, at "
    "the last edge or above it is in none"
)
OUTSIDE_REFUSED = (
    "refused: a site with a value outside a domain or the edges declines the round (rule "
    "classes); a missing value declines it too (rule values)"
)
OUTSIDE_DROPPED = (
    "dropped: in a DP round each site counts only its rows inside the grid (n counts those); "
    "a missing value declines the round (rule values)"
)
FIXES = (
    "raise --dp-epsilon",
    "use fewer cells (shorter domains, fewer bins, fewer columns): the margins and the row "
    "count add up the noise of every cell they sum",
    "give --rows N if the pooled row count is larger",
)


@dataclass(frozen=True)
class CrosstabColumn:
    """One column of the grid: a categorical `domain`, or numeric bin `edges` (not both)."""

    name: str
    domain: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()

    @property
    def is_numeric(self) -> bool:
        return bool(self.edges)

    @property
    def size(self) -> int:
        """Categories of the column: its values, or its bins."""
        return len(self.edges) - 1 if self.edges else len(self.domain)

    def labels(self) -> list[str]:
        """Its categories as the result names them: the domain, or '[a, b)' per bin."""
        if not self.edges:
            return list(self.domain)
        e = [edge_text(v) for v in self.edges]
        return [f"[{a}, {b})" for a, b in zip(e[:-1], e[1:], strict=True)]


@dataclass(frozen=True)
class CrosstabRequest:
    columns: tuple[CrosstabColumn, ...] = ()


@dataclass(frozen=True)
class CrosstabSpec:
    columns: tuple[CrosstabColumn, ...]


@result_type
@dataclass(frozen=True, kw_only=True)
class CrosstabResult(RoundFacts, Result):
    wire: ClassVar[str] = "crosstab"
    protocol: str
    method: str
    columns: list[str]
    categories: dict[str, list[str]]
    edges: dict[str, list[float]]
    counts: list[list[int]]  # a row per category of columns[0]; the others' product across
    margins: dict[str, list[int]]
    n: int
    cells: int
    bins: str
    outside: str
    dp: DpFacts | None = None

    def to_pandas(self) -> Any:
        """The counts as a pandas DataFrame laid out like `pandas.crosstab`: rows are the
        first column's categories, columns the product of the others' (a MultiIndex for
        two), or one column `count` for a single column. Needs pandas."""
        pd = extras.pandas()
        names, cats = self.columns, self.categories
        index = pd.Index(cats[names[0]], name=names[0])
        if len(names) == 1:
            return pd.DataFrame(self.counts, index=index, columns=pd.Index(["count"]))
        if len(names) == 2:
            columns = pd.Index(cats[names[1]], name=names[1])
        else:
            columns = pd.MultiIndex.from_product([cats[n] for n in names[1:]], names=names[1:])
        return pd.DataFrame(self.counts, index=index, columns=columns)


@dataclass(frozen=True)
class CrosstabPlan:
    columns: tuple[CrosstabColumn, ...]
    min_owners: int
    deadline_seconds: float
    encoding: ShareEncoding
    dp: DpSpec | None = None
    sensitivity: noise.Sensitivity | None = None
    label: str = "crosstab"

    @property
    def shape(self) -> tuple[int, ...]:
        return grid_shape(self.columns)

    @property
    def cells(self) -> int:
        return math.prod(self.shape)


def edge_text(value: float) -> str:
    """An edge as labels write it: 18, 0.5, 1e+20 (the shortest text that reads back)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


# ------------------------------------------------------------------ the grid


def check_columns(columns: tuple[CrosstabColumn, ...]) -> tuple[CrosstabColumn, ...]:
    """1 to 3 distinct named columns, each a non-empty domain of distinct non-empty values or
    at least 2 strictly increasing finite edges, and at most MAX_CELLS cells."""
    if not columns or len(columns) > MAX_COLUMNS:
        raise DataError(
            f"a cross-tabulation counts 1 to {MAX_COLUMNS} columns, got {len(columns)}",
            field="columns",
        )
    names = [c.name for c in columns]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise DataError("columns must be named, each once", field="columns")
    out = []
    for c in columns:
        if bool(c.domain) == bool(c.edges):
            raise DataError(
                f"column '{c.name}' needs either a domain (categorical) or edges (numeric)",
                field="columns",
            )
        if c.domain and (any(not v for v in c.domain) or len(set(c.domain)) != len(c.domain)):
            raise DataError(
                f"the domain of column '{c.name}' must list distinct, non-empty values",
                field="columns",
            )
        edges = tuple(float(v) for v in c.edges)
        if edges and (
            len(edges) < 2
            or not all(math.isfinite(v) for v in edges)
            or any(b <= a for a, b in zip(edges, edges[1:], strict=False))
        ):
            raise DataError(
                f"the edges of column '{c.name}' must be at least 2 strictly increasing "
                "finite numbers",
                field="columns",
            )
        out.append(CrosstabColumn(c.name, tuple(c.domain), edges))
    shape = grid_shape(out)
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise DataError(
            f"the grid has {cells} cells ({' x '.join(map(str, shape))}); at most {MAX_CELLS}: "
            "shorten a domain, use fewer bins or fewer columns",
            field="columns",
        )
    return tuple(out)


def grid_shape(columns) -> tuple[int, ...]:
    return tuple(c.size for c in columns)


def encoding(
    scale_bits: int = 0,
    max_rows_per_owner: int = DEFAULT_MAX_ROWS_PER_OWNER,
    max_owners: int = DEFAULT_MAX_OWNERS,
    noise_bound: int = 0,
) -> ShareEncoding:
    """Counts at 2^scale_bits (0: plain integers; DP rounds: finer noise); a cell of one owner
    holds at most its row count."""
    check_parameters(scale_bits, ROW_NORM, max_rows_per_owner, max_owners, scale_bits)
    return ShareEncoding(
        scale_bits=scale_bits,
        value_bound=ROW_NORM,
        data_bound=data_bound(max_rows_per_owner, scale_bits),
        max_rows_per_owner=max_rows_per_owner,
        max_owners=max_owners,
        count_scale_bits=scale_bits,
        noise_bound=noise_bound,
    )


def data_bound(max_rows: int, scale_bits: int) -> int:
    return max(max_rows, 1) << scale_bits


def sensitivity(scale_bits: int) -> noise.Sensitivity:
    """One row added or removed changes exactly one cell by one count: F = 2^scale_bits in one
    coordinate of the integer share, so L1 = L2 = F (a dropped row changes nothing)."""
    f = float(2**scale_bits)
    return noise.Sensitivity(l1=f, l2=f)


# ------------------------------------------------------------------ owner side


def cell_indices(
    table: SiteTable, columns: tuple[CrosstabColumn, ...], drop_outside: bool
) -> tuple[np.ndarray, int]:
    """The flat cell index of every row inside the grid (row-major) and the rows read. A missing
    value refuses the round (rule values, checked in every column first); rows outside the grid
    are refused (rule classes) or, with `drop_outside` (DP), left out."""
    read = [_read_column(table, c) for c in columns]
    per_column = [_category_index(values, c) for values, c in zip(read, columns, strict=True)]
    if not drop_outside:
        for (_, ok), values, c in zip(per_column, read, columns, strict=True):
            if not ok.all():
                _refuse_outside(values, ok, c)
    inside = np.logical_and.reduce([ok for _, ok in per_column])
    kept = [idx[inside] for idx, _ in per_column]
    flat = np.ravel_multi_index(kept, grid_shape(columns)).astype(np.int64)
    return flat, len(inside)


def _read_column(table: SiteTable, c: CrosstabColumn) -> Any:
    """A numeric column's finite values, or a categorical column's labels (the text the owner
    reads); DataError (rule values) for a missing, NaN, infinite or non-numeric value."""
    if c.is_numeric:
        x = table.matrix([c.name])[:, 0]
        bad = int((~np.isfinite(x)).sum())
        if bad:
            raise DataError(
                f"column '{c.name}' has {bad} missing, NaN or infinite value(s)",
                field=c.name,
                rule="values",
            )
        return x
    try:
        return table.labels(c.name)
    except DataError as exc:  # a missing value
        raise DataError(str(exc), field=c.name, rule="values") from exc


def _category_index(values: Any, c: CrosstabColumn) -> tuple[np.ndarray, np.ndarray]:
    """(category index per row, 0 outside; whether the row is inside the column's categories).
    Bins are left-closed: e_i <= x < e_i+1."""
    if c.is_numeric:
        idx = np.searchsorted(np.asarray(c.edges, dtype=np.float64), values, side="right") - 1
    else:
        index = {v: i for i, v in enumerate(c.domain)}
        idx = np.fromiter((index.get(v, -1) for v in values), dtype=np.int64, count=len(values))
    ok = (idx >= 0) & (idx < c.size)
    return np.where(ok, idx, 0), ok


def _refuse_outside(values: Any, ok: np.ndarray, c: CrosstabColumn) -> None:
    """A non-DP round: every value must be in a declared category (the detail stays at the
    site; the aggregator reads the rule only)."""
    if c.is_numeric:
        x = np.asarray(values)
        raise DataError(
            f"column '{c.name}' has {int((~ok).sum())} value(s) outside the round's edges "
            f"[{edge_text(c.edges[0])}, {edge_text(c.edges[-1])}) (values from "
            f"{float(x.min()):.6g} to {float(x.max()):.6g})",
            field=c.name,
            rule="classes",
        )
    unknown = sorted({str(v) for v, inside in zip(values, ok, strict=True) if not inside})
    shown = ", ".join(repr(u) for u in unknown[:5])
    raise DataError(
        f"column '{c.name}' has value(s) {shown} outside the round's domain {list(c.domain)[:20]}",
        field=c.name,
        rule="classes",
    )


def local_counts(cells: np.ndarray, n_cells: int) -> np.ndarray:
    """One count per cell of the whole grid, zeros included."""
    return np.bincount(cells, minlength=n_cells).astype(np.int64)


def encode_counts(counts: np.ndarray, enc: ShareEncoding) -> list[int]:
    values = [int(v) << enc.count_scale_bits for v in counts]
    if any(v < 0 or v > enc.data_bound for v in values):
        raise EncodingError("a cell count exceeds the declared bound", rule="rows")
    return values


# ------------------------------------------------------------------ aggregator side


def nonnegative_projection(y: np.ndarray, total: float) -> np.ndarray:
    """argmin ||x - y||_2 over x >= 0 with sum x = total (Euclidean projection onto the scaled
    simplex, sort-based): x = max(y - theta, 0) for the one theta that gives the total."""
    y = np.asarray(y, dtype=np.float64)
    if total <= 0 or y.size == 0:
        return np.zeros_like(y)
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - total
    k = np.arange(1, y.size + 1)
    rho = int(np.nonzero(u - css / k > 0)[0][-1])
    theta = css[rho] / (rho + 1)
    return np.maximum(y - theta, 0.0)


def round_keeping_total(x: np.ndarray, total: int) -> np.ndarray:
    """Non-negative integers summing to `total`: floors, then one more to the largest
    remainders (the first cell first among equal remainders)."""
    low = np.floor(np.maximum(x, 0.0)).astype(np.int64)
    missing = total - int(low.sum())
    if missing > 0:
        order = np.argsort(-(x - low), kind="stable")
        low[order[: min(missing, low.size)]] += 1
    elif missing < 0:  # float slack only: take from the largest cells
        for i in np.argsort(-low, kind="stable")[:-missing]:
            low[i] -= 1 if low[i] > 0 else 0
    return low


def released_counts(totals: list[int], enc: ShareEncoding, noisy: bool) -> np.ndarray:
    """Cell counts from the revealed integer totals: exact (non-DP), or post-processed noisy
    counts, non-negative and summing to the noisy total (DP)."""
    s = enc.count_scale_bits
    if not noisy:
        if any(t < 0 or t % (1 << s) for t in totals):
            raise ProtocolError(
                "a cell total is negative or not a whole count: corrupted aggregate"
            )
        return np.array([t >> s for t in totals], dtype=np.int64)
    y = np.array([t / (1 << s) for t in totals], dtype=np.float64)
    total = max(int(round(float(y.sum()))), 0)
    return round_keeping_total(nonnegative_projection(y, total), total)


def margins(table: np.ndarray, names: list[str]) -> dict[str, list[int]]:
    """Per column, the count of each of its categories: the table summed over the others."""
    out = {}
    for j, name in enumerate(names):
        others = tuple(a for a in range(table.ndim) if a != j)
        out[name] = [int(v) for v in table.sum(axis=others)]
    return out


def crosstab_truth(
    plan: CrosstabPlan, table: np.ndarray, names: list[str], sigma: float
) -> dp_release.Truth:
    """What a released table says of its noise: every margin entry and the row count with the
    std of its noise (a margin of column j sums K / k_j cells: sigma sqrt(K / k_j), before the
    post-processing, which only lowers it), the margins the noise buries, and how many cells
    are within two noise std of 0."""
    figures: dict[str, float] = {"rows": float(table.sum())}
    noise: dict[str, float] = {"rows": sigma * math.sqrt(plan.cells)}
    for c, name in zip(plan.columns, names, strict=True):
        for label, count in zip(c.labels(), margins(table, names)[name], strict=True):
            key = f"rows with {name} = {label}"
            figures[key], noise[key] = float(count), sigma * math.sqrt(plan.cells / c.size)
    warnings = dp_release.buried(figures, noise)
    small = int(np.sum(table <= dp_release.NOISE_MULTIPLE * sigma))
    if small:
        warnings.append(
            ReleaseWarning(
                "cells",
                f"{small} of {plan.cells} cells are within two noise std of 0 (+/- {sigma:.2g} "
                "rows each): their counts are mostly noise (fewer columns or bins, raise epsilon, "
                "or pool more rows)",
            )
        )
    return dp_release.Truth(noise, warnings, None, figures)


def noise_preview(plan: CrosstabPlan, rows: int | None = None) -> dict:
    """What the noise of a DP round does to the counts, from public parameters only.

    Every cell carries Skellam noise of standard deviation sigma = sqrt(2 mu) / 2^f counts (with
    the quorum's shares); a margin of column j sums K / k_j cells (sigma sqrt(K / k_j)) and the
    row count all K cells (sigma sqrt(K)), before post-processing (which only lowers the error
    of cells near 0). Each is checked against the largest value it can take: the row count."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    k = plan.cells
    names = [c.name for c in plan.columns]
    margin_std = {c.name: sigma * math.sqrt(k / c.size) for c in plan.columns}
    doc |= {
        "cells": k,
        "noise_std_per_cell": sigma,
        "noise_std_of_margins": margin_std,
        "noise_std_of_row_count": sigma * math.sqrt(k),
        "fixes": list(FIXES),
    }
    if rows is None:
        return doc
    if not rows > 0:
        raise DataError("rows must be positive", field="rows")
    doc["assumed_rows"] = rows
    doc["mean_cell_count"] = rows / k
    checks = [SignalCheck("each cell count", sigma, rows)]
    if len(names) > 1:
        checks += [
            SignalCheck(f"each count of the margin of {n}", margin_std[n], rows) for n in names
        ]
    checks.append(SignalCheck("row count", sigma * math.sqrt(k), rows))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


class CrosstabProtocol(FederatedProtocol):
    name = "crosstab"
    request_type = CrosstabRequest
    spec_type = CrosstabSpec

    plot_file = "crosstab.png"
    fixed_row_norm_bound = 1.0  # nothing to clip: a row adds counts, the DP request needs no bound

    def result_file(self, label: str) -> str | None:
        return "result.json" if label == self.name else None

    # ---------------------------------------------------------------- aggregator side

    def plan(self, request: CrosstabRequest, common: Common) -> CrosstabPlan:
        columns = check_columns(tuple(request.columns))
        if common.value_bound:
            raise DataError(
                "a cross-tabulation takes no value_bound: numeric columns are binned by edges",
                field="value_bound",
            )
        min_owners, deadline = common.quorum(), common.deadline()
        cells = math.prod(grid_shape(columns))
        max_owners = common.n_invited  # the CSP sums at most one share of each invited owner
        dp, sens = None, None
        if common.dp is None:
            enc = encoding(common.scale_bits, max_owners=max_owners)
        else:
            f = common.scale_bits or DP_DEFAULT_SCALE_BITS
            sens = sensitivity(f)
            # a row is one count in one cell: row_norm_bound has nothing to clip, the spec says 1
            one_hot = DpRequest(common.dp.epsilon, common.dp.delta, ROW_NORM)
            dp, noise_bound = skellam_plan(one_hot, sens, min_owners, cells)
            enc = encoding(f, max_owners=max_owners, noise_bound=noise_bound)
        return CrosstabPlan(columns, min_owners, deadline, enc, dp, sens)

    def next_round(self, plan: CrosstabPlan, state: None, index: int) -> RoundPlan:
        spec = CrosstabSpec(plan.columns)
        return RoundPlan(
            spec, plan.label, plan.encoding, plan.cells, plan.dp, dimension=len(plan.columns)
        )

    def finish_round(self, plan: CrosstabPlan, state: None, outcome: Outcome) -> Step:
        start = time.perf_counter()
        totals = outcome.require_totals()
        if len(totals) != plan.cells:
            raise ProtocolError(f"expected {plan.cells} cell totals, got {len(totals)}")
        flat = released_counts(totals, plan.encoding, plan.dp is not None)
        table = flat.reshape(plan.shape)
        names = [c.name for c in plan.columns]
        outcome.timings["statistics_seconds"] = time.perf_counter() - start
        dp = None
        if plan.dp is not None and plan.sensitivity is not None:
            sigma = plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits)
            dp = dp_facts(
                "distributed Skellam noise on every cell count",
                plan.dp,
                plan.sensitivity,
                crosstab_truth(plan, table, names, sigma),
                noise_std_per_value=plan.dp.noise_std(outcome.n_owners, plan.encoding.scale_bits),
                post_processing="least-squares projection of the noisy cells onto the "
                "non-negative tables with the noisy total, then integers keeping that total "
                "(largest remainders); margins and n are sums of the released cells",
                note="noise_std_per_value is per cell, in counts; row_norm_bound is 1: a row "
                "is one count in one cell",
            )
        return Step(
            CrosstabResult(
                protocol=self.name,
                method=METHOD,
                columns=names,
                categories={c.name: c.labels() for c in plan.columns},
                edges={c.name: list(c.edges) for c in plan.columns if c.is_numeric},
                counts=[[int(v) for v in row] for row in table.reshape(plan.shape[0], -1)],
                margins=margins(table, names),
                n=int(flat.sum()),
                cells=plan.cells,
                bins=BINS,
                outside=OUTSIDE_DROPPED if plan.dp is not None else OUTSIDE_REFUSED,
                **outcome.facts(),
                dp=dp,
            )
        )

    # ---------------------------------------------------------------- owner side

    def columns(self, spec: CrosstabSpec) -> list[str]:
        return [c.name for c in spec.columns]

    def request_columns(self, request: CrosstabRequest) -> list[str]:
        return [c.name for c in request.columns]

    def dimension(self, spec: CrosstabSpec) -> int:
        return len(spec.columns)

    def check(
        self, spec: CrosstabSpec, enc: ShareEncoding | None, dp: DpSpec | None, site: SiteData
    ) -> None:
        if enc is None or enc.rotation_dimension:
            raise ProtocolError("a cross-tabulation round needs a plain encoding")
        columns = check_columns(tuple(spec.columns))
        require_same_count_scale(enc)
        require_bound(enc, data_bound(enc.max_rows_per_owner, enc.count_scale_bits))
        if dp is not None:
            cells = math.prod(grid_shape(columns))
            verify_dp(dp, (), self.dp_sensitivity(spec, enc, dp), cells, enc)

    def dp_sensitivity(
        self, spec: CrosstabSpec, enc: ShareEncoding | None, dp: DpSpec
    ) -> noise.Sensitivity:
        if enc is None:
            raise ProtocolError("a cross-tabulation round needs a plain encoding")
        return sensitivity(enc.count_scale_bits)

    def describe(self, spec: CrosstabSpec, dp: DpSpec | None) -> str:
        cells = math.prod(grid_shape(spec.columns))
        return f"cross-tabulation of {', '.join(self.columns(spec))} ({cells} cells)"

    def share_values(
        self,
        spec: CrosstabSpec,
        enc: ShareEncoding,
        dp: DpSpec | None,
        site: SiteData,
        timings: dict[str, float],
    ) -> list[int]:
        start = time.perf_counter()
        columns = tuple(spec.columns)
        table = site.read(self.columns(spec))
        cells, n_rows = cell_indices(table, columns, drop_outside=dp is not None)
        if n_rows > enc.max_rows_per_owner:
            raise DataError(
                f"{n_rows} rows exceed the round's max_rows_per_owner {enc.max_rows_per_owner}",
                rule="rows",
            )
        counts = local_counts(cells, math.prod(grid_shape(columns)))
        timings["statistics_seconds"] = time.perf_counter() - start
        return encode_counts(counts, enc)


PROTOCOL = registry.register(CrosstabProtocol())
