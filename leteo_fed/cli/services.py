"""The parties' own commands: `certs`, `csp serve`, `aggregator serve`, `owner serve`.

Everything a site needs to run a service lives here and in the base install; the service modules
(gRPC, keys) are imported only when a service starts, so `--help` stays quick.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from leteo_fed.cli import operators, owner_setup
from leteo_fed.cli.health import add_health_listen, add_metrics_listen
from leteo_fed.cli.options import (
    SubParsers,
    add_key_size_flags,
    add_spark_sum_flag,
    add_tls,
    csv_list,
    host_port,
    host_ports,
    listen_address,
    positive_int,
    set_handler,
    tls_config,
)
from leteo_fed.defaults import (
    CERT_VALIDITY_DAYS,
    DEFAULT_AGGREGATOR_ADDRESS,
    DEFAULT_CSP_ADDRESS,
    DEFAULT_KEY_BITS,
    IDLE_OWNER_DAYS,
    MAX_CONNECTED_OWNERS,
    SPARK_REPORT_THRESHOLD,
)


def add_parsers(sub: SubParsers) -> None:
    """`certs`, then `csp`, `aggregator` and `owner`, each with its `serve` action."""
    _add_certs(sub)
    _add_csp(sub)
    _add_aggregator(sub)
    _add_owner(sub)


CERTS_DESCRIPTION = """\
mTLS certificates. A certificate's common name is the party's name, its organizational unit
its role. Four certificate authorities (CAs), one per role, each kept by its own custodian:

  owners       certifies owner agents    key kept by the sites' consortium (e.g. DPO office)
  analysts     certifies data users      key kept by the body that approves data users
  aggregators  certifies the aggregator  key kept by the platform operator
  csps         certifies the CSP         key kept by the CSP's own organization

Every service accepts a certificate for a role only if that role's CA issued it, and every
client accepts a server as a role only if that role's CA issued its certificate, so the
platform operator can mint neither an owner, an analyst nor a CSP. A party's folder holds
ca.crt (the TLS trust bundle), owners-ca.crt, analysts-ca.crt, aggregators-ca.crt, csps-ca.crt
and its own NAME.crt/NAME.key, never a CA key. Private keys are written with mode 600.

One machine (demos, tests, docker compose; whoever runs it holds all four CA keys):
  leteo-fed certs --out certs --owners site-1,site-2
  leteo-fed certs --out certs --owners site-1,site-2 --per-party
      # certs/authorities (the CA keys), certs/csp, certs/aggregator, certs/analyst,
      # certs/site-1, certs/site-2: a party's folder as `issue` and `bundle` would make it

A deployment, each custodian on its own machine (see docs/certificates.md):
  leteo-fed certs ca owners --out owners-ca          # once per CA, by its custodian
  leteo-fed certs issue --ca-dir owners-ca --role owner --name site-1 \\
      --hosts site-1.example.org --out site-1        # by the custodian of the role's CA
  leteo-fed certs bundle --role owner --owners-ca owners-ca.crt \\
      --analysts-ca analysts-ca.crt --aggregators-ca aggregators-ca.crt \\
      --csps-ca csps-ca.crt --out site-1
