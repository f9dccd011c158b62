"""What the simulation measures of processes: CPU and memory, from /proc."""

from __future__ import annotations

import math
import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU of a process (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_mib(pid: int) -> dict[str, float]:
    """Resident memory now (VmRSS) and at its peak (VmHWM), MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "VmHWM"):
            out["rss_mib" if key == "VmRSS" else "peak_rss_mib"] = int(line.split()[1]) / 1024
    return out


class CpuWatch:
    """CPU seconds a set of processes used since `start` (processes that exited are skipped)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = dict(pids)
        self._start = {name: _cpu_or_nan(pid) for name, pid in self.pids.items()}

    def used(self) -> dict[str, float]:
        return {name: _cpu_or_nan(pid) - self._start[name] for name, pid in self.pids.items()}


def _cpu_or_nan(pid: int) -> float:
    try:
        return cpu_seconds(pid)
    except (OSError, IndexError, ValueError):
        return math.nan
