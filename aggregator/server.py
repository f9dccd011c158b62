"""Start the aggregator: serve until SIGTERM."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from aggregator.service import SPARK_REPORT_THRESHOLD, AggregatorService, add_to_server
from leteo_fed import defaults
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.cert_check import check_certificate
from leteo_fed.transport.grpc_io import TlsConfig, make_loop_server, serve_until_signal
from leteo_fed.transport.health import ServiceHealth

log = logging.getLogger("leteo.aggregator")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Aggregator"].full_name
WORKERS = 64  # threads for unary and upload calls: a share's intake is short, uploads queue
# a socket per connected owner, and as many again for owners mid-handshake or reconnecting: a
# limit with no room for them makes a reconnecting crowd fail every handshake, for good
FILES_PER_OWNER = 2
SPARE_FILES = 1024  # the state, logs, the CSP or key holders, analysts, Spark


def raise_open_files_limit(max_owners: int) -> None:
    """Ask for as many open files as `max_owners` sockets need (up to the hard limit), and say
    so when the system allows fewer: the refusal then comes from the kernel, not from us."""
    import resource

    needed = max_owners * FILES_PER_OWNER + SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        try:  # a privileged service may raise its own hard limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            return
        except (OSError, ValueError):
            pass
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        log.warning(
            "open files limited to %d: room for about %d connected owners, fewer than "
            "--max-owners %d (raise the hard limit: ulimit -Hn, or the service's LimitNOFILE)",
            target,
            max(0, (target - SPARE_FILES) // FILES_PER_OWNER),
            max_owners,
        )


def serve(
    listen: str,
    tls: TlsConfig,
    csp_address: str,
    transcript: Path | None = None,
    spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
    state_dir: Path | None = None,
    health_listen: str | None = None,
    metrics_listen: str | None = None,
    idle_owner_days: float | None = defaults.IDLE_OWNER_DAYS,
    max_owners: int = defaults.MAX_CONNECTED_OWNERS,
    keyholders: Sequence[str] = (),
) -> None:
    """`state_dir`: keep registrations, jobs and rounds there and pick up after a restart
    (aggregator/state.py); None: in memory only. `health_listen`: also answer grpc.health.v1
    probes there, in plaintext (Health only). `metrics_listen`: serve Prometheus metrics
    there (docs/metrics.md). `keyholders`: the threshold key's holders decrypt instead of a
    CSP (`csp_address` then empty)."""
    check_certificate(tls)  # before any state is created: one line, not a failed handshake
    service = AggregatorService(
        tls,
        csp_address,
        tls.identity.name,
        transcript,
        spark_report_threshold,
        state_dir,
        idle_owner_days,
        max_owners,
        keyholders,
    )
    raise_open_files_limit(max_owners)
    # owners' open streams are coroutines on the server's event loop; other calls (answers,
    # shares, analysts' requests) run on the worker threads
    server, port = make_loop_server(tls, listen, workers=WORKERS)
    add_to_server(server, service)
    health = ServiceHealth([SERVICE_NAME])
    health.attach(server)
    health.serve_probes(health_listen)
    service.metrics.serve(metrics_listen)
    if service.store is None:
        log.warning(
            "no --state-dir: registrations, jobs and results are kept in memory only; a "
            "restart forgets them and fails nothing that was running"
        )
    else:
        log.info("state kept in %s", service.store.path)
        service.engine.recover()
    decrypts = f"key holders at {', '.join(keyholders)}" if keyholders else f"CSP at {csp_address}"
    log.info("aggregator listening on %s (port %d); %s", listen, port, decrypts)
    # the state closes only once the server has stopped: streams ending write to it
    serve_until_signal(server, "aggregator", on_stop=service.stop_serving, health=health)
    service.close_state()
