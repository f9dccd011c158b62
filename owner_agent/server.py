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
    server, port = make_server(config.tls, config.listen)
    add_to_server(server, service)
    log.info(
        "owner %s listening on %s (port %d); data %s; aggregator %s; CSP %s",
        config.site_id,
        config.listen,
        port,
        config.data.path,
        config.aggregator,
        config.csp,
    )
    service.start_background()
    serve_until_signal(server, f"owner {config.site_id}", on_stop=service.stop)
