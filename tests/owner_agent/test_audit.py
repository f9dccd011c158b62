"""The owner's audit log: every invitation, decision, upload and result, as JSON lines; and
`leteo-fed owner audit` through real processes (CSP, aggregator, 3 owners, mTLS)."""

from __future__ import annotations

import json
import os
import stat
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from sklearn.datasets import load_iris

from leteo_fed.errors import ConfigError
from leteo_fed.protocols.moments_round import MomentsRequest
from owner_agent import audit

NAMES = ["sl", "sw", "pl", "pw"]


def test_events_are_whole_json_lines_in_an_owner_only_file(tmp_path):
    path = tmp_path / "logs" / "audit.jsonl"
    log = audit.AuditLog(path, "site-1")
    log.record("decision", "r1", accepted=False, reason="column 'x' is not in data.csv")
    log.record("sent", "r2", protocol="pca", columns=["a"], n_ciphertexts=3, bytes=1536)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with open(path, "a") as fh:
        fh.write('{"time": "2026-01-01T00:00:00", "event": "res')  # a torn last line (crash)
    events = audit.read(path)
    assert [e["event"] for e in events] == ["decision", "sent"]
    assert events[0]["site"] == "site-1" and events[0]["round_id"] == "r1"
    text = audit.table(events)
    assert "declined: column 'x' is not in data.csv" in text
    assert "3 ciphertexts, 1536 bytes, pca" in text
    with pytest.raises(ValueError):
        log.record("guess", "r3")
    with pytest.raises(ConfigError, match="no audit log"):
        audit.read(tmp_path / "missing.jsonl")


@pytest.mark.slow
def test_every_site_logs_what_it_was_asked_and_what_left_it(tmp_path, capsys):
    from leteo_fed.cli.main import main
    from leteo_fed.client import AnalystClient, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec

    x = load_iris().data
    owners = []
    for i, idx in enumerate(np.array_split(np.arange(len(x)), 3), start=1):
        names = NAMES if i < 3 else NAMES[:3]  # site-3 lacks the column "pw"
        path = tmp_path / f"site-{i}.csv"
        pacsv.write_csv(pa.table({n: x[idx, j] for j, n in enumerate(names)}), path)
        owners.append(OwnerSpec(f"site-{i}", path))
    with LocalCluster(tmp_path / "run", owners) as cluster:
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(3)
        result = client.run(
            MomentsRequest(features=tuple(NAMES)), RoundOptions(min_owners=2, deadline_seconds=60)
        ).to_dict()
        client.close()
        assert result["owners"] == ["site-1", "site-2"]
        config = cluster.workdir / "config"

        def events(site: str) -> list[dict]:
            rows = audit.read(config / f"audit-{site}.jsonl")
            return [e for e in rows if e["round_id"] == result["round_id"]]

        for site in ("site-1", "site-2"):
            got = events(site)
            for _ in range(50):  # the result is published right after the round closes
                if [e["event"] for e in got][-1:] == ["result"]:
                    break
                time.sleep(0.1)
                got = events(site)
            assert [e["event"] for e in got] == ["invitation", "decision", "sent", "result"]
            invitation, decision, sent, published = got
            assert invitation["protocol"] == "pca" and invitation["columns"] == NAMES
            assert invitation["epsilon"] is None and decision["accepted"] is True
            n = result["encoding"]["ciphertexts_per_share"]
            assert sent["n_ciphertexts"] == n and sent["bytes"] == n * 512  # 4096-bit ciphertexts
            assert sent["columns"] == NAMES and published["state"] == "COMPLETED"
        declined = events("site-3")
        assert [e["event"] for e in declined][:2] == ["invitation", "decision"]
        decision = declined[1]
        assert decision["accepted"] is False and "'pw'" in decision["detail"]
        # the aggregator was told the rule only, not the site's file or which column
        assert decision["reason"] == "columns: a column the round reads is not in this site's data"
        assert result["declined"] == {"site-3": decision["reason"]}
        assert not any(e["event"] == "sent" for e in declined)

        assert main(["owner", "audit", "--config", str(config / "site-3.toml")]) == 0
        out = capsys.readouterr().out
        assert "declined: column 'pw' is not in site-3.csv" in out
        assert main(["owner", "audit", "--config", str(config / "site-1.toml"), "--json"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert {e["event"] for e in lines} >= {"invitation", "decision", "sent", "result"}
