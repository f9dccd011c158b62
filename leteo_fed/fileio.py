"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

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
