"""The aggregator's gRPC face: authenticates callers, parses streams, hands over to the engine.

What it sees: ciphertexts, its own masks, and each protocol's output (the aggregate statistics
it needs). It never sees a single owner's share in the clear. Everything protocol-specific lives
in the protocol objects (`leteo_fed.protocols`); the round lifecycle in `aggregator.rounds`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import grpc
from google.protobuf.message import DecodeError

from aggregator.owners import OwnerDirectory
from aggregator.rounds.engine import SPARK_REPORT_THRESHOLD, RoundEngine
from aggregator.rounds.jobs import job_status
from aggregator.rounds.report_intake import ReportIntake
from aggregator.rounds.reveal import Revealer
from aggregator.rounds.round import OPEN, Round, round_status
from aggregator.rounds.secure_sum import SecureSum, SignedShares
from aggregator.rounds.threshold_sum import ThresholdSecureSum
from aggregator.state import StateStore
from leteo_fed import __version__, defaults
from leteo_fed.errors import AccessDenied, ConfigError, DataError, NotFoundError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.certs import Party, check_site_id
from leteo_fed.transport.grpc_io import (
    TlsConfig,
    require_role,
    rpc_async_stream_method,
    rpc_method,
)
from leteo_fed.transport.messages import encoding_from_proto, reports_from_batch
from leteo_fed.transport.metrics import AggregatorMetrics
from leteo_fed.transport.published import owner_status
from leteo_fed.transport.rounds import (
    check_named_owners,
    check_round_id,
    common_from_proto,
    request_from_proto,
)
from leteo_fed.transport.signing import ROUND_REQUEST, verify

log = logging.getLogger("leteo.aggregator")

ANSWER_MARGIN_SECONDS = 1.0  # GetRound answers this long before the caller's deadline
MAX_TIMINGS = 32  # phase timings one upload may report
DEFAULT_JOB_LISTING = 50  # jobs ListJobs returns when the caller names no limit
MAX_JOB_LISTING = 1000

# the intakes an owner uploads to: encrypted shares or LDP reports, each read off its own stream
Intake = TypeVar("Intake", SignedShares, ReportIntake)


def check_address(address: str) -> None:
    """Where an owner is reached: host:port, the host a name, an IPv4 or a bracketed IPv6
    address, the port in 1..65535."""
    host, _, port = address.rpartition(":")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    ok = (
        0 < len(bare) <= 253
        and all(c.isascii() and (c.isalnum() or c in "-._:") for c in bare)
        and (":" not in bare or bare != host)
        and port.isascii()
        and port.isdigit()
        and 0 < int(port) < 65536
    )
    if not ok:
        shown = address if len(address) <= 60 else address[:60] + "..."
        raise DataError(f"address must be host:port (port 1-65535), got {shown!r}", field="address")


def key_service(
    tls: TlsConfig, csp_address: str, keyholders: Sequence[str], transcript: Path | None
) -> Revealer:
    """Whoever decrypts the rounds' sums: the CSP at `csp_address`, or the key holders at
    `keyholders` (every holder of the threshold key), never both."""
    if csp_address and keyholders:
        raise ConfigError(
            "the aggregator decrypts with one CSP or with key holders, not both: give a CSP "
            "address or key holder addresses",
            field="keyholders",
        )
    if keyholders:
        if len(set(keyholders)) != len(keyholders):
            raise ConfigError("a key holder is listed twice", field="keyholders")
        channels = {a: tls.channel(a, peer="keyholder") for a in keyholders}
        return ThresholdSecureSum(channels, transcript)
    if not csp_address:
        raise ConfigError("the aggregator needs a CSP address or key holder addresses", field="csp")
    return SecureSum(tls.channel(csp_address, peer="csp"), csp_address, transcript)


def _wait_seconds(asked: float, context: grpc.ServicerContext) -> float:
    """How long GetRound may block: what was asked, at most MAX_WAIT_SECONDS, and short of the
    caller's deadline, so the caller gets the status rather than DEADLINE_EXCEEDED."""
    if math.isnan(asked):
        raise DataError("wait_seconds must be a number of seconds, got NaN", field="wait_seconds")
    wait = min(max(asked, 0.0), defaults.MAX_WAIT_SECONDS)
    remaining = context.time_remaining()
    if remaining is not None:
        wait = min(wait, max(0.0, remaining - ANSWER_MARGIN_SECONDS))
    return wait


