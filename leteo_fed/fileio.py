"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)  # permissions set before any byte is written
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def check_writable_folder(path: Path, flag: str = "--out") -> None:
    """This process may write into the folder (or create it): checked before a command
    contacts anyone, so an output that cannot be written is one line, before any round starts
    or any budget is spent (ConfigError naming the flag). Nothing is left behind: a missing
    folder is not created here, its nearest existing parent is checked instead."""
    from leteo_fed.errors import ConfigError

    folder = Path(path)
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        if not existing.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if existing == folder:
            fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=folder)
            os.close(fd)
            os.unlink(probe)
        elif not os.access(existing, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as exc:
        raise ConfigError(
            f"{flag} {folder}: cannot write there ({exc.strerror or exc})", field=flag.lstrip("-")
        ) from None


def atomic_write_json(path: Path, doc: Any) -> None:
    atomic_write_bytes(Path(path), (json.dumps(doc, indent=2) + "\n").encode())


def atomic_save_figure(fig: Any, path: Path, mode: int = 0o644) -> None:
    """Save a matplotlib figure to ``path`` atomically, then close it (also on failure).

    The format follows the suffix of ``path`` (PNG without one). matplotlib is imported here only,
    to close the figure, so importing this module does not import it.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(suffix=path.suffix or ".png", dir=path.parent)
    os.fchmod(fd, mode)  # mkstemp creates 0600; a plot is as readable as any other output
    os.close(fd)
    try:
        fig.savefig(tmp)
        os.replace(tmp, path)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
