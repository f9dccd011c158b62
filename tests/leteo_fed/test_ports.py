"""Local deployments' ports: never the same one to two processes of a machine at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from leteo_fed.demo import ports

HAND_OUT = """
import json, sys
from leteo_fed.demo.ports import free_port
print(json.dumps([free_port() for _ in range(int(sys.argv[1]))]))
"""


def test_two_processes_at_once_get_disjoint_ports(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HAND_OUT, "300"], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(len(set(o)) == 300 for o in outs)
    assert not set(outs[0]) & set(outs[1])
    registry = tmp_path / f"leteo-fed-ports-{os.getuid()}"
    assert {int(line.split()[0]) for line in registry.read_text().splitlines()} == set(
        outs[0]
    ) | set(outs[1])
    assert registry.stat().st_mode & 0o077 == 0  # this user's only


def test_expired_and_garbled_entries_are_dropped(tmp_path, monkeypatch):
    registry = tmp_path / "ports"
    now = time.time()
    registry.write_text(f"40001 {now - ports.RESERVE_SECONDS - 1}\n40002 {now}\n4000")
    monkeypatch.setattr(ports, "registry_path", lambda: registry)
    port = ports.free_port()
    kept = dict(line.split() for line in registry.read_text().splitlines())
    assert set(kept) == {"40002", str(port)}
