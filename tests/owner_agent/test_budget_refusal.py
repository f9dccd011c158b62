"""An owner agent refuses a DP k-means iteration its ledger cannot take, before any data is read:
at the precheck (this and every later iteration of the job, composed under the ledger's
accountant) and, should the ledger change in between, at the reservation."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from leteo_fed.config import OwnerPolicy
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import PrivacyLedger
from leteo_fed.protocols.kmeans_round import PROTOCOL, KmeansRequest
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.transport import membership
from leteo_fed.transport.rounds import Invitation
from owner_agent.shares import ShareRunner


@dataclass
class CountingSite:
    site_id: str = "site-1"
    file_name: str = "site-1.csv"
    is_local: bool = True
    uses_spark: bool = False
    reads: list = field(default_factory=list)

    def read(self, columns):
        self.reads.append(list(columns))  # a refused round must never get here
        rows = np.random.default_rng(0).normal(size=(50, len(columns)))
        return SimpleNamespace(matrix=lambda cols: rows)

    def missing_columns(self, columns):
        return []


@dataclass
class Uplink:
    declined: list = field(default_factory=list)

    def send_share(self, inv, upload):
        raise AssertionError("nothing may be sent")

    def send_reports(self, inv, upload):
        raise AssertionError("nothing may be sent")

    def decline(self, round_id, reason):
        self.declined.append((round_id, reason))


def _invitation(iterations: int) -> Invitation:
    request = KmeansRequest(
        k=2, centers=(0.0, 0.0, 1.0, 1.0), iterations=iterations, features=("a", "b")
    )
    plan = PROTOCOL.plan(request, Common(n_invited=3, min_owners=3, dp=DpRequest(1.0, 1e-6, 2.0)))
    rnd = PROTOCOL.next_round(plan, PROTOCOL.start(plan, "job-1", ["site-1", "s2", "s3"]), 1)
    return Invitation(
        round_id="job-1-it1",
        label="kmeans",
        protocol=PROTOCOL,
        spec=rnd.spec,
        key_id="k1",
        deadline_unix=0.0,
        n_values=rnd.n_values,
        n_ciphertexts=1,
        encoding=rnd.encoding,
        layout=SimpleNamespace(),
        dp=rnd.dp,
        min_owners=3,
        invited_root=membership.root(["s2", "s3", "site-1"]),
        n_invited=3,
        job_id="job-1",
    )


def _runner(ledger: PrivacyLedger, site: CountingSite, uplink: Uplink) -> ShareRunner:
    public = SimpleNamespace(key_id="k1", ciphertext_bytes=8)
    return ShareRunner(
        site,  # type: ignore[arg-type]
        ledger,
        encryptor=lambda key_id: SimpleNamespace(public=public),  # type: ignore[arg-type]
        encrypt=lambda values, key_id: values,
        uplink=uplink,
        policy=OwnerPolicy(columns=("*",), min_other_owners=2),
    )


def test_a_job_the_ledger_cannot_take_is_refused_before_any_read(tmp_path):
    inv = _invitation(iterations=20)  # (1, 1e-6) over 20 iterations by RDP
    # 0.5 already spent of a budget of 1.2: the job's 20 iterations (epsilon 1 together) do not
    # fit, although its first iteration alone would
    ledger = PrivacyLedger(tmp_path / "ledger.json", 1.2, 1e-5)
    ledger.charge("earlier", "laplace", Budget(0.5))
    taken = PROTOCOL.ledger_charge(inv.spec, inv.encoding, inv.dp)
    assert ledger.can_afford(taken.budget, taken.event, job=taken.job)
    site, uplink = CountingSite(), Uplink()
    runner = _runner(ledger, site, uplink)
    refusal = runner.precheck(inv)
    assert refusal is not None and refusal.public.startswith("budget:")
    assert "leteo-fed owner budget set" in refusal.detail and "19 more" in refusal.detail
    assert site.reads == []
    # run directly with an exhausted ledger: the reservation refuses, nothing is read or sent
    ledger.charge("more", "laplace", Budget(0.69))
    before = ledger.path.read_bytes()
    assert runner.run(inv) is True
    assert site.reads == [] and len(uplink.declined) == 1
    assert ledger.path.read_bytes() == before


def test_a_job_that_fits_is_accepted(tmp_path):
    inv = _invitation(iterations=20)
    ledger = PrivacyLedger(tmp_path / "ledger.json", 1.5, 1e-5)
    runner = _runner(ledger, CountingSite(), Uplink())
    assert runner.precheck(inv) is None


def test_bounds_narrower_than_the_sites_published_ones_are_noted_in_the_audit_log(tmp_path):
    """Allowed (the analyst signed them), but the site's values get clipped: the audit log
    says which, before anything is read."""
    from leteo_fed.privacy.bounds import ColumnBounds
    from leteo_fed.protocols.moments_round import PROTOCOL as MOMENTS
    from leteo_fed.protocols.moments_round import MomentsRequest
    from owner_agent.audit import AuditLog
    from owner_agent.audit import read as audit_events

    request = MomentsRequest(method="pca", features=("a", "b"), components=1)
    dp = DpRequest(1.0, 1e-6, 0.0, (ColumnBounds("a", 0, 10), ColumnBounds("b", -1, 1)))
    plan = MOMENTS.plan(request, Common(n_invited=3, min_owners=3, dp=dp))
    rnd = MOMENTS.next_round(plan, MOMENTS.start(plan, "job-2", []), 1)
    inv = Invitation(
        round_id="job-2",
        label="pca",
        protocol=MOMENTS,
        spec=rnd.spec,
        key_id="k1",
        deadline_unix=0.0,
        n_values=rnd.n_values,
        n_ciphertexts=1,
        encoding=rnd.encoding,
        layout=SimpleNamespace(),
        dp=rnd.dp,
        min_owners=3,
        invited_root=membership.root(["s2", "s3", "site-1"]),
        n_invited=3,
        job_id="job-2",
    )
    audit = AuditLog(tmp_path / "audit.jsonl", "site-1")
    site = CountingSite()
    runner = ShareRunner(
        site,  # type: ignore[arg-type]
        PrivacyLedger(tmp_path / "ledger.json", 5.0, 1e-5),
        encryptor=lambda key_id: SimpleNamespace(  # type: ignore[arg-type]
            public=SimpleNamespace(key_id="k1", ciphertext_bytes=8)
        ),
        encrypt=lambda values, key_id: values,
        uplink=Uplink(),
        audit=audit,
        policy=OwnerPolicy(columns=("*",), min_other_owners=2),
        published_bounds=(ColumnBounds("a", 0, 20), ColumnBounds("b", -1, 1)),
    )
    assert runner.precheck(inv) is None  # taken part in
    noted = [e for e in audit_events(audit.path) if e.get("event") == "bounds_narrower"]
    assert len(noted) == 1 and noted[0]["bounds"] == ["a=0,10 inside the published 0,20"]
    assert site.reads == []
