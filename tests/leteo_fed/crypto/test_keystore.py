"""Secret key files: owner-only permissions, passphrase sealing, atomic writes."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from leteo_fed.crypto.keystore import (
    load_private_key,
    passphrase_from_env,
    save_private_key,
    save_public_key,
)
from leteo_fed.crypto.paillier import PrivateKey, generate_keypair
from leteo_fed.errors import KeyStoreError

PASSPHRASE = "correct horse battery staple"


@pytest.fixture(scope="module")
def key() -> PrivateKey:
    return generate_keypair(2048)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_saved_secret_key_is_owner_only_and_round_trips(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "csp.key"
    save_private_key(path, key)
    assert mode_of(path) == 0o600
    loaded = load_private_key(path)
    assert (loaded.p, loaded.q) == (key.p, key.q)
    assert loaded.public.n == key.p * key.q


def test_mode_is_0600_even_with_permissive_umask(tmp_path: Path, key: PrivateKey) -> None:
    old = os.umask(0)
    try:
        save_private_key(tmp_path / "k", key)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "k") == 0o600


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_load_refuses_permissive_file(tmp_path: Path, key: PrivateKey, mode: int) -> None:
    path = tmp_path / "csp.key"
    save_private_key(path, key)
    path.chmod(mode)
    with pytest.raises(KeyStoreError, match="chmod") as info:
        load_private_key(path)
    assert f"{mode:o}" in str(info.value)


def test_load_refuses_missing_and_garbage(tmp_path: Path) -> None:
    with pytest.raises(KeyStoreError, match="not found"):
        load_private_key(tmp_path / "absent.key")
    bad = tmp_path / "bad.key"
    bad.write_text("not json")
    bad.chmod(0o600)
    with pytest.raises(KeyStoreError, match="JSON"):
        load_private_key(bad)
    other = tmp_path / "other.key"
    other.write_text(json.dumps({"kind": "something-else"}))
    other.chmod(0o600)
    with pytest.raises(KeyStoreError):
        load_private_key(other)


def test_sealed_round_trip_and_refusals(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "sealed.key"
    save_private_key(path, key, passphrase=PASSPHRASE)
    assert mode_of(path) == 0o600
    loaded = load_private_key(path, passphrase=PASSPHRASE)
    assert (loaded.p, loaded.q) == (key.p, key.q)

    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        load_private_key(path, passphrase=PASSPHRASE + "!")
    for missing in (None, ""):
        with pytest.raises(KeyStoreError, match="passphrase is required"):
            load_private_key(path, passphrase=missing)


def test_sealed_file_hides_the_primes(tmp_path: Path, key: PrivateKey) -> None:
    plain, sealed = tmp_path / "plain.key", tmp_path / "sealed.key"
    save_private_key(plain, key)
    save_private_key(sealed, key, passphrase=PASSPHRASE)
    plain_text, sealed_text = plain.read_text(), sealed.read_text()
    # the check is meaningful: the unsealed file does contain hex(p)
    assert hex(key.p) in plain_text
    for secret in (hex(key.p), hex(key.q), hex(key.p)[2:40], str(key.p)[:40], hex(key.q)[2:40]):
        assert secret not in sealed_text
    doc = json.loads(sealed_text)
    assert doc["kind"] == "paillier-private-sealed"
    assert set(doc) >= {"kdf", "salt", "nonce", "ciphertext"}


def test_two_sealings_differ(tmp_path: Path, key: PrivateKey) -> None:
    a, b = tmp_path / "a.key", tmp_path / "b.key"
    save_private_key(a, key, passphrase=PASSPHRASE)
    save_private_key(b, key, passphrase=PASSPHRASE)
    da, db = json.loads(a.read_text()), json.loads(b.read_text())
    assert da["salt"] != db["salt"] and da["nonce"] != db["nonce"]
    assert da["ciphertext"] != db["ciphertext"]


def test_tampered_sealed_file_refused(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "sealed.key"
    save_private_key(path, key, passphrase=PASSPHRASE)
    doc = json.loads(path.read_text())
    raw = bytearray(doc["ciphertext"].encode())
    raw[10] = ord("A") if raw[10] != ord("A") else ord("B")
    doc["ciphertext"] = raw.decode()
    path.write_text(json.dumps(doc))
    with pytest.raises(KeyStoreError):
        load_private_key(path, passphrase=PASSPHRASE)


def test_atomic_write_leaves_no_temp_files(tmp_path: Path, key: PrivateKey) -> None:
    folder = tmp_path / "keys"
    path = folder / "csp.key"
    save_private_key(path, key)
    save_private_key(path, key, passphrase=PASSPHRASE)  # overwrite in place
    save_public_key(folder / "csp.pub", key.public)
    assert sorted(p.name for p in folder.iterdir()) == ["csp.key", "csp.pub"]
    assert load_private_key(path, PASSPHRASE).p == key.p


def test_failed_atomic_write_cleans_up(tmp_path: Path, key: PrivateKey) -> None:
    target = tmp_path / "is-a-directory"
    target.mkdir()
    with pytest.raises(OSError):
        save_private_key(target, key)
    assert [p.name for p in tmp_path.iterdir()] == ["is-a-directory"]
    assert list(target.iterdir()) == []


def test_public_key_file(tmp_path: Path, key: PrivateKey) -> None:
    path = tmp_path / "csp.pub"
    save_public_key(path, key.public)
    assert mode_of(path) == 0o644
    doc = json.loads(path.read_text())
    assert doc["kind"] == "paillier-public"
    assert int(doc["n"], 16) == key.p * key.q
    assert doc["bits"] == 2048 and doc["key_id"] == key.public.key_id
    assert hex(key.p) not in path.read_text()


def test_passphrase_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LETEO_TEST_PASS", "s3cret")
    assert passphrase_from_env("LETEO_TEST_PASS") == "s3cret"
    monkeypatch.setenv("LETEO_TEST_PASS", "")
    assert passphrase_from_env("LETEO_TEST_PASS") is None
    monkeypatch.delenv("LETEO_TEST_PASS")
    assert passphrase_from_env("LETEO_TEST_PASS") is None
