"""The key ceremony of a threshold key: one dealer makes the key and m share files, each
holder files its own share and the dealt file is deleted.

A dealer exists: for the seconds `keys deal` runs, one process knows the factorization of n
(and so could decrypt everything under the key). It writes nothing of it anywhere: only the m
share files (mode 600) and the public key, staged in a private folder and moved into place, and
it exits. What remains trusted is that process and the machine it ran on. A dealer-free,
distributed generation of the key is not built (docs/threshold-keys.md says what it would take).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from csp.keys import KeyFolder, check_key_bits, sync_dir
from leteo_fed.crypto import threshold
from leteo_fed.crypto.keystore import (
    load_key_share,
    passphrase_from_env,
    save_key_share,
    save_public_key,
)
from leteo_fed.crypto.threshold import KeyShare, ThresholdKey
from leteo_fed.errors import KeyStoreError
from leteo_fed.transport.certs import keyholder_name

log = logging.getLogger("leteo.keys")

SHARE_SUFFIX = ".share"
PUBLIC_SUFFIX = ".pub.json"


def share_file_name(index: int) -> str:
    """What `keys deal` calls holder `index`'s share: the name `certs --keyholders` gives it."""
    return f"{keyholder_name(index)}{SHARE_SUFFIX}"


@dataclass(frozen=True)
class Dealt:
    key: ThresholdKey
    shares: list[Path]  # holder i's file at position i - 1
    public: Path
    seconds: float


def deal_to(out: Path, bits: int, holders: int, threshold_: int, allow_small: bool) -> Dealt:
    """A new threshold key dealt into `out`: keyholder-<i>.share for every holder and
    <key_id>.pub.json. Refuses a folder that already holds share files (a second dealing
    must not mix with the first)."""
    check_key_bits(bits, allow_small)
    threshold.check_threshold(holders, threshold_)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    existing = sorted(p.name for p in out.glob(f"*{SHARE_SUFFIX}"))
    if existing:
        raise KeyStoreError(
            f"{out} already holds share files ({', '.join(existing[:3])}): deal into an empty "
            "folder, so shares of two keys never mix"
        )
    staging = out / f".dealing-{secrets.token_hex(8)}"
    staging.mkdir(mode=0o700)
    start = time.perf_counter()
    try:
        key, shares = threshold.deal(bits, holders, threshold_)
        for share in shares:
            save_key_share(staging / share_file_name(share.index), share)
        public_name = f"{key.key_id}{PUBLIC_SUFFIX}"
        save_public_key(staging / public_name, key)
        paths = []
        for index in range(1, holders + 1):  # into place only once every file is written
            name = share_file_name(index)
            os.replace(staging / name, out / name)
            paths.append(out / name)
        os.replace(staging / public_name, out / public_name)
        sync_dir(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    seconds = time.perf_counter() - start
    log.info(
        "dealt a %d-bit %d-of-%d key %s in %.1f s", bits, threshold_, holders, key.key_id, seconds
    )
    return Dealt(key, paths, out / public_name, seconds)


def add_share(
    share_file: Path, key_dir: Path, keep: bool = False, make_current: bool = True
) -> KeyShare:
    """File a dealt share into a holder's key folder (sealed with LETEO_CSP_PASSPHRASE if set)
    and make it current; the dealt file is deleted unless `keep`."""
    share = load_key_share(Path(share_file))
    passphrase = passphrase_from_env()
    folder = KeyFolder.open(Path(key_dir), passphrase, create=True)
    with folder.locked():
        key_id = share.key.key_id
        if folder.holds(key_id):
            held = folder.load(key_id, passphrase)
            if not isinstance(held, KeyShare) or held.index != share.index:
                raise KeyStoreError(f"{key_dir} already holds another secret for key {key_id}")
        else:
            folder.add(share, passphrase)
        if make_current:
            folder.set_current(key_id)
    if not keep:
        Path(share_file).unlink()
    log.info(
        "filed share %d of %d-of-%d key %s in %s%s",
        share.index,
        share.key.threshold,
        share.key.holders,
        key_id,
        key_dir,
        " (current)" if make_current else "",
    )
    return share
