"""What an owner agent loads before it says it is ready: everything a round needs, and not the
analysis libraries only the aggregator or the analyst use (each costs every site memory)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import owner_agent.server
from leteo_fed.protocols import registry
registry.names()
print(json.dumps(sorted(sys.modules)))
"""


def test_owner_agent_loads_every_protocol_and_no_scipy():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(json.loads(proc.stdout))
    assert {"leteo_fed.protocols.pca", "leteo_fed.protocols.logreg"} <= loaded
    heavy = sorted(
        m
        for m in loaded
        if m.split(".")[0] in ("scipy", "sklearn", "pandas", "matplotlib", "pyspark")
        or m == "pyarrow.parquet"
    )
    assert heavy == []
