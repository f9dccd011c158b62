"""Federated cross-tabulation: counts of 1 to 3 columns over a public grid, optionally DP.

Each column is categorical, over a public domain (its values, compared as the text the owner
reads: 1 and 1.0 both read '1'), or numeric, binned by public edges e_0 < ... < e_k into the
left-closed bins [e_i, e_i+1) (a value equal to the last edge is in none; edges are finite,
so the result is plain JSON). The grid is the product of the columns' categories, at most
MAX_CELLS cells.

Owner n sends one count per cell of the WHOLE grid, zeros included, in row-major order (the
last column varies fastest): its share never says which categories the site holds. A missing
or non-numeric value refuses the round (rule `values`); a value outside a domain or the edges
refuses a non-DP round (rule `classes`: every category must be declared) and is dropped in a DP
round (the row is in no cell; refusing would reveal it). The aggregator reveals the exact totals:
equal to `pandas.crosstab` on the pooled rows, reindexed to the grid.

DP rounds add distributed Skellam noise. Adding or removing one row changes one cell by one
count (`Crosstab.blocks`: L1 = L2 = one count, 2^scale_bits in the integer share; checked by
brute force in the tests); there is nothing to clip. Noisy counts are post-processed (no
privacy cost): the noisy cells y are projected in least squares onto the non-negative tables
with the noisy total T = round(sum y), then rounded to integers keeping T (largest
remainders); margins and n are sums of the released cells, so they agree with them exactly.

Every party learns: the owners nothing; the CSP masked plaintexts only; the aggregator the
pooled counts of every cell (noisy in DP rounds), never one site's. Single-round, so one DP
release costs each owner the round's (epsilon, delta) once.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed import extras
from leteo_fed.errors import ConfigError, DataError, ProtocolError
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, registry
from leteo_fed.protocols.base import SiteTable, preview_facts
from leteo_fed.protocols.results import DpFacts, Result, RoundFacts, result_type
from leteo_fed.protocols.secure_sum import SecureSumProtocol
from leteo_fed.protocols.statistic import (
    COUNT,
    Block,
    NoiseReport,
    Release,
    Rows,
    SecureSumStatistic,
    Totals,
)

METHOD = "contingency-table"
MAX_COLUMNS = 3
MAX_CELLS = 10_000  # one encrypted count per cell and owner
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
    "raise `dp_epsilon`",
    "use fewer cells (shorter domains, fewer bins, fewer columns): the margins and the row "
    "count add up the noise of every cell they sum",
    "give `rows` N if the pooled row count is larger",
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


# ------------------------------------------------------------------ the command line's grid


def column_values(text: str) -> tuple[str, list[str]]:
    """`COL=v1,v2,...` split on the FIRST '=' (a value may contain '=' or '<'; a column name
    cannot contain '='); values are comma-separated and stripped."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    values = [v.strip() for v in rest.split(",")]
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected COL=v1,v2,... got {text!r}")
    if not rest.strip() or any(not v for v in values):
        raise argparse.ArgumentTypeError(f"column '{name}': empty value in {rest!r}")
    return name, values


def columns_from_flags(
    columns: Sequence[str],
    domain: Sequence[tuple[str, list[str]]] = (),
    edges: Sequence[tuple[str, list[str]]] = (),
) -> tuple[CrosstabColumn, ...]:
    """The grid of `columns`, `domain` and `edges`: one of them per column."""
    given: dict[str, tuple[str, list[str]]] = {}
    for kind, items in (("domain", domain), ("edges", edges)):
        for name, values in items:
            if name in given:
                raise ConfigError(
                    f"column '{name}' has more than one `domain` or `edges`", field=kind
                )
            given[name] = (kind, values)
    out = []
    for name in columns:
        if "=" in name:
            raise ConfigError(f"a column name cannot contain '=': {name!r}", field="columns")
        if name not in given:
            raise ConfigError(f"column '{name}' needs a `domain` or `edges`", field="columns")
        kind, values = given.pop(name)
        if kind == "domain":
            out.append(CrosstabColumn(name, domain=tuple(values)))
            continue
        try:
            numbers = tuple(float(v) for v in values)
        except ValueError as exc:
            raise ConfigError(f"`edges` of '{name}' must be numbers: {exc}", field="edges") from exc
        out.append(CrosstabColumn(name, edges=numbers))
    if given:
        raise ConfigError(
            f"`domain`/`edges` name column(s) not in `columns`: {', '.join(sorted(given))}",
            field="columns",
        )
    return tuple(out)


