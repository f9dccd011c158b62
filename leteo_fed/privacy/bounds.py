"""Public bounds per column: data in natural units, clipped and scaled by the owners.

A DP release must bound what one row can change. Asking analysts for one L2 bound on whole
rows made them rescale every site's file by hand (age lies in 17..90, hours in 1..99: no single
norm fits both). Instead the analyst signs public bounds [lower, upper] per numeric column (from
a codebook, never from the data); every owner clips each value to its column's bounds and maps
it affinely to [-1, 1]:

    x' = (clip(x, lower, upper) - center) / half,   center = (lower + upper) / 2,
                                                    half = (upper - lower) / 2

so a row of d bounded columns has ||x'||_2 <= sqrt(d): the row-norm bound is derived, and the
protocol's sensitivity follows from it unchanged. The aggregator maps the released statistics
back (means: center + half m'; second moments: H S' H with H = diag(half)), which is
post-processing and costs no privacy.

Bounds wider than the data waste accuracy (the noise is the same over a wider range); bounds
narrower than the data clip it (bias). Owners count the rows they clipped, in the same noisy
share, so the analyst learns (with noise) how heavy the clipping was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tomllib

from leteo_fed.errors import DataError


@dataclass(frozen=True)
class ColumnBounds:
    """One column's public bounds (the wire's ColumnBounds)."""

    column: str
    lower: float
    upper: float

    def __post_init__(self) -> None:
        if not self.column:
            raise DataError("a bound needs a column name", field="bounds")
        lo, hi = float(self.lower), float(self.upper)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise DataError(
                f"bounds of column '{self.column}' must be finite with lower < upper, got "
                f"[{self.lower}, {self.upper}]",
                field="bounds",
            )

    @property
    def center(self) -> float:
        return (self.lower + self.upper) / 2.0

    @property
    def half(self) -> float:
        return (self.upper - self.lower) / 2.0

    def __str__(self) -> str:
        return f"{self.column}={self.lower:g},{self.upper:g}"


def check_unique(bounds: Iterable[ColumnBounds]) -> tuple[ColumnBounds, ...]:
    out = tuple(bounds)
    names = [b.column for b in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DataError(f"bounds given twice for column(s) {', '.join(dup)}", field="bounds")
    return out


def parse_bound(text: str) -> ColumnBounds:
    """`COL=LO,HI` (the command line's form)."""
    name, sep, rest = text.partition("=")
    parts = rest.split(",")
    if not sep or len(parts) != 2:
        raise DataError(f"--bounds takes COL=LO,HI, got {text!r}", field="bounds")
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise DataError(f"--bounds {text!r}: LO and HI must be numbers", field="bounds") from None
    return ColumnBounds(name.strip(), lo, hi)


def load_codebook(path: str | Path) -> tuple[ColumnBounds, ...]:
    """A public codebook: TOML or JSON mapping each column to [lower, upper], e.g.
    `age = [17, 90]` (TOML, optionally under a `[bounds]` table) or {"age": [17, 90]}."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise DataError(f"cannot read codebook {p}: {exc.strerror}", field="codebook") from None
    try:
        doc = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"codebook {p} is not valid: {exc}", field="codebook") from None
    if isinstance(doc, dict) and isinstance(doc.get("bounds"), dict):
        doc = doc["bounds"]
    if not isinstance(doc, dict):
        raise DataError(f"codebook {p} must map columns to [lower, upper]", field="codebook")
    return from_mapping(doc, f"codebook {p}")


def from_mapping(doc: Mapping[str, object], where: str = "bounds") -> tuple[ColumnBounds, ...]:
    out = []
    for name, pair in doc.items():
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pair)
        ):
            raise DataError(
                f"{where}: column '{name}' needs [lower, upper], got {pair!r}", field="bounds"
            )
        out.append(ColumnBounds(str(name), float(pair[0]), float(pair[1])))
    return check_unique(out)


def merged(
    given: Sequence[ColumnBounds], codebook: Sequence[ColumnBounds] = ()
) -> tuple[ColumnBounds, ...]:
    """The codebook's bounds, each overridden by one given on the command line."""
    mine = {b.column: b for b in check_unique(given)}
    rest = [b for b in check_unique(codebook) if b.column not in mine]
    return (*rest, *mine.values())


def for_columns(
    bounds: Sequence[ColumnBounds], columns: Sequence[str], flag: str = "`bounds`"
) -> tuple[ColumnBounds, ...]:
    """The bounds of `columns`, in their order; DataError naming every column without one.
    Bounds of columns the round does not read are dropped (a codebook covers many)."""
    by_name = {b.column: b for b in bounds}
    missing = [c for c in columns if c not in by_name]
    if missing:
        raise DataError(
            f"no public bounds for column(s) {', '.join(missing)}: {flag} must give every "
            f"numeric column a DP release reads (e.g. {missing[0]}=LO,HI, or a codebook)",
            field="bounds",
        )
    return tuple(by_name[c] for c in columns)


def centers_halves(bounds: Sequence[ColumnBounds]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([b.center for b in bounds], dtype=np.float64),
        np.array([b.half for b in bounds], dtype=np.float64),
    )


def scale_columns(x: np.ndarray, bounds: Sequence[ColumnBounds]) -> tuple[np.ndarray, np.ndarray]:
    """Each column clipped to its bounds and mapped to [-1, 1]; and which rows had a value
    outside its bounds (clipped). `x` must be finite (the caller checked)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(bounds):
        raise DataError(f"expected a {len(bounds)}-column matrix, got shape {arr.shape}")
    lo = np.array([b.lower for b in bounds])
    hi = np.array([b.upper for b in bounds])
    clipped = np.any((arr < lo) | (arr > hi), axis=1)
    center, half = centers_halves(bounds)
    scaled = (np.clip(arr, lo, hi) - center) / half
    return np.clip(scaled, -1.0, 1.0), clipped


def unscale_mean(mean: np.ndarray | Sequence[float], bounds: Sequence[ColumnBounds]) -> np.ndarray:
    center, half = centers_halves(bounds)
    return center + half * np.asarray(mean, dtype=np.float64)


def clip_to(values: np.ndarray, bounds: Sequence[ColumnBounds]) -> np.ndarray:
    """Values (e.g. noisy means) kept within their columns' bounds: post-processing."""
    lo = np.array([b.lower for b in bounds])
    hi = np.array([b.upper for b in bounds])
    return np.clip(np.asarray(values, dtype=np.float64), lo, hi)


def unscale_scatter(scatter: np.ndarray, bounds: Sequence[ColumnBounds]) -> np.ndarray:
    """A centered second-moment matrix of scaled columns in natural units: H S' H."""
    _, half = centers_halves(bounds)
    return np.asarray(scatter, dtype=np.float64) * np.outer(half, half)


def narrower_than(
    requested: Sequence[ColumnBounds], published: Mapping[str, tuple[float, float]]
) -> list[str]:
    """The requested bounds narrower than a site's published ones (values there get clipped)."""
    out = []
    for b in requested:
        pub = published.get(b.column)
        if pub is not None and (b.lower > pub[0] or b.upper < pub[1]):
            out.append(f"{b} inside the published {pub[0]:g},{pub[1]:g}")
    return out


__all__ = [
    "ColumnBounds",
    "centers_halves",
    "clip_to",
    "check_unique",
    "for_columns",
    "from_mapping",
    "load_codebook",
    "merged",
    "narrower_than",
    "parse_bound",
    "scale_columns",
    "unscale_mean",
    "unscale_scatter",
]
