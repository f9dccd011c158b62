"""Running a document's fenced ```bash blocks as a person would paste them: in order, by one
`bash -e -x` in an empty folder, with `leteo-fed` and `python` this test's interpreter, every
127.0.0.1 port moved to a free one, and every process the blocks start stopped afterwards."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from leteo_fed.demo.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def section_blocks(path: Path, section: str, at_least: int = 1) -> list[str]:
    """The ```bash blocks of the section headed `section` (up to the next `## `), in order."""
    text = path.read_text()
    start = text.index(section)
    end = text.find("\n## ", start + len(section))
    body = text[start : end if end >= 0 else len(text)]
    blocks = re.findall(r"^```bash\n(.*?)^```$", body, re.S | re.M)
    assert len(blocks) >= at_least, blocks
    return blocks


def free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


def on_free_ports(script: str, at_least: int) -> str:
    """Every 127.0.0.1:PORT of the script moved to a free port, the same one each time."""
    ports = sorted(set(re.findall(r"127\.0\.0\.1:(\d+)", script)))
    assert len(ports) >= at_least, ports
    free = dict(zip(ports, map(str, free_ports(len(ports))), strict=True))
    return re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{free[m.group(1)]}", script)


def leteo(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def shell_env(bin_dir: Path) -> dict[str, str]:
    """`leteo-fed` and `python` are this interpreter; no LETEO_* setting leaks in."""
    bin_dir.mkdir()
    for name, argv in (("leteo-fed", f"{sys.executable} -m leteo_fed"), ("python", sys.executable)):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LETEO_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def group_left(pgid: int, grace: float = 10.0) -> str:
    """The processes still in the group after `grace` seconds (`ps` lines), or ''."""
    end = time.monotonic() + grace
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return ""
        if time.monotonic() > end:
            ps = subprocess.run(
                ["ps", "-o", "pid,stat,args", "-g", str(pgid)], capture_output=True, text=True
            )
            return ps.stdout
        time.sleep(0.2)


@dataclass
class ShellRun:
    rc: int | None  # None: it timed out
    printed: str  # its stdout
    trace: str  # its stderr (bash -x)
    work: Path  # the folder it ran in
    left_running: str  # `ps` lines of processes it left behind ('' if none)

    def tails(self) -> str:
        parts = [f"--- bash stderr\n{self.trace[-4000:]}"]
        for log in sorted(self.work.glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text()[-1500:]}")
        return "\n".join(parts)


def run_blocks(blocks: list[str], tmp_path: Path, ports: int, timeout: float = 900) -> ShellRun:
    """The blocks as one script on free ports (at least `ports` distinct ones), in
    tmp_path/run; a process left running after the script ends is killed (and reported)."""
    work = tmp_path / "run"
    work.mkdir()
    script = tmp_path / "doc.sh"
    script.write_text(on_free_ports("\n".join(blocks), ports))
    env = shell_env(tmp_path / "bin")
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-e", "-x", str(script)],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # the servers it starts share its process group
        )
        try:
            rc: int | None = shell.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            left = group_left(shell.pid)
            if left:
                os.killpg(shell.pid, signal.SIGKILL)
    return ShellRun(rc, out.read_text(), err.read_text(), work, left)