def timings_from_header(timings) -> dict[str, float]:
    """An owner's phase timings (they go into the published result): a few named, finite,
    non-negative durations."""
    if len(timings) > MAX_TIMINGS:
        raise DataError(f"more than {MAX_TIMINGS} timings", field="timings")
    for name, seconds in timings.items():
        if not 0 < len(name) <= 64:
            raise DataError("a timing's name must have 1 to 64 characters", field="timings")
        if not (math.isfinite(seconds) and seconds >= 0):
            raise DataError(
                f"timing {name!r} must be a finite number of seconds >= 0, got {seconds}",
                field="timings",
            )
    return dict(timings)


def _counting_refusals(method):
    """An upload handler whose refusals are counted by reason (`leteo_shares_refused`)."""

    @functools.wraps(method)
    def wrapper(self, request_iterator, context):
        try:
            return method(self, request_iterator, context)
        except BaseException as exc:
            self.metrics.share_refused(exc)
            raise

    return wrapper


class AggregatorService(pb_grpc.AggregatorServicer):
    def __init__(
        self,
        tls: TlsConfig,
        csp_address: str,
        name: str = "aggregator",
        transcript: Path | None = None,
        spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
        state_dir: Path | None = None,
        idle_owner_days: float | None = defaults.IDLE_OWNER_DAYS,
        max_owners: int = defaults.MAX_CONNECTED_OWNERS,
        keyholders: Sequence[str] = (),
    ) -> None:
        """`state_dir`: where registrations, jobs and rounds are kept across restarts (see
        aggregator/state.py); None keeps them in memory only. With a state dir, call
        `engine.recover()` once at start-up. `idle_owner_days`: owners not heard from for
        longer are not invited unless an analyst names them (None: always invited).
        `keyholders`: the holders of a threshold key decrypt instead of a CSP (`csp_address`
        then empty)."""
        self._name = name
        self._tls = tls
        self.store = StateStore(state_dir) if state_dir is not None else None
        self.metrics = AggregatorMetrics()
        decryption = key_service(tls, csp_address, keyholders, transcript)
        store = self.store
        self.owners = OwnerDirectory(
            tls,
            max_connected=max_owners,
            final_status=self._final_status,
            on_register=store.save_owner if store is not None else None,
            idle_seconds=idle_owner_days * 86400 if idle_owner_days else None,
            on_seen=store.touch_owners if store is not None else None,
            on_remove=store.delete_owner if store is not None else None,
        )
        self.engine = RoundEngine(
            self.owners,
            decryption,
            self._publish,
            spark_report_threshold,
            owners_ca=tls.role_ca("owner"),
            store=self.store,
            rebuild=_rebuild,
            metrics=self.metrics,
        )
        self.metrics.watch_owners(self.owners.connected_count)
        if self.store is not None:
            self.owners.restore(self.store.owners(), self.store.owners_last_seen())

    def public_key(self):
        return self.engine.secure_sum.public_key()

    # ------------------------------------------------------------------ RPCs: anyone

    @rpc_method
    def Health(self, request, context):
        return pb.HealthReply(
            party=self._name, role="aggregator", version=__version__, status="SERVING"
        )

    # ------------------------------------------------------------------ RPCs: owners

    @rpc_method
    def RegisterOwner(self, request, context):
        caller = require_role(context, "owner")
        if request.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot register as '{request.site_id}'")
        check_site_id(request.site_id)
        check_address(request.address)
        self.owners.register(request.site_id, request.address)
        return pb.Ack(ok=True, message=f"registered {request.site_id}")

    @rpc_async_stream_method
    async def Connect(self, request, context):
        """An outbound owner's stream of invitations and results, open until either side
        closes it (the owner reconnects with backoff). A coroutine on the server's event loop:
        an idle stream holds no thread. What may block (the state, other owners' locks) runs
        on the worker pool."""
        caller = require_role(context, "owner")
        if request.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot connect as '{request.site_id}'")
        check_site_id(request.site_id)
        for round_id in request.awaiting:
            check_round_id(round_id)
        loop = asyncio.get_running_loop()
        link, _ = await loop.run_in_executor(
            None, self.owners.connect, caller.name, request, _always_active
        )
        try:
            async for task in link.stream():
                yield task
        finally:  # the stream ended, was closed, or the owner went away (cancelled)
            loop.run_in_executor(None, self.owners.disconnected, link)

    @rpc_method
    def AnswerInvite(self, request, context):
        caller = require_role(context, "owner")
        if request.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot answer for '{request.site_id}'")
        reason = "" if request.accepted else request.reason or "declined"
        self.owners.answer(caller.name, request.round_id, reason)
        return pb.Ack(ok=True)

    def _final_status(self, round_id: str) -> pb.RoundStatus | None:
        """The published status of a finished round (None while open or unknown)."""
        try:
            rnd = self.engine.round(round_id)
        except NotFoundError:  # a round from before a restart
            return self.engine.stored_round_status(round_id)
        status = round_status(rnd)
        return None if status.state == OPEN else status

    def _open_upload(self, request_iterator, context, takes: type[Intake]):
        """Common start of an owner's upload stream: who, which round (one whose intake `takes`
        this kind of upload), and one upload each."""
        caller = require_role(context, "owner")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("an upload must start with its header")
        header = first.header
        if header.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot submit for '{header.site_id}'")
        timings = timings_from_header(header.timings)
        rnd = self.engine.round(header.round_id)
        intake = rnd.intake
        if not isinstance(intake, takes):
            kind = "LDP reports" if takes is ReportIntake else "an encrypted share"
            raise ProtocolError(f"round {rnd.round_id} ({rnd.label}) does not take {kind}")
        rnd.begin_share(caller.name)
        return caller, header, rnd, intake, timings

    @rpc_method
    @_counting_refusals
    def SubmitShare(self, request_iterator, context):
        caller, header, rnd, intake, timings = self._open_upload(
            request_iterator, context, SignedShares
        )
        try:
            self._check_header(rnd, intake, header)
            view = (rnd.invited, rnd.min_owners, rnd.label)
            share = intake.receive(caller.name, header, request_iterator, view)
        except BaseException:
            rnd.abort_share(caller.name)
            self.engine.upload_failed(rnd)
            raise
        complete = rnd.accept(caller.name, share, timings)
        log.info(
            "round %s: share from %s accepted (%d/%d)",
            rnd.round_id,
            caller.name,
            len(rnd.submitted),
            len(rnd.invited),
        )
        self.metrics.share_received(rnd.label)
        self.engine.accepted(rnd, complete)
        return pb.Ack(ok=True, message=f"share accepted for {rnd.round_id}")

    def _check_header(self, rnd: Round, intake: SignedShares, header: pb.ShareHeader) -> None:
        public = intake.public
        if header.key_id != public.key_id:
            raise ProtocolError(
                f"share encrypted under key {header.key_id}, round uses {public.key_id}"
            )
        if header.dimension != rnd.plan.dimension:
            raise DataError(
                f"share has dimension {header.dimension}, round {rnd.round_id} has "
                f"{rnd.plan.dimension} features",
                field="dimension",
            )
        enc, layout = encoding_from_proto(header.encoding, public.bits)
        if enc != rnd.plan.encoding or layout != intake.layout:
            raise DataError("share encoding differs from the round's encoding", field="encoding")
        if header.n_ciphertexts != intake.n_ciphertexts:
            raise DataError(
                f"share declares {header.n_ciphertexts} ciphertexts, round expects "
                f"{intake.n_ciphertexts}",
                field="n_ciphertexts",
            )

    @rpc_method
    @_counting_refusals
    def SubmitReports(self, request_iterator, context):
        caller, header, rnd, intake, timings = self._open_upload(
            request_iterator, context, ReportIntake
        )
        declared = int(header.n_reports)
        parts, count = [], 0
        try:
            # accumulated + in-flight + this owner's declared reports: above the threshold the
            # chunks go to files and Spark estimates at the end (geo rounds keep their points)
            expected = intake.declare(declared)
            threshold = self.engine.spark_report_threshold
            if intake.spill_if_over(expected, threshold, rnd.round_id):
                log.info(
                    "round %s: %d reports expected (threshold %d): chunks spill to %s, "
                    "the estimate will run on Spark",
                    rnd.round_id,
                    expected,
                    threshold,
                    intake.spill_dir,
                )
                self.engine.warm_spark()
            for msg in request_iterator:
                if msg.WhichOneof("part") != "batch":
                    raise ProtocolError("only report batches may follow the header")
                reports = reports_from_batch(msg.batch)
                parts.append(intake.partial(reports))
                count += len(reports)
                if count > header.n_reports:
                    raise DataError(f"more than the {header.n_reports} reports declared")
            if count != header.n_reports:
                raise ProtocolError(f"incomplete reports: {count} of {header.n_reports} arrived")
        except BaseException:
            intake.declare(-declared)
            intake.discard(parts)  # spilled chunk files of this upload, never folded
            rnd.abort_share(caller.name)
            self.engine.upload_failed(rnd)
            raise
        complete = rnd.accept(caller.name, parts, timings)
        log.info("round %s: %d reports from %s accepted", rnd.round_id, count, caller.name)
        self.metrics.share_received(rnd.label, reports=count)
        self.engine.accepted(rnd, complete)
        return pb.Ack(ok=True, message=f"{count} reports accepted for {rnd.round_id}")

    @rpc_method
    def Decline(self, request, context):
        caller = require_role(context, "owner")
        if request.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot decline for '{request.site_id}'")
        rnd = self.engine.round(request.round_id)
        log.warning("round %s: %s declined: %s", rnd.round_id, caller.name, request.reason)
        self.engine.decline(rnd, caller.name, request.reason)
        return pb.Ack(ok=True)

    # ------------------------------------------------------------------ RPCs: data user

    @rpc_method
    def ListOwners(self, request, context):
        require_role(context, "analyst", "aggregator")
        return pb.OwnerList(owners=self.owners.listing())

    @rpc_method
    def RemoveOwners(self, request, context):
        require_role(context, "aggregator")  # the operator, with the aggregator's certificate
        sites = list(request.site_ids)
        if not sites or len(sites) > defaults.MAX_CONNECTED_OWNERS:
            raise DataError("name between 1 and the most owners the aggregator serves")
        self.owners.remove(sites)
        return pb.OwnerList(owners=self.owners.listing())

    @rpc_method
    def GetRound(self, request, context):
        require_role(context, "analyst", "aggregator")
        wait = _wait_seconds(request.wait_seconds, context)
        job = self.engine.job(request.round_id)
        if job is not None:
            if wait:
                job.done.wait(wait)
            return job_status(job)
        try:
            rnd = self.engine.round(request.round_id)
        except NotFoundError:  # a job or round from before a restart: its kept status
            stored = self.engine.stored_status(request.round_id)
            if stored is None:
                raise
            return stored
        if wait:
            rnd.done.wait(wait)
        return round_status(rnd)

    @rpc_method
    def ListJobs(self, request, context):
        caller = require_role(context, "analyst", "aggregator")
        limit = request.limit or DEFAULT_JOB_LISTING
        if limit > MAX_JOB_LISTING:
            raise DataError(f"limit must be at most {MAX_JOB_LISTING}, got {limit}", field="limit")
        everyone = caller.role == "aggregator"
        return pb.JobList(jobs=self.engine.jobs_listing(None if everyone else caller.name, limit))

    @rpc_method
    def StartRound(self, start, context):
        caller = require_role(context, "analyst", "aggregator")
        signed = start.request
        request = self._authorized_request(signed, caller)
        protocol, payload = request_from_proto(request)
        # the named owners, checked against the root the analyst signed: exactly those invited
        named = check_named_owners(request, list(start.owners))
        job = self.engine.start(
            protocol,
            payload,
            lambda n: common_from_proto(request, n),
            named,
            caller.name,
            signed,
        )
        return job_status(job)

    def _authorized_request(self, signed: pb.Signed, caller: Party) -> pb.RoundRequest:
        """The analyst's signed request. Owners verify the signature themselves; checking it
        here too refuses a bad one before anything is opened."""
        analysts_ca = self._tls.role_ca("analyst")
        if analysts_ca is not None:
            signer = verify(signed, ROUND_REQUEST, analysts_ca, "analyst", "the round request")
            if signer.name != caller.name:
                raise AccessDenied(
                    f"'{caller.name}' sent a round request signed by '{signer.name}'"
                )
        request = pb.RoundRequest()
        try:
            request.ParseFromString(signed.body)
        except DecodeError as exc:
            raise DataError("the signed round request is not a RoundRequest") from exc
        return request

    # ------------------------------------------------------------------ results

    def _publish(self, rnd: Round) -> None:
        status = round_status(rnd)
        for site in rnd.invited:  # each owner its slim copy: no per-owner lists
            self.engine.submit(self.owners.publish, site, owner_status(status, site))

    def stop_serving(self) -> None:
        """Stop now: pending work is cancelled, owners' streams end, in-flight calls end with
        the channels. The state stays open: calls and streams still ending write to it
        (`close_state` once the server has stopped)."""
        self.engine.close()
        self.engine.secure_sum.close()
        self.owners.close()

    def close_state(self) -> None:
        if self.store is not None:
            self.store.close()

    def close(self) -> None:
        """Stop and close the state (a service not served by a gRPC server, e.g. in tests)."""
        self.stop_serving()
        self.close_state()


def _always_active() -> bool:
    """An event-loop stream learns that its owner went away by being cancelled."""
    return True


def _rebuild(signed_bytes: bytes):
    """A kept job's signed request planned again after a restart (`recovery.Rebuild`): the
    protocol, its payload, the common fields for n invited owners, and the envelope relayed to
    owners. Its signature was checked when the job started."""
    try:
        signed = pb.Signed.FromString(signed_bytes)
        request = pb.RoundRequest.FromString(signed.body)
    except DecodeError as exc:
        raise DataError("the kept round request is unreadable") from exc
    protocol, payload = request_from_proto(request)
    return protocol, payload, lambda n: common_from_proto(request, n), signed


def add_to_server(server: grpc.Server, service: AggregatorService) -> None:
    pb_grpc.add_AggregatorServicer_to_server(service, server)
