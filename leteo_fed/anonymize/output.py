"""Where a release goes, and how it is put there atomically (both engines).

The release is written to a temporary sibling of the target, measured there, and moved into
place only when the job's checks pass; an existing output is replaced only then.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from leteo_fed.errors import ConfigError


@dataclass(frozen=True)
class Output:
    """Where the release goes: a single CSV file, or a Parquet dataset folder."""

    path: Path
    fmt: str

    @classmethod
    def of(cls, target: str | Path) -> Output:
        text = str(target)
        if "://" in text and not text.startswith("file://"):
            raise ConfigError(f"--out must be a local path, got {text!r}")
        path = Path(text.removeprefix("file://")).absolute()
        fmt = "csv" if path.suffix.lower() == ".csv" else "parquet"
        if fmt == "csv" and path.is_dir():
            raise ConfigError(f"--out {path} is a folder; a .csv output is a single file")
        return cls(path, fmt)

    def staging(self) -> Path:
        """A sibling folder, so the final move stays on one file system.

        Not hidden: Spark skips paths starting with '.' or '_' when it lists a dataset.
        """
        return self.path.parent / f"{self.path.name}.tmp-{uuid.uuid4().hex[:12]}"


def publish(written: Path, staging: Path, out: Output) -> None:
    """Move the staged release into place; an existing output is replaced only after success."""
    old: Path | None = None
    if out.path.exists() or out.path.is_symlink():
        if out.fmt == "csv" and out.path.is_file():
            os.replace(written, out.path)  # atomic for a single file
            shutil.rmtree(staging, ignore_errors=True)
            return
        old = out.path.parent / f"{out.path.name}.old-{uuid.uuid4().hex[:12]}"
        os.replace(out.path, old)
    try:
        os.replace(written, out.path)
    except BaseException:
        if old is not None:
            os.replace(old, out.path)
        raise
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
    if old is not None:
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def default_report_path(out: Output) -> Path:
    """``released.csv`` -> ``released.report.json``; ``released/`` -> ``released.report.json``."""
    stem = out.path.stem if out.fmt == "csv" or out.path.suffix else out.path.name
    return out.path.with_name(f"{stem}.report.json")


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
