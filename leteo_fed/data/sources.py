"""Reading a site's table (CSV or Parquet) into a float matrix, with errors that name the column."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from leteo_fed.errors import DataError

FORMATS = ("csv", "parquet")


def detect_format(path: str, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise DataError(
                f"unknown data format {fmt!r}; expected one of {FORMATS}", field="format"
            )
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".csv", ".txt", ".gz"):
        return "csv"
    raise DataError(
        f"cannot tell the format of {path}; set data.format to csv or parquet", field="format"
    )


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def _local(path: str) -> Path:
    p = Path(path.removeprefix("file://"))
    if not p.exists():
        raise DataError(f"data file not found: {p}", field="path")
    return p


def column_names(path: str, fmt: str | None = None) -> list[str]:
    p, kind = _local(path), detect_format(path, fmt)
    if kind == "parquet":
        import pyarrow.parquet as pq  # loaded by a Parquet source only

        return list(pq.read_schema(p).names)
    with pacsv.open_csv(p) as reader:
        return list(reader.schema.names)


def read_table(path: str, fmt: str | None = None, columns: Sequence[str] | None = None) -> pa.Table:
    p, kind = _local(path), detect_format(path, fmt)
    if columns is not None:
        available = column_names(path, fmt)
        missing = [c for c in columns if c not in available]
        if missing:
            raise DataError(
                f"column '{missing[0]}' is not in {p} (columns: {', '.join(available)})",
                field=missing[0],
            )
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(p, columns=list(columns) if columns else None)
        opts = pacsv.ConvertOptions(include_columns=list(columns) if columns else None)
        return pacsv.read_csv(p, convert_options=opts)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataError(f"cannot read {p}: {exc}") from exc


def warm_up() -> None:
    """Pay pyarrow's first conversion to NumPy now: it imports pandas when installed (0.3 s,
    over 1 s on a loaded host). A service does it at start, outside any round's time."""
    pa.array([0.0]).to_numpy(zero_copy_only=False)


def to_matrix(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """float64 matrix; nulls become NaN so validation can name the column."""
    out = np.empty((table.num_rows, len(columns)))
    for j, name in enumerate(columns):
        col = table.column(name)
        if not (
            pa.types.is_integer(col.type)
            or pa.types.is_floating(col.type)
            or pa.types.is_null(col.type)
        ):
            raise DataError(
                f"column '{name}' is not numeric (type {col.type})", field=name, rule="values"
            )
        out[:, j] = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
    return out


def numeric_columns(table: pa.Table, exclude: Sequence[str] = ()) -> list[str]:
    return [
        f.name
        for f in table.schema
        if f.name not in exclude and (pa.types.is_integer(f.type) or pa.types.is_floating(f.type))
    ]


def read_matrix(path: str, columns: Sequence[str], fmt: str | None = None) -> np.ndarray:
    return to_matrix(read_table(path, fmt, columns), columns)


def label_strings(table: pa.Table, column: str) -> list[str]:
    """Class labels as strings (1 and 1.0 both read '1'); refuses missing labels."""
    if column not in table.column_names:
        raise DataError(f"label column '{column}' is not in the data", field=column)
    values = pc.cast(table.column(column), pa.string()).to_pylist()
    missing = sum(v is None for v in values)
    if missing:
        raise DataError(f"label column '{column}' has {missing} missing value(s)", field=column)
    return values
