"""The analyst's client: one API for every protocol.

    with AnalystClient("localhost:50051", tls) as client:
        result = client.run(MomentsRequest(method="pca", features=("x", "y"), components=1),
                            RoundOptions(min_owners=2))
    result.eigenvalues, result.to_dict(), result.to_pandas()

`request` is the protocol's own request dataclass (the registry finds the protocol by its type);
`RoundOptions` holds the fields every protocol shares. See docs/python-api.md.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc

from leteo_fed import defaults
from leteo_fed.errors import LeteoError, PeerUnavailable
from leteo_fed.privacy import bounds as bounds_of
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import warn_all
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import registry
from leteo_fed.protocols.interface import FederatedProtocol
from leteo_fed.protocols.results import Result
from leteo_fed.transport.grpc_io import TlsConfig, rpc_error_message
from leteo_fed.transport.rounds import named_owners, request_to_proto, result_from_proto
from leteo_fed.transport.signing import ROUND_REQUEST

log = logging.getLogger("leteo.client")

RECONNECT_PATIENCE_SECONDS = 180.0  # an aggregator restart resumes the job within this
RECONNECT_POLL_SECONDS = 2.0


RECONNECT_PROGRESS_SECONDS = 10.0  # while unreachable: a short progress line this often


class _Outage:
    """One stretch of an unreachable aggregator while waiting on a job: the full error once,
    then a short progress line now and then (not the long gRPC message every poll), and
    PeerUnavailable past the client's patience."""

    def __init__(self, job_id: str, patience: float) -> None:
        self.job_id = job_id
        self.patience = patience
        self.since = time.monotonic()
        self.said = False
        self.last_progress = self.since

    def failed(self, exc: PeerUnavailable) -> None:
        now = time.monotonic()
        down = now - self.since
        if down > self.patience:
            raise PeerUnavailable(
                f"{exc} (for {down:.0f} s); the job {self.job_id} may "
                f"still complete: fetch it with `leteo-fed result {self.job_id}`"
            ) from exc
        if not self.said:
            self.said = True
            log.warning(
                "aggregator unreachable (%s); waiting for job %s (up to %.0f s)",
                exc,
                self.job_id,
                self.patience,
            )
        elif now - self.last_progress >= RECONNECT_PROGRESS_SECONDS:
            self.last_progress = now
            log.warning("aggregator still unreachable after %.0f s; waiting", down)

    def over(self) -> None:
        log.info(
            "aggregator reachable again after %.0f s; job %s",
            time.monotonic() - self.since,
            self.job_id,
        )


class RoundFailed(LeteoError):
    """The round ended without a result (quorum not met, CSP failure, ...)."""


