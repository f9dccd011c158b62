"""The parties' own commands: `certs`, `csp serve`, `aggregator serve`, `owner serve`.

Everything a site needs to run a service lives here and in the base install; the service modules
(gRPC, keys) are imported only when a service starts, so `--help` stays quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leteo_fed.cli.options import (
    SubParsers,
    add_tls,
    csv_list,
    set_handler,
    tls_config,
)
from leteo_fed.defaults import (
    CERT_VALIDITY_DAYS,
    DEFAULT_AGGREGATOR_ADDRESS,
    DEFAULT_CSP_ADDRESS,
    DEFAULT_KEY_BITS,
    SPARK_REPORT_THRESHOLD,
)


def add_parsers(sub: SubParsers) -> None:
    """`certs`, then `csp`, `aggregator` and `owner`, each with its `serve` action."""
    _add_certs(sub)
    _add_csp(sub)
    _add_aggregator(sub)
    _add_owner(sub)


def _add_certs(sub: SubParsers) -> None:
    p = sub.add_parser(
        "certs",
        help="create a CA and mTLS certificates for every party",
        description="Create a private CA and one certificate per party (csp, aggregator, analyst "
        "and each owner site). Identity = certificate common name; role = organizational unit. "
        "Private keys are written with mode 600.",
    )
    p.add_argument(
        "--out", type=Path, default=Path("certs"), help="output folder (default: ./certs)"
    )
    p.add_argument(
        "--owners", type=csv_list, required=True, help="owner site ids, e.g. site-1,site-2"
    )
    p.add_argument(
        "--hosts",
        type=csv_list,
        default=[],
        help="extra host names / IPs the services are reached at (localhost and 127.0.0.1 are always included)",
    )
    p.add_argument(
        "--days",
        type=int,
        default=CERT_VALIDITY_DAYS,
        help=f"validity in days (default: {CERT_VALIDITY_DAYS})",
    )
    set_handler(p, run)


def _serve_parser(sub: SubParsers, command: str, help_text: str) -> SubParsers:
    """`COMMAND ACTION`: the sub-parsers of a service's actions (`serve`; owners: `audit`)."""
    return sub.add_parser(command, help=help_text).add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )


def _add_csp(sub: SubParsers) -> None:
    p = _serve_parser(sub, "csp", "the crypto service provider").add_parser(
        "serve",
        help="run the CSP service",
        description="Serve the CSP: creates a Paillier key pair in --key-dir on first start "
        "(secret key mode 600; sealed with a passphrase if LETEO_CSP_PASSPHRASE is set), serves "
        "the public key, and decrypts blinded aggregates for the aggregator only.",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_CSP_ADDRESS,
        help=f"host:port (default: {DEFAULT_CSP_ADDRESS})",
    )
    p.add_argument(
        "--key-dir", type=Path, default=Path("csp-keys"), help="key folder (default: ./csp-keys)"
    )
    p.add_argument(
        "--key-bits",
        type=int,
        default=DEFAULT_KEY_BITS,
        help=f"Paillier modulus size for a new key (default: {DEFAULT_KEY_BITS})",
    )
    p.add_argument(
        "--insecure-small-key",
        action="store_true",
        help=f"allow keys below {DEFAULT_KEY_BITS} bits (tests only)",
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        help="append every decrypted (blinded) value to this file, for audits",
    )
    add_tls(p, "csp", "csp")
    set_handler(p, run)


def _add_aggregator(sub: SubParsers) -> None:
    p = _serve_parser(sub, "aggregator", "the aggregator (data user)").add_parser(
        "serve",
        help="run the aggregator service",
        description="Serve the aggregator: owners register with it; the data user starts rounds "
        "against it (`leteo-fed pca`).",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_AGGREGATOR_ADDRESS,
        help=f"host:port (default: {DEFAULT_AGGREGATOR_ADDRESS})",
    )
    p.add_argument(
        "--csp",
        default=DEFAULT_CSP_ADDRESS,
        help=f"CSP address (default: {DEFAULT_CSP_ADDRESS})",
    )
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        help="append what the aggregator learns per round to this file, for audits",
    )
    p.add_argument(
        "--spark-report-threshold",
        type=int,
        default=SPARK_REPORT_THRESHOLD,
        metavar="N",
        help="LDP rounds expecting more than N reports spill them to files and estimate with "
        f"Spark (default: {SPARK_REPORT_THRESHOLD})",
    )
    add_tls(p, "aggregator", "aggregator")
    set_handler(p, run)


def _add_owner(sub: SubParsers) -> None:
    owner = _serve_parser(sub, "owner", "an owner agent (one per site)")
    p = owner.add_parser(
        "serve",
        help="run an owner agent",
        description="Serve an owner agent next to a site's data. All settings come from one TOML "
        "file: site_id, listen, advertise, [data] path/format/label_column/engine, [peers] "
        "aggregator/csp, [tls] dir or ca/cert/key. See docs/owner-config.md.",
    )
    p.add_argument("--config", type=Path, required=True, help="owner TOML config file")
    set_handler(p, run)
    p = owner.add_parser(
        "audit",
        help="show this site's audit log",
        description="Print the site's audit log as a table: every invitation, the decision "
        "(with the reason for a decline), what left the site (protocol, columns, sizes, the "
        "budget charged) and the published result. The log is `audit_log` in the config "
        "(default: audit-SITE.jsonl next to it).",
    )
    p.add_argument("--config", type=Path, required=True, help="owner TOML config file")
    p.add_argument("--json", action="store_true", help="print the events as JSON lines")
    set_handler(p, run_audit)


def run_audit(args: argparse.Namespace) -> int:
    """`owner audit`: the log as a table (or JSON lines)."""
    import json

    from leteo_fed.config import load_owner_config
    from owner_agent import audit

    config = load_owner_config(args.config)
    path = config.audit_log or args.config.parent / f"audit-{config.site_id}.jsonl"
    events = audit.read(path)
    if args.json:
        for event in events:
            print(json.dumps(event))
    else:
        print(audit.table(events))
    return 0


def run(args: argparse.Namespace) -> int:
    """Issue the certificates, or serve until interrupted."""
    if args.command == "certs":
        from leteo_fed.transport.certs import create_pki

        parties = create_pki(args.out, args.owners, args.hosts, args.days)
        print(
            f"wrote CA and {len(parties)} certificates to {args.out}: "
            + ", ".join(p.name for p in parties)
        )
    elif args.command == "csp":
        from csp.server import serve as serve_csp

        serve_csp(
            args.listen,
            tls_config(args),
            args.key_dir,
            args.key_bits,
            args.insecure_small_key,
            args.transcript,
        )
    elif args.command == "aggregator":
        from aggregator.server import serve as serve_aggregator

        serve_aggregator(
            args.listen,
            tls_config(args),
            args.csp,
            args.transcript,
            args.spark_report_threshold,
        )
    else:
        from owner_agent.server import serve as serve_owner

        serve_owner(args.config)
    return 0
