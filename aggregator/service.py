"""The aggregator (data user): runs rounds, sums encrypted shares, blinds, asks the CSP, unblinds.

What it sees: ciphertexts, its own masks, and the protocol output (the aggregate statistics it
needs to compute PCA). It never sees a single owner's share in the clear.
"""

from __future__ import annotations

import atexit
import json
import logging
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np

from aggregator.kmeans_job import IterationContext, KmeansJob
from aggregator.plan import DpPlan, LdpRoundPlan, plan_kmeans, plan_round
from aggregator.rounds import COMPLETED, FAILED, Round
from leteo_fed import __version__
from leteo_fed.crypto.paillier import (
    PublicKey,
    add_plaintexts,
    bytes_to_int,
    check_ciphertext,
)
from leteo_fed.encoding.packing import draw_masks, pack_raw, unblind, unpack
from leteo_fed.errors import (
    DataError,
    LeteoError,
    NotFoundError,
    PeerUnavailable,
    ProtocolError,
)
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import discriminant, kmeans, ldp_collection, moments, pca, rotation
from leteo_fed.transport.certs import check_site_id
from leteo_fed.transport.grpc_io import (
    TlsConfig,
    require_role,
    rpc_error_message,
    rpc_method,
)
from leteo_fed.transport.messages import (
    batches,
    encoding_from_proto,
    encoding_to_proto,
    fetch_public_key,
    grouping_to_proto,
)

log = logging.getLogger("leteo.aggregator")

INVITE_TIMEOUT_SECONDS = 10.0
CSP_TIMEOUT_SECONDS = 300.0
SPARK_REPORT_THRESHOLD = 5_000_000  # LDP rounds expecting more reports are estimated with Spark


def _dp_spec(dp: DpPlan) -> pb.DpSpec:
    """What owners need to add their share of the distributed Skellam noise."""
    return pb.DpSpec(
        epsilon=dp.epsilon,
        delta=dp.delta,
        row_norm_bound=dp.row_norm_bound,
        mu=dp.mu,
        quorum=dp.quorum,
        mechanism="skellam",
    )


