"""The CSP's key folder: layout, the atomic `current` pointer, permissions, migration of the
single-key layout, rotation and retirement, and the running CSP's view of it (KeyRing)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from csp import keys
from csp.keys import KeyFolder, KeyRing
from leteo_fed.crypto.keystore import (
    is_sealed,
    load_private_key,
    save_private_key,
    save_public_key,
)
from leteo_fed.crypto.paillier import Encryptor, PrivateKey, generate_keypair
from leteo_fed.errors import ConfigError, KeyStoreError, NotFoundError

BITS = 512  # small keys: these tests are about files, not security
PASSPHRASE = "correct horse battery staple"


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def folder(tmp_path: Path) -> KeyFolder:
    return keys.open_or_create(tmp_path / "csp-keys", BITS, True, None)


def test_first_start_makes_the_layout(folder: KeyFolder) -> None:
    key_id = folder.current_id()
    assert key_id is not None and keys.is_key_id(key_id)
    assert folder.pointer.read_text() == f"{key_id}\n"
    assert mode_of(folder.path) == 0o700 and mode_of(folder.keys) == 0o700
    secret, public = folder.secret_path(key_id), folder.public_path(key_id)
    assert secret == folder.path / "keys" / f"{key_id}.key" and mode_of(secret) == 0o600
    assert public.name == f"{key_id}.pub.json" and mode_of(public) == 0o644
    assert json.loads(public.read_text())["key_id"] == key_id
    assert folder.load(key_id).public.key_id == key_id
    assert not (folder.path / "paillier.key").exists()
    # a second start opens the same key
    again = keys.open_or_create(folder.path, BITS, True, None)
    assert again.current_id() == key_id and folder.key_ids() == [key_id]


def test_small_keys_need_the_flag_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--insecure-small-key"):
        keys.open_or_create(tmp_path / "k", BITS, False, None)
    assert not (tmp_path / "k").exists()


def test_secret_keys_are_0600_even_with_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        folder = keys.open_or_create(tmp_path / "k", BITS, True, None)
        _, key = keys.rotate(folder.path, None, True, None)
    finally:
        os.umask(old)
    for key_id in folder.key_ids():
        assert mode_of(folder.secret_path(key_id)) == 0o600
    assert mode_of(folder.path / ".lock") == 0o600
    assert folder.current_id() == key.public.key_id


def test_rotation_writes_the_key_before_the_pointer_and_replaces_it_atomically(
    folder: KeyFolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = folder.current_id()
    assert old is not None
    stamp = folder.pointer_stamp()
    seen: list[tuple[str | None, bool]] = []
    real_set = KeyFolder.set_current

    def spy(self: KeyFolder, key_id: str) -> None:
        # when the pointer is about to move, the new key's files are already in place
        seen.append((self.current_id(), self.holds(key_id)))
        real_set(self, key_id)

    monkeypatch.setattr(KeyFolder, "set_current", spy)
    previous, key = keys.rotate(folder.path, None, True, None)
    new = key.public.key_id
    assert previous == old and seen == [(old, True)]
    assert folder.current_id() == new != old
    assert folder.pointer_stamp() != stamp  # a running CSP notices with one stat
    assert sorted(folder.key_ids()) == sorted([old, new])
    assert key.public.bits == BITS  # the default size is the current key's
    # nothing half-written is left beside the pointer and the keys
    names = sorted(p.name for p in folder.path.iterdir())
    assert names == [".lock", "current", "keys"]
    assert all(not p.name.startswith(".") for p in folder.keys.iterdir())


def test_the_pointer_names_only_a_held_key(folder: KeyFolder) -> None:
    with pytest.raises(KeyStoreError, match="not held"):
        folder.set_current("0" * 32)
    folder.pointer.write_text("not a key id\n")
    with pytest.raises(KeyStoreError, match="does not hold a key id"):
        folder.current_id()


def test_rotate_needs_an_existing_folder(tmp_path: Path) -> None:
    with pytest.raises(KeyStoreError, match="no CSP key folder"):
        keys.rotate(tmp_path / "typo", None, True, None)
    assert not (tmp_path / "typo").exists()


def test_rotate_to_a_small_key_needs_the_flag(folder: KeyFolder) -> None:
    with pytest.raises(ConfigError, match="--insecure-small-key"):
        keys.rotate(folder.path, None, False, None)
    assert len(folder.key_ids()) == 1


def test_a_sealed_current_key_is_rotated_only_with_its_passphrase(tmp_path: Path) -> None:
    folder = keys.open_or_create(tmp_path / "k", BITS, True, PASSPHRASE)
    first = folder.current_id()
    assert first is not None and is_sealed(folder.secret_path(first))
    with pytest.raises(KeyStoreError, match="LETEO_CSP_PASSPHRASE"):
        keys.rotate(folder.path, None, True, None)
    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        keys.rotate(folder.path, None, True, "not it")
    assert folder.key_ids() == [first] and folder.current_id() == first
    _, key = keys.rotate(folder.path, None, True, PASSPHRASE)
    new = key.public.key_id
    assert is_sealed(folder.secret_path(new))
    assert load_private_key(folder.secret_path(new), PASSPHRASE).p == key.p


def test_retire_deletes_only_an_old_secret_key(folder: KeyFolder) -> None:
    old = folder.current_id()
    assert old is not None
    _, key = keys.rotate(folder.path, None, True, None)
    new = key.public.key_id
    with pytest.raises(KeyStoreError, match="is the current key"):
        keys.retire(folder.path, new)
    assert folder.holds(new)
    deleted = keys.retire(folder.path, old)
    assert deleted == folder.secret_path(old) and not deleted.exists()
    assert folder.public_path(old).exists()  # the record that the key existed
    with pytest.raises(NotFoundError, match="was retired"):
        keys.retire(folder.path, old)
    with pytest.raises(NotFoundError, match="not held"):
        keys.retire(folder.path, "f" * 32)
    with pytest.raises(KeyStoreError, match="not a key id"):
        keys.retire(folder.path, "../current")
    with pytest.raises(NotFoundError, match="was retired"):
        folder.load(old)
    states = {i.key_id: (i.current, i.held) for i in folder.infos()}
    assert states == {new: (True, True), old: (False, False)}


def test_a_key_filed_under_another_id_is_refused(folder: KeyFolder) -> None:
    other = generate_keypair(BITS)
    wrong = "a" * 32
    save_private_key(folder.secret_path(wrong), other)
    with pytest.raises(KeyStoreError, match="holds key"):
        folder.load(wrong)


def _legacy(path: Path, key: PrivateKey, passphrase: str | None, public: bool = True) -> None:
    """A key folder as CSPs before key rotation wrote it."""
    path.mkdir(mode=0o700)
    save_private_key(path / "paillier.key", key, passphrase)
    if public:
        save_public_key(path / "paillier.pub.json", key.public)
    (path / "decrypted-rounds.jsonl").write_text('{"round_id": "r1", "state": "decrypted"}\n')


@pytest.mark.parametrize(
    ("passphrase", "public"), [(None, True), (PASSPHRASE, True), (PASSPHRASE, False)]
)
def test_the_single_key_layout_is_migrated(
    tmp_path: Path, passphrase: str | None, public: bool
) -> None:
    key = generate_keypair(BITS)
    path = tmp_path / "csp-keys"
    _legacy(path, key, passphrase, public)
    raw = (path / "paillier.key").read_bytes()
    folder = keys.open_or_create(path, BITS, True, passphrase)
    key_id = key.public.key_id
    assert folder.current_id() == key_id and folder.key_ids() == [key_id]
    assert folder.secret_path(key_id).read_bytes() == raw  # moved as is, sealed or not
    assert mode_of(folder.secret_path(key_id)) == 0o600
    assert not (path / "paillier.key").exists() and not (path / "paillier.pub.json").exists()
    assert (path / "decrypted-rounds.jsonl").read_text().startswith('{"round_id": "r1"')
    assert folder.load(key_id, passphrase).p == key.p
    # and a rotation afterwards keeps it as an old key
    _, new = keys.rotate(path, None, True, passphrase)
    assert folder.current_id() == new.public.key_id and folder.holds(key_id)


def test_a_sealed_single_key_without_its_public_file_needs_the_passphrase(tmp_path: Path) -> None:
    path = tmp_path / "k"
    _legacy(path, generate_keypair(BITS), PASSPHRASE, public=False)
    with pytest.raises(KeyStoreError, match="passphrase is required"):
        keys.open_or_create(path, BITS, True, None)
    assert (path / "paillier.key").exists()  # untouched


def test_a_readable_single_key_is_not_migrated(tmp_path: Path) -> None:
    path = tmp_path / "k"
    _legacy(path, generate_keypair(BITS), None)
    (path / "paillier.key").chmod(0o644)
    with pytest.raises(KeyStoreError, match="chmod 600"):
        keys.open_or_create(path, BITS, True, None)
    assert (path / "paillier.key").exists() and not list((path / "keys").iterdir())


def test_an_interrupted_migration_completes_on_the_next_open(tmp_path: Path) -> None:
    key = generate_keypair(BITS)
    path = tmp_path / "k"
    _legacy(path, key, None)
    # as if the last run stopped after copying the key but before removing paillier.key
    (path / "keys").mkdir(mode=0o700)
    save_private_key(path / "keys" / f"{key.public.key_id}.key", key)
    folder = keys.open_or_create(path, BITS, True, None)
    assert folder.current_id() == key.public.key_id and folder.key_ids() == [key.public.key_id]
    assert not (path / "paillier.key").exists()


# ---------------------------------------------------------------------- the running CSP


def test_the_ring_picks_up_a_rotation_without_restart(folder: KeyFolder) -> None:
    ring = KeyRing(folder, allow_small=True)
    try:
        a = ring.current().public
        _, key = keys.rotate(folder.path, None, True, None)
        b = ring.current().public
        assert b.key_id == key.public.key_id != a.key_id
        # the old key still decrypts what was encrypted under it
        c = Encryptor(a).encrypt(42)
        assert ring.held(a.key_id).pool.decrypt_many([c]) == [42]
        assert ring.loaded() == sorted([a.key_id, b.key_id])
    finally:
        ring.close()


def test_the_ring_refuses_a_retired_key_at_its_next_use(folder: KeyFolder) -> None:
    ring = KeyRing(folder, allow_small=True)
    try:
        a = ring.current().public.key_id
        keys.rotate(folder.path, None, True, None)
        ring.current()
        keys.retire(folder.path, a)
        with pytest.raises(NotFoundError, match="was retired"):
            ring.held(a)
        assert a not in ring.loaded()
        with pytest.raises(NotFoundError, match="not held"):
            ring.held("0" * 32)
        with pytest.raises(NotFoundError, match="not a key id"):
            ring.held("x" * 1000)
    finally:
        ring.close()


def test_the_ring_refuses_small_keys_unless_allowed(folder: KeyFolder) -> None:
    ring = KeyRing(folder)
    with pytest.raises(KeyStoreError, match="--insecure-small-key"):
        ring.current()


def test_a_ring_of_one_fixed_key(tmp_path: Path) -> None:
    key = generate_keypair(BITS)
    ring = KeyRing.single(key)
    assert ring.current().key is key and ring.held(key.public.key_id).key is key
    with pytest.raises(NotFoundError):
        ring.held("0" * 32)
    ring.close()


# ---------------------------------------------------------------------- the commands


def leteo_fed(*args: str, passphrase: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LETEO_CSP_PASSPHRASE"}
    if passphrase:
        env["LETEO_CSP_PASSPHRASE"] = passphrase
    return subprocess.run(
        [sys.executable, "-m", "leteo_fed", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_key_commands_say_what_they_do(folder: KeyFolder) -> None:
    old = folder.current_id()
    assert old is not None
    d = str(folder.path)
    proc = leteo_fed("csp", "rotate-key", "--key-dir", d, "--insecure-small-key")
    assert proc.returncode == 0, proc.stderr
    new = folder.current_id()
    assert new != old and f"new key {new} ({BITS} bits) is now current" in proc.stdout
    assert f"--key-id {old}" in proc.stdout and "no restart needed" in proc.stdout

    proc = leteo_fed("csp", "retire-key", "--key-dir", d, "--key-id", str(new))
    assert proc.returncode == 2 and "is the current key" in proc.stderr
    assert folder.holds(str(new))

    proc = leteo_fed("csp", "retire-key", "--key-dir", d, "--key-id", old)
    assert proc.returncode == 0, proc.stderr
    assert f"deleted the secret key of {old}: {folder.secret_path(old)}" in proc.stdout
    assert not folder.holds(old) and folder.public_path(old).exists()

    proc = leteo_fed("csp", "list-keys", "--key-dir", d)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line.split()[2] for line in proc.stdout.splitlines()[1:]}
    assert rows == {str(new): "current", old: "retired"}
    assert "Traceback" not in proc.stderr


def test_rotate_key_refuses_a_small_key_and_a_missing_folder(tmp_path: Path) -> None:
    proc = leteo_fed("csp", "rotate-key", "--key-dir", str(tmp_path / "typo"))
    assert proc.returncode == 2 and "no CSP key folder" in proc.stderr
    folder = keys.open_or_create(tmp_path / "k", BITS, True, None)
    proc = leteo_fed("csp", "rotate-key", "--key-dir", str(folder.path))
    assert proc.returncode == 2 and "--insecure-small-key" in proc.stderr
    assert len(folder.key_ids()) == 1
