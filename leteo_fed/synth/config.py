"""synth.toml: the public description of every released column, the groups and the budget split.

Everything here is public by assumption (the bounds, the domains, the grid, k, the shares): the
release reveals it. Nothing in it may be derived from the data being synthesized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from leteo_fed.errors import ConfigError
from leteo_fed.privacy.budget import check_delta, check_epsilon

ENGINES = ("auto", "local", "spark")
# micro-aggregation: per feature group, DP clusters of the grid with Gaussian models (`model`);
# marginals: a DP tree of 2-way marginals fitted by Private-PGM (`marginals`)
METHODS = ("microaggregation", "marginals")
DEFAULT_MARGINAL_SHARES = {"one_way": 1 / 3, "select": 1 / 3, "two_way": 1 / 3}
DEFAULT_BINS = 4
DEFAULT_K = 50
# A DP histogram over more cells than this mostly counts noise: every empty cell adds
# E[max(0, Lap(b))] = b/2 to the clipped counts (docs/synthetic-data.md, "Limits").
DEFAULT_MAX_CELLS = 4096
DEFAULT_SHARES = {"histogram": 0.4, "sums": 0.3, "covariance": 0.3}
DEFAULT_GROUPING_SHARE = 0.1
DEFAULT_GROUPING_CUT = 0.9  # groups = "dp": a pair joins only 1 - cut (in TVD) from independence


@dataclass(frozen=True)
class Column:
    """One released column: numeric with public bounds, or categorical with its public domain."""

    name: str
    kind: str  # "numeric" or "categorical"
    lo: float = 0.0
    hi: float = 1.0
    integer: bool = False
    bins: int = DEFAULT_BINS
    categories: tuple[str, ...] = ()
    edges: tuple[float, ...] = ()  # public bin edges lo < ... < hi; empty: `bins` equal bins

    def bin_edges(self) -> tuple[float, ...]:
        """The numeric bins' edges in the column's units, lo first and hi last."""
        if self.edges:
            return self.edges
        step = (self.hi - self.lo) / self.bins
        return tuple(self.lo + i * step for i in range(self.bins)) + (self.hi,)

    @property
    def width(self) -> int:
        """Encoded dimensions: 1 for a numeric column, one per category for a categorical one."""
        return 1 if self.kind == "numeric" else len(self.categories)

    @property
    def levels(self) -> int:
        """Grid cells along this column: its bins, or its categories."""
        return self.bins if self.kind == "numeric" else len(self.categories)


@dataclass(frozen=True)
class SynthConfig:
    """The parsed synth.toml (see docs/synthetic-data.md for every key)."""

    columns: tuple[Column, ...]
    epsilon: float
    k: int = DEFAULT_K
    groups: tuple[tuple[str, ...], ...] | None = None  # None: computed under DP
    group_split: str = "dimension"
    shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    grouping_share: float = DEFAULT_GROUPING_SHARE
    grouping_cut: float = DEFAULT_GROUPING_CUT
    max_cells: int = DEFAULT_MAX_CELLS
    label: str | None = None
    classes: tuple[str, ...] = ()
    engine: str = "auto"
    method: str = "microaggregation"
    delta: float = 0.0  # > 0: (epsilon, delta)-DP through zCDP (method = "marginals" only)
    marginal_shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_MARGINAL_SHARES))

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def with_epsilon(self, epsilon: float) -> SynthConfig:
        from dataclasses import replace

        return replace(self, epsilon=check_epsilon(epsilon, "epsilon"))


def _num(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}", field=where)
    return float(value)


def _int(value: Any, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where} must be an integer >= {low}, got {value!r}", field=where)
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where} must be a non-empty list of strings", field=where)
    if len(set(value)) != len(value):
        raise ConfigError(f"{where} lists a value twice", field=where)
    return tuple(value)


def _edges(raw: Any, name: str, lo: float, hi: float) -> tuple[float, ...]:
    """Public bin edges: numbers from lo to hi, strictly increasing (e.g. [0, 0.5, 5000, hi]
    gives an integer column's zeros a bin of their own)."""
    where = f"{name}.edges"
    if not isinstance(raw, list) or len(raw) < 2:
        raise ConfigError(f"'{where}' must be a list of at least 2 numbers", field=where)
    edges = tuple(_num(v, where) for v in raw)
    if edges[0] != lo or edges[-1] != hi:
        raise ConfigError(
            f"'{where}' must start at lo ({lo:g}) and end at hi ({hi:g}), got "
            f"{edges[0]:g} .. {edges[-1]:g}",
            field=where,
        )
    if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ConfigError(f"'{where}' must increase strictly", field=where)
    # values are binned on their 16-bit codes: inner edges must fall on distinct inner codes
    scale = 1 << 16
    codes = [int((e - lo) / (hi - lo) * scale + 0.5) for e in edges[1:-1]]
    if any(c <= 0 or c >= scale for c in codes) or len(set(codes)) != len(codes):
        raise ConfigError(
            f"'{where}': inner edges closer to each other or to lo/hi than the encoding's "
            f"resolution ({(hi - lo) / scale:.4g} units) cannot be told apart",
            field=where,
        )
    return edges


def _column(raw: Any, i: int, default_bins: int) -> Column:
    where = f"column[{i}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ConfigError(f"{where} needs a name", field=where)
    name = raw["name"]
    kind = raw.get("type")
    known = {"name", "type", "lo", "hi", "integer", "bins", "edges", "categories"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"column {name!r}: unknown keys {unknown}", field=name)
    if kind == "numeric":
        if "lo" not in raw or "hi" not in raw:
            raise ConfigError(
                f"column {name!r}: a numeric column needs its public bounds lo and hi", field=name
            )
        lo, hi = _num(raw["lo"], f"{name}.lo"), _num(raw["hi"], f"{name}.hi")
        if not lo < hi:
            raise ConfigError(f"column {name!r}: lo must be < hi, got [{lo}, {hi}]", field=name)
        integer = raw.get("integer", False)
        if not isinstance(integer, bool):
            raise ConfigError(f"column {name!r}: integer must be true or false", field=name)
        if "edges" in raw:
            if "bins" in raw:
                raise ConfigError(f"column {name!r}: give bins or edges, not both", field=name)
            edges = _edges(raw["edges"], name, lo, hi)
            return Column(name, "numeric", lo, hi, integer, len(edges) - 1, edges=edges)
        bins = _int(raw.get("bins", default_bins), f"{name}.bins", 1)
        return Column(name, "numeric", lo, hi, integer, bins)
    if kind == "categorical":
        cats = _strings(raw.get("categories"), f"{name}.categories")
        return Column(name, "categorical", categories=cats)
    raise ConfigError(
        f"column {name!r}: type must be 'numeric' or 'categorical', got {kind!r}", field=name
    )


def _shares(
    raw: Any, defaults: dict[str, float] = DEFAULT_SHARES, key: str = "shares"
) -> dict[str, float]:
    if raw is None:
        return dict(defaults)
    if not isinstance(raw, dict) or set(raw) != set(defaults):
        raise ConfigError(f"synthesize.{key} must set exactly {sorted(defaults)}", field=key)
    out = {k: _num(v, f"{key}.{k}") for k, v in raw.items()}
    if any(v <= 0 for v in out.values()):
        raise ConfigError(f"every synthesize.{key} value must be > 0", field=key)
    total = sum(out.values())
    return {k: v / total for k, v in out.items()}  # normalized: only the proportions matter


def parse(doc: dict[str, Any]) -> SynthConfig:
    """A SynthConfig from the TOML document; ConfigError naming the key otherwise."""
    top = doc.get("synthesize", {})
    if not isinstance(top, dict):
        raise ConfigError("[synthesize] must be a table", field="synthesize")
    default_bins = _int(top.get("bins", DEFAULT_BINS), "synthesize.bins", 1)
    raw_cols = doc.get("column")
    if not isinstance(raw_cols, list) or not raw_cols:
        raise ConfigError("synth.toml declares no [[column]]", field="column")
    columns = tuple(_column(c, i, default_bins) for i, c in enumerate(raw_cols))
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise ConfigError("a column is declared twice", field="column")
    label = top.get("label")
    classes: tuple[str, ...] = ()
    if label is not None:
        if not isinstance(label, str) or label in names:
            raise ConfigError(
                "synthesize.label must name a column that is not a [[column]]", field="label"
            )
        classes = _strings(top.get("classes"), "synthesize.classes")
    groups: tuple[tuple[str, ...], ...] | None
    raw_groups = top.get("groups", "dp")
    if raw_groups == "dp":
        groups = None
    elif isinstance(raw_groups, list):
        groups = tuple(_strings(g, "synthesize.groups") for g in raw_groups)
        flat = [c for g in groups for c in g]
        unknown = sorted(set(flat) - set(names))
        if unknown:
            raise ConfigError(
                f"synthesize.groups names undeclared columns {unknown}", field="groups"
            )
        if sorted(flat) != sorted(names):
            missing = sorted(set(names) - set(flat))
            raise ConfigError(
                f"synthesize.groups must put every column in exactly one group "
                f"(missing {missing}, or a column listed twice)",
                field="groups",
            )
    else:
        raise ConfigError('synthesize.groups must be a list of lists or "dp"', field="groups")
    split = top.get("group_split", "dimension")
    if split not in ("dimension", "equal"):
        raise ConfigError(
            "synthesize.group_split must be 'dimension' or 'equal'", field="group_split"
        )
    engine = top.get("engine", "auto")
    if engine not in ENGINES:
        raise ConfigError(f"synthesize.engine must be one of {list(ENGINES)}", field="engine")
    grouping_share = _num(top.get("grouping_share", DEFAULT_GROUPING_SHARE), "grouping_share")
    if not 0 < grouping_share < 1:
        raise ConfigError("synthesize.grouping_share must be in (0, 1)", field="grouping_share")
    cut = _num(top.get("grouping_cut", DEFAULT_GROUPING_CUT), "grouping_cut")
    if not 0 < cut <= 1:
        raise ConfigError("synthesize.grouping_cut must be in (0, 1]", field="grouping_cut")
    epsilon = check_epsilon(top.get("epsilon", 1.0), "epsilon")
    method = top.get("method", "microaggregation")
    if method not in METHODS:
        raise ConfigError(f"synthesize.method must be one of {list(METHODS)}", field="method")
    delta = check_delta(top.get("delta", 0.0), "synthesize.delta", allow_zero=True)
    if delta > 0 and method != "marginals":
        raise ConfigError(
            'synthesize.delta > 0 needs method = "marginals" (micro-aggregation is pure '
            "epsilon-DP: leave delta out or set it to 0)",
            field="delta",
        )
    known = {
        "epsilon", "k", "bins", "groups", "group_split", "shares", "grouping_share",
        "grouping_cut", "max_cells", "label", "classes", "engine", "method", "marginal_shares",
        "delta",
    }  # fmt: skip
    unknown = sorted(set(top) - known)
    if unknown:
        raise ConfigError(f"[synthesize]: unknown keys {unknown}", field="synthesize")
    return SynthConfig(
        columns=columns,
        epsilon=epsilon,
        k=_int(top.get("k", DEFAULT_K), "synthesize.k", 1),
        groups=groups,
        group_split=split,
        shares=_shares(top.get("shares")),
        grouping_share=grouping_share,
        grouping_cut=cut,
        max_cells=_int(top.get("max_cells", DEFAULT_MAX_CELLS), "synthesize.max_cells", 1),
        label=label,
        classes=classes,
        engine=engine,
        method=method,
        delta=delta,
        marginal_shares=_shares(
            top.get("marginal_shares"), DEFAULT_MARGINAL_SHARES, "marginal_shares"
        ),
    )


def load(path: Path) -> SynthConfig:
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}", field="config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}", field="config") from exc
    return parse(doc)
