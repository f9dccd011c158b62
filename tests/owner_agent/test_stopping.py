"""A stopping agent: it declines new rounds (saying only that it stops) and waits a bounded
time for the shares it is computing. The service is built bare (`__new__`): these two steps
read nothing but the stop flag and the jobs."""

from __future__ import annotations

import threading
import time

from leteo_fed.proto import leteo_pb2 as pb
from owner_agent.service import OwnerAgentService


def bare_service() -> OwnerAgentService:
    service = OwnerAgentService.__new__(OwnerAgentService)
    service._stop = threading.Event()
    service._jobs = {}
    return service


def test_a_stopping_agent_declines_an_invitation_with_the_rule_only() -> None:
    service = bare_service()
    service._stop.set()
    refusal, inv, auth = service._accept(pb.RoundSpec(round_id="pca-0123456789ab"))
    assert inv is None and auth is None
    assert refusal is not None and refusal.public == "this agent is stopping"


def test_stop_waits_for_a_running_share_and_names_one_past_the_grace() -> None:
    service = bare_service()
    quick, slow = threading.Event(), threading.Event()
    service._jobs["pca-quick"] = threading.Thread(target=lambda: time.sleep(0.1) or quick.set())
    service._jobs["pca-slow"] = threading.Thread(target=slow.wait, daemon=True)
    for job in service._jobs.values():
        job.start()
    start = time.monotonic()
    running = service._finish_jobs(0.5)
    took = time.monotonic() - start
    assert quick.is_set() and running == ["pca-slow"]
    assert 0.4 < took < 2.0
    slow.set()
