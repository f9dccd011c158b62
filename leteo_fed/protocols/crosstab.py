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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from leteo_fed import extras
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols import dp_release, registry
from leteo_fed.protocols.crosstab_grid import (
    GRID_FLAGS,
    CrosstabColumn,
    cell_indices,
    check_columns,
    columns_from_flags,
    grid_shape,
    local_counts,
    margins,
)
from leteo_fed.protocols.dp_facts import preview_facts
from leteo_fed.protocols.noisy_counts import released_counts
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
        return lines

    def describe(self, spec: CrosstabSpec) -> str:
        cells = math.prod(grid_shape(spec.columns))
        names = ", ".join(c.name for c in spec.columns)
        return f"cross-tabulation of {names} ({cells} cells)"


PROTOCOL = registry.register(SecureSumProtocol(Crosstab()))
