"""The public grid of a cross-tabulation: its columns (a categorical domain or numeric bin
edges), their checks, the command line's form of them, and an owner's cell index per row.

A value is in a cell as the text the owner reads (categorical) or by left-closed bins
[e_i, e_i+1) (numeric). Outside the grid, a non-DP round is refused (rule `classes`: every
category must be declared) and a DP round drops the row (refusing would reveal it); a missing
value refuses either (rule `values`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from leteo_fed.errors import ConfigError, DataError
from leteo_fed.protocols.round_types import SiteTable

MAX_COLUMNS = 3
MAX_CELLS = 10_000  # one encrypted count per cell and owner


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


def edge_text(value: float) -> str:
    """An edge as labels write it: 18, 0.5, 1e+20 (the shortest text that reads back)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


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


def margins(table: np.ndarray, names: list[str]) -> dict[str, list[int]]:
    """Per column, the count of each of its categories: the table summed over the others."""
    out = {}
    for j, name in enumerate(names):
        others = tuple(a for a in range(table.ndim) if a != j)
        out[name] = [int(v) for v in table.sum(axis=others)]
    return out
