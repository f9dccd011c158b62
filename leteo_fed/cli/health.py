"""`leteo-fed health ADDRESS`: a grpc.health.v1 probe, as Kubernetes or compose would make it.

Exit 0 when the service answers SERVING, 1 otherwise (NOT_SERVING, unknown service, nobody
answering): usable as a container healthcheck. Plaintext by default, for the `--health-listen`
port every service can open; with `--tls-dir` it probes the service's own mTLS port with this
party's certificate.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from leteo_fed.cli.options import SubParsers, host_port, set_handler
from leteo_fed.transport.roles import ROLES

SERVICES = ("csp", "keyholder", "aggregator", "owner")  # roles that serve a port


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "health",
        help="probe a service's standard gRPC health (exit 0 if SERVING)",
        description="Ask a CSP, key holder, aggregator or owner agent for its grpc.health.v1 "
        "status and "
        "exit 0 if it is SERVING, else 1. Without --tls-dir the probe is plaintext, for the "
        "port a service opens with --health-listen (Health only); with --tls-dir it uses this "
        "party's certificate on the service's mTLS port.",
    )
    p.add_argument("address", type=host_port, help="host:port to probe")
    p.add_argument(
        "--service",
        default="",
        help="one service's status, e.g. leteo.v1.CryptoServiceProvider (default: the server's)",
    )
    p.add_argument("--timeout", type=float, default=3.0, help="seconds (default: 3)")
    g = p.add_argument_group("mTLS probe (the service's own port)")
    g.add_argument("--tls-dir", type=Path, default=None, help="this party's certificate folder")
    g.add_argument("--name", default=None, help="this party's certificate name")
    g.add_argument("--role", choices=ROLES, default=None, help="this party's role")
    g.add_argument(
        "--peer", choices=SERVICES, default=None, help="the probed service's role (whose CA)"
    )
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    import grpc

    from leteo_fed.errors import ConfigError
    from leteo_fed.transport import health

    if args.tls_dir is None:
        channel = grpc.insecure_channel(args.address)
    else:
        if not (args.name and args.role and args.peer):
            raise ConfigError("an mTLS probe needs --name, --role and --peer with --tls-dir")
        from leteo_fed.transport.grpc_io import TlsConfig

        tls = TlsConfig.from_dir(args.tls_dir, args.name, args.role)
        channel = tls.channel(args.address, peer=args.peer)
    with channel:
        try:
            status = health.check(channel, args.service, args.timeout)
        except grpc.RpcError as exc:
            print(f"{args.address}: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return 1
    print(f"{args.address} {args.service or '(server)'}: {status}")
    return 0 if status == "SERVING" else 1


def add_health_listen(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--health-listen",
        default=os.environ.get("LETEO_HEALTH_LISTEN") or None,
        metavar="HOST:PORT",
        help="also answer standard gRPC health probes (grpc.health.v1, plaintext, Health "
        "only: for Kubernetes gRPC probes and `leteo-fed health`) on this address, e.g. "
        "127.0.0.1:8081 (default: $LETEO_HEALTH_LISTEN, else off)",
    )


def add_metrics_listen(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics",
        default=os.environ.get("LETEO_METRICS_LISTEN") or None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics (rounds, shares, declines, decryptions, budget; "
        "docs/metrics.md) over plain HTTP at http://HOST:PORT/metrics, e.g. 127.0.0.1:9464 "
        "(default: $LETEO_METRICS_LISTEN, else off)",
    )
