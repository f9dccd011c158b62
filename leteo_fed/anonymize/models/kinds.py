"""Which columns are numbers: one rule, applied alike by the Spark and the in-process engines.

A CSV file holds text. Both engines read every CSV column as text and then type a column by what
ALL its values look like (``null`` = an empty cell; the engines count the matches, each in its own
way, and this module decides from the counts):

* ``integer`` when every value is a plain integer with no sign but ``-``, no leading zero and at
  most 18 digits (it fits an int64 and prints back exactly as written: ``007`` stays text);
* ``float`` when every value is a decimal number without a leading zero (``-1.5``, ``0.5``,
  ``.5``, ``2e-3``), ``NaN`` or an infinity (``inf``, ``-Infinity``; any letter case);
* ``text`` otherwise, and always for categorical quasi-identifiers, sensitive columns with a
  hierarchy and direct identifiers, which are compared, matched and hashed as written.

Parquet columns keep their stored types (integers, floating point or decimals are numbers). The
refusals of the job's input check (missing values, a numeric quasi-identifier that is not a
number, an empty table) are decided here too, so both engines word them identically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.errors import DataError

INTEGER = "integer"
FLOAT = "float"
TEXT = "text"
OTHER = "other"  # booleans, dates, ...: neither a number nor text
NUMERIC = (INTEGER, FLOAT)

# RE2 (pyarrow) and java.util.regex (Spark) read these alike; \z: no trailing newline slips by
INT_PATTERN = r"^(0|-?[1-9][0-9]{0,17})\z"
NUMBER_PATTERN = r"^[-+]?((0|[1-9][0-9]*)(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?\z"
INF_PATTERN = r"^[-+]?(?i:inf|infinity)\z"
NAN_PATTERN = r"^(?i:nan)\z"
FLOAT_PATTERN = f"{NUMBER_PATTERN}|{INF_PATTERN}"  # a number, not NaN


@dataclass(frozen=True)
class ColumnScan:
    """What one pass over a column found (counts over all rows; ``lo``/``hi`` as numbers).

    ``ints`` / ``floats`` count the text values matching :data:`INT_PATTERN` / :data:`FLOAT_PATTERN`
    or :data:`NAN_PATTERN`; ``nans`` counts NaN (in text, the token).
    """

    nulls: int = 0
    ints: int = 0
    floats: int = 0
    nans: int = 0
    lo: float | None = None
    hi: float | None = None


@dataclass(frozen=True)
class InputSummary:
    """The checked input: rows, each column's kind and each numeric QI's span (max - min)."""

    rows: int
    kinds: dict[str, str]
    spans: dict[str, float]

    def numeric(self, column: str) -> bool:
        return self.kinds.get(column) in NUMERIC


def text_columns(config: AnonymizationConfig) -> set[str]:
    """Columns read as text whatever they hold: categorical QIs, sensitive columns with a
    hierarchy, direct identifiers."""
    out = {q.column for q in config.quasi_identifiers if q.type == "categorical"}
    out |= {s.column for s in config.sensitive if s.hierarchy is not None}
    out |= set(config.identifiers.drop) | set(config.identifiers.pseudonymize)
    return out


def scanned_columns(config: AnonymizationConfig, columns: Iterable[str], fmt: str) -> list[str]:
    """Columns the engines must scan: every typed-by-content CSV column, QIs and sensitive ones."""
    wanted = [*config.qi_columns, *(s.column for s in config.sensitive)]
    if fmt == "csv":
        fixed = text_columns(config)
        wanted += [c for c in columns if c not in fixed]
    return list(dict.fromkeys(wanted))


def text_kind(scan: ColumnScan, rows: int) -> str:
    """The kind of a text column from its scan (all-null columns stay text)."""
    values = rows - scan.nulls
    if values <= 0:
        return TEXT
    if scan.ints == values:
        return INTEGER
    if scan.floats == values:
        return FLOAT
    return TEXT


def resolve(
    config: AnonymizationConfig,
    fmt: str,
    columns: Iterable[str],
    rows: int,
    scans: Mapping[str, ColumnScan],
    stored: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Every column's kind: by content for CSV (see the module docstring), stored for Parquet."""
    if fmt != "csv":
        if stored is None:
            raise ValueError("Parquet kinds come from the stored types")
        return {c: stored[c] for c in columns}
    fixed = text_columns(config)
    return {c: TEXT if c in fixed or c not in scans else text_kind(scans[c], rows) for c in columns}


def check_input(
    config: AnonymizationConfig,
    rows: int,
    kinds: Mapping[str, str],
    scans: Mapping[str, ColumnScan],
) -> InputSummary:
    """Refuse what no release can be made of; the spans of the numeric QIs."""
    for q in config.quasi_identifiers:
        if q.type == "numeric" and kinds[q.column] not in NUMERIC:
            what = "text" if kinds[q.column] == TEXT else "a non-numeric type"
            raise DataError(
                f"numeric quasi-identifier {q.column!r} is read as {what}, not a number; "
                "fix the data or declare it categorical with a hierarchy",
                field=q.column,
            )
    if rows == 0:
        raise DataError("the input has no rows")
    for name in [*config.qi_columns, *(s.column for s in config.sensitive)]:
        scan = scans[name]
        bad = scan.nulls + (scan.nans if kinds[name] in NUMERIC else 0)
        if bad:
            raise DataError(
                f"column {name!r} has {bad} missing (null/NaN) value(s); "
                "quasi-identifiers and sensitive columns must be complete",
                field=name,
            )
    spans = {}
    for q in config.quasi_identifiers:
        if q.type == "numeric":
            scan = scans[q.column]
            assert scan.lo is not None and scan.hi is not None
            if not math.isfinite(scan.lo) or not math.isfinite(scan.hi):
                raise DataError(
                    f"numeric quasi-identifier {q.column!r} has an infinite value",
                    field=q.column,
                )
            spans[q.column] = float(scan.hi) - float(scan.lo)
    return InputSummary(rows, dict(kinds), spans)


def numeric_sensitive(config: AnonymizationConfig, summary: InputSummary) -> set[str]:
    """Sensitive columns held as numbers (ordered t-closeness by default)."""
    return {s.column for s in config.sensitive if summary.numeric(s.column)}


def typed_columns(config: AnonymizationConfig, summary: InputSummary) -> set[str]:
    """Columns the algorithms read as numbers: numeric QIs and numeric sensitive columns."""
    numeric_qis = {q.column for q in config.quasi_identifiers if q.type == "numeric"}
    return numeric_qis | numeric_sensitive(config, summary)
