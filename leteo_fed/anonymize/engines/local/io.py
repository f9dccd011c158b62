"""Reading and writing releases in process, with pyarrow, the way the Spark job does.

* CSV in: every column as text, RFC 4180 quoting, an empty cell (quoted or not) is null, the
  header names the columns; a folder means its visible files (not ``.``/``_``-prefixed) in name
  order. Parquet in: a file or a dataset folder, stored types kept.
* CSV out: the bytes Spark's writer produces with the job's options: one header line, ``,``
  between cells, ``\\n`` after every row, a cell quoted (``"`` doubled inside) only when it holds
  ``"``, ``,``, a line break, or is the empty string; null is an empty cell; other values as
  Spark prints them (:mod:`engines.local.text`). Written block by block, so a large release never
  exists twice in memory.
* Parquet out: a dataset folder with one ``part-00000.parquet`` file, rows in input order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from leteo_fed.anonymize.engines.local.text import spark_text
from leteo_fed.anonymize.models.kinds import FLOAT, INTEGER, OTHER, TEXT
from leteo_fed.errors import DataError

_BLOCK_ROWS = 1 << 16


def _files(path: Path, suffixes: tuple[str, ...]) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DataError(f"cannot read {str(path)!r}: no such file or folder")
    files = sorted(
        p
        for p in path.iterdir()
        if p.is_file() and not p.name.startswith((".", "_")) and p.name.lower().endswith(suffixes)
    )
    if not files:
        raise DataError(f"cannot read {str(path)!r}: the folder holds no {'/'.join(suffixes)} file")
    return files


def read_csv_text(path: str | Path, *, multiline: bool = False) -> pa.Table:
    """Every column as text (nullable); a folder's files are concatenated in name order.

    ``multiline``: quoted values may hold line breaks (a release; Spark reads inputs line by line).
    """
    parse = pacsv.ParseOptions(
        quote_char='"', double_quote=True, escape_char=False, newlines_in_values=multiline
    )
    tables = []
    for file in _files(Path(path), (".csv", ".csv.gz", ".csv.bz2", ".csv.zst", ".csv.xz")):
        try:
            names = pacsv.open_csv(file, parse_options=parse).schema.names
            convert = pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
                null_values=[""],
            )
            tables.append(pacsv.read_csv(file, parse_options=parse, convert_options=convert))
        except (pa.ArrowInvalid, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DataError(f"cannot read {str(file)!r} as csv: {first}") from exc
    try:
        return pa.concat_tables(tables)
    except pa.ArrowInvalid as exc:
        raise DataError(f"the CSV files of {str(path)!r} have different headers") from exc


def read_parquet(path: str | Path) -> pa.Table:
    """A Parquet file or dataset folder (Spark's ``_SUCCESS`` and hidden files are skipped)."""
    try:
        files = _files(Path(path), (".parquet", ".pq"))
        return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    except (pa.ArrowInvalid, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"cannot read {str(path)!r} as parquet: {first}") from exc


def stored_kind(t: pa.DataType) -> str:
    """The kind (:mod:`models.kinds`) of a stored Parquet type."""
    if pa.types.is_integer(t):
        return INTEGER
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return FLOAT
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return TEXT
    return OTHER


def typed(column: pa.ChunkedArray, kind: str) -> pa.ChunkedArray:
    """A text column as the numbers its kind says it holds (other columns unchanged)."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return column
    if kind == INTEGER:
        return pc.cast(column, pa.int64())
    if kind == FLOAT:
        return pc.cast(column, pa.float64())
    return column


# ---------------------------------------------------------------------------- CSV out


def _cells(column: pa.ChunkedArray) -> pa.Array:
    """One column's CSV cells: quoted where Spark quotes, nulls empty."""
    text = spark_text(column).combine_chunks()
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    needs = pc.or_(pc.match_substring_regex(text, '["\\n\\r,]'), pc.equal(text, ""))
    return pc.fill_null(pc.if_else(needs, quoted, text), "")


def _header(names: list[str]) -> str:
    cells = pa.array(names, pa.string())
    return ",".join(_cells(pa.chunked_array([cells])).to_pylist()) + "\n"


def write_csv(table: pa.Table, target: Path) -> None:
    """The release as one CSV file (see the module docstring for the exact format)."""
    with target.open("wb") as f:
        f.write(_header(table.column_names).encode("utf-8"))
        for start in range(0, table.num_rows, _BLOCK_ROWS):
            block = table.slice(start, _BLOCK_ROWS)
            cells = [_cells(block.column(i)) for i in range(block.num_columns)]
            rows = pc.binary_join_element_wise(*cells, pa.scalar(",", pa.string()))
            lines = pc.binary_join_element_wise(rows, pa.scalar("", pa.string()), "\n")
            _, offsets, data = lines.buffers()
            if data is not None and len(lines):
                ends = np.frombuffer(offsets, dtype=np.int32)
                f.write(memoryview(data)[ends[lines.offset] : ends[lines.offset + len(lines)]])


def write_parquet(table: pa.Table, folder: Path) -> None:
    """The release as a dataset folder with one part file."""
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-00000.parquet")
