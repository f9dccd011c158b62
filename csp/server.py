"""Start the CSP (open or create its key folder) or a key holder (open its folder of shares),
serve until SIGTERM."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from csp import keyholder
from csp.keys import KeyFolder, KeyRing, ShareRing, check_key_bits, open_or_create
from csp.service import PARALLEL_MIN_PER_WORKER, CspService, add_to_server
from leteo_fed import defaults
from leteo_fed.crypto.keystore import passphrase_from_env
from leteo_fed.crypto.paillier import MIN_SECURE_BITS
from leteo_fed.errors import KeyStoreError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.transport.cert_check import check_certificate
from leteo_fed.transport.grpc_io import TlsConfig, make_server, serve_until_signal
from leteo_fed.transport.health import ServiceHealth

log = logging.getLogger("leteo.csp")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["CryptoServiceProvider"].full_name
KEYHOLDER_SERVICE_NAME = pb.DESCRIPTOR.services_by_name["KeyHolder"].full_name


def load_key_ring(key_dir: Path, bits: int, allow_small: bool) -> KeyRing:
    """The CSP's keys (csp/keys.py): a first key pair is made on first start; later starts
    read the folder, so a restart keeps every key. Rotation needs no restart."""
    passphrase = passphrase_from_env()
    folder = open_or_create(Path(key_dir), bits, allow_small, passphrase)
    keys = KeyRing(folder, passphrase, allow_small, min_per_worker=PARALLEL_MIN_PER_WORKER)
    current = keys.current()  # opened now: a wrong passphrase or a small key fails at start
    held = [i.key_id for i in folder.infos() if i.held]
    log.info(
        "key folder %s: current key %s, %d key(s) held", key_dir, current.public.key_id, len(held)
    )
    return keys


def serve(
    listen: str,
    tls: TlsConfig,
    key_dir: Path,
    key_bits: int = MIN_SECURE_BITS,
    allow_small_key: bool = False,
    transcript: Path | None = None,
    health_listen: str | None = None,
    metrics_listen: str | None = None,
    spark_threshold: int = defaults.CSP_SPARK_CIPHERTEXTS,
) -> None:
    """`health_listen`: also answer grpc.health.v1 probes there, in plaintext (Health only).
    The flags, the certificate and the port are checked first: a CSP that cannot serve makes
    no key (a bad flag is named whatever else is running on this machine)."""
    check_key_bits(key_bits, allow_small_key)
    check_certificate(tls)
    server, port = make_server(tls, listen)  # a port in use: refused before any key is made
    health = ServiceHealth([SERVICE_NAME])
    health.set(False)  # NOT_SERVING until the key is ready (a new 2048-bit key takes a while)
    health.serve_probes(health_listen)
    keys = load_key_ring(Path(key_dir), key_bits, allow_small_key)
    if keys.current().public.bits < MIN_SECURE_BITS:
        log.warning("INSECURE: %d-bit Paillier key, for tests only", keys.current().public.bits)
    # the decrypt-once log lives with the keys: both are this CSP's durable state
    service = CspService(
        keys,
        tls.identity.name,
        transcript,
        owners_ca=tls.role_ca("owner"),
        state_dir=key_dir,
        spark_threshold=spark_threshold,
    )
    add_to_server(server, service)
    health.attach(server)
    service.metrics.serve(metrics_listen)  # Prometheus metrics (docs/metrics.md)
    # NOT_SERVING while the key folder holds no usable current key (e.g. all retired)
    health.watch(lambda: keys.current() is not None, SERVICE_NAME)
    log.info("CSP %s listening on %s (port %d)", tls.identity.name, listen, port)
    threading.Thread(target=service.warm_up, name="decryption-workers", daemon=True).start()
    serve_until_signal(server, "csp", on_stop=service.close, health=health)


def serve_keyholder(
    listen: str,
    tls: TlsConfig,
    key_dir: Path,
    allow_small_key: bool = False,
    health_listen: str | None = None,
    metrics_listen: str | None = None,
    spark_threshold: int = defaults.CSP_SPARK_CIPHERTEXTS,
) -> None:
    """A key holder serving the shares filed in `key_dir` (`keyholder add-share`); it makes no
    key: a folder without a current share is refused before the port is bound."""
    check_certificate(tls)
    passphrase = passphrase_from_env()
    folder = KeyFolder.open(Path(key_dir), passphrase) if Path(key_dir).is_dir() else None
    if folder is None or folder.current_id() is None:
        raise KeyStoreError(
            f"{key_dir} holds no share: file the one dealt to this holder first "
            f"(leteo-fed keyholder add-share FILE --key-dir {key_dir})"
        )
    keys = ShareRing(folder, passphrase, allow_small_key)
    share = keys.current().share  # opened now: a wrong passphrase or a small key fails here
    server, port = make_server(tls, listen)
    health = ServiceHealth([KEYHOLDER_SERVICE_NAME])
    if share.key.public.bits < MIN_SECURE_BITS:
        log.warning("INSECURE: %d-bit Paillier key, for tests only", share.key.public.bits)
    service = keyholder.KeyHolderService(
        keys,
        tls.identity.name,
        owners_ca=tls.role_ca("owner"),
        state_dir=Path(key_dir),
        spark_threshold=spark_threshold,
    )
    keyholder.add_to_server(server, service)
    health.attach(server)
    health.serve_probes(health_listen)
    service.metrics.serve(metrics_listen)
    health.watch(lambda: keys.current() is not None, KEYHOLDER_SERVICE_NAME)
    log.info(
        "key holder %s (share %d of key %s) listening on %s (port %d)",
        tls.identity.name,
        share.index,
        share.key.key_id,
        listen,
        port,
    )
    serve_until_signal(server, "keyholder", on_stop=service.close, health=health)