"""


def _add_hosts_and_days(p: argparse.ArgumentParser) -> None:
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


def _add_certs(sub: SubParsers) -> None:
    """`certs --owners ...` (everything in one folder), or one custodian's step: `certs ca`,
    `certs issue`, `certs bundle`."""
    from leteo_fed.transport.roles import AUTHORITIES, ROLES

    p = sub.add_parser(
        "certs",
        help="create the CAs and mTLS certificates",
        usage="%(prog)s --owners IDS [--out DIR] [--per-party] [--hosts HOSTS] [--days DAYS]\n"
        "       %(prog)s {ca,issue,bundle} ...",
        description=CERTS_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--out", type=Path, default=Path("certs"), help="output folder (default: ./certs)"
    )
    p.add_argument(
        "--owners",
        type=csv_list,
        help="owner site ids, e.g. site-1,site-2 (required without an ACTION)",
    )
    p.add_argument(
        "--per-party",
        action="store_true",
        help="one folder per party under --out (its own key, its role's ca.crt and the CA "
        "certificates) and the CAs with their keys in --out/authorities, which no party gets",
    )
    p.add_argument(
        "--keyholders",
        type=int,
        default=0,
        metavar="M",
        help="also certify M key holders of a threshold key, keyholder-1..keyholder-M, by the "
        "CSPs' CA (docs/threshold-keys.md; default: 0)",
    )
    _add_hosts_and_days(p)
    set_handler(p, run)
    actions = p.add_subparsers(dest="action", metavar="ACTION", prog=p.prog)

    ca = actions.add_parser(
        "ca",
        help="create one certificate authority",
        description="Create one CA: AUTHORITY-ca.crt (give it to every party) and "
        "AUTHORITY-ca.key (mode 600: only its custodian keeps it, ideally offline). Refuses to "
        "replace an existing CA.",
    )
    ca.add_argument("authority", choices=AUTHORITIES, help="which roles the CA certifies")
    ca.add_argument("--out", type=Path, required=True, help="the custodian's CA folder")
    ca.add_argument(
        "--days",
        type=int,
        default=CERT_VALIDITY_DAYS,
        help=f"validity in days (default: {CERT_VALIDITY_DAYS})",
    )

    issue = actions.add_parser(
        "issue",
        help="issue one party's certificate from its role's CA",
        description="Issue NAME.crt and NAME.key (mode 600) from the CA of ROLE in --ca-dir "
        "(owners-ca for owner, analysts-ca for analyst, aggregators-ca for aggregator, "
        "csps-ca for csp). Hand both files to the party over a secure channel.",
    )
    issue.add_argument("--ca-dir", type=Path, required=True, help="folder with the role's CA")
    issue.add_argument("--role", choices=ROLES, required=True, help="the party's role")
    issue.add_argument(
        "--name", required=True, help="the party's name: its site id, csp, aggregator, ..."
    )
    issue.add_argument("--out", type=Path, required=True, help="folder for NAME.crt/NAME.key")
    _add_hosts_and_days(issue)

    bundle = actions.add_parser(
        "bundle",
        help="put the CA certificates into a party's folder",
        description="Write the four CA certificates and ca.crt, the TLS trust bundle for "
        "ROLE (the CAs of the peers it calls and of the callers it accepts), into a party's "
        "folder. A channel to a peer trusts that peer role's CA file alone. Reads "
        "certificates only: no CA key.",
    )
    bundle.add_argument("--role", choices=ROLES, required=True, help="the party's role")
    for authority in AUTHORITIES:
        bundle.add_argument(
            f"--{authority}-ca",
            type=Path,
            required=True,
            metavar="FILE",
            help=f"{authority}-ca.crt, as its custodian published it",
        )
    bundle.add_argument("--out", type=Path, required=True, help="the party's folder")
    for q in (ca, issue, bundle):
        set_handler(q, run)


def _serve_parser(sub: SubParsers, command: str, help_text: str) -> SubParsers:
    """`COMMAND ACTION`: the sub-parsers of a service's actions (`serve`; owners: `audit`)."""
    return sub.add_parser(command, help=help_text).add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )


def _add_csp(sub: SubParsers) -> None:
    actions = _serve_parser(sub, "csp", "the crypto service provider")
    p = actions.add_parser(
        "serve",
        help="run the CSP service",
        description="Serve the CSP: creates a Paillier key pair in --key-dir on first start "
        "(secret key mode 600; sealed with a passphrase if LETEO_CSP_PASSPHRASE is set), serves "
        "the public key, and decrypts blinded aggregates for the aggregator only. It picks up "
        "a `csp rotate-key` of its --key-dir while running (see docs/key-rotation.md).",
    )
    p.add_argument(
        "--listen",
        type=listen_address,
        default=DEFAULT_CSP_ADDRESS,
        help=f"host:port (default: {DEFAULT_CSP_ADDRESS})",
    )
    p.add_argument(
        "--key-dir", type=Path, default=Path("csp-keys"), help="key folder (default: ./csp-keys)"
    )
    add_key_size_flags(p, "Paillier modulus size for a new key")
    p.add_argument(
        "--transcript",
        type=Path,
        default=None,
        help="append every decrypted (blinded) value to this file, for audits",
    )
    add_spark_sum_flag(p)
    add_tls(p, "csp", "csp")
    add_health_listen(p)
    add_metrics_listen(p)
    set_handler(p, run)
    _add_csp_keys(actions)


def _add_csp_keys(actions: SubParsers) -> None:
    """`csp rotate-key`, `csp retire-key`, `csp list-keys`: the CSP's key folder, offline or
    beside a running CSP (it needs no restart)."""
    rotate = actions.add_parser(
        "rotate-key",
        help="create a new key pair and make it current",
        description="Create a new Paillier key pair in --key-dir and make it the current key. "
        "A running CSP serving this folder uses it for every round opened from then on; "
        "rounds already open finish on the key they were opened with. The old secret key is "
        "kept until `csp retire-key`. Sealed with LETEO_CSP_PASSPHRASE, which must be the "
        "CSP's passphrase if its current key is sealed.",
    )
    retire = actions.add_parser(
        "retire-key",
        help="delete an old secret key",
        description="Delete the secret key KEY_ID (KEY_DIR/keys/KEY_ID.key) from --key-dir; "
        "refuses the current key. Its public key file stays, as the record that the key "
        "existed. Rounds still open on that key can no longer be decrypted (their owners get "
        "their budget back by withdrawal). A running CSP stops using it at once.",
    )
    listing = actions.add_parser(
        "list-keys",
        help="list the keys of a key folder",
        description="Every key in --key-dir: its id, size, whether it is current, held or "
        "retired, and whether its secret key is sealed. Opens no secret key.",
    )
    for q in (rotate, retire, listing):
        q.add_argument("--key-dir", type=Path, required=True, help="the CSP's key folder")
    rotate.add_argument(
        "--key-bits",
        type=int,
        default=None,
        help="Paillier modulus size of the new key (default: that of the current key)",
    )
    rotate.add_argument(
        "--insecure-small-key",
        action="store_true",
        help=f"allow keys below {DEFAULT_KEY_BITS} bits (tests only)",
    )
    retire.add_argument("--key-id", required=True, help="the key to retire (32 hex digits)")
    for q in (rotate, retire, listing):
        set_handler(q, run_csp_keys)