class RpcRefused(LeteoError):
    """The aggregator refused the request; carries the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode | None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RoundOptions:
    """The round fields every protocol shares (outside its request dataclass): who is asked,
    the quorum, the deadline (per round; a k-means job has one round per iteration), the
    fixed-point encoding and an optional DP release."""

    min_owners: int = 0  # 0: the protocol's default quorum
    deadline_seconds: float = defaults.DEFAULT_DEADLINE_SECONDS
    owners: tuple[str, ...] = ()  # empty: every registered owner
    scale_bits: int = 0  # 0: the protocol's default
    value_bound: float = 0.0  # 0: the protocol's default
    dp_epsilon: float | None = None  # None: no DP (k-means: the whole job's budget)
    dp_delta: float | None = None
    row_norm_bound: float | None = None
    # DP: public bounds per numeric column, natural units: ColumnBounds, or {column: (lo, hi)}
    bounds: tuple[ColumnBounds, ...] | Mapping[str, tuple[float, float]] = ()

    def column_bounds(self) -> tuple[ColumnBounds, ...]:
        if isinstance(self.bounds, Mapping):
            return bounds_of.from_mapping(self.bounds)
        return bounds_of.check_unique(self.bounds)


def protocol_of(request: Any) -> FederatedProtocol:
    """The registered protocol whose request dataclass `request` is."""
    return registry.for_request(request)


def output_file(request: Any) -> str:
    """The file the CLI writes the result of `request` to (pca.json, kmeans.json, ...)."""
    return protocol_of(request).output_file(request)


def round_request(request: Any, options: RoundOptions | None = None) -> pb.RoundRequest:
    """The RoundRequest (unsigned) asking for `request` with `options`."""
    o = options or RoundOptions()
    protocol = protocol_of(request)
    row_norm_bound = o.row_norm_bound
    if row_norm_bound is None and o.dp_epsilon is not None:
        row_norm_bound = protocol.fixed_row_norm_bound
    return request_to_proto(
        protocol.name,
        protocol.wire_request(request),
        owners=tuple(o.owners),
        min_owners=o.min_owners,
        deadline_seconds=o.deadline_seconds,
        scale_bits=o.scale_bits,
        value_bound=o.value_bound,
        dp_epsilon=o.dp_epsilon,
        dp_delta=o.dp_delta,
        row_norm_bound=row_norm_bound,
        bounds=o.column_bounds(),
    )


class AnalystClient:
    def __init__(
        self,
        aggregator: str,
        tls: TlsConfig,
        on_job: Callable[[str], None] | None = None,
        patience: float = RECONNECT_PATIENCE_SECONDS,
    ) -> None:
        """`on_job` is told a job's id as soon as the aggregator took it (before any waiting);
        `patience`: how long waiting on a job rides through an unreachable aggregator (a
        restart: the job resumes there) before giving up."""
        self._address = aggregator
        self._channel = tls.channel(aggregator, peer="aggregator")
        self._stub = pb_grpc.AggregatorStub(self._channel)
        self._signer = tls.signer()
        self._on_job = on_job
        self._patience = patience

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> AnalystClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, timeout: float):
        try:
            return method(request, timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise PeerUnavailable(
                    f"aggregator at {self._address}: {rpc_error_message(exc)}"
                ) from exc
            raise RpcRefused(rpc_error_message(exc), code) from exc

    def owners(self) -> list[tuple[str, str]]:
        """(site, address) of every registered owner; an outbound owner has no address."""
        return [(o.site_id, o.address) for o in self.owner_listing()]

    def owner_listing(self) -> list[pb.OwnerRegistration]:
        """Every registered owner with how it is reached (inbound/outbound), whether the
        aggregator can reach it now, when it was last heard from and whether it is idle."""
        return list(self._call(self._stub.ListOwners, pb.ListOwnersRequest(), 10).owners)

    def remove_owners(self, sites: list[str]) -> list[pb.OwnerRegistration]:
        """The operator forgets sites (the aggregator's own certificate); the listing after."""
        request = pb.RemoveOwnersRequest(site_ids=sites)
        return list(self._call(self._stub.RemoveOwners, request, 10).owners)

    def wait_for_owners(
        self, count: int, timeout: float = 60.0, should_stop: Callable[[], bool] | None = None
    ) -> list[str]:
        end = time.monotonic() + timeout
        while True:
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt
            try:
                sites = [o.site_id for o in self.owner_listing() if o.connected]
            except PeerUnavailable:
                sites = []
            if len(sites) >= count:
                return sites
            if time.monotonic() > end:
                raise PeerUnavailable(
                    f"only {len(sites)} of {count} owners registered and reachable within {timeout:.0f} s"
                )
            time.sleep(0.2)

    def _start(self, request: pb.RoundRequest, owners: list[str]) -> pb.RoundStatus:
        """Sign the request with this analyst's certificate key: owners check the signature,
        so the aggregator cannot claim another analyst or alter what was asked. The named
        `owners` go beside it: the request signs only their root."""
        request.nonce = secrets.token_hex(16)
        request.issued_unix = time.time()
        body = request.SerializeToString(deterministic=True)
        if self._signer is None:  # insecure mode: nothing is authenticated anyway
            signed = pb.Signed(body=body)
        else:
            signed = self._signer.sign(body, ROUND_REQUEST)
        start = pb.StartRoundRequest(request=signed, owners=owners)
        status = self._call(self._stub.StartRound, start, 30)
        if self._on_job is not None:
            self._on_job(status.round_id)
        return status

    def start(self, request: Any, options: RoundOptions | None = None) -> pb.RoundStatus:
        """Start the job `request` asks for (any protocol's request dataclass); its status,
        whose `round_id` is the job id."""
        named = named_owners((options or RoundOptions()).owners)
        return self._start(round_request(request, options), named)

    def wait(
        self,
        round_id: str,
        timeout: float,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> pb.RoundStatus:
        end = time.monotonic() + timeout
        outage: _Outage | None = None
        while True:
            wait = max(0.0, min(1.0, end - time.monotonic()))
            try:
                status = self._call(
                    self._stub.GetRound,
                    pb.RoundQuery(round_id=round_id, wait_seconds=wait),
                    wait + 30,
                )
            except PeerUnavailable as exc:
                outage = outage or _Outage(round_id, self._patience)
                outage.failed(exc)
                end += RECONNECT_POLL_SECONDS  # the time it is down does not count against it
                time.sleep(RECONNECT_POLL_SECONDS)
                continue
            if outage is not None:
                outage.over()
                outage = None
            if status.state != "OPEN" or time.monotonic() >= end:
                return status
            if on_tick:
                on_tick(status)

    def job(self, job_id: str) -> pb.RoundStatus:
        """A job's (or round's) status now, kept across aggregator restarts."""
        return self._call(self._stub.GetRound, pb.RoundQuery(round_id=job_id), 30)

    def jobs(self, limit: int = 50) -> list[pb.JobSummary]:
        """This analyst's most recent jobs at the aggregator, newest first."""
        return list(self._call(self._stub.ListJobs, pb.ListJobsRequest(limit=limit), 30).jobs)

    def run(
        self,
        request: Any,
        options: RoundOptions | None = None,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> Result:
        """Run the job `request` asks for and wait for its typed result (RoundFailed if it
        ends without one). The protocol says how long the job may take (k-means: every
        iteration may use its deadline). Every released figure the noise buries is said as a
        `privacy.noise_gate.NoiseWarning` (`Result.release_warnings`), never printed."""
        o = options or RoundOptions()
        status = self.start(request, o)
        timeout = protocol_of(request).job_timeout(request, o.deadline_seconds)
        result = job_result(self.wait(status.round_id, timeout + 60, on_tick))
        warn_all(result.release_warnings())  # a figure that is noise: a NoiseWarning, no print
        return result

    def result_of(self, job_id: str) -> Result:
        """The typed result of a job that ended (RoundFailed if it is running or failed); a
        figure the noise buries is said as a `NoiseWarning`, as by `run`."""
        result = job_result(self.job(job_id))
        warn_all(result.release_warnings())
        return result


def job_result(final: pb.RoundStatus) -> Result:
    """The typed result of an ended job; RoundFailed naming why there is none."""
    if final.state == "OPEN":
        raise RoundFailed(f"round {final.round_id} is still running: {final.message}")
    if final.state != "COMPLETED":
        raise RoundFailed(f"round {final.round_id} {final.state.lower()}: {final.message}")
    if not final.HasField("result"):
        raise RoundFailed(f"round {final.round_id} completed without a result")
    result: Result = result_from_proto(final.result)
    return result
