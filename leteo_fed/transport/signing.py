"""Signatures that travel through a party nobody has to trust.

An owner signs what it says about its share, the analyst signs its round request, each with the
key of its own certificate. Whoever relays the message (the aggregator) cannot change it, and
the verifier checks the signer's certificate against the certificate authority of the signer's
role, which the relaying party does not hold. Every signature covers a purpose tag, so a
signature made for one purpose never verifies as another.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from leteo_fed.errors import AccessDenied, ConfigError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.certs import Party, read_identity

SHARE_STATEMENT = b"leteo/v1/share-statement\x00"
ROUND_REQUEST = b"leteo/v1/round-request\x00"


@dataclass(frozen=True)
class Signer:
    """A party's certificate and private key, used to sign what it sends through others."""

    certificate: bytes  # PEM
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def from_pem(cls, certificate: bytes, key_pem: bytes) -> Signer:
        key = serialization.load_pem_private_key(key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ConfigError("signing needs an EC (P-256) certificate key", field="tls.key")
        return cls(certificate, key)

    @property
    def identity(self) -> Party:
        return read_identity(self.certificate)

    def sign(self, body: bytes, purpose: bytes) -> pb.Signed:
        signature = self.key.sign(purpose + body, ec.ECDSA(hashes.SHA256()))
        return pb.Signed(body=body, signature=signature, certificate=self.certificate)


def _authorities(ca_pem: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(ca_pem)
    except ValueError as exc:
        raise ConfigError(f"unreadable certificate authority: {exc}") from exc


def verify(
    signed: pb.Signed,
    purpose: bytes,
    ca_pem: bytes,
    role: str,
    what: str,
    now: dt.datetime | None = None,
) -> Party:
    """The signer of `signed`, if its certificate was issued by `ca_pem` for `role` and the
    signature over purpose || body holds; AccessDenied naming `what` otherwise."""
    if not signed.signature or not signed.certificate:
        raise AccessDenied(f"{what} is not signed")
    try:
        cert = x509.load_pem_x509_certificate(signed.certificate)
    except ValueError as exc:
        raise AccessDenied(f"{what}: the signer's certificate is unreadable") from exc
    issuer = next(
        (ca for ca in _authorities(ca_pem) if _issued_by(cert, ca)),
        None,
    )
    if issuer is None:
        raise AccessDenied(
            f"{what}: the signer's certificate was not issued by the {role}s' certificate "
            "authority this party trusts"
        )
    when = now or dt.datetime.now(dt.timezone.utc)
    if not cert.not_valid_before_utc <= when <= cert.not_valid_after_utc:
        raise AccessDenied(f"{what}: the signer's certificate is expired or not yet valid")
    party = read_identity(signed.certificate)
    if party.role != role:
        raise AccessDenied(f"{what} is signed by {party.role} '{party.name}', not by an {role}")
    public = cert.public_key()
    if not isinstance(public, ec.EllipticCurvePublicKey):
        raise AccessDenied(f"{what}: the signer's key is not an EC key")
    try:
        public.verify(signed.signature, purpose + signed.body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature as exc:
        raise AccessDenied(f"{what}: the signature does not match its content") from exc
    return party


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
