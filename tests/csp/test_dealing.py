"""The key ceremony (csp/dealing.py, `keys deal` / `keyholder add-share`): one share file per
holder, owner-only, nothing of the dealer's secret left anywhere, shares filed and deleted."""

from __future__ import annotations

import json
import re
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import gmpy2
import pytest

from csp import dealing
from csp.keys import KeyFolder, KeyRing, ShareRing
from leteo_fed.crypto.keystore import load_key_share, load_threshold_key
from leteo_fed.crypto.paillier import generate_keypair
from leteo_fed.errors import KeyStoreError


def _integers(path: Path) -> list[int]:
    """Every integer a JSON file holds (hex strings and numbers), however nested."""
    found: list[int] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, bool):
            return
        elif isinstance(node, int):
            found.append(node)
        elif isinstance(node, str) and re.fullmatch(r"0x[0-9a-f]+", node):
            found.append(int(node, 16))

    walk(json.loads(path.read_text()))
    return found


def test_keys_deal_leaves_only_the_shares_and_no_secret_of_the_dealer(tmp_path):
    """`keys deal` as a user runs it: afterwards the folder holds m share files (mode 600) and
    the public key, and no integer in any file reveals the factorization: none shares a factor
    with n, and none is a multiple of m' = p'q' (the dealer's d is: w^(4 d) = 1 mod n)."""
    out = tmp_path / "dealt"
    run = subprocess.run(
        [sys.executable, "-m", "leteo_fed", "keys", "deal", "--holders", "3", "--threshold", "2"]
        + ["--out", str(out), "--key-bits", "512", "--insecure-small-key", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(run.stdout)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(
        ["keyholder-1.share", "keyholder-2.share", "keyholder-3.share", f"{doc['key_id']}.pub.json"]
    )
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for i in (1, 2, 3):
        assert stat.S_IMODE((out / f"keyholder-{i}.share").stat().st_mode) == 0o600
    key = load_threshold_key(out / f"{doc['key_id']}.pub.json")
    n = key.public.n
    assert (key.threshold, key.holders, key.key_id) == (2, 3, doc["key_id"])
    witnesses = [secrets.randbelow(n - 3) + 2 for _ in range(4)]
    for path in out.iterdir():
        for x in _integers(path):
            assert gmpy2.gcd(x, n) in (1, n), f"{path.name} holds a factor of n"
            if x > 1:  # w^(4x) = 1 (mod n) for every w iff m' | x: d and its multiples are
                assert any(pow(w, 4 * x, n) != 1 for w in witnesses), f"{path.name} holds d"
    shares = [load_key_share(out / f"keyholder-{i}.share") for i in (1, 2, 3)]
    assert [s.index for s in shares] == [1, 2, 3] and all(s.key == key for s in shares)


def test_a_second_dealing_into_the_same_folder_is_refused(tmp_path):
    dealing.deal_to(tmp_path, 512, 3, 2, allow_small=True)
    with pytest.raises(KeyStoreError, match="already holds share files"):
        dealing.deal_to(tmp_path, 512, 3, 2, allow_small=True)


def test_a_failed_dealing_leaves_nothing(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(dealing, "save_public_key", broken)
    with pytest.raises(OSError, match="disk full"):
        dealing.deal_to(tmp_path / "d", 512, 3, 2, allow_small=True)
    assert list((tmp_path / "d").iterdir()) == []  # no share, no staging folder


def test_small_keys_and_minority_thresholds_are_refused_before_any_work(tmp_path):
    with pytest.raises(Exception, match="--insecure-small-key"):
        dealing.deal_to(tmp_path, 1024, 3, 2, allow_small=False)
    with pytest.raises(Exception, match="not a majority"):
        dealing.deal_to(tmp_path, 512, 4, 2, allow_small=True)
    assert not list(tmp_path.iterdir())


def test_add_share_files_it_sealed_and_deletes_the_dealt_file(tmp_path, monkeypatch):
    dealt = dealing.deal_to(tmp_path / "dealt", 512, 3, 2, allow_small=True)
    monkeypatch.setenv("LETEO_CSP_PASSPHRASE", "holder two's own")
    share = dealing.add_share(dealt.shares[1], tmp_path / "h2")
    assert not dealt.shares[1].exists()
    folder = KeyFolder.open(tmp_path / "h2", "holder two's own")
    assert folder.current_id() == dealt.key.key_id
    [info] = folder.infos()
    assert info.held and info.current and info.sealed
    assert stat.S_IMODE(folder.secret_path(dealt.key.key_id).stat().st_mode) == 0o600
    ring = ShareRing(folder, "holder two's own", allow_small=True)
    assert ring.current().share == share
    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        ShareRing(folder, "guess", allow_small=True).current()
    # a CSP does not serve a share, nor a holder a whole key
    with pytest.raises(KeyStoreError, match="keyholder serve"):
        KeyRing(folder, "holder two's own", allow_small=True).current()
    csp_folder = KeyFolder.open(tmp_path / "csp", create=True)
    whole = generate_keypair(512)
    csp_folder.set_current(csp_folder.add(whole))
    with pytest.raises(KeyStoreError, match="a whole Paillier key"):
        ShareRing(csp_folder, allow_small=True).current()


def test_add_share_refuses_another_share_of_the_same_key(tmp_path):
    dealt = dealing.deal_to(tmp_path / "dealt", 512, 3, 2, allow_small=True)
    dealing.add_share(dealt.shares[0], tmp_path / "h1")
    with pytest.raises(KeyStoreError, match="already holds another secret"):
        dealing.add_share(dealt.shares[1], tmp_path / "h1")
    assert dealt.shares[1].exists()  # nothing was deleted for a refused filing


@pytest.mark.parametrize("made", [False, True])
def test_a_holder_without_a_filed_share_is_refused_before_it_serves(tmp_path, made):
    """`keyholder serve` on a missing or empty folder: one line naming add-share, exit 2."""
    folder = tmp_path / "holder"
    if made:
        KeyFolder.open(folder, create=True)
    run = subprocess.run(
        [sys.executable, "-m", "leteo_fed", "keyholder", "serve", "--key-dir", str(folder)]
        + ["--insecure", "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert f"{folder} holds no share" in run.stderr and "keyholder add-share" in run.stderr
    assert made or not folder.exists()  # nothing made for a folder that was not there