class AggregatorService(pb_grpc.AggregatorServicer):
    def __init__(
        self,
        tls: TlsConfig,
        csp_address: str,
        name: str = "aggregator",
        transcript: Path | None = None,
        spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
    ) -> None:
        if spark_report_threshold < 0:
            raise ValueError(f"spark_report_threshold must be >= 0, got {spark_report_threshold}")
        self._spark_report_threshold = spark_report_threshold
        self._transcript = transcript
        self._tls = tls
        self._name = name
        self._csp_address = csp_address
        self._csp_channel = tls.channel(csp_address)
        self._csp = pb_grpc.CryptoServiceProviderStub(self._csp_channel)
        self._public: PublicKey | None = None
        self._owners: dict[str, str] = {}
        self._owner_stubs: dict[str, pb_grpc.OwnerAgentStub] = {}
        self._owner_channels: list[grpc.Channel] = []
        self._rounds: dict[str, Round] = {}
        self._jobs: dict[str, KmeansJob] = {}  # federated k-means jobs, by job id
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="round")

    # ------------------------------------------------------------------ helpers

    def public_key(self) -> PublicKey:
        if self._public is None:
            self._public = fetch_public_key(self._csp, self._csp_address)
            log.info("CSP public key %s (%d bits)", self._public.key_id, self._public.bits)
        return self._public

    def _owner_stub(self, site: str) -> pb_grpc.OwnerAgentStub:
        with self._lock:
            address = self._owners[site]
            stub = self._owner_stubs.get(address)
            if stub is None:
                channel = self._tls.channel(address)
                self._owner_channels.append(channel)
                stub = pb_grpc.OwnerAgentStub(channel)
                self._owner_stubs[address] = stub
            return stub

    def _round(self, round_id: str) -> Round:
        with self._lock:
            rnd = self._rounds.get(round_id)
        if rnd is None:
            raise NotFoundError(f"unknown round {round_id!r}")
        return rnd

    @staticmethod
    def status(rnd: Round) -> pb.RoundStatus:
        with rnd.lock:
            return pb.RoundStatus(
                round_id=rnd.round_id,
                protocol=rnd.protocol,
                state=rnd.state,
                message=rnd.message,
                invited=rnd.invited,
                submitted=list(rnd.submitted),
                missing=rnd.missing(),
                result_json=json.dumps(rnd.result) if rnd.result else "",
            )

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
        if not request.address or ":" not in request.address:
            raise DataError("address must be host:port", field="address")
        with self._lock:
            previous = self._owners.get(request.site_id)
            self._owners[request.site_id] = request.address
        if previous != request.address:
            log.info("owner %s registered at %s", request.site_id, request.address)
        return pb.Ack(ok=True, message=f"registered {request.site_id}")

    def _open_upload(self, request_iterator, context, ldp: bool):
        """Common start of an owner's upload stream: who, which round, and one upload each."""
        caller = require_role(context, "owner")
        first = next(request_iterator, None)
        if first is None or first.WhichOneof("part") != "header":
            raise ProtocolError("an upload must start with its header")
        header = first.header
        if header.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot submit for '{header.site_id}'")
        rnd = self._round(header.round_id)
        if (rnd.protocol == "ldp") != ldp:
            kind = "LDP reports" if ldp else "an encrypted share"
            raise ProtocolError(f"round {rnd.round_id} ({rnd.protocol}) does not take {kind}")
        rnd.begin_share(caller.name)
        return caller, header, rnd

    @rpc_method
    def SubmitShare(self, request_iterator, context):
        caller, header, rnd = self._open_upload(request_iterator, context, ldp=False)
        try:
            self._check_header(rnd, header)
            ciphertexts = self._receive(rnd, request_iterator)
        except BaseException:
            rnd.abort_share(caller.name)
            raise
        complete = rnd.accept_share(caller.name, ciphertexts, dict(header.timings))
        log.info(
            "round %s: share from %s accepted (%d/%d)",
            rnd.round_id,
            caller.name,
            len(rnd.submitted),
            len(rnd.invited),
        )
        if complete:
            self._pool.submit(self._finalize, rnd)
        return pb.Ack(ok=True, message=f"share accepted for {rnd.round_id}")

    def _check_header(self, rnd: Round, header: pb.ShareHeader) -> None:
        if header.key_id != rnd.public.key_id:
            raise ProtocolError(
                f"share encrypted under key {header.key_id}, round uses {rnd.public.key_id}"
            )
        if header.dimension != len(rnd.plan.features):
            raise DataError(
                f"share has dimension {header.dimension}, round {rnd.round_id} has "
                f"{len(rnd.plan.features)} features",
                field="dimension",
            )
        if rnd.protocol == kmeans.PROTOCOL:
            enc, layout = kmeans.encoding_from_proto(header.encoding, rnd.public.bits)
        else:
            enc, layout = encoding_from_proto(header.encoding, rnd.public.bits)
        if enc != rnd.plan.encoding or layout != rnd.layout:
            raise DataError("share encoding differs from the round's encoding", field="encoding")
        if header.n_ciphertexts != rnd.n_ciphertexts:
            raise DataError(
                f"share declares {header.n_ciphertexts} ciphertexts, round expects {rnd.n_ciphertexts}",
                field="n_ciphertexts",
            )

    @staticmethod
    def _receive(rnd: Round, request_iterator) -> list[int]:
        expected = rnd.n_ciphertexts
        ciphertexts: list[int] = []
        for msg in request_iterator:
            if msg.WhichOneof("part") != "batch":
                raise ProtocolError("only ciphertext batches may follow the share header")
            for raw in msg.batch.ciphertexts:
                c = bytes_to_int(raw)
                check_ciphertext(rnd.public, c)
                ciphertexts.append(c)
            if len(ciphertexts) > expected:
                raise DataError(f"share has more than the {expected} ciphertexts it declared")
        if len(ciphertexts) != expected:
            raise ProtocolError(
                f"incomplete share: {len(ciphertexts)} of {expected} ciphertexts arrived"
            )
        return ciphertexts

    @rpc_method
    def Decline(self, request, context):
        caller = require_role(context, "owner")
        if request.site_id != caller.name:
            raise ProtocolError(f"owner '{caller.name}' cannot decline for '{request.site_id}'")
        rnd = self._round(request.round_id)
        log.warning("round %s: %s declined: %s", rnd.round_id, caller.name, request.reason)
        if rnd.decline(caller.name, request.reason):
            self._pool.submit(self._finalize, rnd)
        return pb.Ack(ok=True)

    # ------------------------------------------------------------------ RPCs: data user

    @rpc_method
    def ListOwners(self, request, context):
        require_role(context, "analyst", "aggregator")
        with self._lock:
            owners = [
                pb.OwnerRegistration(site_id=s, address=a) for s, a in sorted(self._owners.items())
            ]
        return pb.OwnerList(owners=owners)

    @rpc_method
    def GetRound(self, request, context):
        require_role(context, "analyst", "aggregator")
        wait = min(max(request.wait_seconds, 0.0), 600.0)
        with self._lock:
            job = self._jobs.get(request.round_id)
        if job is not None:
            if wait:
                job.done.wait(wait)
            return job.status()
        rnd = self._round(request.round_id)
        if wait:
            rnd.done.wait(wait)
        return self.status(rnd)

    @rpc_method
    def StartRound(self, request, context):
        caller = require_role(context, "analyst", "aggregator")
        if request.method == kmeans.PROTOCOL:
            return self._start_kmeans(request, caller.name)
        with self._lock:
            registered = dict(self._owners)
        invited = list(request.owners) or sorted(registered)
        plan = plan_round(request, len(invited))
        self._check_invited(invited, registered, plan.min_owners)
        public = self.public_key()
        layout = plan.encoding.layout(public.bits)
        rnd = Round(
            round_id=f"{plan.method}-{uuid.uuid4().hex[:12]}",
            protocol=plan.method,
            plan=plan,
            deadline=time.time() + plan.deadline_seconds,
            public=public,
            layout=layout,
            n_values=moments.n_values(len(plan.features), plan.groupings),
            invited=invited,
            rotation=rotation.random_rotation(len(plan.features)) if plan.projection_only else None,
        )
        self._open_at_csp(rnd, "projection" if plan.projection_only else "blinded")
        log.info(
            "round %s opened by %s: %s on %d features, %d owners invited, quorum %d, deadline %.0f s",
            rnd.round_id,
            caller.name,
            plan.method.upper(),
            len(plan.features),
            len(invited),
            plan.min_owners,
            plan.deadline_seconds,
        )
        spec = pb.RoundSpec(
            round_id=rnd.round_id,
            protocol=rnd.protocol,
            features=plan.features,
            encoding=encoding_to_proto(plan.encoding, layout),
            key_id=public.key_id,
            deadline_unix=rnd.deadline,
            n_values=rnd.n_values,
            n_ciphertexts=rnd.n_ciphertexts,
            groupings=[grouping_to_proto(g) for g in plan.declared_groupings],
            rotation=rnd.rotation.ravel().tolist() if rnd.rotation is not None else [],
        )
        if plan.dp is not None:
            spec.dp.CopyFrom(_dp_spec(plan.dp))
        self._invite_all(rnd, spec)
        return self.status(rnd)

    @staticmethod
    def _check_invited(invited: list[str], registered: dict[str, str], min_owners: int) -> None:
        unknown = [s for s in invited if s not in registered]
        if unknown:
            raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
        if len(invited) < min_owners:
            raise ProtocolError(
                f"{len(invited)} owner(s) registered, the round needs at least {min_owners}"
            )

    def _open_at_csp(self, rnd: Round, mode: str = "blinded") -> None:
        """Announce the round and its ciphertext count to the CSP, then track it here."""
        try:
            self._csp.OpenRound(
                pb.CspRoundRequest(
                    round_id=rnd.round_id,
                    key_id=rnd.public.key_id,
                    n_ciphertexts=rnd.n_ciphertexts,
                    mode=mode,
                ),
                timeout=10,
            )
        except grpc.RpcError as exc:
            raise PeerUnavailable(
                f"the CSP refused to open the round: {rpc_error_message(exc)}"
            ) from exc
        with self._lock:
            self._rounds[rnd.round_id] = rnd

    def _invite_all(self, rnd: Round, spec: pb.RoundSpec) -> None:
        """Arm the deadline and invite every owner (each invitation on the pool)."""
        timer = threading.Timer(max(0.0, rnd.deadline - time.time()), self._finalize, args=(rnd,))
        timer.daemon = True
        timer.start()
        for site in rnd.invited:
            self._pool.submit(self._invite, rnd, site, spec)

    # ------------------------------------------------------------------ federated k-means

    def _start_kmeans(self, request: pb.RoundRequest, caller: str) -> pb.RoundStatus:
        with self._lock:
            registered = dict(self._owners)
        invited = list(request.owners) or sorted(registered)
        plan = plan_kmeans(request, len(invited))
        self._check_invited(invited, registered, plan.min_owners)
        public = self.public_key()
        job = KmeansJob(
            job_id=f"kmeans-{uuid.uuid4().hex[:12]}",
            plan=plan,
            invited=invited,
            public=public,
            layout=plan.encoding.layout(public.bits),
            centers=plan.centers,
        )
        with self._lock:
            self._jobs[job.job_id] = job
        log.info(
            "k-means job %s started by %s: k=%d on %d features, at most %d iteration(s), "
            "%d owners invited, quorum %d%s",
            job.job_id,
            caller,
            plan.k,
            len(plan.features),
            plan.iterations,
            len(invited),
            plan.min_owners,
            f", DP epsilon {plan.dp_total[0]:g}" if plan.dp_total else "",
        )
        threading.Thread(
            target=self._run_kmeans, args=(job,), name=f"job-{job.job_id}", daemon=True
        ).start()
        return job.status()

    def _run_kmeans(self, job: KmeansJob) -> None:
        """Iterate: open a round with the current centers, wait for it, update, stop or go on."""
        plan = job.plan
        t = 0
        try:
            for t in range(1, plan.iterations + 1):
                if self._closing.is_set():
                    raise PeerUnavailable("the aggregator is shutting down")
                rnd = self._open_kmeans_iteration(job, t)
                if not rnd.done.wait(plan.deadline_seconds + CSP_TIMEOUT_SECONDS + 60):
                    raise ProtocolError(f"round {rnd.round_id} did not finish")
                if rnd.state != COMPLETED:
                    job.finish(FAILED, f"iteration {t} of {plan.iterations} failed: {rnd.message}")
                    log.warning("k-means job %s failed: %s", job.job_id, job.message)
                    return
                entry = job.record(rnd)
                log.info(
                    "k-means job %s: iteration %d done with %s; max center shift %.6g",
                    job.job_id,
                    t,
                    ", ".join(entry["contributors"]),
                    entry["center_shift"],
                )
                if entry["center_shift"] <= plan.tolerance:
                    job.converged = True
                    break
            how = "converged" if job.converged else "reached the iteration limit"
            job.finish(COMPLETED, f"{len(job.iterations)} iteration(s), {how}", job.result_doc())
            log.info("k-means job %s completed: %s", job.job_id, job.message)
        except LeteoError as exc:
            job.finish(FAILED, f"iteration {t} of {plan.iterations} failed: {exc}")
            log.error("k-means job %s failed: %s", job.job_id, job.message)
        except Exception as exc:  # a bug must still end the job, never leave it hanging
            log.exception("k-means job %s crashed", job.job_id)
            job.finish(FAILED, f"internal error: {type(exc).__name__}")

    def _open_kmeans_iteration(self, job: KmeansJob, t: int) -> Round:
        plan = job.plan
        d = len(plan.features)
        rnd = Round(
            round_id=f"{job.job_id}-it{t}",
            protocol=kmeans.PROTOCOL,
            plan=plan,
            deadline=time.time() + plan.deadline_seconds,
            public=job.public,
            layout=job.layout,
            n_values=kmeans.n_values(plan.k, d),
            invited=list(job.invited),
            kmeans=IterationContext(job.job_id, t, job.centers.copy()),
        )
        spec = pb.RoundSpec(
            round_id=rnd.round_id,
            protocol=kmeans.PROTOCOL,
            features=plan.features,
            encoding=kmeans.encoding_to_proto(plan.encoding, job.layout),
            key_id=job.public.key_id,
            deadline_unix=rnd.deadline,
            n_values=rnd.n_values,
            n_ciphertexts=rnd.n_ciphertexts,
            kmeans=pb.KmeansIteration(
                job_id=job.job_id,
                iteration=t,
                iterations=plan.iterations,
                k=plan.k,
                centers=rnd.kmeans.centers.ravel().tolist(),
            ),
        )
        if plan.dp is not None:
            spec.dp.CopyFrom(_dp_spec(plan.dp))
        self._open_at_csp(rnd)
        job.progress(f"iteration {t} of {plan.iterations} open ({rnd.round_id})")
        self._invite_all(rnd, spec)
        return rnd

    def _compute_kmeans(self, rnd: Round) -> dict:
        """Unblind the iteration's totals and update the centers; the result owners receive
        holds the new centers only (no counts, no per-owner facts)."""
        plan, ctx = rnd.plan, rnd.kmeans
        t = ctx.timings
        start = time.perf_counter()
        masks = draw_masks(rnd.n_values, rnd.layout)
        blinded = add_plaintexts(rnd.public, rnd.aggregate, pack_raw(masks, rnd.layout))
        t["mask_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        plaintexts, ctx.csp_seconds = self._decrypt(rnd, blinded)
        t["csp_round_trip_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        slots = unpack(plaintexts, rnd.n_values, rnd.layout)
        totals = unblind(slots, masks, len(rnd.submitted), rnd.layout)
        t["unmask_seconds"] = time.perf_counter() - start
        self._record(rnd, {"mode": "blinded", "aggregate_totals": [str(v) for v in totals]})

        start = time.perf_counter()
        noisy = plan.dp is not None
        decoded = kmeans.decode_totals(
            totals, plan.k, len(plan.features), plan.encoding, noisy=noisy
        )
        ctx.update = kmeans.update_centers(
            decoded, ctx.centers, clip_norm=plan.dp.row_norm_bound if noisy else None
        )
        t["update_seconds"] = time.perf_counter() - start
        t.update(rnd.timings)
        return {
            "protocol": kmeans.PROTOCOL,
            "method": kmeans.METHOD,
            "job_id": ctx.job_id,
            "iteration": ctx.iteration,
            "iterations": plan.iterations,
            "features": plan.features,
            "k": plan.k,
            "centers": ctx.update.centers.tolist(),
            "center_shift": ctx.update.shift,
            "round_id": rnd.round_id,
            "owners": sorted(rnd.submitted),
        }

    @rpc_method
    def StartLdpRound(self, request, context):
        caller = require_role(context, "analyst", "aggregator")
        spec = ldp_collection.spec_from_request(request)
        with self._lock:
            registered = dict(self._owners)
        invited = list(request.owners) or sorted(registered)
        unknown = [s for s in invited if s not in registered]
        if unknown:
            raise NotFoundError(f"owner(s) not registered: {', '.join(unknown)}")
        min_owners = request.min_owners or 1  # each report is already private on its own
        if len(invited) < min_owners:
            raise ProtocolError(f"{len(invited)} owner(s) registered, the round needs {min_owners}")
        deadline = request.deadline_seconds or 120.0
        if not 0 < deadline <= 24 * 3600:
            raise DataError("deadline_seconds must be in (0, 86400]", field="deadline_seconds")
        rnd = Round(
            round_id=f"ldp-{uuid.uuid4().hex[:12]}",
            protocol="ldp",
            plan=LdpRoundPlan(spec, min_owners, request.consistency),
            deadline=time.time() + deadline,
            public=None,
            layout=None,
            n_values=0,
            invited=invited,
            ldp=ldp_collection.Accumulator(spec),
        )
        with self._lock:
            self._rounds[rnd.round_id] = rnd
        log.info(
            "round %s opened by %s: LDP %s on column %s at epsilon %g, %d owners invited",
            rnd.round_id,
            caller.name,
            spec.mechanism,
            spec.column,
            spec.epsilon,
            len(invited),
        )
        timer = threading.Timer(deadline, self._finalize, args=(rnd,))
        timer.daemon = True
        timer.start()
        round_spec = pb.RoundSpec(
            round_id=rnd.round_id, protocol="ldp", deadline_unix=rnd.deadline, ldp=spec
        )
        for site in invited:
            self._pool.submit(self._invite, rnd, site, round_spec)
        return self.status(rnd)

    @rpc_method
    def SubmitReports(self, request_iterator, context):
        caller, header, rnd = self._open_upload(request_iterator, context, ldp=True)
        acc = rnd.ldp
        declared = int(header.n_reports)
        parts, count = [], 0
        try:
            # accumulated + in-flight + this owner's declared reports: above the threshold the
            # chunks go to files and Spark estimates at the end (geo rounds keep their points)
            expected = acc.declare(declared)
            over = expected > self._spark_report_threshold
            if over and acc.can_spill and acc.spill_dir is None:
                spill_dir = Path(tempfile.mkdtemp(prefix=f"leteo-{rnd.round_id}-"))
                if acc.spill(spill_dir):
                    log.info(
                        "round %s: %d reports expected (threshold %d): chunks spill to %s, "
                        "the estimate will run on Spark",
                        rnd.round_id,
                        expected,
                        self._spark_report_threshold,
                        spill_dir,
                    )
                    atexit.register(acc.cleanup)  # a shutdown mid-round leaves no files

                    def cleanup_when_done(rnd=rnd, acc=acc) -> None:
                        rnd.done.wait()  # completed or failed, the files go with the round
                        acc.cleanup()

                    threading.Thread(
                        target=cleanup_when_done, name=f"spill-{rnd.round_id}", daemon=True
                    ).start()
                    self._pool.submit(ldp_collection.warm_spark)  # the JVM starts meanwhile
                else:
                    spill_dir.rmdir()  # another upload switched first
            for msg in request_iterator:
                if msg.WhichOneof("part") != "batch":
                    raise ProtocolError("only report batches may follow the header")
                reports = ldp_collection.from_batch(msg.batch)
                parts.append(acc.partial(reports))
                count += len(reports)
                if count > header.n_reports:
                    raise DataError(f"more than the {header.n_reports} reports declared")
            if count != header.n_reports:
                raise ProtocolError(f"incomplete reports: {count} of {header.n_reports} arrived")
        except BaseException:
            acc.declare(-declared)
            acc.discard(parts)  # spilled chunk files of this upload, never folded
            rnd.abort_share(caller.name)
            raise
        complete = rnd.accept_reports(caller.name, parts, dict(header.timings))
        log.info("round %s: %d reports from %s accepted", rnd.round_id, count, caller.name)
        if complete:
            self._pool.submit(self._finalize, rnd)
        return pb.Ack(ok=True, message=f"{count} reports accepted for {rnd.round_id}")

    # ------------------------------------------------------------------ round machinery

    def _invite(self, rnd: Round, site: str, spec: pb.RoundSpec) -> None:
        try:
            reply = self._owner_stub(site).Invite(spec, timeout=INVITE_TIMEOUT_SECONDS)
            reason = "" if reply.accepted else reply.reason or "declined"
        except grpc.RpcError as exc:
            reason = f"unreachable: {rpc_error_message(exc)}"
        if reason:
            log.warning("round %s: %s cannot take part: %s", rnd.round_id, site, reason)
            if rnd.decline(site, reason):
                self._finalize(rnd)

    def _finalize(self, rnd: Round) -> None:
        if not rnd.claim_close():
            return
        try:
            if len(rnd.submitted) < rnd.plan.min_owners:
                rnd.finish(FAILED, rnd.quorum_message())
                log.warning("round %s failed: %s", rnd.round_id, rnd.message)
            else:
                result = self._compute(rnd)
                rnd.finish(COMPLETED, f"{len(rnd.submitted)} share(s) aggregated", result)
                log.info("round %s completed with %d owners", rnd.round_id, len(rnd.submitted))
        except LeteoError as exc:
            rnd.finish(FAILED, str(exc))
            log.error("round %s failed: %s", rnd.round_id, exc)
        except Exception as exc:  # a bug must still end the round, never leave it hanging
            log.exception("round %s crashed", rnd.round_id)
            rnd.finish(FAILED, f"internal error: {type(exc).__name__}")
        self._publish(rnd)

    def _compute(self, rnd: Round) -> dict:
        if rnd.protocol == "ldp":
            start = time.perf_counter()
            try:
                doc = rnd.ldp.result(rnd.plan.consistency)
            finally:
                rnd.ldp.cleanup()  # spilled chunk files are not needed any more
            log.info(
                "round %s: %s estimate from %d reports (%s path)",
                rnd.round_id,
                doc["mechanism"],
                doc["n"],
                doc["engine"],
            )
            doc.update(
                round_id=rnd.round_id,
                owners=sorted(rnd.submitted),
                declined=rnd.declined,
                timings={
                    "owners": rnd.submitted,
                    "aggregator": {"estimate_seconds": time.perf_counter() - start},
                },
            )
            return doc
        if rnd.protocol == kmeans.PROTOCOL:
            return self._compute_kmeans(rnd)
        if rnd.plan.projection_only:
            return self._compute_projection(rnd)
        t = {}
        start = time.perf_counter()
        masks = draw_masks(rnd.n_values, rnd.layout)
        blinded = add_plaintexts(rnd.public, rnd.aggregate, pack_raw(masks, rnd.layout))
        t["mask_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        plaintexts, csp_seconds = self._decrypt(rnd, blinded)
        t["csp_round_trip_seconds"] = time.perf_counter() - start

        start = time.perf_counter()
        plan = rnd.plan
        slots = unpack(plaintexts, rnd.n_values, rnd.layout)
        totals = unblind(slots, masks, len(rnd.submitted), rnd.layout)
        agg = moments.decode_totals(
            totals,
            len(plan.features),
            plan.groupings,
            plan.encoding.scale_bits,
            plan.encoding.count_scale_bits,
            noisy=plan.dp is not None,
        )
        t["unmask_seconds"] = time.perf_counter() - start
        self._record(rnd, {"mode": "blinded", "aggregate_totals": [str(v) for v in totals]})

        start = time.perf_counter()
        if plan.method == pca.PROTOCOL:
            result = pca.pca_from_moments(
                agg,
                plan.features,
                plan.components,
                plan.standardize,
                psd_project=plan.dp is not None,
            )
        else:
            result = discriminant.from_aggregate(
                agg, plan.method, plan.groupings, plan.features, plan.components, plan.ridge
            )
        t["eigendecomposition_seconds"] = time.perf_counter() - start
        t.update(rnd.timings)

        doc = result.to_dict()
        doc.update(self._round_facts(rnd, t, {"decrypt_seconds": csp_seconds}))
        return doc

    def _round_facts(self, rnd: Round, t: dict, csp: dict) -> dict:
        plan = rnd.plan
        return dict(
            round_id=rnd.round_id,
            owners=sorted(rnd.submitted),
            declined=rnd.declined,
            encoding={
                "scale_bits": plan.encoding.scale_bits,
                "value_bound": plan.encoding.value_bound,
                "slot_bits": rnd.layout.slot_bits,
                "slots_per_ciphertext": rnd.layout.slots_per_ciphertext,
                "mask_bits": rnd.layout.mask_bits,
                "statistical_security_bits": rnd.layout.statistical_security,
                "ciphertexts_per_share": rnd.n_ciphertexts,
                "paillier_bits": rnd.public.bits,
            },
            timings={"owners": rnd.submitted, "aggregator": t, "csp": csp},
            dp=self._dp_facts(rnd),
        )

    @staticmethod
    def _dp_facts(rnd: Round) -> dict | None:
        dp = rnd.plan.dp
        if dp is None:
            return None
        n = len(rnd.submitted)
        return {
            "mechanism": "distributed Skellam noise on the encoded statistics (SPEC P5)",
            "epsilon": dp.epsilon,
            "delta": dp.delta,
            "row_norm_bound": dp.row_norm_bound,
            "quorum": dp.quorum,
            "skellam_mu_aggregate": dp.mu * n / dp.quorum,
            "noise_std_per_value": dp.noise_std(n, rnd.plan.encoding.scale_bits),
            "sensitivity_l1": dp.l1,
            "sensitivity_l2": dp.l2,
            "note": "rows clipped to row_norm_bound at each owner; every owner charged its ledger",
        }

    def _compute_projection(self, rnd: Round) -> dict:
        """Projection-only: the CSP eigendecomposes the rotated aggregate; we rotate back."""
        plan, t = rnd.plan, dict(rnd.timings)
        head = pb.ProjectionRequest(
            round_id=rnd.round_id,
            key_id=rnd.public.key_id,
            method=plan.method,
            dimension=len(plan.features),
            classes_per_grouping=[len(g.classes) for g in plan.declared_groupings],
            encoding=encoding_to_proto(plan.encoding, rnd.layout),
            n_owners=len(rnd.submitted),
            components=plan.components,
        )
        if plan.ridge.rho is not None:
            head.rho = plan.ridge.rho
        if plan.ridge.rho_prime is not None:
            head.rho_prime = plan.ridge.rho_prime
        head.ridge_noise_floor = plan.ridge.noise_floor

        def requests():
            yield pb.ProjectionChunk(header=head)
            for chunk in batches(rnd.aggregate, rnd.public.ciphertext_bytes):
                yield pb.ProjectionChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

        start = time.perf_counter()
        try:
            reply = self._csp.ComputeProjection(requests(), timeout=CSP_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            raise PeerUnavailable(f"CSP projection failed: {rpc_error_message(exc)}") from exc
        t["csp_round_trip_seconds"] = time.perf_counter() - start
        d, k = len(plan.features), plan.components
        rotated = np.array(reply.components, dtype=np.float64).reshape(k, d)
        self._record(
            rnd,
            {
                "mode": "projection",
                "eigenvalues": list(reply.eigenvalues),
                "rotated_components": rotated.tolist(),
            },
        )
        start = time.perf_counter()
        comps = rotation.rotate_back(rotated, rnd.rotation)
        t["rotate_back_seconds"] = time.perf_counter() - start
        doc = {
            "protocol": plan.method,
            "method": plan.method,
            "mode": "projection-only",
            "features": plan.features,
            "eigenvalues": list(reply.eigenvalues),
            "components": comps.tolist(),
            "n_samples": None,  # withheld: the aggregator learns only directions and eigenvalues
        }
        if plan.method == pca.PROTOCOL:
            doc["explained_variance_ratio"] = list(reply.explained_variance_ratio)
            doc["standardized"] = False
        else:
            doc["classes"] = list(plan.declared_groupings[0].classes)
            doc["ridge"] = dict(reply.ridge)
            if len(plan.declared_groupings) > 1:
                doc["privacy_classes"] = list(plan.declared_groupings[1].classes)
        doc.update(self._round_facts(rnd, t, {"compute_seconds": reply.compute_seconds}))
        return doc

    def _record(self, rnd: Round, learned: dict) -> None:
        """Audit transcript of what the aggregator learned in each round."""
        if self._transcript is None:
            return
        with self._lock, open(self._transcript, "a") as out:
            out.write(json.dumps({"round_id": rnd.round_id, **learned}) + "\n")

    def _decrypt(self, rnd: Round, blinded: list[int]) -> tuple[list[int], float]:
        def requests():
            yield pb.DecryptChunk(
                header=pb.CspRoundRequest(
                    round_id=rnd.round_id, key_id=rnd.public.key_id, n_ciphertexts=len(blinded)
                )
            )
            for chunk in batches(blinded, rnd.public.ciphertext_bytes):
                yield pb.DecryptChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

        plaintexts: list[int] = []
        seconds = 0.0
        try:
            for reply in self._csp.DecryptBlinded(requests(), timeout=CSP_TIMEOUT_SECONDS):
                plaintexts.extend(bytes_to_int(p) for p in reply.plaintexts)
                seconds = reply.decrypt_seconds
        except grpc.RpcError as exc:
            raise PeerUnavailable(f"CSP decryption failed: {rpc_error_message(exc)}") from exc
        if len(plaintexts) != len(blinded):
            raise ProtocolError(f"the CSP returned {len(plaintexts)} of {len(blinded)} plaintexts")
        return plaintexts, seconds

    def _publish(self, rnd: Round) -> None:
        status = self.status(rnd)
        for site in rnd.invited:
            self._pool.submit(self._publish_one, site, status)

    def _publish_one(self, site: str, status: pb.RoundStatus) -> None:
        try:
            self._owner_stub(site).PublishResult(status, timeout=5)
        except grpc.RpcError as exc:
            log.info(
                "could not publish %s to %s: %s", status.round_id, site, rpc_error_message(exc)
            )

    def close(self) -> None:
        """Stop now: pending work is cancelled and in-flight calls end with the channels."""
        self._closing.set()  # k-means jobs open no further iteration
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._csp_channel.close()
        with self._lock:
            for channel in self._owner_channels:
                channel.close()


def add_to_server(server: grpc.Server, service: AggregatorService) -> None:
    pb_grpc.add_AggregatorServicer_to_server(service, server)
