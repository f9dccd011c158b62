"""The CSP's key folder: every Paillier key pair it holds, by key id, and which one is current.
A key holder's folder is the same, each secret file one share of a threshold key (its
`.pub.json` the threshold key's public side): `ShareRing` reads it as `KeyRing` reads a CSP's.

    KEY_DIR/                      mode 700
      current                     the current key id and a newline, replaced atomically
      keys/<key_id>.key           a secret key, mode 600 (sealed if LETEO_CSP_PASSPHRASE is set)
      keys/<key_id>.pub.json      its public key (kept after the secret key is retired)
      decrypted-rounds.jsonl      the decrypt-once log (csp/decrypt_log.py)

New rounds use the current key; a round keeps the key it was opened with to the end. Rotation
writes the new pair first and then replaces `current`, so a reader sees the old current key or
the new one, never an id whose files are missing. A running CSP notices a new `current` at its
next GetPublicKey (one stat of the file per call), and a retired key at its next use of it.
Retiring deletes a secret key (never the current one): rounds on it can no longer be decrypted.

The earlier layout, one key pair as paillier.key and paillier.pub.json, is migrated when the
folder is opened: the key moves (bytes unchanged, sealed or not) to keys/<key_id>.key and
becomes current.

A key id is 32 hex digits, the hash of n (`paillier.key_id_of`); a loaded secret key must hash
to the id it is filed under. Secret keys are never logged and never leave this process (see
`leteo_fed.crypto.parallel` for the CSP's own decryption workers).
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from leteo_fed.crypto.keystore import (
    check_secret_mode,
    is_sealed,
    load_private_key,
    load_public_key,
    load_secret,
    save_key_share,
    save_private_key,
    save_public_key,
)
from leteo_fed.crypto.paillier import MIN_SECURE_BITS, PrivateKey, PublicKey, generate_keypair
from leteo_fed.crypto.parallel import DecryptionPool
from leteo_fed.crypto.threshold import KeyShare
from leteo_fed.errors import ConfigError, KeyStoreError, NotFoundError, ProtocolError
from leteo_fed.fileio import atomic_write_bytes

log = logging.getLogger("leteo.csp")

CURRENT_FILE = "current"
KEYS_DIR = "keys"
LOCK_FILE = ".lock"
LEGACY_SECRET_FILE = "paillier.key"  # the single-key layout, migrated on open
LEGACY_PUBLIC_FILE = "paillier.pub.json"
SECRET_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub.json"
_KEY_ID = re.compile(r"[0-9a-f]{32}")


def is_key_id(text: str) -> bool:
    return bool(_KEY_ID.fullmatch(text))


def check_key_bits(bits: int, allow_small: bool) -> None:
    if bits < MIN_SECURE_BITS and not allow_small:
        raise ConfigError(
            f"--key-bits {bits} is below {MIN_SECURE_BITS}; pass --insecure-small-key to allow "
            "it for tests",
            field="key_bits",
        )


@dataclass(frozen=True)
class KeyInfo:
    """One key of the folder, as `csp list-keys` shows it (no secret is opened)."""

    key_id: str
    bits: int
    current: bool
    held: bool  # its secret key is still in the folder (False: retired)
    sealed: bool


class KeyFolder:
    """The files of a CSP key folder. Writers (migration, rotation, retirement) hold an
    exclusive lock on KEY_DIR/.lock; readers need none (every file is replaced atomically)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.keys = self.path / KEYS_DIR
        self.pointer = self.path / CURRENT_FILE

    @classmethod
    def open(cls, path: Path, passphrase: str | None = None, create: bool = False) -> KeyFolder:
        """The folder at `path` (made, mode 700, only with `create`), its single-key layout
        migrated if it has one."""
        folder = cls(path)
        if not folder.path.is_dir():
            if not create:
                raise KeyStoreError(
                    f"no CSP key folder at {folder.path} (`leteo-fed csp serve` makes one)"
                )
            folder.path.mkdir(parents=True, exist_ok=True)
        folder.path.chmod(0o700)
        folder.keys.mkdir(mode=0o700, exist_ok=True)
        folder.keys.chmod(0o700)
        if (folder.path / LEGACY_SECRET_FILE).exists():
            with folder.locked():
                folder._migrate(passphrase)
        return folder

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive against other writers of this folder (another `rotate-key`, a starting
        CSP migrating it)."""
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # ------------------------------------------------------------------ paths and reading

    def secret_path(self, key_id: str) -> Path:
        return self.keys / f"{_checked(key_id)}{SECRET_SUFFIX}"

    def public_path(self, key_id: str) -> Path:
        return self.keys / f"{_checked(key_id)}{PUBLIC_SUFFIX}"

    def holds(self, key_id: str) -> bool:
        """Whether the secret key `key_id` is in the folder (one stat)."""
        return is_key_id(key_id) and self.secret_path(key_id).exists()

    def current_id(self) -> str | None:
        try:
            text = self.pointer.read_text()
        except FileNotFoundError:
            return None
        key_id = text.strip()
        if not is_key_id(key_id):
            raise KeyStoreError(f"{self.pointer} does not hold a key id: {text[:40]!r}")
        return key_id

    def pointer_stamp(self) -> tuple[int, int, int] | None:
        """Changes whenever `current` is replaced (a new inode every time): cheap to poll."""
        try:
            st = self.pointer.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    def key_ids(self) -> list[str]:
        """Every key this folder has seen (held or retired), by its public key file."""
        names = [p.name for p in self.keys.iterdir()]
        ids = {n[: -len(PUBLIC_SUFFIX)] for n in names if n.endswith(PUBLIC_SUFFIX)}
        ids |= {n[: -len(SECRET_SUFFIX)] for n in names if n.endswith(SECRET_SUFFIX)}
        return sorted(i for i in ids if is_key_id(i))

    def public_key(self, key_id: str) -> PublicKey:
        key = load_public_key(self.public_path(key_id))
        if key.key_id != key_id:
            raise KeyStoreError(f"{self.public_path(key_id)} holds key {key.key_id}")
        return key

    def load(self, key_id: str, passphrase: str | None = None) -> PrivateKey | KeyShare:
        """The secret key (or key share) `key_id`; NotFoundError naming it if it was retired or
        never here."""
        path = self.secret_path(key_id)
        if not path.exists():
            raise NotFoundError(self.missing_reason(key_id))
        key = load_secret(path, passphrase)
        if public_of(key).key_id != key_id:
            raise KeyStoreError(f"{path} holds key {public_of(key).key_id}, not {key_id}")
        return key

    def missing_reason(self, key_id: str) -> str:
        if is_key_id(key_id) and self.public_path(key_id).exists():
            return (
                f"key {key_id} was retired at this CSP (its secret key is deleted): rounds on "
                "it can no longer be decrypted"
            )
        return f"key {key_id or '(none)'} is not held by this CSP"

    def infos(self) -> list[KeyInfo]:
        current = self.current_id()
        out = []
        for key_id in self.key_ids():
            held = self.holds(key_id)
            try:
                bits = self.public_key(key_id).bits
            except KeyStoreError:
                bits = 0
            sealed = False
            if held:
                with suppress(KeyStoreError):
                    sealed = is_sealed(self.secret_path(key_id))
            out.append(KeyInfo(key_id, bits, key_id == current, held, sealed))
        return out

    # ------------------------------------------------------------------ writing (locked)

    def add(self, key: PrivateKey | KeyShare, passphrase: str | None = None) -> str:
        """File a key pair (or a key share and its threshold key) under its id (the secret
        first, mode 600); not yet current."""
        key_id = public_of(key).key_id
        if isinstance(key, KeyShare):
            save_key_share(self.secret_path(key_id), key, passphrase)
            save_public_key(self.public_path(key_id), key.key)
        else:
            save_private_key(self.secret_path(key_id), key, passphrase)
            save_public_key(self.public_path(key_id), key.public)
        sync_dir(self.keys)
        return key_id

    def set_current(self, key_id: str) -> None:
        if not self.holds(key_id):
            raise KeyStoreError(f"cannot make key {key_id} current: {self.missing_reason(key_id)}")
        atomic_write_bytes(self.pointer, f"{key_id}\n".encode(), mode=0o644)
        sync_dir(self.path)

    def retire(self, key_id: str) -> Path:
        """Delete the secret key `key_id` (refusing the current one); its public key stays as
        the record that the id existed. Returns the deleted file."""
        if not is_key_id(key_id):
            raise KeyStoreError(f"{key_id!r} is not a key id (32 hex digits)")
        with self.locked():
            if key_id == self.current_id():
                raise KeyStoreError(
                    f"key {key_id} is the current key: new rounds use it. Rotate first "
                    "(leteo-fed csp rotate-key), then retire it"
                )
            path = self.secret_path(key_id)
            if not path.exists():
                raise NotFoundError(self.missing_reason(key_id))
            path.unlink()
            sync_dir(self.keys)
        log.info("retired key %s: deleted %s", key_id, path)
        return path

    def _migrate(self, passphrase: str | None) -> None:
        """paillier.key (+ .pub.json) -> keys/<key_id>.key (+ .pub.json), current if none is.
        Idempotent: an interrupted migration completes on the next open."""
        legacy = self.path / LEGACY_SECRET_FILE
        if not legacy.exists():  # another process migrated it while we waited for the lock
            return
        check_secret_mode(legacy)
        try:  # the public file names the key without opening a sealed secret
            public = load_public_key(self.path / LEGACY_PUBLIC_FILE)
        except KeyStoreError:
            public = load_private_key(legacy, passphrase).public
        key_id = public.key_id
        target = self.secret_path(key_id)
        if not target.exists():
            atomic_write_bytes(target, legacy.read_bytes(), mode=0o600)
        if not self.public_path(key_id).exists():
            save_public_key(self.public_path(key_id), public)
        sync_dir(self.keys)
        if self.current_id() is None:
            self.set_current(key_id)
        legacy.unlink()
        (self.path / LEGACY_PUBLIC_FILE).unlink(missing_ok=True)
        sync_dir(self.path)
        log.info("moved the key of %s to %s (key %s)", legacy, target, key_id)


def public_of(key: PrivateKey | KeyShare) -> PublicKey:
    return key.key.public if isinstance(key, KeyShare) else key.public


def _checked(key_id: str) -> str:
    if not is_key_id(key_id):
        raise KeyStoreError(f"{key_id!r} is not a key id (32 hex digits)")
    return key_id


def sync_dir(path: Path) -> None:
    """Make renames and unlinks in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- the commands


