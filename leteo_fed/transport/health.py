"""Standard gRPC health (grpc.health.v1) and reflection for every service.

Probes from Kubernetes, `grpc_health_probe` or compose ask the standard Health service rather
than our own RPC. Every service registers it on its mTLS port (for tools holding a certificate)
and, with `--health-listen`, on a plaintext port that serves nothing but Health: Kubernetes'
gRPC probes speak no TLS, and a health status says nothing about anyone's data. Status is kept
per service name ("" is the whole server): SERVING while the service can do its work,
NOT_SERVING while it drains at shutdown or, for the CSP, while it holds no usable key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from leteo_fed.transport.grpc_io import SERVER_OPTIONS, bind

log = logging.getLogger("leteo.health")

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def status_name(status: int) -> str:
    return health_pb2.HealthCheckResponse.ServingStatus.Name(status)


class ServiceHealth:
    """The health of one process's services, shared by its mTLS port and its probe port."""

    def __init__(self, services: Sequence[str]) -> None:
        self.services = tuple(services)
        self.servicer = health.HealthServicer(experimental_non_blocking=True)
        self._stop = threading.Event()
        self._probes: grpc.Server | None = None
        for name in ("", *self.services):
            self.servicer.set(name, SERVING)

    def attach(self, server: grpc.Server) -> None:
        """Health and reflection on the service's own (mTLS) server."""
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        names = (*self.services, health.SERVICE_NAME, reflection.SERVICE_NAME)
        reflection.enable_server_reflection(names, server)

    def set(self, serving: bool, service: str | None = None) -> None:
        """One service's status (None: every service and the server as a whole)."""
        status = SERVING if serving else NOT_SERVING
        for name in ("", *self.services) if service is None else (service,):
            self.servicer.set(name, status)

    def watch(self, ready: Callable[[], bool], service: str, every: float = 5.0) -> None:
        """Re-check `ready` every few seconds and publish it as `service`'s status."""

        def loop() -> None:
            last = None
            while not self._stop.is_set():
                try:
                    now = bool(ready())
                except Exception:  # a readiness check that fails is a NOT_SERVING, not a crash
                    now = False
                if now != last:
                    log.info("%s is %s", service, "SERVING" if now else "NOT_SERVING")
                    self.set(now, service)
                    self.set(now, "")
                    last = now
                self._stop.wait(every)

        threading.Thread(target=loop, name=f"health-{service}", daemon=True).start()

    def drain(self) -> None:
        """Shutting down: every status NOT_SERVING, for good."""
        self._stop.set()
        self.servicer.enter_graceful_shutdown()

    def close(self) -> None:
        if self._probes is not None:
            self._probes.stop(grace=1)

    def serve_probes(self, listen: str | None) -> None:
        """With `listen` (`--health-listen`): a plaintext server with Health only (no
        reflection, no service), started now, stopped by `drain`."""
        if listen:
            self._probes = self.probe_server(listen)

    def probe_server(self, listen: str) -> grpc.Server:
        """A plaintext server with Health only (no reflection, no service), started."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=SERVER_OPTIONS)
        health_pb2_grpc.add_HealthServicer_to_server(self.servicer, server)
        bind(server, listen, None, "health_listen")
        server.start()
        log.info("health probes (grpc.health.v1, plaintext) on %s", listen)
        return server


def check(channel: grpc.Channel, service: str = "", timeout: float = 3.0) -> str:
    """Ask a server's standard Health service: 'SERVING', 'NOT_SERVING', 'SERVICE_UNKNOWN'..."""
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return "SERVICE_UNKNOWN"
        raise
    return status_name(reply.status)