GRID_FLAGS = {
    "columns": {
        "type": tuple[str, ...],
        "required": True,
        "help": "1 to 3 comma-separated columns; each needs one `domain` or `edges`",
    },
    "domain": {
        "type": column_values,
        "action": "append",
        "default": [],
        "metavar": "COL=V1,V2,...",
        "help": "a categorical column and its public values (split on the first '=': a value "
        "may contain '=' or '<'); a value outside them refuses a non-DP round and is dropped "
        "in a DP one",
    },
    "edges": {
        "type": column_values,
        "action": "append",
        "default": [],
        "metavar": "COL=E1,E2,...",
        "help": "a numeric column and its increasing bin edges: bins [E1, E2), [E2, E3), ...; "
        "a value outside [E1, Elast) refuses a non-DP round and is dropped in a DP one",
    },
}


@dataclass(frozen=True)
class CrosstabRequest:
    columns: tuple[CrosstabColumn, ...] = field(
        default=(), metadata={"flags": GRID_FLAGS, "build": columns_from_flags}
    )


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


def grid_shape(columns: Sequence[CrosstabColumn]) -> tuple[int, ...]:
    return tuple(c.size for c in columns)


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


def released_counts(totals: Sequence[int], count_scale_bits: int, noisy: bool) -> np.ndarray:
    """Cell counts from the revealed integer totals (at 2^count_scale_bits): exact (non-DP), or
    post-processed noisy counts, non-negative and summing to the noisy total (DP)."""
    s = count_scale_bits
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


def noise_preview(plan: Any, rows: int | None = None) -> dict:
    """What the noise of a DP round does to the counts, from public parameters only.

    Every cell carries Skellam noise of standard deviation sigma = sqrt(2 mu) / 2^f counts (with
    the quorum's shares); a margin of column j sums K / k_j cells (sigma sqrt(K / k_j)) and the
    row count all K cells (sigma sqrt(K)), before post-processing (which only lowers the error
    of cells near 0). Each is checked against the largest value it can take: the row count."""
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    columns = plan.spec.columns
    k = math.prod(grid_shape(columns))
    margin_std = {c.name: sigma * math.sqrt(k / c.size) for c in columns}
    doc |= {
        "cells": k,
        "noise_std_per_cell": sigma,
        "noise_std_of_margins": margin_std,
        "noise_std_of_row_count": sigma * math.sqrt(k),
        "fixes": list(FIXES),
    }
    doc["expected_error"] = {"each cell count": sigma}
    doc["expected_error"] |= {f"each count of the margin of {n}": e for n, e in margin_std.items()}
    doc["expected_error"]["row count"] = sigma * math.sqrt(k)
    if rows is None:
        return doc
    if not rows > 0:
        raise DataError("rows must be positive", field="rows")
    doc["assumed_rows"] = rows
    doc["mean_cell_count"] = rows / k
    checks = [SignalCheck("each cell count", sigma, rows)]
    if len(columns) > 1:
        checks += [
            SignalCheck(f"each count of the margin of {c.name}", margin_std[c.name], rows)
            for c in columns
        ]
    checks.append(SignalCheck("row count", sigma * math.sqrt(k), rows))
    doc["signal_checks"] = [chk.to_dict() for chk in checks]
    return doc


