"""Persisting Paillier keys and threshold key shares: secrets owner-only (0600), optionally
sealed with a passphrase.

The sealed form derives a 256-bit key from the passphrase with scrypt and encrypts the key JSON
with AES-256-GCM, so a copied file is useless without the passphrase. A secret file is either a
whole Paillier key ("paillier-private", the CSP's) or one holder's share of a threshold key
("threshold-share", leteo_fed/crypto/threshold.py); `load_secret` reads either.
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
from leteo_fed.crypto.threshold import KeyShare, ThresholdKey
from leteo_fed.errors import EncodingError, KeyStoreError, ProtocolError
from leteo_fed.fileio import atomic_write_bytes

_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1


_AAD = {"paillier-private": b"leteo-paillier-v1", "threshold-share": b"leteo-threshold-share-v1"}
SECRET_KINDS = tuple(_AAD)


def save_private_key(path: Path, key: PrivateKey, passphrase: str | None = None) -> None:
    _save_secret(path, {"kind": "paillier-private", "p": hex(key.p), "q": hex(key.q)}, passphrase)


def save_key_share(path: Path, share: KeyShare, passphrase: str | None = None) -> None:
    doc = {
        "kind": "threshold-share",
        "index": share.index,
        "secret": hex(share.secret),
        "key": threshold_key_doc(share.key),
    }
    _save_secret(path, doc, passphrase)


def _save_secret(path: Path, doc: dict, passphrase: str | None) -> None:
    kind = doc["kind"]
    payload = json.dumps(doc).encode()
    if passphrase:
        salt, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
        sealed = AESGCM(_derive(passphrase, salt)).encrypt(nonce, payload, _AAD[kind])
        doc = {
            "kind": f"{kind}-sealed",
            "kdf": {"name": "scrypt", "n": _SCRYPT_N, "r": _SCRYPT_R, "p": _SCRYPT_P},
            "salt": base64.b64encode(salt).decode(),
            "nonce": base64.b64encode(nonce).decode(),
            "ciphertext": base64.b64encode(sealed).decode(),
        }
        payload = json.dumps(doc).encode()
    atomic_write_bytes(Path(path), payload, mode=0o600)


def load_private_key(path: Path, passphrase: str | None = None) -> PrivateKey:
    key = load_secret(path, passphrase)
    if not isinstance(key, PrivateKey):
        raise KeyStoreError(
            f"{path} holds one holder's share of a threshold key, not a whole Paillier key: "
            "serve it with `leteo-fed keyholder serve`"
        )
    return key


def load_key_share(path: Path, passphrase: str | None = None) -> KeyShare:
    key = load_secret(path, passphrase)
    if not isinstance(key, KeyShare):
        raise KeyStoreError(
            f"{path} holds a whole Paillier key, not a share of a threshold key: serve it with "
            "`leteo-fed csp serve`"
        )
    return key


def load_secret(path: Path, passphrase: str | None = None) -> PrivateKey | KeyShare:
    """A secret file of either kind, unsealed with `passphrase` if it is sealed."""
    path = Path(path)
    doc = _read_secret(path)
    kind = str(doc.get("kind", ""))
    if kind.endswith("-sealed") and kind[: -len("-sealed")] in _AAD:
        if not passphrase:
            raise KeyStoreError(f"secret key file {path} is sealed: a passphrase is required")
        kdf = doc["kdf"]
        key = _derive(passphrase, base64.b64decode(doc["salt"]), kdf["n"], kdf["r"], kdf["p"])
        try:
            plain = AESGCM(key).decrypt(
                base64.b64decode(doc["nonce"]),
                base64.b64decode(doc["ciphertext"]),
                _AAD[kind[: -len("-sealed")]],
            )
        except InvalidTag as exc:
            raise KeyStoreError(f"wrong passphrase for {path}") from exc
        doc = json.loads(plain)
    try:
        if doc.get("kind") == "paillier-private":
            return PrivateKey(int(doc["p"], 16), int(doc["q"], 16))
        if doc.get("kind") == "threshold-share":
            share = KeyShare(
                threshold_key_from_doc(doc["key"]), int(doc["index"]), int(doc["secret"], 16)
            )
            if not share.matches():
                raise KeyStoreError(
                    f"{path}: the share does not match its verification key (corrupted, or "
                    "not from this key's dealing)"
                )
            return share
    except (KeyError, TypeError, ValueError, EncodingError, ProtocolError) as exc:
        raise KeyStoreError(f"{path} is not a readable LETEO-Fed secret key: {exc}") from exc
    raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier secret key or key share")


def threshold_key_doc(key: ThresholdKey) -> dict:
    """The public side of a threshold key as JSON (in a share file, or a .pub.json)."""
    return {
        "kind": "threshold-public",
        "n": hex(key.public.n),
        "bits": key.public.bits,
        "key_id": key.key_id,
        "threshold": key.threshold,
        "holders": key.holders,
        "v": hex(key.v),
        "verification": [hex(x) for x in key.verification],
    }


def threshold_key_from_doc(doc: dict) -> ThresholdKey:
    if doc.get("kind") != "threshold-public":
        raise ValueError("not a threshold-public document")
    return ThresholdKey(
        PublicKey(int(doc["n"], 16)),
        int(doc["threshold"]),
        int(doc["holders"]),
        int(doc["v"], 16),
        tuple(int(x, 16) for x in doc["verification"]),
    )


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
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier secret key or key share")
    return doc


def is_sealed(path: Path) -> bool:
    """Whether a secret key file is sealed with a passphrase (read without opening it)."""
    return str(_read_secret(Path(path)).get("kind", "")).endswith("-sealed")


def save_public_key(path: Path, key: PublicKey | ThresholdKey) -> None:
    """A public key file: a Paillier key, or a threshold key's whole public side."""
    if isinstance(key, ThresholdKey):
        doc = threshold_key_doc(key)
    else:
        doc = {"kind": "paillier-public", "n": hex(key.n), "bits": key.bits, "key_id": key.key_id}
    atomic_write_bytes(Path(path), json.dumps(doc, indent=1).encode(), mode=0o644)


def load_public_key(path: Path) -> PublicKey:
    """A public key file's Paillier key (of a threshold key too); its key id is recomputed from
    n, never taken from the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("kind") not in ("paillier-public", "threshold-public"):
            raise ValueError("not a paillier-public document")
        key = PublicKey(int(doc["n"], 16))
    except (ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier public key: {exc}") from exc
    if key.n < 3:
        raise KeyStoreError(f"{path} is not a LETEO-Fed Paillier public key")
    return key


def load_threshold_key(path: Path) -> ThresholdKey:
    path = Path(path)
    try:
        return threshold_key_from_doc(json.loads(path.read_bytes()))
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        OSError,
        EncodingError,
        ProtocolError,
    ) as exc:
        raise KeyStoreError(f"{path} is not a LETEO-Fed threshold public key: {exc}") from exc


def _derive(
    passphrase: str, salt: bytes, n: int = _SCRYPT_N, r: int = _SCRYPT_R, p: int = _SCRYPT_P
):
    return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())


def passphrase_from_env(var: str = "LETEO_CSP_PASSPHRASE") -> str | None:
    """Passphrases come from the environment (or a secrets manager), never from argv or logs."""
    value = os.environ.get(var)
    return value or None
