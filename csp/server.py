"""Start the CSP: load (or create) the Paillier key pair, serve until SIGTERM."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from csp.service import CspService, add_to_server
from leteo_fed.crypto.keystore import (
    load_private_key,
    passphrase_from_env,
    save_private_key,
    save_public_key,
)
from leteo_fed.crypto.paillier import MIN_SECURE_BITS, generate_keypair
from leteo_fed.errors import ConfigError
from leteo_fed.transport.grpc_io import TlsConfig, make_server, serve_until_signal

log = logging.getLogger("leteo.csp")

SECRET_KEY_FILE = "paillier.key"
PUBLIC_KEY_FILE = "paillier.pub.json"


def load_or_create_key(key_dir: Path, bits: int, allow_small: bool):
    if bits < MIN_SECURE_BITS and not allow_small:
        raise ConfigError(
            f"--key-bits {bits} is below {MIN_SECURE_BITS}; pass --insecure-small-key to allow "
            "it for tests",
            field="key_bits",
        )
    key_dir.mkdir(parents=True, exist_ok=True)
    key_dir.chmod(0o700)
    secret = key_dir / SECRET_KEY_FILE
    passphrase = passphrase_from_env()
    if secret.exists():
        key = load_private_key(secret, passphrase)
        log.info("loaded the Paillier key from %s", secret)
        if key.public.bits < MIN_SECURE_BITS and not allow_small:
            raise ConfigError(
                f"stored key has {key.public.bits} bits; pass --insecure-small-key to use it"
            )
        return key
    start = time.perf_counter()
    key = generate_keypair(bits)
    save_private_key(secret, key, passphrase)
    save_public_key(key_dir / PUBLIC_KEY_FILE, key.public)
    log.info(
        "generated a %d-bit Paillier key in %.2f s; secret key stored at %s (mode 600%s)",
        bits,
        time.perf_counter() - start,
        secret,
        ", sealed with passphrase" if passphrase else "",
    )
    return key


def serve(
    listen: str,
    tls: TlsConfig,
    key_dir: Path,
    key_bits: int = MIN_SECURE_BITS,
    allow_small_key: bool = False,
    transcript: Path | None = None,
) -> None:
    key = load_or_create_key(Path(key_dir), key_bits, allow_small_key)
    if key.public.bits < MIN_SECURE_BITS:
        log.warning("INSECURE: %d-bit Paillier key, for tests only", key.public.bits)
    # the decrypt-once log lives with the key: both are this CSP's durable state
    service = CspService(
        key, tls.identity.name, transcript, owners_ca=tls.role_ca("owner"), state_dir=key_dir
    )
    server, port = make_server(tls, listen)
    add_to_server(server, service)
    log.info("CSP %s listening on %s (port %d)", tls.identity.name, listen, port)
    threading.Thread(target=service.warm_up, name="decryption-workers", daemon=True).start()
    serve_until_signal(server, "csp", on_stop=service.close)