class Crosstab(SecureSumStatistic[CrosstabRequest, CrosstabSpec]):
    name = "crosstab"
    request_type = CrosstabRequest
    spec_type = CrosstabSpec
    result_type = CrosstabResult
    output_file = "result.json"
    plot_file = "crosstab.png"
    fixed_row_norm_bound = ROW_NORM
    takes_bounds = False
    summary = ("round_id", "owners", "columns", "n", "margins")
    help = "counts of 1 to 3 columns over public domains and bins across the owners"
    description = (
        "Start a cross-tabulation round: every owner sends the Paillier-encrypted count of its "
        "rows in every cell of the public grid (zeros included); the aggregator learns only "
        "the pooled counts (with `dp_epsilon`, noisy, non-negative and consistent with their "
        "margins). Writes OUT/result.json and the bar chart OUT/crosstab.png."
    )

    def spec(self, request: CrosstabRequest) -> CrosstabSpec:
        return CrosstabSpec(check_columns(tuple(request.columns)))

    def features(self, spec: CrosstabSpec) -> tuple[str, ...]:
        return ()  # every column is read as categories, from the table

    def other_columns(self, spec: CrosstabSpec) -> tuple[str, ...]:
        return tuple(c.name for c in spec.columns)

    def check_spec(self, spec: CrosstabSpec) -> None:
        check_columns(tuple(spec.columns))

    def blocks(self, spec: CrosstabSpec, bound: float) -> tuple[Block, ...]:
        """One count per cell of the whole grid: a row adds one to one cell (a dropped row to
        none), so L1 = L2 = 1 count."""
        cells = math.prod(grid_shape(spec.columns))
        return (Block("cells", cells, 1.0, l1=1.0, l2=1.0, kind=COUNT),)

    def sums(self, spec: CrosstabSpec, rows: Rows) -> dict[str, np.ndarray]:
        columns = tuple(spec.columns)
        cells, n_rows = cell_indices(rows.table, columns, drop_outside=rows.dp)
        rows.check_count(n_rows)
        return {"cells": local_counts(cells, math.prod(grid_shape(columns)))}

    def result(self, spec: CrosstabSpec, totals: Totals, release: Release) -> dict[str, Any]:
        shape = grid_shape(spec.columns)
        flat = released_counts(*totals.encoded("cells"), release.noisy)
        table = flat.reshape(shape)
        names = [c.name for c in spec.columns]
        return {
            "method": METHOD,
            "columns": names,
            "categories": {c.name: c.labels() for c in spec.columns},
            "edges": {c.name: list(c.edges) for c in spec.columns if c.is_numeric},
            "counts": [[int(v) for v in row] for row in table.reshape(shape[0], -1)],
            "margins": margins(table, names),
            "n": int(flat.sum()),
            "cells": math.prod(shape),
            "bins": BINS,
            "outside": OUTSIDE_DROPPED if release.noisy else OUTSIDE_REFUSED,
        }

    def figures(self, spec: CrosstabSpec, result: Mapping[str, Any]) -> dict[str, float]:
        """The row count and every count of every margin."""
        figures = {"rows": float(result["n"])}
        for c in spec.columns:
            for label, count in zip(c.labels(), result["margins"][c.name], strict=True):
                figures[f"rows with {c.name} = {label}"] = float(count)
        return figures

    def noise_report(
        self, spec: CrosstabSpec, result: Mapping[str, Any], totals: Totals, release: Release
    ) -> NoiseReport:
        """Each figure's noise in closed form (a margin of column j sums K / k_j cells: sigma
        sqrt(K / k_j), before the post-processing, which only lowers it), and how many cells
        are within two noise std of 0."""
        sigma, cells = release.noise_std, int(result["cells"])
        noise = {"rows": sigma * math.sqrt(cells)}
        for c in spec.columns:
            for label in c.labels():
                noise[f"rows with {c.name} = {label}"] = sigma * math.sqrt(cells / c.size)
        small = int(np.sum(np.array(result["counts"]) <= dp_release.NOISE_MULTIPLE * sigma))
        warnings = []
        if small:
            warnings.append(
                ReleaseWarning(
                    "cells",
                    f"{small} of {cells} cells are within two noise std of 0 (+/- {sigma:.2g} "
                    "rows each): their counts are mostly noise (fewer columns or bins, raise "
                    "epsilon, or pool more rows)",
                )
            )
        return NoiseReport(
            noise,
            warnings,
            mechanism="distributed Skellam noise on every cell count",
            post_processing="least-squares projection of the noisy cells onto the "
            "non-negative tables with the noisy total, then integers keeping that total "
            "(largest remainders); margins and n are sums of the released cells",
            note="noise_std_per_value is per cell, in counts; row_norm_bound is 1: a row "
            "is one count in one cell",
        )

    def preview(self, plan: Any, rows: int | None) -> dict[str, Any]:
        return noise_preview(plan, rows)

    def preview_lines(self, doc: Mapping[str, Any], rows: int | None) -> list[str]:
        lines = [
            f"each of the {doc['cells']} cell counts carries noise of std "
            f"{doc['noise_std_per_cell']:.4g} (epsilon {doc['epsilon']:g}, delta "
            f"{doc['delta']:g}); the row count {doc['noise_std_of_row_count']:.4g}"
        ]
        for name, std in doc["noise_std_of_margins"].items():
            lines.append(f"  each count of the margin of {name}: +/- {std:.4g} (1 std)")
        if rows is None:
            lines.append("give `rows` N to check the noise against your row count")
        return lines

    def describe(self, spec: CrosstabSpec) -> str:
        cells = math.prod(grid_shape(spec.columns))
        names = ", ".join(c.name for c in spec.columns)
        return f"cross-tabulation of {names} ({cells} cells)"


PROTOCOL = registry.register(SecureSumProtocol(Crosstab()))
