"""What an owner does with an invitation, for every protocol: check, charge, build, send.

The protocol says what to check, what the round costs and how to compute the share; this module
does the rest once: the budget check, the ledger's reserve (before the data is touched), commit
(as the share starts to leave the site) or release (only if nothing left), and the Skellam noise,
packing and encryption of secure-sum shares.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import grpc
import numpy as np

from leteo_fed.config import OwnerPolicy
from leteo_fed.crypto.paillier import Encryptor
from leteo_fed.encoding.packing import masks_from_seed, new_mask_seed, pack
from leteo_fed.errors import LeteoError, ProtocolError
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.budget import Budget
from leteo_fed.privacy.ledger import BUDGET_COMMANDS, PrivacyLedger
from leteo_fed.privacy.verify import add_owner_noise
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.interface import LedgerCharge, ReportRounds, SecureSumRounds
from leteo_fed.transport.grpc_io import rpc_error_message
from leteo_fed.transport.rounds import Invitation
from leteo_fed.transport.signing import Signer
from leteo_fed.transport.statements import ciphertext_digest, sign_statement
from owner_agent.audit import AuditLog
from owner_agent.audit import read as audit_events
from owner_agent.policy import refusal as policy_refusal
from owner_agent.policy import release_facts
from owner_agent.refusals import Refusal, from_error
from owner_agent.site_data import LocalSite

log = logging.getLogger("leteo.owner")


@dataclass
class ShareUpload:
    """An encrypted share, ready to leave the site."""

    ciphertexts: list[int]
    timings: dict[str, float]
    statement: pb.Signed  # what this site signs about the share; the CSP checks it
    mask_seed: bytes  # seeds this share's one-time mask; sent to the aggregator only


@dataclass
class ReportUpload:
    """Perturbed reports, ready to leave the site."""

    n_reports: int
    chunks: list[np.ndarray]
    timings: dict[str, float]


class Uplink(Protocol):
    """How built uploads reach the aggregator (the service's gRPC side)."""

    def send_share(self, inv: Invitation, upload: ShareUpload) -> None: ...

    def send_reports(self, inv: Invitation, upload: ReportUpload) -> None: ...

    def decline(self, round_id: str, reason: str) -> None: ...


class ShareRunner:
    def __init__(
        self,
        site: LocalSite,
        ledger: PrivacyLedger | None,
        encryptor: Callable[[str], Encryptor],  # by key id
        encrypt: Callable[[list[int], str], list[int]],  # values, key id
        uplink: Uplink,
        audit: AuditLog | None = None,
        policy: OwnerPolicy | None = None,
        signer: Signer | None = None,
        published_bounds: Sequence[ColumnBounds] = (),
    ) -> None:
        self.site = site
        self.ledger = ledger
        self._encryptor = encryptor
        self._encrypt = encrypt
        self._uplink = uplink
        self._audit = audit
        self.policy = policy or OwnerPolicy()
        self._signer = signer  # None only in insecure mode
        self._published = {b.column: (b.lower, b.upper) for b in published_bounds}

    # ------------------------------------------------------------------ before accepting

    def precheck(self, inv: Invitation, analyst: str | None = None) -> Refusal | None:
        """None to accept; else why this site declines. Cheap: no row is read."""
        try:
            ruled = policy_refusal(self.policy, inv, self._history, analyst=analyst)
            if ruled:
                return Refusal.said(ruled)
            if inv.encoding is not None:
                public = self._encryptor(inv.key_id).public
                if inv.key_id != public.key_id:
                    return Refusal.said(
                        f"round key {inv.key_id} is not the CSP key {public.key_id}"
                    )
            inv.protocol.check(inv.spec, inv.encoding, inv.dp, self.site)
        except LeteoError as exc:
            return Refusal.said(str(exc))
        self._note_narrow_bounds(inv)
        needed = inv.protocol.ledger_charge(inv.spec, inv.encoding, inv.dp, ahead=True)
        if needed is not None:
            reason = self._budget_reason(needed)
            if reason:
                return Refusal.rule("budget", reason)
        try:
            missing = self.site.missing_columns(inv.protocol.columns(inv.spec))
        except LeteoError as exc:  # the data source itself (its path stays here)
            return Refusal.rule("columns", str(exc))
        if missing:
            where = f"{self.site.file_name} (site {self.site.site_id})"
            return Refusal.rule("columns", f"column '{missing[0]}' is not in {where}")
        return None

    def _note_narrow_bounds(self, inv: Invitation) -> None:
        """A DP request whose bounds are narrower than the ones this site publishes clips its
        values: allowed (the analyst signed them), but noted in the audit log."""
        if inv.dp is None or not inv.dp.bounds or not self._published:
            return
        narrower = bounds_of.narrower_than(inv.dp.bounds, self._published)
        if narrower:
            log.info("round %s: bounds narrower than published: %s", inv.round_id, narrower)
            self._record("bounds_narrower", inv.round_id, bounds=narrower)

    def _history(self) -> list[dict]:
        """What this site did before (the audit log), for the rules that count it."""
        return audit_events(self._audit.path) if self._audit is not None else []

    def _budget_reason(self, needed: LedgerCharge) -> str:
        """Why the ledger cannot take this round (and, for a job, its later rounds), before any
        data is read; "" if it can. The text names the command that changes a budget."""
        site_id = self.site.site_id
        if self.ledger is None:
            return f"site {site_id} has no privacy budget configured ([privacy] in its config)"
        problem = self.ledger.shortfall(
            needed.budget, needed.event, job=needed.job, further=needed.further
        )
        if problem is None:
            return ""
        left = self.ledger.remaining()
        return (
            f"privacy budget of site {site_id} exhausted ({self.ledger.accountant} accountant): "
            f"{problem}; remaining epsilon {left.epsilon:g}, delta {left.delta:g}; "
            f"{BUDGET_COMMANDS}"
        )

    # ------------------------------------------------------------------ after accepting

    def run(self, inv: Invitation) -> bool:
        """Reserve, build, commit, send; decline (naming the problem) if anything fails. True
        if the round's charge was given back (nothing left the site), so the analyst's request
        gets it back too."""
        charge = inv.protocol.charge(inv.spec, inv.dp)
        taken = inv.protocol.ledger_charge(inv.spec, inv.encoding, inv.dp)
        released = False
        try:
            ledger = self._ledger() if taken is not None else None
            if ledger is not None and taken is not None:  # reserved before the data is touched
                try:
                    entry = ledger.reserve(
                        inv.round_id,
                        inv.protocol.mechanism(inv.spec, inv.dp),
                        taken.budget,
                        note=inv.protocol.describe(inv.spec, inv.dp),
                        event=taken.event,
                        job=taken.job,
                    )
                    charge = entry.budget  # what the ledger recorded for this round
                except LeteoError as exc:
                    self._decline(inv.round_id, Refusal.rule("budget", str(exc)), released=True)
                    return True
            try:
                upload = self.build(inv)
            except BaseException:
                released = True
                if ledger is not None:  # nothing left this site
                    ledger.release(inv.round_id, share_left_owner=False)
                raise
            if ledger is not None:  # committed as the share starts to leave the site
                ledger.commit(inv.round_id)
            if isinstance(upload, ReportUpload):
                self._uplink.send_reports(inv, upload)
                log.info("round %s: %d LDP reports submitted", inv.round_id, upload.n_reports)
            else:
                self._uplink.send_share(inv, upload)
                log.info(
                    "round %s: share submitted (%d ciphertexts)",
                    inv.round_id,
                    len(upload.ciphertexts),
                )
            self._record_sent(inv, upload, charge)
        except LeteoError as exc:  # met while reading the data: only the rule leaves the site
            log.warning("round %s: %s", inv.round_id, exc)
            self._decline(inv.round_id, from_error(exc), released)
        except grpc.RpcError as exc:
            # the upload may have partly left: the charge stays committed
            reason = f"upload refused: {rpc_error_message(exc)}"
            self._record("failed", inv.round_id, reason=reason)
            log.error("round %s: %s", inv.round_id, reason)
            # tell the aggregator, so the round does not wait for this share until its deadline
            self._uplink.decline(inv.round_id, reason)
        except Exception as exc:
            log.exception("round %s: computing the share crashed", inv.round_id)
            self._decline(inv.round_id, from_error(exc), released)
        return released

    def _decline(self, round_id: str, refusal: Refusal, released: bool = False) -> None:
        """Record the refusal with its detail (and whether the round's charge went back to the
        budget: the audit log and the ledger agree); the aggregator receives its public text
        only."""
        facts = refusal.facts() | ({"released": True} if released else {})
        self._record("failed", round_id, **facts)
        self._uplink.decline(round_id, refusal.public)

    def _record(self, event: str, round_id: str, **facts) -> None:
        if self._audit is not None:
            self._audit.record(event, round_id, **facts)

    def _record_sent(
        self, inv: Invitation, upload: ShareUpload | ReportUpload, charge: Budget | None
    ) -> None:
        """What left the site: protocol, columns, sizes, the budget charged."""
        facts = {
            "protocol": inv.label,
            "columns": inv.protocol.columns(inv.spec),
            **release_facts(inv),
            "epsilon": charge.epsilon if charge is not None else None,
            "delta": charge.delta if charge is not None else None,
            "header_timings": dict(upload.timings),
        }
        if isinstance(upload, ReportUpload):
            size = sum(int(c.nbytes) for c in upload.chunks)
            self._record("sent", inv.round_id, n_reports=upload.n_reports, bytes=size, **facts)
        else:
            width = self._encryptor(inv.key_id).public.ciphertext_bytes
            n = len(upload.ciphertexts)
            # the digest this site signed: the CSP decrypts only sums of shares with such digests
            digest = ciphertext_digest(upload.ciphertexts, width).hex()
            self._record(
                "sent", inv.round_id, n_ciphertexts=n, bytes=n * width, digest=digest, **facts
            )

    def _ledger(self) -> PrivacyLedger:
        if self.ledger is None:  # precheck refuses such rounds; a direct call gets this
            raise ProtocolError(f"site {self.site.site_id} has no privacy budget configured")
        return self.ledger

    def build(self, inv: Invitation) -> ShareUpload | ReportUpload:
        timings: dict[str, float] = {}
        protocol = inv.protocol
        if isinstance(protocol, ReportRounds):
            stream = protocol.reports(inv.spec, self.site, np.random.default_rng(), timings)
            return ReportUpload(stream.n_reports, list(stream.chunks), timings)
        if not isinstance(protocol, SecureSumRounds):
            raise ProtocolError(f"{protocol.name} rounds are neither reports nor a secure sum")
        enc, _ = inv.share_encoding
        values = protocol.share_values(inv.spec, enc, inv.dp, self.site, timings)
        return self.seal(inv, values, timings)

    def seal(self, inv: Invitation, values: list[int], timings: dict[str, float]) -> ShareUpload:
        """Encoded values -> (noised,) packed, masked, encrypted and signed share."""
        if len(values) != inv.n_values:
            raise ProtocolError(f"share has {len(values)} values, round expects {inv.n_values}")
        layout = inv.share_encoding[1]
        start = time.perf_counter()
        if inv.dp is not None:
            values = add_owner_noise(values, inv.dp)
        packed = pack(values, layout)
        seed = new_mask_seed()  # the CSP only ever sees this share masked
        masks = masks_from_seed(seed, len(packed), layout)
        packed = [p + r for p, r in zip(packed, masks, strict=True)]
        timings["encode_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        ciphertexts = self._encrypt(packed, inv.key_id)
        timings["encrypt_seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        public = self._encryptor(inv.key_id).public
        statement = pb.ShareStatement(
            round_id=inv.round_id,
            site_id=self.site.site_id,
            key_id=public.key_id,
            protocol=inv.label,
            invited_root=inv.invited_root,
            n_invited=inv.n_invited,
            quorum=inv.min_owners,
            n_ciphertexts=len(ciphertexts),
            ciphertext_digest=ciphertext_digest(ciphertexts, public.ciphertext_bytes),
            masked=True,
            reveal=inv.protocol.reveal_mode(inv.spec),
            spec_digest=inv.spec_digest,
        )
        signed = sign_statement(statement, self._signer)
        timings["sign_seconds"] = time.perf_counter() - start
        return ShareUpload(ciphertexts, timings, signed, seed)
