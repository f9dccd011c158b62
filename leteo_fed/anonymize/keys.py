"""The HMAC key of the pseudonyms, loaded and checked before any row is read (both engines).

A key comes from an environment variable or a key file that only its owner can read; keys
shorter than 16 bytes are refused, and a key is never echoed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from leteo_fed.anonymize.models.config import Identifiers
from leteo_fed.errors import ConfigError, KeyStoreError

MIN_KEY_BYTES = 16


def load_key(ids: Identifiers) -> bytes:
    """The HMAC key from ``identifiers.key_env`` or ``identifiers.key_file``; never echoed.

    A key file must not be accessible by group or others (like an SSH key); its trailing newline
    is not part of the key. Keys shorter than 16 bytes are refused.
    """
    if ids.key_env is not None:
        raw = os.environ.get(ids.key_env)
        if not raw:
            raise ConfigError(
                f"environment variable {ids.key_env!r} (identifiers.key_env) is not set or empty",
                field="identifiers.key_env",
            )
        key = raw.encode("utf-8")
        source = f"environment variable {ids.key_env!r}"
    elif ids.key_file is not None:
        key = _read_key_file(Path(ids.key_file))
        source = f"key file {ids.key_file}"
    else:
        raise ConfigError(
            "pseudonymization needs 'identifiers.key_env' or 'identifiers.key_file'",
            field="identifiers.pseudonymize",
        )
    if len(key) < MIN_KEY_BYTES:
        raise KeyStoreError(
            f"the HMAC key from {source} has {len(key)} bytes; at least {MIN_KEY_BYTES} are "
            "required (e.g. 32 random bytes, hex encoded)",
            field="identifiers.key_file" if ids.key_file else "identifiers.key_env",
        )
    return key


def _read_key_file(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise KeyStoreError(
                f"key file {path} is accessible by group or others (mode "
                f"{stat.S_IMODE(mode):03o}); run: chmod 600 {path}",
                field="identifiers.key_file",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise KeyStoreError(
            f"cannot read key file {path}: {exc.strerror}", field="identifiers.key_file"
        ) from exc
    return data.rstrip(b"\r\n")
