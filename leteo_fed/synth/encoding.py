"""Public encoding: every released column to integer codes, identically in both engines.

A numeric value is clipped to its public bounds [lo, hi], scaled to u in [0, 1] and stored as
the 16-bit fixed-point integer q = floor(u * SCALE + 0.5), so x = q / SCALE in [0, 1]. A
categorical value is the index of its category in the public domain; its encoded vector is the
one-hot block (SCALE at that index). Integers make every sum exact, so NumPy and Spark release
the same statistics bit for bit whatever order they add in. Encoded dimensions: one per numeric
column, one per category. A value outside a categorical domain, a missing value or a numeric
cell that is not a number is refused by name (:class:`DataError`), never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.synth.config import Column, SynthConfig

if TYPE_CHECKING:
    import pyarrow as pa

_NUMBER = r"^\s*[+-]?((\d+\.?\d*|\.\d+)(e[+-]?\d+)?|inf|infinity|nan)\s*$"
SCALE = 1 << 16  # products reach 2^32: int64 sums stay exact up to 2^31 rows per key


@dataclass
class Encoded:
    """The released columns as codes (numeric q, categorical index), the class index per row,
    and how many values were clipped to the public bounds (per numeric column, below / above)."""

    codes: dict[str, np.ndarray]
    classes: np.ndarray
    clipped: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return int(self.classes.shape[0])


def missing_column(name: str, what: str = "column") -> DataError:
    return DataError(f"{what} {name!r} is not in the input", field=name)


def missing_values(name: str, count: int) -> DataError:
    return DataError(
        f"column {name!r} has {count} missing (null/NaN) values; the synthesizer refuses "
        "them: fill or drop them before synthesizing",
        field=name,
    )


def not_numbers(name: str, examples: list[str]) -> DataError:
    return DataError(
        f"numeric column {name!r} holds values that are not numbers, e.g. {examples}", field=name
    )


def outside_domain(name: str, examples: list[str], what: str = "column") -> DataError:
    return DataError(
        f"{what} {name!r} holds values outside its public domain, e.g. {examples}; add them to "
        "its categories in synth.toml or drop those rows",
        field=name,
    )


def quantize(x: np.ndarray, col: Column) -> np.ndarray:
    """floor((clip(x, lo, hi) - lo) / (hi - lo) * SCALE + 0.5) as int64 (Spark: same ops)."""
    u = (np.clip(x, col.lo, col.hi) - col.lo) / (col.hi - col.lo)
    return np.floor(u * SCALE + 0.5).astype(np.int64)


def cuts(col: Column) -> np.ndarray:
    """The codes where a column with public `edges` enters its next bin: the inner edges
    quantized like the values (exact integers, so both engines bin alike)."""
    return quantize(np.asarray(col.edges[1:-1], dtype=np.float64), col)


def level(codes: np.ndarray, col: Column) -> np.ndarray:
    """A code's grid level: its category; its bin (q * bins) // SCALE, capped at bins - 1; or,
    with public edges, how many inner edges' codes it reaches."""
    if col.kind == "categorical":
        return codes
    if col.edges:
        return np.searchsorted(cuts(col), codes, side="right").astype(np.int64)
    return np.minimum((codes * col.bins) // SCALE, col.bins - 1)


def _index(values: pa.ChunkedArray, domain: tuple[str, ...], name: str, what: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    text = values if pa.types.is_string(values.type) else pc.cast(values, pa.string())
    if text.null_count:
        raise missing_values(name, text.null_count)
    idx = pc.index_in(text, value_set=pa.array(domain, pa.string()))
    if idx.null_count:
        bad = pc.filter(text, pc.is_null(idx))
        raise outside_domain(name, sorted(set(bad.to_pylist()))[:5], what)
    return np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)


def _numbers(values: pa.ChunkedArray, name: str) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    if values.null_count:
        raise missing_values(name, values.null_count)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        values = pc.utf8_trim_whitespace(values)  # as Spark's cast does
        try:
            values = pc.cast(values, pa.float64())
        except pa.ArrowInvalid:
            ok = pc.match_substring_regex(values, _NUMBER, ignore_case=True)
            bad = sorted(set(pc.filter(values, pc.invert(ok)).to_pylist()))[:5]
            raise not_numbers(name, [str(b) for b in bad]) from None
    elif not (pa.types.is_integer(values.type) or pa.types.is_floating(values.type)):
        raise DataError(f"numeric column {name!r} has type {values.type}", field=name)
    x = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    nan = int(np.isnan(x).sum())
    if nan:
        raise missing_values(name, nan)
    return x


def encode_table(table: pa.Table, config: SynthConfig) -> Encoded:
    """Codes of every declared column of an Arrow table (the in-process engine's input)."""
    names = set(table.column_names)
    for c in config.columns:
        if c.name not in names:
            raise missing_column(c.name)
    if config.label is not None and config.label not in names:
        raise missing_column(config.label, "label column")
    codes: dict[str, np.ndarray] = {}
    clipped: dict[str, dict[str, int]] = {}
    for c in config.columns:
        values = table.column(c.name)
        if c.kind == "categorical":
            codes[c.name] = _index(values, c.categories, c.name, "column")
            continue
        x = _numbers(values, c.name)
        clipped[c.name] = {"below": int((x < c.lo).sum()), "above": int((x > c.hi).sum())}
        codes[c.name] = quantize(x, c)
    if config.label is None:
        classes = np.zeros(table.num_rows, dtype=np.int64)
    else:
        classes = _index(table.column(config.label), config.classes, config.label, "label column")
    return Encoded(codes, classes, clipped)


def read_local(path: str, fmt: str) -> pa.Table:
    """The input as the in-process engine reads it (anonymize's readers: CSV as text)."""
    from leteo_fed.anonymize.engines.local.io import read_csv_text, read_parquet

    where = Path(path.removeprefix("file://"))
    return read_parquet(where) if fmt == "parquet" else read_csv_text(where)


def one_hot(codes: list[np.ndarray], widths: list[int]) -> np.ndarray:
    """The encoded matrix (int64, entries in [0, SCALE]): numeric codes as they are (width 0
    marks a numeric column here), categorical indices as one-hot blocks of SCALE."""
    n = codes[0].shape[0] if codes else 0
    dims = sum(max(w, 1) for w in widths)
    out = np.zeros((n, dims), dtype=np.int64)
    at = 0
    rows = np.arange(n)
    for c, w in zip(codes, widths, strict=True):
        if w == 0:
            out[:, at] = c
            at += 1
        else:
            out[rows, at + c] = SCALE
            at += w
    return out


def widths(columns: list[Column]) -> list[int]:
    """The `one_hot` width spec: 0 for a numeric column, the domain size for a categorical one."""
    return [0 if c.kind == "numeric" else len(c.categories) for c in columns]
