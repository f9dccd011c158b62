"""A private certificate authority and one certificate per party, for mutual TLS.

Identity lives in the certificate: the common name is the party's name (``csp``,
``aggregator``, a site id, ``analyst``) and the organizational unit is its role. Services
authorize calls by that role and name, never by anything the caller merely claims.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from leteo_fed.defaults import CERT_VALIDITY_DAYS
from leteo_fed.errors import ConfigError
from leteo_fed.fileio import atomic_write_bytes

ROLES = ("csp", "aggregator", "owner", "analyst")
CA_NAME = "LETEO-Fed CA"


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
    out: Path, days: int = CERT_VALIDITY_DAYS
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
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
    atomic_write_bytes(out / "ca.crt", cert.public_bytes(serialization.Encoding.PEM))
    atomic_write_bytes(out / "ca.key", _key_pem(key), mode=0o600)
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


def create_pki(
    out: Path, owners: list[str], hosts: list[str] | None = None, days: int = CERT_VALIDITY_DAYS
) -> list[Party]:
    """CA plus certificates for the CSP, the aggregator, the analyst CLI and every owner."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parties = [Party("csp", "csp"), Party("aggregator", "aggregator"), Party("analyst", "analyst")]
    for site in owners:
        check_site_id(site)
        parties.append(Party(site, "owner"))
    ca_cert, ca_key = create_ca(out, days)
    for party in parties:
        issue(out, party, ca_cert, ca_key, hosts or [], days)
    return parties


def check_site_id(site: str) -> None:
    reserved = {"csp", "aggregator", "analyst", "ca"}
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
