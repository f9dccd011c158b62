"""Start an owner agent from its config file: serve until SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

from leteo_fed.config import OwnerConfig, load_owner_config
from leteo_fed.errors import ConfigError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.grpc_io import make_server, serve_until_signal
from leteo_fed.transport.health import ServiceHealth
from owner_agent.service import OwnerAgentService, add_to_server
from owner_agent.site_check import fatal, problems, startup_findings

log = logging.getLogger("leteo.owner")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["OwnerAgent"].full_name


def serve(
    config_path: Path, health_listen: str | None = None, metrics_listen: str | None = None
) -> None:
    """`health_listen`: also answer grpc.health.v1 probes there, in plaintext (Health only)."""
    config = load_owner_config(config_path)
    _check_before_start(config)
    service = OwnerAgentService(config)
    health = ServiceHealth([SERVICE_NAME])
    server = None
    if config.listen:  # outbound mode: optional, Health only (probes on the site's own host)
        server, port = make_server(config.tls, config.listen)
        add_to_server(server, service)
        health.attach(server)
        where = f"listening on {config.listen} (port {port})"
        if config.outbound:
            where += " for Health only"
    else:
        where = "serving no port"
    holders = config.keyholders
    key = (
        f"key holders {', '.join(holders.addresses)} ({holders.threshold} of {holders.holders})"
        if holders is not None
        else f"CSP {config.csp}"
    )
    log.info(
        "owner %s (%s mode) %s; data %s; aggregator %s; %s",
        config.site_id,
        config.mode,
        where,
        config.data.describe(),
        config.aggregator,
        key,
    )
    health.serve_probes(health_listen)
    service.metrics.serve(metrics_listen)  # Prometheus metrics (docs/metrics.md)
    service.start_background()
    serve_until_signal(server, f"owner {config.site_id}", on_stop=service.stop, health=health)


def _check_before_start(config: OwnerConfig) -> None:
    """`owner check`'s data, certificate and port checks: the agent refuses to start on a
    broken data source, certificate or port (ConfigError, one line each); other problems (a
    column the policy lists but the data lacks, too few rows) are logged: rounds decline."""
    findings = startup_findings(config)
    for f in problems(findings):
        if f not in fatal(findings):
            log.warning("owner check: %s", f.line())
    broken = fatal(findings)
    if broken:
        raise ConfigError(
            "the agent cannot start: " + "; ".join(f.line() for f in broken), field=broken[0].check
        )
