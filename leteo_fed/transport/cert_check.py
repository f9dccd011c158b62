"""Is this party's certificate usable? Checked before a service creates anything or listens.

A service that starts with a wrong certificate fails at its first handshake, long after it
has, say, generated a Paillier key; `owner check` and every `serve` call `check_certificate`
first, so the problem is one line naming the file and what is wrong with it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from leteo_fed.errors import ConfigError
from leteo_fed.transport.certs import authority_of, issued_by
from leteo_fed.transport.grpc_io import TlsConfig

EXPIRY_WARNING_DAYS = 30


@dataclass(frozen=True)
class CertFacts:
    name: str
    role: str
    path: Path
    not_after: dt.datetime
    days_left: float

    @property
    def expires_soon(self) -> bool:
        return self.days_left < EXPIRY_WARNING_DAYS

    def describe(self) -> str:
        return (
            f"{self.role} '{self.name}' ({self.path}), issued by the {authority_of(self.role)}' "
            f"CA, valid until {self.not_after:%Y-%m-%d} ({self.days_left:.0f} days)"
        )


def check_certificate(tls: TlsConfig, now: dt.datetime | None = None) -> CertFacts | None:
    """The certificate's facts, or ConfigError: files missing, another party's certificate, a
    key that does not match it, not issued by its role's authority, not yet or no longer
    valid. None in insecure mode."""
    if tls.insecure:
        return None
    _, cert_pem, key_pem = tls._read()  # files present, the certificate names this party
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"TLS key {tls.key} is unreadable: {exc}", field="tls.key") from exc
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    if key.public_key().public_bytes(der, public) != cert.public_key().public_bytes(der, public):
        raise ConfigError(
            f"TLS key {tls.key} does not belong to the certificate {tls.cert}", field="tls.key"
        )
    role = tls.identity.role
    authorities = x509.load_pem_x509_certificates(tls.role_ca(role) or b"")
    if not any(issued_by(cert, ca) for ca in authorities):
        raise ConfigError(
            f"certificate {tls.cert} was not issued by the {authority_of(role)}' CA in "
            f"{Path(tls.ca or '').parent} (a certificate from another deployment or authority)",
            field="tls.cert",
        )
    now = now or dt.datetime.now(dt.timezone.utc)
    if now < cert.not_valid_before_utc:
        raise ConfigError(
            f"certificate {tls.cert} is not valid before "
            f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC (check this machine's clock)",
            field="tls.cert",
        )
    if now >= cert.not_valid_after_utc:
        raise ConfigError(
            f"certificate {tls.cert} expired on {cert.not_valid_after_utc:%Y-%m-%d}: have a new "
            f"one issued (`leteo-fed certs issue`, docs/certificates.md)",
            field="tls.cert",
        )
    days = (cert.not_valid_after_utc - now).total_seconds() / 86400
    return CertFacts(tls.identity.name, role, Path(tls.cert or ""), cert.not_valid_after_utc, days)