def run_csp_keys(args: argparse.Namespace) -> int:
    """`csp rotate-key`, `retire-key`, `list-keys`: what changed, in plain words."""
    from csp import keys
    from leteo_fed.crypto.keystore import passphrase_from_env

    key_dir = args.key_dir
    if args.action == "rotate-key":
        passphrase = passphrase_from_env()
        old, key = keys.rotate(key_dir, args.key_bits, args.insecure_small_key, passphrase)
        new = key.public.key_id
        folder = keys.KeyFolder(key_dir)
        sealed = ", sealed with LETEO_CSP_PASSPHRASE" if passphrase else ""
        print(f"new key {new} ({key.public.bits} bits) is now current")
        print(f"  secret key {folder.secret_path(new)} (mode 600{sealed})")
        print(f"  public key {folder.public_path(new)}")
        print(
            f"previous key {old} is kept: rounds opened on it finish on it. Once they have, "
            f"retire it: leteo-fed csp retire-key --key-dir {key_dir} --key-id {old}"
        )
        print("a running CSP on this folder uses the new key for new rounds; no restart needed")
    elif args.action == "retire-key":
        folder = keys.KeyFolder(key_dir)
        deleted = keys.retire(key_dir, args.key_id, passphrase_from_env())
        print(f"deleted the secret key of {args.key_id}: {deleted}")
        print(
            f"kept its public key {folder.public_path(args.key_id)} as the record that it "
            "existed; rounds still open on it can no longer be decrypted"
        )
    else:
        infos = keys.KeyFolder.open(key_dir, passphrase_from_env()).infos()
        print(f"{'key id':32}  {'bits':>5}  {'state':8}  sealed")
        for info in infos:
            state = "current" if info.current else "held" if info.held else "retired"
            sealed = "yes" if info.sealed else "no" if info.held else "-"
            print(f"{info.key_id:32}  {info.bits:>5}  {state:8}  {sealed}")
    return 0


