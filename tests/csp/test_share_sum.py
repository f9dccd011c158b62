"""The CSP's sum of a round's shares (csp/share_sum.py): the same product in-process and on
worker processes, and every bad share refused by the message that names it, either way."""

from __future__ import annotations

import random

import pytest

from csp import share_sum
from csp.share_check import ShareCiphertexts, checked_product
from csp.share_sum import ShareSum
from leteo_fed.crypto.paillier import Decryptor, Encryptor, generate_keypair
from leteo_fed.crypto.parallel import TaskPool
from leteo_fed.errors import ProtocolError
from leteo_fed.transport.statements import ciphertext_digest

WIDTH_VALUES = 5  # ciphertexts per share


@pytest.fixture(scope="module")
def key():
    return generate_keypair(1024)  # a test key: the arithmetic is the same


def _shares(key, n_shares: int, seed: int) -> tuple[list[ShareCiphertexts], list[int]]:
    rng = random.Random(seed)
    public = key.public
    enc = Encryptor(public)
    totals = [0] * WIDTH_VALUES
    shares = []
    for s in range(n_shares):
        values = [rng.randrange(1000) for _ in range(WIDTH_VALUES)]
        totals = [t + v for t, v in zip(totals, values, strict=True)]
        cts = enc.encrypt_many(values)
        digest = ciphertext_digest(cts, public.ciphertext_bytes)
        shares.append(ShareCiphertexts(f"site-{s}", digest, cts))
    return shares, totals


def _sum(key, shares, pool) -> list[int]:
    summer = ShareSum(key.public.n, key.public.ciphertext_bytes, pool)
    for share in shares:
        summer.add(share)
    return summer.total()


def test_in_process_and_on_workers_give_the_same_sum(key, monkeypatch):
    monkeypatch.setattr(share_sum, "BATCH_CIPHERTEXTS", 12)  # many small tasks in flight
    shares, totals = _shares(key, 40, seed=1)
    with TaskPool(workers=2) as pool:
        parallel = _sum(key, shares, pool)
    local = _sum(key, shares, None)
    assert parallel == local
    assert Decryptor(key).decrypt_many(local) == totals


@pytest.mark.parametrize("where", ["in-process", "workers"])
def test_a_bad_share_is_refused_by_name(key, monkeypatch, where):
    monkeypatch.setattr(share_sum, "BATCH_CIPHERTEXTS", 12)
    public = key.public
    shares, _ = _shares(key, 10, seed=2)
    forged = list(shares[6].ciphertexts)
    forged[0] = forged[0] * 3 % public.n_square  # still a unit, not what the owner signed
    not_unit = [public.n * 7] + list(shares[3].ciphertexts[1:])  # shares a factor with n
    out_of_range = [public.n_square + 1] + list(shares[3].ciphertexts[1:])
    cases = [
        (ShareCiphertexts("site-6", shares[6].digest, forged), "share from 'site-6' do not match"),
        (
            ShareCiphertexts(
                "site-3", ciphertext_digest(not_unit, public.ciphertext_bytes), not_unit
            ),
            "not an element of Z",
        ),
        (ShareCiphertexts("site-3", shares[3].digest, out_of_range), "not an element of Z"),
    ]
    with TaskPool(workers=2) as pool:
        for bad, message in cases:
            mixed = [*shares[:5], bad, *shares[5:]]
            with pytest.raises(ProtocolError, match=message):
                _sum(key, mixed, pool if where == "workers" else None)


def test_the_unit_test_of_a_whole_share_is_the_per_ciphertext_one(key):
    """Multiplying a share's ciphertexts mod n and testing the product once finds a
    ciphertext sharing a factor with n wherever it sits."""
    public = key.public
    shares, _ = _shares(key, 1, seed=3)
    for i in range(WIDTH_VALUES):
        cts = list(shares[0].ciphertexts)
        cts[i] = cts[i] * key.p % public.n_square
        bad = ShareCiphertexts("x", ciphertext_digest(cts, public.ciphertext_bytes), cts)
        with pytest.raises(ProtocolError, match="not an element"):
            checked_product(public.n, public.ciphertext_bytes, [bad])


@pytest.mark.slow
def test_spark_gives_the_same_sum_and_refuses_the_first_bad_share(key, spark, tmp_path):
    pytest.importorskip("pyspark")
    public = key.public
    shares, totals = _shares(key, 12, seed=4)

    def on_spark(items) -> list[int]:
        spill = tmp_path / f"spill-{len(list(tmp_path.iterdir()))}"
        spill.mkdir()
        summer = ShareSum(public.n, public.ciphertext_bytes, None, spill)
        try:
            for share in items:
                summer.add(share)
            return summer.total()
        finally:
            summer.close()
            assert not spill.exists()  # nothing of the shares outlives the sum

    assert on_spark(shares) == _sum(key, shares, None)
    assert Decryptor(key).decrypt_many(on_spark(shares)) == totals
    forged = [ShareCiphertexts(s.site, bytes(32), s.ciphertexts) for s in shares[7:9]]
    with pytest.raises(ProtocolError, match="share from 'site-7' do not match"):
        on_spark([*shares[:7], *forged, *shares[9:]])
