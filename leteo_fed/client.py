"""The data user's client: start a round at the aggregator and wait for its outcome."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from leteo_fed import defaults
from leteo_fed.errors import LeteoError, PeerUnavailable
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.ldp_collection import LdpRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.transport.grpc_io import TlsConfig, rpc_error_message
from leteo_fed.transport.rounds import request_to_proto, result_document
from leteo_fed.transport.signing import ROUND_REQUEST

log = logging.getLogger("leteo.client")

RECONNECT_PATIENCE_SECONDS = 180.0  # an aggregator restart resumes the job within this
RECONNECT_POLL_SECONDS = 2.0


class RoundFailed(LeteoError):
    """The round ended without a result (quorum not met, CSP failure, ...)."""


class RpcRefused(LeteoError):
    """The aggregator refused the request; carries the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode | None) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class RoundParams:
    features: list[str]
    method: str = "pca"
    components: int = 0
    min_owners: int = 0
    deadline_seconds: float = defaults.DEFAULT_DEADLINE_SECONDS
    standardize: bool = False
    scale_bits: int = 0
    value_bound: float = 0.0
    owners: tuple[str, ...] = ()
    groupings: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (label column, classes)
    rho: float | None = None
    rho_prime: float | None = None
    projection_only: bool = False
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    row_norm_bound: float | None = None

    def to_proto(self) -> pb.RoundRequest:
        request = MomentsRequest(
            method=self.method,
            features=tuple(self.features),
            components=self.components,
            standardize=self.standardize,
            groupings=tuple(LabelClasses(c, tuple(k)) for c, k in self.groupings),
            rho=self.rho,
            rho_prime=self.rho_prime,
            projection_only=self.projection_only,
        )
        return request_to_proto("moments", request, **common_fields(self))


def common_fields(params) -> dict:
    """The request fields outside the payload, from any of the params classes."""
    out = {
        "owners": tuple(params.owners),
        "min_owners": params.min_owners,
        "deadline_seconds": params.deadline_seconds,
    }
    for name in ("scale_bits", "value_bound", "dp_epsilon", "dp_delta", "row_norm_bound"):
        if hasattr(params, name):
            out[name] = getattr(params, name)
    return out


@dataclass
class CommonParams:
    """The round fields outside a protocol's payload."""

    min_owners: int = 0
    deadline_seconds: float = defaults.DEFAULT_DEADLINE_SECONDS
    owners: tuple[str, ...] = ()
    scale_bits: int = 0
    value_bound: float = 0.0
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    row_norm_bound: float | None = None


@dataclass
class KmeansParams:
    """A federated k-means job: the aggregator runs one round per iteration."""

    features: list[str]
    k: int
    centers: list[list[float]]  # initial centers, k x d
    iterations: int = 10  # maximum number of iterations T
    tolerance: float = 0.0  # stop once no center moves more than this (L2)
    min_owners: int = 0
    deadline_seconds: float = defaults.DEFAULT_DEADLINE_SECONDS  # per iteration
    scale_bits: int = 0
    value_bound: float = 0.0
    owners: tuple[str, ...] = ()
    dp_epsilon: float | None = None  # the whole job's budget, split evenly over the iterations
    dp_delta: float | None = None
    row_norm_bound: float | None = None

    def to_proto(self) -> pb.RoundRequest:
        request = KmeansRequest(
            k=self.k,
            centers=tuple(float(v) for row in self.centers for v in row),
            iterations=self.iterations,
            tolerance=self.tolerance,
            features=tuple(self.features),
        )
        return request_to_proto("kmeans", request, **common_fields(self))