def open_or_create(
    key_dir: Path, bits: int, allow_small: bool, passphrase: str | None
) -> KeyFolder:
    """`csp serve`: the key folder, with a first key pair made current if it has none."""
    check_key_bits(bits, allow_small)
    folder = KeyFolder.open(key_dir, passphrase, create=True)
    with folder.locked():
        if folder.current_id() is None:
            key = _generate(bits)
            folder.set_current(folder.add(key, passphrase))
            log.info(
                "secret key of %s stored at %s (mode 600%s)",
                key.public.key_id,
                folder.secret_path(key.public.key_id),
                ", sealed with passphrase" if passphrase else "",
            )
    return folder


def rotate(
    key_dir: Path, bits: int | None, allow_small: bool, passphrase: str | None
) -> tuple[str, PrivateKey]:
    """A new key pair, made current: (the previous current key id, the new key). `bits`
    defaults to the size of the current key. If the current key is sealed, the new one is
    sealed with the same passphrase (checked by opening the current key first)."""
    folder = KeyFolder.open(key_dir, passphrase)
    owner = folder.path.stat().st_uid
    if owner != os.geteuid():  # the CSP could not read a secret key file we wrote (mode 600)
        raise KeyStoreError(
            f"{folder.path} belongs to user id {owner}: run rotate-key as the user that runs "
            "the CSP"
        )
    with folder.locked():
        old = folder.current_id()
        if old is None:
            raise KeyStoreError(
                f"{key_dir} has no current key; `leteo-fed csp serve --key-dir {key_dir}` "
                "creates the first one"
            )
        if folder.holds(old) and is_sealed(folder.secret_path(old)):
            if not passphrase:
                raise KeyStoreError(
                    f"the current key {old} is sealed: set LETEO_CSP_PASSPHRASE to the CSP's "
                    "passphrase so the new key is sealed with it too"
                )
            folder.load(old, passphrase)  # a wrong passphrase fails here, before any write
        if bits is None:
            bits = folder.public_key(old).bits
        check_key_bits(bits, allow_small)
        key = _generate(bits)
        folder.set_current(folder.add(key, passphrase))
    log.info("rotated the CSP key in %s: %s -> %s", key_dir, old, key.public.key_id)
    return old, key


