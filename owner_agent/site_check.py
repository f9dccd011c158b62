"""Is this site ready to take part? `leteo-fed owner check` and the agent's start-up.

Every check a site's IT team would otherwise discover one failed round at a time: the config's
keys, the data source (reachable, the policy's columns present with usable types and no missing
values, at least `policy.min_rows` rows), the certificate (role, authority, key, expiry), the
peers (a standard gRPC health check over mTLS: nobody records it), the budget left and the port.
Each check yields findings; a problem makes `owner check` exit 2 and the agent refuse to start.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tomllib

from leteo_fed.config import ANY, OwnerConfig, load_owner_config, unknown_keys
from leteo_fed.errors import LeteoError
from leteo_fed.transport.cert_check import check_certificate
from owner_agent.site_data import LocalSite

PEER_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Finding:
    check: str  # what was checked: "config", "data", "column x", "certificate", "peers.csp",
    # "keyholders ADDRESS", "keyholders.key"...
    ok: bool
    detail: str
    warning: bool = False  # ok, but worth a look (a certificate expiring soon, no ledger yet)

    def line(self) -> str:
        return f"{self.check}: {self.detail}"


def check_site(path: Path, contact_peers: bool = True) -> tuple[OwnerConfig | None, list[Finding]]:
    """Every check of `owner check`; the config is None when it cannot be read."""
    findings = list(_config_keys(path))
    if any(not f.ok for f in findings):
        return None, findings
    try:
        config = load_owner_config(path)
    except LeteoError as exc:
        return None, [*findings, Finding("config", False, str(exc))]
    findings.append(Finding("config", True, f"{path}: site '{config.site_id}', {config.mode}"))
    findings += startup_findings(config)
    if contact_peers:
        findings.append(_peer(config, "aggregator", config.aggregator))
        if config.keyholders is None:
            findings.append(_peer(config, "csp", config.csp))
        else:
            findings += _keyholders(config)
    findings.append(_budget(config))
    return config, findings


def startup_findings(config: OwnerConfig) -> list[Finding]:
    """What the agent checks before it starts: the data source, the certificate, the port."""
    return [*_data(config), _certificate(config), *_port(config)]


def problems(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if not f.ok]


# the agent does not start with these broken: nothing it could do would work
FATAL_AT_START = ("config", "data", "certificate", "port")


def fatal(findings: list[Finding]) -> list[Finding]:
    return [f for f in problems(findings) if f.check in FATAL_AT_START]


# ---------------------------------------------------------------- the checks


def _config_keys(path: Path) -> Iterator[Finding]:
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        yield Finding("config", False, f"config file not found: {path}")
        return
    except tomllib.TOMLDecodeError as exc:
        yield Finding("config", False, f"{path} is not valid TOML: {exc}")
        return
    for _, text in unknown_keys(doc):
        yield Finding("config", False, text)


def _data(config: OwnerConfig) -> Iterator[Finding]:
    policy = config.policy
    try:
        site = LocalSite(config.site_id, config.data)  # min_rows compared below, not refused
    except LeteoError as exc:
        yield Finding("data", False, str(exc))
        return
    source = site.file_name if site.sql is not None else config.data.path
    label = config.data.label_column
    columns = list(dict.fromkeys([*policy.columns, *([label] if label else [])]))
    if not policy.columns:
        yield Finding(
            "policy.columns",
            False,
            "empty: no round may read any column until you list the ones this site shares",
        )
    if not site.is_local:
        yield Finding("data", True, f"{source}: read with Spark when a round runs", warning=True)
        return
    try:
        available = site.column_names()
    except LeteoError as exc:
        yield Finding("data", False, f"{source}: {exc}")
        return
    if ANY in columns:  # every column may be read: check them all
        columns = list(dict.fromkeys([*(c for c in columns if c != ANY), *available]))
    missing = [c for c in columns if c not in available]
    for column in missing:
        yield Finding(f"column {column}", False, f"not in {source}")
    present = [c for c in columns if c not in missing]
    if site.uses_spark:
        yield Finding("data", True, f"{source}: large, read with Spark (rows not counted here)")
        return
    if not present:
        yield Finding("data", True, f"{source}: reachable")
        return
    try:
        view = site.read(present)
    except LeteoError as exc:  # an unreadable file, a failing query
        yield Finding("data", False, f"{source}: {exc}")
        return
    rows = f"{source}: {view.num_rows} rows"
    if view.num_rows < policy.min_rows:
        yield Finding("rows", False, f"{rows}, fewer than policy.min_rows = {policy.min_rows}")
    else:
        yield Finding("rows", True, f"{rows} (policy.min_rows {policy.min_rows})")
    for column in present:
        yield _column(view, column, column == label)


def _column(view, column: str, is_label: bool) -> Finding:
    kind, missing = view.describe(column)
    if missing:
        return Finding(f"column {column}", False, f"{kind}, {missing} missing value(s)")
    if kind != "numeric" and not is_label:
        return Finding(
            f"column {column}",
            True,
            f"{kind}: usable as a class label only (rounds refuse it as a feature)",
            warning=True,
        )
    return Finding(f"column {column}", True, "label" if is_label else kind)


def _certificate(config: OwnerConfig) -> Finding:
    try:
        facts = check_certificate(config.tls)
    except LeteoError as exc:
        return Finding("certificate", False, str(exc))
    if facts is None:
        return Finding("certificate", True, "none: tls.insecure = true (tests only)", warning=True)
    return Finding("certificate", True, facts.describe(), warning=facts.expires_soon)


def _port(config: OwnerConfig) -> Iterator[Finding]:
    if not config.listen:
        yield Finding("port", True, "none: this site connects out and listens on no port")
        return
    try:
        host, _, port = config.listen.rpartition(":")
        host = host.strip("[]") or "0.0.0.0"
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, int(port)))
    except (ValueError, OSError) as exc:
        yield Finding("port", False, f"listen = '{config.listen}': cannot listen there: {exc}")
        return
    yield Finding("port", True, f"{config.listen} is free")


def _peer(config: OwnerConfig, role: str, address: str, check: str = "") -> Finding:
    """A standard gRPC health check over this site's mTLS identity: it proves the peer is up
    and that both certificates are accepted, and registers nothing anywhere."""
    import grpc

    from leteo_fed.transport import health

    check = check or f"peers.{role}"
    try:
        with config.tls.channel(address, peer=role) as channel:
            status = health.check(channel, timeout=PEER_TIMEOUT_SECONDS)
    except grpc.RpcError as exc:
        return Finding(check, False, f"{address}: {exc.code().name}: {exc.details()}")
    except LeteoError as exc:
        return Finding(check, False, f"{address}: {exc}")
    return Finding(check, status == "SERVING", f"{address}: {status}")


def _keyholders(config: OwnerConfig) -> list[Finding]:
    """Each key holder answers, and the key rule holds: at least `keyholders.threshold` of
    them return the identical key, shared among exactly the holders listed with exactly that
    threshold (what the agent requires before it encrypts anything under it)."""
    from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
    from leteo_fed.transport.threshold_keys import describe_key, fetch_agreed_key

    holders = config.keyholders
    if holders is None:
        return []
    found = [_peer(config, "keyholder", a, f"keyholders {a}") for a in holders.addresses]
    channels = {a: config.tls.channel(a, peer="keyholder") for a in holders.addresses}
    try:
        stubs = {a: pb_grpc.KeyHolderStub(c) for a, c in channels.items()}
        key, answers = fetch_agreed_key(stubs, holders.threshold, timeout=PEER_TIMEOUT_SECONDS)
        agreeing = sum(1 for a in answers if a.key == key)
        found.append(
            Finding(
                "keyholders.key",
                True,
                f"{describe_key(key)}: returned identically by {agreeing} holders "
                f"({holders.threshold} needed)",
            )
        )
    except LeteoError as exc:
        found.append(Finding("keyholders.key", False, str(exc)))
    finally:
        for channel in channels.values():
            channel.close()
    return found


def _budget(config: OwnerConfig) -> Finding:
    privacy = config.privacy
    if privacy is None:
        return Finding("budget", True, "no [privacy]: this site declines every DP round", True)
    if not privacy.ledger.exists():
        return Finding(
            "budget",
            True,
            f"epsilon {privacy.epsilon_total:g}, delta {privacy.delta_total:g} left (the "
            f"ledger {privacy.ledger} is created at the first start)",
        )
    from leteo_fed.privacy.ledger import PrivacyLedger

    try:
        ledger = PrivacyLedger(
            privacy.ledger,
            privacy.epsilon_total,
            privacy.delta_total,
            accountant=privacy.accountant,
        )
        left = ledger.remaining()
    except LeteoError as exc:
        return Finding("budget", False, str(exc))
    return Finding(
        "budget",
        True,
        f"epsilon {left.epsilon:g} of {privacy.epsilon_total:g}, delta {left.delta:g} of "
        f"{privacy.delta_total:g} left ({ledger.accountant} accountant; {privacy.ledger})",
        warning=left.epsilon <= 0,
    )