@dataclass
class LdpParams:
    column: str
    mechanism: str
    epsilon: float
    domain: tuple[str, ...] = ()
    lower: float | None = None
    upper: float | None = None
    min_owners: int = 0
    deadline_seconds: float = defaults.DEFAULT_DEADLINE_SECONDS
    owners: tuple[str, ...] = ()
    consistency: bool = False
    columns: tuple[str, ...] = ()  # geo: the point's coordinates
    box: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # geo: public (lower, upper)

    def to_proto(self) -> pb.RoundRequest:
        request = LdpRequest(
            column=self.column,
            mechanism=self.mechanism,
            epsilon=self.epsilon,
            domain=tuple(self.domain),
            lower=self.lower,
            upper=self.upper,
            consistency=self.consistency,
            columns=tuple(self.columns),
            box_lower=tuple(self.box[0]) if self.box is not None else (),
            box_upper=tuple(self.box[1]) if self.box is not None else (),
        )
        return request_to_proto("ldp", request, **common_fields(self))


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

    def _start(self, request: pb.RoundRequest) -> pb.RoundStatus:
        """Sign the request with this analyst's certificate key: owners check the signature,
        so the aggregator cannot claim another analyst or alter what was asked."""
        request.nonce = secrets.token_hex(16)
        request.issued_unix = time.time()
        body = request.SerializeToString(deterministic=True)
        if self._signer is None:  # insecure mode: nothing is authenticated anyway
            signed = pb.Signed(body=body)
        else:
            signed = self._signer.sign(body, ROUND_REQUEST)
        status = self._call(self._stub.StartRound, signed, 30)
        if self._on_job is not None:
            self._on_job(status.round_id)
        return status

    def start_round(self, params: RoundParams) -> pb.RoundStatus:
        return self._start(params.to_proto())

    def wait(
        self,
        round_id: str,
        timeout: float,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> pb.RoundStatus:
        end = time.monotonic() + timeout
        unreachable_since: float | None = None
        while True:
            wait = max(0.0, min(1.0, end - time.monotonic()))
            try:
                status = self._call(
                    self._stub.GetRound,
                    pb.RoundQuery(round_id=round_id, wait_seconds=wait),
                    wait + 30,
                )
            except PeerUnavailable as exc:
                now = time.monotonic()
                unreachable_since = unreachable_since or now
                if now - unreachable_since > self._patience:
                    raise PeerUnavailable(
                        f"{exc} (for {now - unreachable_since:.0f} s); the job {round_id} may "
                        f"still complete: fetch it with `leteo-fed result {round_id}`"
                    ) from exc
                log.warning("aggregator unreachable (%s); waiting for job %s", exc, round_id)
                end += RECONNECT_POLL_SECONDS  # the time it is down does not count against it
                time.sleep(RECONNECT_POLL_SECONDS)
                continue
            unreachable_since = None
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

    def run_round(
        self,
        params: RoundParams,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> dict:
        status = self.start_round(params)
        return self._result(status, params.deadline_seconds, on_tick)

    def start_kmeans(self, params: KmeansParams) -> pb.RoundStatus:
        return self._start(params.to_proto())

    def run_kmeans(
        self,
        params: KmeansParams,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> dict:
        """Start a k-means job and wait for its result (every iteration may use its deadline)."""
        status = self.start_kmeans(params)
        budget = (params.iterations or 10) * (params.deadline_seconds + 30)
        return self._result(status, budget, on_tick)

    def run_protocol(
        self,
        protocol: str,
        request: Any,
        common: CommonParams,
        on_tick: Callable[[pb.RoundStatus], None] | None = None,
    ) -> dict:
        """Any registered protocol: its request dataclass plus the common round fields."""
        msg = request_to_proto(protocol, request, **common_fields(common))
        status = self._start(msg)
        return self._result(status, common.deadline_seconds, on_tick)

    def start_ldp(self, params: LdpParams) -> pb.RoundStatus:
        return self._start(params.to_proto())

    def run_ldp(
        self, params: LdpParams, on_tick: Callable[[pb.RoundStatus], None] | None = None
    ) -> dict:
        return self._result(self.start_ldp(params), params.deadline_seconds, on_tick)

    def _result(self, status: pb.RoundStatus, deadline: float, on_tick) -> dict:
        return result_of(self.wait(status.round_id, deadline + 60, on_tick))


def result_of(final: pb.RoundStatus) -> dict:
    """The result document of an ended job; RoundFailed naming why there is none."""
    if final.state == "OPEN":
        raise RoundFailed(f"round {final.round_id} is still running: {final.message}")
    if final.state != "COMPLETED":
        raise RoundFailed(f"round {final.round_id} {final.state.lower()}: {final.message}")
    doc = result_document(final)
    if doc is None:
        raise RoundFailed(f"round {final.round_id} completed without a result")
    return doc