def retire(key_dir: Path, key_id: str, passphrase: str | None = None) -> Path:
    """Delete the secret key `key_id` from the folder (not the current key); the deleted file.
    (The passphrase is needed only to migrate a sealed single-key folder without its public
    key file.)"""
    return KeyFolder.open(key_dir, passphrase).retire(key_id)


def _generate(bits: int) -> PrivateKey:
    start = time.perf_counter()
    key = generate_keypair(bits)
    log.info(
        "generated a %d-bit Paillier key %s in %.2f s",
        bits,
        key.public.key_id,
        time.perf_counter() - start,
    )
    return key


# ---------------------------------------------------------------------- the running CSP


@dataclass
class HeldKey:
    """A key the running CSP decrypts with, and its own decryption workers (started lazily)."""

    key: PrivateKey
    pool: DecryptionPool

    @property
    def public(self) -> PublicKey:
        return self.key.public

    def close(self) -> None:
        self.pool.close()


@dataclass
class HeldShare:
    """A share a running key holder partially decrypts with (on its own threads)."""

    share: KeyShare

    @property
    def public(self) -> PublicKey:
        return self.share.key.public

    def close(self) -> None:
        """Nothing runs for a share between rounds."""


Held = TypeVar("Held", HeldKey, HeldShare)


class Ring(ABC, Generic[Held]):
    """The keys of a running CSP or key holder: loaded from its folder on first use.

    `current()` re-reads the folder's `current` pointer whenever the file changed (one stat per
    call), so a rotation takes effect without a restart; `held(key_id)` checks that the secret
    key file is still there (one stat), so a retired key is refused at its next use and its
    workers stop. Without a folder (tests), the ring holds one fixed key."""

    party = "CSP"

    def __init__(
        self,
        folder: KeyFolder | None,
        passphrase: str | None = None,
        allow_small: bool = False,
        min_per_worker: int = 32,
        key: PrivateKey | KeyShare | None = None,
    ) -> None:
        if (folder is None) == (key is None):
            raise ValueError("a key ring reads a key folder or holds one fixed key")
        self._folder = folder
        self._passphrase = passphrase  # in memory only, as the secret keys it opens
        self._allow_small = allow_small
        self._min_per_worker = min_per_worker
        self._held: dict[str, Held] = {}
        self._lock = threading.Lock()
        self._current = ""
        self._stamp: tuple[int, int, int] | None = None
        if key is not None:
            self._current = public_of(key).key_id
            self._held[self._current] = self._checked_hold(key)

    @abstractmethod
    def _hold(self, key: PrivateKey | KeyShare) -> Held:
        """What this party keeps of a loaded key (refusing the other kind of secret)."""

    def _checked_hold(self, key: PrivateKey | KeyShare) -> Held:
        public = public_of(key)
        small = public.bits < MIN_SECURE_BITS
        if small and not self._allow_small and self._folder is not None:
            raise KeyStoreError(
                f"key {public.key_id} has {public.bits} bits; this {self.party} was not started "
                "with --insecure-small-key"
            )
        return self._hold(key)

    def current(self) -> Held:
        """The key new rounds use."""
        folder = self._folder
        if folder is not None:
            stamp = folder.pointer_stamp()
            with self._lock:
                if stamp is None or stamp != self._stamp:
                    key_id = folder.current_id()
                    if key_id is None:
                        raise KeyStoreError(f"the key folder {folder.path} has no current key")
                    if self._current and key_id != self._current:
                        log.info(
                            "current key is now %s (was %s): new rounds use it",
                            key_id,
                            self._current,
                        )
                    self._current, self._stamp = key_id, stamp
        return self.held(self._current)

    def held(self, key_id: str) -> Held:
        """The key `key_id` if this party holds it; NotFoundError naming why not (never had
        it, or retired)."""
        if not key_id:
            raise ProtocolError("key_id is empty")
        if not is_key_id(key_id):
            raise NotFoundError(f"{key_id[:40]!r} is not a key id (32 hex digits)")
        folder = self._folder
        if folder is None:
            held = self._held.get(key_id)
            if held is None:
                raise NotFoundError(f"key {key_id} is not held by this {self.party}")
            return held
        if not folder.holds(key_id):
            with self._lock:
                gone = self._held.pop(key_id, None)
            if gone is not None:
                log.info("key %s was retired: its decryption workers stop", key_id)
                gone.close()
            raise NotFoundError(folder.missing_reason(key_id))
        with self._lock:
            held = self._held.get(key_id)
            if held is None:
                loaded = folder.load(key_id, self._passphrase)
                held = self._held[key_id] = self._checked_hold(loaded)
                log.info("loaded key %s (%d bits)", key_id, held.public.bits)
            return held

    def loaded(self) -> list[str]:
        with self._lock:
            return sorted(self._held)

    def close(self) -> None:
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for h in held:
            h.close()


class KeyRing(Ring[HeldKey]):
    """A CSP's whole Paillier keys, one DecryptionPool each."""

    @classmethod
    def single(cls, key: PrivateKey, min_per_worker: int = 32) -> KeyRing:
        return cls(None, key=key, min_per_worker=min_per_worker)

    def _hold(self, key: PrivateKey | KeyShare) -> HeldKey:
        if isinstance(key, KeyShare):
            raise KeyStoreError(
                f"key {key.key.key_id} in this folder is one share of a threshold key: serve it "
                "with `leteo-fed keyholder serve`, not as a CSP"
            )
        return HeldKey(key, DecryptionPool(key, min_per_worker=self._min_per_worker))


class ShareRing(Ring[HeldShare]):
    """A key holder's shares of threshold keys."""

    party = "key holder"

    def _hold(self, key: PrivateKey | KeyShare) -> HeldShare:
        if not isinstance(key, KeyShare):
            raise KeyStoreError(
                f"key {key.public.key_id} in this folder is a whole Paillier key: a key holder "
                "serves only shares of threshold keys (`leteo-fed csp serve` serves whole keys)"
            )
        return HeldShare(key)
