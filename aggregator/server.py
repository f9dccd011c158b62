"""Start the aggregator: serve until SIGTERM."""

from __future__ import annotations

import logging
from pathlib import Path

from aggregator.service import SPARK_REPORT_THRESHOLD, AggregatorService, add_to_server
from leteo_fed.transport.grpc_io import TlsConfig, make_server, serve_until_signal

log = logging.getLogger("leteo.aggregator")


def serve(
    listen: str,
    tls: TlsConfig,
    csp_address: str,
    transcript: Path | None = None,
    spark_report_threshold: int = SPARK_REPORT_THRESHOLD,
) -> None:
    service = AggregatorService(
        tls, csp_address, tls.identity.name, transcript, spark_report_threshold
    )
    server, port = make_server(tls, listen)
    add_to_server(server, service)
    log.info("aggregator listening on %s (port %d); CSP at %s", listen, port, csp_address)
    serve_until_signal(server, "aggregator", on_stop=service.close)
