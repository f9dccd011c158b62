"""Start an owner agent from its config file: serve until SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

from leteo_fed.config import load_owner_config
from leteo_fed.transport.grpc_io import make_server, serve_until_signal
from owner_agent.service import OwnerAgentService, add_to_server

log = logging.getLogger("leteo.owner")


def serve(config_path: Path) -> None:
    config = load_owner_config(config_path)
    service = OwnerAgentService(config)
    server = None
    if config.listen:  # outbound mode: optional, Health only (probes on the site's own host)
        server, port = make_server(config.tls, config.listen)
        add_to_server(server, service)
        where = f"listening on {config.listen} (port {port})"
        if config.outbound:
            where += " for Health only"
    else:
        where = "serving no port"
    log.info(
        "owner %s (%s mode) %s; data %s; aggregator %s; CSP %s",
        config.site_id,
        config.mode,
        where,
        config.data.describe(),
        config.aggregator,
        config.csp,
    )
    service.start_background()
    serve_until_signal(server, f"owner {config.site_id}", on_stop=service.stop)
