"""Persisting Paillier keys: secret key owner-only (0600), optionally sealed with a passphrase.

The sealed form derives a 256-bit key from the passphrase with scrypt and encrypts the key JSON
with AES-256-GCM, so a copied file is useless without the passphrase.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from leteo_fed.crypto.paillier import PrivateKey, PublicKey
from leteo_fed.errors import KeyStoreError
from leteo_fed.fileio import atomic_write_bytes

_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1


def save_private_key(path: Path, key: PrivateKey, passphrase: str | None = None) -> None:
    payload = json.dumps({"kind": "paillier-private", "p": hex(key.p), "q": hex(key.q)}).encode()
    if passphrase:
        salt, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
        sealed = AESGCM(_derive(passphrase, salt)).encrypt(nonce, payload, b"leteo-paillier-v1")
        doc = {
            "kind": "paillier-private-sealed",
            "kdf": {"name": "scrypt", "n": _SCRYPT_N, "r": _SCRYPT_R, "p": _SCRYPT_P},
            "salt": base64.b64encode(salt).decode(),
            "nonce": base64.b64encode(nonce).decode(),
            "ciphertext": base64.b64encode(sealed).decode(),
        }
        payload = json.dumps(doc).encode()
    atomic_write_bytes(Path(path), payload, mode=0o600)


def load_private_key(path: Path, passphrase: str | None = None) -> PrivateKey:
    path = Path(path)
    doc = _read_secret(path)
    if doc.get("kind") == "paillier-private-sealed":
        if not passphrase:
            raise KeyStoreError(f"secret key file {path} is sealed: a passphrase is required")
        kdf = doc["kdf"]
        key = _derive(passphrase, base64.b64decode(doc["salt"]), kdf["n"], kdf["r"], kdf["p"])
        try:
            plain = AESGCM(key).decrypt(
                base64.b64decode(doc["nonce"]),
                base64.b64decode(doc["ciphertext"]),
                b"leteo-paillier-v1",
            )
        except InvalidTag as exc:
            raise KeyStoreError(f"wrong passphrase for {path}") from exc
        doc = json.loads(plain)
    if doc.get("kind") != "paillier-private":
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier secret key")
    return PrivateKey(int(doc["p"], 16), int(doc["q"], 16))


def check_secret_mode(path: Path) -> None:
    """KeyStoreError unless the secret key file exists and only its owner may read it."""
    path = Path(path)
    if not path.exists():
        raise KeyStoreError(f"secret key file not found: {path}")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyStoreError(
            f"secret key file {path} is readable by others (mode {mode:o}); run chmod 600 {path}"
        )


def _read_secret(path: Path) -> dict:
    check_secret_mode(path)
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, OSError) as exc:
        raise KeyStoreError(f"secret key file {path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier secret key")
    return doc


def is_sealed(path: Path) -> bool:
    """Whether a secret key file is sealed with a passphrase (read without opening it)."""
    return _read_secret(Path(path)).get("kind") == "paillier-private-sealed"


def save_public_key(path: Path, key: PublicKey) -> None:
    doc = {"kind": "paillier-public", "n": hex(key.n), "bits": key.bits, "key_id": key.key_id}
    atomic_write_bytes(Path(path), json.dumps(doc, indent=1).encode(), mode=0o644)


def load_public_key(path: Path) -> PublicKey:
    """A public key file; its key id is recomputed from n, never taken from the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("kind") != "paillier-public":
            raise ValueError("not a paillier-public document")
        key = PublicKey(int(doc["n"], 16))
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier public key: {exc}") from exc
    if key.n < 3:
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier public key")
    return key


def _derive(
    passphrase: str, salt: bytes, n: int = _SCRYPT_N, r: int = _SCRYPT_R, p: int = _SCRYPT_P
):
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())


def passphrase_from_env(var: str = "LETEO_CSP_PASSPHRASE") -> str | None:
    """Passphrases come from the environment (or a secrets manager), never from argv or logs."""
    value = os.environ.get(var)
    return value or None
