"""Where a job's input is and what it holds: its format and the columns a config needs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from leteo_fed.anonymize.models.config import AnonymizationConfig
from leteo_fed.errors import ConfigError, DataError

FORMATS = ("csv", "parquet")
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate")


def input_format(path: str, explicit: str | None = None) -> str:
    """``csv`` or ``parquet``: the explicit choice, else the name, else a local folder's files."""
    if explicit is not None:
        if explicit not in FORMATS:
            raise ConfigError(f"--format must be one of {list(FORMATS)}, got {explicit!r}")
        return explicit
    name = path.rstrip("/").lower()
    if name.endswith(".csv") or any(name.endswith(".csv" + ext) for ext in _COMPRESSED):
        return "csv"
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    local = Path(path)
    if local.is_dir():
        names = [p.name.lower() for p in local.iterdir()]
        if any(n.endswith((".parquet", ".pq")) for n in names):
            return "parquet"
        if any(".csv" in n for n in names):
            return "csv"
    raise ConfigError(
        f"cannot tell the format of {path!r} from its name; pass --format csv|parquet"
    )


def check_columns(columns: Sequence[str], config: AnonymizationConfig) -> None:
    """Every configured column must exist: name the first missing one and list the available."""
    wanted = [
        *((q.column, "quasi-identifier") for q in config.quasi_identifiers),
        *((s.column, "sensitive") for s in config.sensitive),
        *((c, "identifiers.drop") for c in config.identifiers.drop),
        *((c, "identifiers.pseudonymize") for c in config.identifiers.pseudonymize),
    ]
    for name, role in wanted:
        if name not in columns:
            raise DataError(
                f"{role} column {name!r} is not in the input; available columns: "
                + ", ".join(repr(c) for c in columns),
                field=name,
            )


def outside_hierarchy(column: str, hierarchy: Path | None, missing: Sequence[str]) -> str:
    """The refusal for values missing from a hierarchy (``missing``: the first few, sorted)."""
    more = ", ".join(repr(v) for v in missing[1:])
    return f"value {missing[0]!r} of column {column!r} is not in its hierarchy ({hierarchy})" + (
        f"; also missing: {more}" if more else ""
    )
