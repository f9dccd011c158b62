"""Private certificate authorities and one certificate per party, for mutual TLS.

Identity lives in the certificate: the common name is the party's name (``csp``,
``aggregator``, a site id, ``analyst``) and the organizational unit is its role. Services
authorize calls by that role and name, never by anything the caller merely claims.

Four authorities, one per role, certify the parties, so that no single custodian can mint every
identity: the owners' CA certifies owner agents, the analysts' CA the data users who start
rounds, the aggregators' CA the aggregator and the CSPs' CA the crypto service provider. A
certificate counts for role R only if R's authority issued it (`Authorities.check`), and a TLS
client accepts a server as role R only if R's authority issued its certificate
(`TlsConfig.channel`). docs/certificates.md says who should hold which key.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from leteo_fed.defaults import CERT_VALIDITY_DAYS
from leteo_fed.errors import AccessDenied, ConfigError
from leteo_fed.fileio import atomic_write_bytes
from leteo_fed.transport.roles import (
    AUTHORITIES,
    AUTHORITY_OF,
    BUNDLE,
    ROLES,
    TLS_TRUST,
    authority_of,
    ca_file,
)


@dataclass(frozen=True)
class Party:
    name: str
    role: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _validity(days: int) -> tuple[dt.datetime, dt.datetime]:
    now = dt.datetime.now(dt.timezone.utc)
    return now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)


def create_ca(
    out: Path, authority: str, days: int = CERT_VALIDITY_DAYS, replace: bool = False
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A new self-signed authority: `AUTHORITY-ca.crt` (public) and `AUTHORITY-ca.key` (mode
    600, for its custodian alone). It will not replace an existing one unless asked: every
    certificate the old one issued would stop counting."""
    if authority not in AUTHORITIES:
        raise ConfigError(f"unknown authority {authority!r}; expected one of {AUTHORITIES}")
    out = Path(out)
    key_path = out / ca_file(authority, "key")
    if not replace and (key_path.exists() or (out / ca_file(authority)).exists()):
        raise ConfigError(
            f"{key_path} or its certificate already exists: a new {authority}' CA would orphan "
            "every certificate the old one issued; pick another folder"
        )
    out.mkdir(parents=True, exist_ok=True)
    key = _key()
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, f"LETEO-Fed {authority} CA"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, authority),
        ]
    )
    start, end = _validity(days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    atomic_write_bytes(key_path, _key_pem(key), mode=0o600)
    atomic_write_bytes(out / ca_file(authority), cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def load_ca(folder: Path, authority: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """An authority's certificate and key from its custodian's folder."""
    paths = [Path(folder) / ca_file(authority, ext) for ext in ("crt", "key")]
    for path in paths:
        if not path.is_file():
            raise ConfigError(
                f"{path} not found: the {authority}' CA is made with "
                f"`leteo-fed certs ca {authority}` and kept by its custodian",
                field="ca_dir",
            )
    cert = x509.load_pem_x509_certificate(paths[0].read_bytes())
    key = serialization.load_pem_private_key(paths[1].read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        raise ConfigError(f"{paths[1]} is not the key of {paths[0]}", field="ca_dir")
    return cert, key


def issue(
    out: Path,
    party: Party,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    hosts: list[str],
    days: int = CERT_VALIDITY_DAYS,
) -> None:
    if party.role not in ROLES:
        raise ConfigError(f"unknown role {party.role!r}; expected one of {ROLES}")
    key = _key()
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, party.name),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, party.role),
        ]
    )
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys([party.name, "localhost", "127.0.0.1", *hosts]):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    start, end = _validity(days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    atomic_write_bytes(out / f"{party.name}.crt", cert.public_bytes(serialization.Encoding.PEM))
    atomic_write_bytes(out / f"{party.name}.key", _key_pem(key), mode=0o600)


# `create_pki(per_party=True)`: the custodians' folder, beside one folder per party.
AUTHORITIES_DIR = "authorities"


def create_pki(
    out: Path,
    owners: list[str],
    hosts: list[str] | None = None,
    days: int = CERT_VALIDITY_DAYS,
    per_party: bool = False,
    keyholders: int = 0,
) -> list[Party]:
    """Everything on one machine (demos, tests, docker compose): the four authorities and a
    certificate for the CSP, the aggregator, the analyst CLI, every owner and `keyholders` key
    holders (keyholder-1, keyholder-2, ...; docs/threshold-keys.md).

    In one folder (the default), with a trust bundle of all four CAs: whoever holds the folder
    holds every CA key and every party's key. With `per_party`, the authorities (keys included,
    and the bundle of all four) go to `out/authorities` (mode 700) and each party gets a folder
    of its own, `out/NAME`, as `certs issue` and `certs bundle` would make it: its role's
    `ca.crt`, the four CA certificates and its own NAME.crt/NAME.key, no CA key and no other
    party's key. Either way one operator made every key; a deployment gives each authority its
    own custodian instead (docs/certificates.md). The last file written is `ca.crt` of the
    folder that holds the CAs: once it exists, the layout is complete."""
    out = Path(out)
    parties = [Party("csp", "csp"), Party("aggregator", "aggregator"), Party("analyst", "analyst")]
    parties += [Party(keyholder_name(i), "keyholder") for i in range(1, keyholders + 1)]
    for site in owners:
        check_site_id(site)
        if per_party and site == AUTHORITIES_DIR:
            raise ConfigError(
                f"invalid site id {site!r}: {out / AUTHORITIES_DIR} holds the CA keys",
                field="site_id",
            )
        parties.append(Party(site, "owner"))
    ca_dir = out / AUTHORITIES_DIR if per_party else out
    ca_dir.mkdir(parents=True, exist_ok=True)
    if per_party:
        ca_dir.chmod(0o700)
    cas = {a: create_ca(ca_dir, a, days, replace=True) for a in AUTHORITIES}
    public = {a: [cert] for a, (cert, _) in cas.items()}
    for party in parties:
        cert, key = cas[authority_of(party.role)]
        folder = out / party.name if per_party else out
        folder.mkdir(parents=True, exist_ok=True)
        issue(folder, party, cert, key, hosts or [], days)
        if per_party:
            write_trust(folder, public, party.role)
    write_trust(ca_dir, public)  # last: the layout is complete
    return parties


def issue_from(
    ca_dir: Path,
    out: Path,
    party: Party,
    hosts: list[str],
    days: int = CERT_VALIDITY_DAYS,
) -> None:
    """One party's certificate from the authority of its role, as that authority's custodian
    issues it: `ca_dir` holds that CA alone, so no other role can come out of it."""
    check_party_name(party)
    cert, key = load_ca(ca_dir, authority_of(party.role))
    Path(out).mkdir(parents=True, exist_ok=True)
    issue(Path(out), party, cert, key, hosts, days)


def read_authority(path: Path, authority: str) -> list[x509.Certificate]:
    """The CA certificate(s) in `path`, refused if one is no CA or is another authority's (an
    aggregators' CA passed as the CSPs' would let the aggregator's operator mint a CSP)."""
    try:
        certs = x509.load_pem_x509_certificates(Path(path).read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the {authority}' CA certificate {path}: {exc}") from exc
    for cert in certs:
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        unit = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
        if not is_ca or (unit and unit[0].value != authority):
            raise ConfigError(f"{path} is not the {authority}' CA certificate")
    return certs


def write_trust(
    out: Path, cas: Mapping[str, Sequence[x509.Certificate]], role: str | None = None
) -> None:
    """The public part of a party folder: each authority's certificate(s) as
    AUTHORITY-ca.crt, to tell which authority issued a peer's certificate or signature and to
    verify a server as its role, and the TLS bundle ca.crt: the authorities of the peers `role`
    calls and of the callers it accepts (all of them without a role). Only certificates are
    written; no CA key ever enters a party folder."""
    missing = [a for a in AUTHORITIES if not cas.get(a)]
    if missing:
        raise ConfigError(f"missing CA certificate(s): {', '.join(missing)}")
    seen = [c.fingerprint(hashes.SHA256()) for a in AUTHORITIES for c in cas[a]]
    if len(set(seen)) != len(seen):
        raise ConfigError("one certificate is given for two authorities: each needs its own CA")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pem = {a: b"".join(c.public_bytes(serialization.Encoding.PEM) for c in cas[a]) for a in cas}
    for authority in AUTHORITIES:
        atomic_write_bytes(out / ca_file(authority), pem[authority])
    trusted = TLS_TRUST[role] if role is not None else AUTHORITIES
    atomic_write_bytes(out / BUNDLE, b"".join(pem[a] for a in trusted))


def keyholder_name(index: int) -> str:
    """The name `certs --keyholders` gives holder `index` (its share's index, 1..m)."""
    return f"keyholder-{index}"


def check_party_name(party: Party) -> None:
    """A party's name is also a file name in its folder: a site id's rules, and an owner may
    not take a service's name."""
    authority_of(party.role)
    if party.role == "owner" or party.name != party.role:  # `csp` may be named csp
        check_site_id(party.name)


def check_site_id(site: str) -> None:
    reserved = {"csp", "aggregator", "analyst", "ca", *(f"{a}-ca" for a in AUTHORITIES)}
    ok = site and all(c.isalnum() or c in "-_." for c in site) and len(site) <= 64
    if not ok or site in reserved:
        raise ConfigError(
            f"invalid site id {site!r}: use letters, digits, '-', '_' or '.', at most 64 "
            f"characters, and none of {sorted(reserved)}",
            field="site_id",
        )


def read_identity(pem: bytes) -> Party:
    cert = x509.load_pem_x509_certificate(pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return Party(str(cn[0].value) if cn else "", str(ou[0].value) if ou else "")


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


class Authorities:
    """The CA certificates that certify each role, loaded once per server. `check` runs on
    every call, so its verdict per presented certificate is cached: after the first call it is
    a dictionary lookup."""

    CACHE_SIZE = 1024

    def __init__(self, by_role: Mapping[str, Sequence[x509.Certificate]]) -> None:
        self._by_role = {role: tuple(cas) for role, cas in by_role.items()}
        self._verdicts: dict[bytes, str] = {}

    def check(self, pem: bytes, party: Party) -> None:
        """AccessDenied unless `pem`, the certificate that says it is `party`, was issued
        directly by the authority of `party.role`."""
        verdict = self._verdicts.get(pem)
        if verdict is None:
            verdict = self._refusal(pem, party)
            if len(self._verdicts) >= self.CACHE_SIZE:
                self._verdicts.clear()
            self._verdicts[pem] = verdict
        if verdict:
            raise AccessDenied(verdict)

    def _refusal(self, pem: bytes, party: Party) -> str:
        cert = x509.load_pem_x509_certificate(pem)
        if any(issued_by(cert, ca) for ca in self._by_role.get(party.role, ())):
            return ""
        if party.role not in AUTHORITY_OF:
            return f"{party.role} '{party.name}': no authority certifies role {party.role!r}"
        return (
            f"{party.role} '{party.name}': its certificate for role {party.role} was not issued "
            f"by the {AUTHORITY_OF[party.role]}' certificate authority, the only one that "
            "certifies that role"
        )
