"""The owner agent's gRPC face: sits next to a site's data, answers invitations with shares.

Raw rows never leave this process. Per round it sends one share: the encoded statistics,
packed and Paillier-encrypted under the public key of the CSP or of the threshold key's holders
(`owner_agent.key_custody`; or, for LDP rounds, one perturbed report per record). A problem with the data (missing column, NaN, out-of-bound value) is
reported to the aggregator as a decline naming the rule only; the detail stays in the site's
audit log (`owner_agent.refusals`). Before anything is read, the
analyst's signed request relayed with the round is verified and bound to the round
(`owner_agent.authorization`), and the site's policy applied (`owner_agent.policy`). The protocol
logic lives in `leteo_fed.protocols`; the check-charge-build-send sequence in
`owner_agent.shares`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from leteo_fed import __version__, defaults
from leteo_fed.config import OwnerConfig
from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.data import sources
from leteo_fed.errors import LeteoError, ProtocolError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import registry
from leteo_fed.transport.grpc_io import require_role, rpc_error_message, rpc_method
from leteo_fed.transport.messages import (
    batches,
    encoding_to_proto,
    reports_to_batch,
)
from leteo_fed.transport.metrics import OwnerMetrics
from leteo_fed.transport.published import is_included
from leteo_fed.transport.rounds import (
    Invitation,
    check_round_id,
    invitation_from_proto,
    result_document,
)
from owner_agent.audit import AuditLog, awaiting_results, describe_invitation, results_received
from owner_agent.audit import read as audit_events
from owner_agent.authorization import Authorization, SignedRequests, authorize, verify_request
from owner_agent.budget_period import open_ledger
from owner_agent.key_custody import KeyCustody, open_custody
from owner_agent.keys import ShareKeys
from owner_agent.policy import analyst_refusal
from owner_agent.refusals import Refusal
from owner_agent.shares import ReportUpload, ShareRunner, ShareUpload
from owner_agent.site_data import LocalSite
from owner_agent.uplink import AggregatorLink
from owner_agent.withdrawal import Withdrawals

log = logging.getLogger("leteo.owner")

MAX_AWAITING = 1000  # rounds a reconnecting owner asks results for (the most recent)


class OwnerAgentService(pb_grpc.OwnerAgentServicer):
    def __init__(self, config: OwnerConfig) -> None:
        self.config = config
        self._aggregator_channel: grpc.Channel | None = None
        # who holds the secret key: the CSP, or the holders of a threshold key
        self._aggregator, self.custody = self._open_peers()
        # the custody's keys by key id, each with its prepared encryptor (and encryption pool)
        self.keys = ShareKeys(self._fetch_key, config.randomizer)
        self._stop = threading.Event()
        self._jobs: dict[str, object] = {}  # round id -> the job computing its share
        self.site = LocalSite(config.site_id, config.data, config.policy.min_rows)
        audit_path = config.audit_log or Path(f"audit-{config.site_id}.jsonl")
        self.audit = AuditLog(audit_path, config.site_id)
        ledger = open_ledger(config, self.audit)  # a closed budget period goes to the audit log
        if ledger is not None:
            ledger.renew_if_due()
        self._analysts_ca = config.tls.role_ca("analyst")  # None without TLS
        self.requests = SignedRequests(audit_events(audit_path))
        self.runner = ShareRunner(
            self.site,
            ledger,
            self.keys.encryptor,
            self.keys.encrypt,
            self,
            self.audit,
            config.policy,
            signer=config.tls.signer(),
            published_bounds=config.published_bounds,
        )
        self.metrics = OwnerMetrics()
        self.metrics.watch_ledger(ledger)  # the budget gauges read the ledger at each scrape
        self.results: dict[str, dict] = {}
        self.withdrawals = Withdrawals(ledger, self.custody, self.audit, self.requests.release)
        for stale in self.withdrawals.release_stale():  # before any invitation reserves anew
            self.requests.release(stale)
        self._result_lock = threading.Lock()
        events = audit_events(audit_path)
        self._awaiting = awaiting_results(events)
        self._received = results_received(events)
        self.link: AggregatorLink | None = None
        if config.outbound:
            self.link = AggregatorLink(
                self._reconnect_aggregator,
                config.site_id,
                self._invited_over_link,
                self.receive_result,
                lambda: list(self._awaiting)[-MAX_AWAITING:],
                self._stop,
            )

    # ------------------------------------------------------------------ lifecycle

    def _open_peers(self) -> tuple[pb_grpc.AggregatorStub, KeyCustody]:
        """The aggregator's stub and the key's custody, each on channels of this agent's own
        (the simulation's virtual owners put theirs on a shared event loop instead)."""
        config = self.config
        self._aggregator_channel = config.tls.channel(config.aggregator, peer="aggregator")
        return pb_grpc.AggregatorStub(self._aggregator_channel), open_custody(config)

    def _reconnect_aggregator(self) -> pb_grpc.AggregatorStub:
        """A new channel to the aggregator (its name resolved anew), used from now on by every
        call; the old one is closed (its calls had failed or will fail: the peer is gone)."""
        channel = self.config.tls.channel(self.config.aggregator, peer="aggregator")
        old, self._aggregator_channel = self._aggregator_channel, channel
        self._aggregator = pb_grpc.AggregatorStub(channel)
        if old is not None:
            old.close()
        return self._aggregator

    def start_background(self) -> None:
        """Load what judging and computing a round needs, then connect out to the aggregator
        (outbound mode) or register this agent's address with it (inbound mode, again every
        REGISTER_INTERVAL_SECONDS).

        The aggregator hears of this agent only once it can answer an invitation at once: with
        hundreds of agents invited together, one that first imports its protocol modules or
        builds its key's table while the round waits is one that answers late."""
        start = time.perf_counter()
        loaded = registry.names()  # every protocol module and what it imports
        plugins = [p.name for p in registry.statistics() if getattr(p, "plugin", False)]
        log.info(
            "%d protocols loaded in %.2f s (plugin statistics: %s)",
            len(loaded),
            time.perf_counter() - start,
            ", ".join(plugins) or "none",
        )
        threading.Thread(target=self._get_ready, name="ready", daemon=True).start()
        # charged rounds an earlier run left without a result: watched again (withdrawal.py)
        threading.Thread(
            target=self.withdrawals.reconcile,
            args=(audit_events(self.audit.path),),
            name="reconcile",
            daemon=True,
        ).start()

    def stop(self) -> None:
        """Stop taking rounds, let the shares being computed finish (STOP_GRACE_SECONDS at
        most), then close. A share still running after that is abandoned: its round completes
        without this site or fails, and a charge it committed is settled at the next start
        (owner_agent/withdrawal.py)."""
        self._stop.set()
        if self.link is not None:
            self.link.close()
        running = self._finish_jobs(defaults.STOP_GRACE_SECONDS)
        if running:
            log.warning("stopping with share(s) still being computed: %s", ", ".join(running))
        self.keys.close()
        self.custody.close()
        if self._aggregator_channel is not None:
            self._aggregator_channel.close()

    def _finish_jobs(self, grace: float) -> list[str]:
        """Wait up to `grace` seconds for the share jobs' threads; the rounds still running.
        (A simulation's virtual owners run theirs on a pool and stop by their own `stop`.)"""
        end = time.monotonic() + grace
        jobs = list(self._jobs.items())  # an inbound agent's Invite may still add one
        threads = {r: j for r, j in jobs if isinstance(j, threading.Thread)}
        for job in threads.values():
            job.join(max(0.0, end - time.monotonic()))
        return [round_id for round_id, job in threads.items() if job.is_alive()]

    def _register_loop(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            try:
                self._aggregator.RegisterOwner(
                    pb.OwnerRegistration(
                        site_id=self.config.site_id, address=self.config.advertise
                    ),
                    timeout=defaults.REGISTER_TIMEOUT_SECONDS,
                )
                delay = defaults.REGISTER_INTERVAL_SECONDS
            except grpc.RpcError as exc:
                log.info("aggregator not reachable yet (%s); retrying", rpc_error_message(exc))
                delay = min(delay * 2, 5.0)
            self._stop.wait(delay)

    def _get_ready(self) -> None:
        """The CSP's current key and its table first, then the aggregator. A CSP that does not
        answer does not keep the agent away: it connects and keeps asking for the key."""
        start = time.perf_counter()
        sources.warm_up()
        try:
            self.encryptor()
            ready = True
        except LeteoError as exc:
            log.info("CSP not reachable yet (%s); retrying while connected", exc)
            ready = False
        if self.link is not None:
            self.link.start()
        else:
            threading.Thread(target=self._register_loop, name="register", daemon=True).start()
        if ready:
            log.info("ready to answer invitations (%.2f s)", time.perf_counter() - start)
        else:
            self._warm_up()

    def _warm_up(self) -> None:
        delay = 0.2
        while not self._stop.is_set():
            self._stop.wait(delay)
            try:
                self.encryptor()
                log.info("ready to answer invitations")
                return
            except LeteoError as exc:
                log.info("CSP not reachable yet (%s); retrying", exc)
                delay = min(delay * 2, 5.0)

    def _fetch_key(self, key_id: str) -> PublicKey:
        return self.custody.public_key(key_id)

    def encryptor(self, key_id: str = "") -> Encryptor:
        """The encryptor for the key `key_id` (the current key without one): `ShareKeys`."""
        return self.keys.encryptor(key_id)

    # ------------------------------------------------------------------ RPCs

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(
            party=self.config.site_id, role="owner", version=__version__, status="SERVING"
        )

    @rpc_method
    def Invite(self, request, context):
        require_role(context, "aggregator")
        if self.link is not None:
            raise ProtocolError(
                "this owner is in outbound mode: it takes invitations over its own connection "
                "to the aggregator"
            )
        reason, inv = self._consider(request)
        if reason or inv is None:
            return pb.InviteReply(accepted=False, reason=reason)
        self._start_share(inv)
        return pb.InviteReply(accepted=True)

    def _invited_over_link(self, spec: pb.RoundSpec) -> None:
        """Outbound mode: decide, answer with AnswerInvite, and start the share if the
        aggregator took the acceptance (it drops invitations it stopped waiting for)."""
        received = time.perf_counter()
        if 0 < spec.deadline_unix < time.time():
            reason, inv = "the round's deadline passed before the invitation arrived", None
            log.warning("round %s: %s", spec.round_id, reason)
            self.metrics.decided(False, reason)
        else:
            reason, inv = self._consider(spec)
        answer = pb.InviteAnswer(
            round_id=spec.round_id, site_id=self.config.site_id, accepted=not reason, reason=reason
        )
        try:
            self._aggregator.AnswerInvite(answer, timeout=defaults.DECLINE_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            if inv is not None and not reason:  # accepted, but the aggregator no longer waits
                why = f"the aggregator did not take the acceptance: {rpc_error_message(exc)}"
                self.requests.release(inv.round_id)
                self.audit.record("failed", inv.round_id, reason=why)
                log.warning("round %s: %s", inv.round_id, why)
            else:
                log.warning("round %s: could not answer: %s", spec.round_id, rpc_error_message(exc))
            return
        log.info(
            "round %s: answered (%s) in %.3f s",
            spec.round_id,
            "accepted" if not reason else "declined",
            time.perf_counter() - received,
        )
        if inv is not None and not reason:
            self._start_share(inv)

    def _consider(self, request: pb.RoundSpec) -> tuple[str, Invitation | None]:
        """Decide on an invitation and record it ('' = accepted)."""
        refusal, inv, auth = self._accept(request)
        facts: dict = {"protocol": request.protocol}
        if inv is not None:
            try:
                facts = describe_invitation(inv)
            except LeteoError as exc:  # a spec too malformed to describe is refused anyway
                refusal = refusal or Refusal.said(str(exc))
        if auth is not None:
            facts.update(request_digest=auth.digest)
        self.audit.record("invitation", request.round_id, **facts)
        if refusal is not None or inv is None:
            refusal = refusal or Refusal.said("declined")
            self.audit.record("decision", request.round_id, accepted=False, **refusal.facts())
            log.warning("round %s declined: %s", request.round_id, refusal.detail)
            self.metrics.decided(False, refusal.public)
            return refusal.public, None
        self.audit.record("decision", request.round_id, accepted=True, reason=None)
        self.metrics.decided(True)
        return "", inv

    def _start_share(self, inv: Invitation) -> None:
        self._awaiting[inv.round_id] = None
        while len(self._awaiting) > MAX_AWAITING:
            self._awaiting.popitem(last=False)
        self._jobs[inv.round_id] = self._run_job(f"share-{inv.round_id}", self._run_share, inv)

    def _run_job(self, name: str, target: Callable[..., object], *args: object) -> object:
        """Run `target(*args)` in the background: a thread of its own (a simulation's virtual
        owners use their process's pool)."""
        job = threading.Thread(target=target, args=args, name=name, daemon=True)
        job.start()
        return job

    def _accept(
        self, request: pb.RoundSpec
    ) -> tuple[Refusal | None, Invitation | None, Authorization | None]:
        """Cheap checks answered synchronously; the heavy work runs after the reply. The
        analyst's authorization comes first: nothing is read for an unauthorized round."""
        if self._stop.is_set():  # a job started now would be cut short by the exit
            return Refusal.said("this agent is stopping"), None, None
        if request.round_id in self._jobs:
            return Refusal.said(f"round {request.round_id} was already accepted"), None, None
        try:
            # the round's key (fetched from the CSP by id if new: a rotation happened)
            bits = self.encryptor(request.key_id).public.bits if request.key_id else 0
            inv = invitation_from_proto(request, bits)
        except LeteoError as exc:
            return Refusal.said(str(exc)), None, None
        try:
            auth = verify_request(inv.authorization, self._analysts_ca)
        except LeteoError as exc:
            return Refusal.said(str(exc)), inv, None
        self.audit.attach(inv.round_id, analyst=auth.analyst)
        policy = self.config.policy
        reason = analyst_refusal(policy, auth.analyst)
        if reason:
            return Refusal.said(reason), inv, auth
        try:
            authorize(
                inv,
                auth,
                self.config.site_id,
                policy.request_max_age_hours,
                self.requests,
                time.time(),
                bits,
            )
        except LeteoError as exc:
            return Refusal.said(str(exc)), inv, auth
        refusal = self.runner.precheck(inv, auth.analyst)
        if refusal is not None:
            self.requests.release(inv.round_id)
        return refusal, inv, auth

    def _run_share(self, inv: Invitation) -> None:
        if self.runner.run(inv):  # nothing left: the analyst's request gets the charge back
            self.requests.release(inv.round_id)
        # a charged share whose round never yields a result gets its budget back (see
        # owner_agent/withdrawal.py) once the key's custody attests it can never be decrypted
        self.withdrawals.watch(inv.round_id, inv.deadline_unix)

    @rpc_method
    def PublishResult(self, request, context):
        require_role(context, "aggregator")
        if self.link is not None:
            raise ProtocolError(
                "this owner is in outbound mode: it takes results over its own connection "
                "to the aggregator"
            )
        self.receive_result(request)
        return pb.Ack(ok=True)

    def receive_result(self, status: pb.RoundStatus) -> None:
        """A round's published end, kept once: a repeat (sent again after a reconnect or an
        aggregator restart) is ignored. A failure gives a charged share's budget back first
        (`owner_agent.withdrawal`), so the next invitation sees it."""
        check_round_id(status.round_id)  # the result's file is named after it
        if status.state not in ("COMPLETED", "FAILED"):
            raise ProtocolError(
                f"round {status.round_id}: a result must be final, got {status.state!r}"
            )
        with self._result_lock:
            if status.round_id in self._received:
                log.info("round %s: result already received; repeat ignored", status.round_id)
                return
            doc = {
                "round_id": status.round_id,
                "state": status.state,
                "message": status.message,
                "result": result_document(status),
            }
            self.results[status.round_id] = doc
            self._received.add(status.round_id)
            self._awaiting.pop(status.round_id, None)
        included = is_included(status, self.config.site_id)
        self.audit.record(
            "result", status.round_id, state=status.state, message=status.message, included=included
        )
        if self.config.results_dir is not None:
            atomic_write_json(Path(self.config.results_dir) / f"{status.round_id}.json", doc)
        log.info("round %s result received: %s", status.round_id, status.state)
        self.withdrawals.result(
            status.round_id, status.state, wait=self.link is not None, included=included
        )

    # ------------------------------------------------------------------ uplink to the aggregator

    def send_share(self, inv: Invitation, upload: ShareUpload) -> None:
        enc, layout = inv.share_encoding
        header = pb.ShareHeader(
            round_id=inv.round_id,
            site_id=self.config.site_id,
            key_id=inv.key_id,
            dimension=inv.protocol.dimension(inv.spec),
            encoding=encoding_to_proto(enc, layout),
            n_ciphertexts=len(upload.ciphertexts),
            timings=upload.timings,
            statement=upload.statement,
            mask_seed=upload.mask_seed,
        )
        width = self.encryptor(inv.key_id).public.ciphertext_bytes

        def chunks():
            yield pb.ShareChunk(header=header)
            for chunk in batches(upload.ciphertexts, width):
                yield pb.ShareChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

        self._aggregator.SubmitShare(chunks(), timeout=defaults.SHARE_UPLOAD_TIMEOUT_SECONDS)
        self.metrics.uploaded(reports=False)

    def send_reports(self, inv: Invitation, upload: ReportUpload) -> None:
        header = pb.ReportHeader(
            round_id=inv.round_id,
            site_id=self.config.site_id,
            n_reports=upload.n_reports,
            timings=upload.timings,
        )

        def stream():
            yield pb.ReportChunk(header=header)
            for chunk in upload.chunks:
                yield pb.ReportChunk(batch=reports_to_batch(chunk))

        self._aggregator.SubmitReports(stream(), timeout=defaults.REPORT_UPLOAD_TIMEOUT_SECONDS)
        self.metrics.uploaded(reports=True)

    def decline(self, round_id: str, reason: str) -> None:
        log.warning("round %s: declining: %s", round_id, reason)
        self.metrics.refused(reason)
        try:
            self._aggregator.Decline(
                pb.DeclineNotice(round_id=round_id, site_id=self.config.site_id, reason=reason),
                timeout=defaults.DECLINE_TIMEOUT_SECONDS,
            )
        except grpc.RpcError as exc:
            log.error("could not tell the aggregator: %s", rpc_error_message(exc))


def add_to_server(server: grpc.Server, service: OwnerAgentService) -> None:
    pb_grpc.add_OwnerAgentServicer_to_server(service, server)