def _add_aggregator(sub: SubParsers) -> None:
    actions = _serve_parser(sub, "aggregator", "the aggregator (data user)")
    p = actions.add_parser(
        "serve",
        help="run the aggregator service",
        description="Serve the aggregator: owners register with it; the data user starts rounds "
        "against it (`leteo-fed pca`).",
    )
    p.add_argument(
        "--listen",
        type=listen_address,
        default=DEFAULT_AGGREGATOR_ADDRESS,
        help=f"host:port (default: {DEFAULT_AGGREGATOR_ADDRESS})",
    )
    decrypts = p.add_mutually_exclusive_group()
    decrypts.add_argument(
        "--csp",
        default=DEFAULT_CSP_ADDRESS,
        type=host_port,
        help=f"CSP address (default: {DEFAULT_CSP_ADDRESS})",
    )
    decrypts.add_argument(
        "--keyholders",
        type=host_ports,
        default=None,
        metavar="ADDR1,ADDR2,...",
        help="instead of a CSP, the holders of a threshold key (every one of its m holders; "
        "any t of them decrypt, see `leteo-fed keys deal`); projection-only rounds are "
        "refused with a threshold key",
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
    p.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep owner registrations, jobs and round results in DIR (an SQLite database, "
        "created 0700) so that a restart fails the rounds it interrupted, publishes them, and "
        "resumes k-means jobs (default: in memory only; a restart forgets everything)",
    )
    p.add_argument(
        "--idle-owner-days",
        type=float,
        default=IDLE_OWNER_DAYS,
        metavar="DAYS",
        help="owners not heard from for longer are no longer invited unless an analyst names "
        f"them with --owners (0: always invited; default: {IDLE_OWNER_DAYS:g})",
    )
    p.add_argument(
        "--max-owners",
        type=positive_int,
        default=MAX_CONNECTED_OWNERS,
        metavar="N",
        help="owners connected at once: the next one is refused (RESOURCE_EXHAUSTED, it "
        "retries with backoff) until one leaves; the open-files limit is raised to match "
        f"(default: {MAX_CONNECTED_OWNERS})",
    )
    add_tls(p, "aggregator", "aggregator")
    add_health_listen(p)
    add_metrics_listen(p)
    set_handler(p, run)
    operators.add_parsers(actions)  # aggregator owners [remove]


def _add_owner(sub: SubParsers) -> None:
    owner = _serve_parser(sub, "owner", "an owner agent (one per site)")
    p = owner.add_parser(
        "serve",
        help="run an owner agent",
        description="Serve an owner agent next to a site's data. All settings come from one TOML "
        "file: site_id, listen, advertise, [data] path/format/label_column/engine (or url, "
        "query/table, password_env/password_file for a database), [peers] "
        "aggregator/csp, [tls] dir or ca/cert/key. See docs/owner-config.md.",
    )
    p.add_argument("--config", type=Path, required=True, help="owner TOML config file")
    add_health_listen(p)
    add_metrics_listen(p)
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
    owner_setup.add_parsers(owner)


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
        run_certs(args)
    elif args.command == "csp":
        from csp.server import serve as serve_csp

        serve_csp(
            args.listen,
            tls_config(args),
            args.key_dir,
            args.key_bits,
            args.insecure_small_key,
            args.transcript,
            args.health_listen,
            args.metrics,
            args.spark_ciphertext_threshold,
        )
    elif args.command == "aggregator":
        from aggregator.server import serve as serve_aggregator
        from leteo_fed.errors import ConfigError

        if args.keyholders is not None and len(args.keyholders) < 2:
            raise ConfigError("aggregator serve: --keyholders needs every holder, at least 2")
        serve_aggregator(
            args.listen,
            tls_config(args),
            "" if args.keyholders else args.csp,
            args.transcript,
            args.spark_report_threshold,
            args.state_dir,
            args.health_listen,
            args.metrics,
            args.idle_owner_days or None,
            args.max_owners,
            args.keyholders or (),
        )
    else:
        # Arrow's own allocator keeps ~6 MiB of arenas in every agent that reads a table; an
        # agent reads one per round and idles in between (read by Arrow when it loads)
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        from owner_agent.server import serve as serve_owner

        serve_owner(args.config, args.health_listen, args.metrics)
    return 0


def run_certs(args: argparse.Namespace) -> None:
    """One of the `certs` forms; says where each file goes."""
    from leteo_fed.errors import ConfigError
    from leteo_fed.transport import certs

    if args.action is None:
        if not args.owners:
            raise ConfigError("certs: --owners is required (or give an ACTION: ca, issue, bundle)")
        if not 0 <= args.keyholders <= 32:
            raise ConfigError(f"certs: --keyholders must be in 0..32, got {args.keyholders}")
        parties = certs.create_pki(
            args.out,
            args.owners,
            args.hosts,
            args.days,
            per_party=args.per_party,
            keyholders=args.keyholders,
        )
        names = ", ".join(p.name for p in parties)
        if args.per_party:
            authorities = args.out / certs.AUTHORITIES_DIR
            print(
                f"wrote the owners', analysts', aggregators' and CSPs' CAs to {authorities} "
                f"and one folder per party under {args.out}: {names}"
            )
            print(
                f"{authorities} holds every CA key: give it to no party; for a deployment, "
                "see docs/certificates.md"
            )
        else:
            print(
                f"wrote the owners', analysts', aggregators' and CSPs' CAs and {len(parties)} "
                f"certificates to {args.out}: {names}"
            )
            print("this folder holds every CA key: for a deployment, see docs/certificates.md")
    elif args.owners or args.per_party:
        option = "--owners" if args.owners else "--per-party"
        raise ConfigError(f"certs {args.action}: {option} belongs to the one-folder form")
    elif args.action == "ca":
        certs.create_ca(args.out, args.authority, args.days)
        print(
            f"wrote {args.out / certs.ca_file(args.authority)} (give it to every party) and "
            f"{args.out / certs.ca_file(args.authority, 'key')} (keep it with its custodian)"
        )
    elif args.action == "issue":
        party = certs.Party(args.name, args.role)
        certs.issue_from(args.ca_dir, args.out, party, args.hosts, args.days)
        print(f"wrote {args.out / args.name}.crt and .key for {args.role} '{args.name}'")
    else:
        cas = {a: certs.read_authority(getattr(args, f"{a}_ca"), a) for a in certs.AUTHORITIES}
        certs.write_trust(args.out, cas, args.role)
        trusted = ", ".join(certs.TLS_TRUST[args.role])
        print(f"wrote the CA certificates to {args.out}; its ca.crt trusts: {trusted}")
