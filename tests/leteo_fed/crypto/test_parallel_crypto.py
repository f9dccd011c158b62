"""Process pools for Paillier: same results as the sequential Encryptor/Decryptor, input order
kept, no worker processes for small batches, workers reused across batches."""

from __future__ import annotations

import secrets

import pytest

from leteo_fed.crypto.paillier import Decryptor, Encryptor, PrivateKey, generate_keypair
from leteo_fed.crypto.parallel import DecryptionPool, EncryptionPool, _contiguous_chunks
from leteo_fed.errors import EncodingError

BITS = 2048
WORKERS = 2
# Low threshold so that a batch of a few dozen values already goes to the pool: keeps the test
# fast while exercising the multi-process path.
MIN_PER_WORKER = 8


@pytest.fixture(scope="module")
def key() -> PrivateKey:
    return generate_keypair(BITS)


@pytest.fixture(scope="module")
def decryptor(key: PrivateKey) -> Decryptor:
    return Decryptor(key)


@pytest.fixture(scope="module")
def enc_pool(key: PrivateKey):
    with EncryptionPool(key.public, workers=WORKERS, min_per_worker=MIN_PER_WORKER) as pool:
        yield pool


@pytest.fixture(scope="module")
def dec_pool(key: PrivateKey):
    with DecryptionPool(key, workers=WORKERS, min_per_worker=MIN_PER_WORKER) as pool:
        yield pool


def _plaintexts(key: PrivateKey, count: int) -> list[int]:
    # Mix of edge values and full-size random ones; distinct so an order slip would show.
    edge = [0, 1, 2, key.public.n - 1]
    return edge + [secrets.randbelow(key.public.n) for _ in range(count - len(edge))]


def test_chunks_are_contiguous_and_cover_everything() -> None:
    items = list(range(23))
    for parts in (1, 2, 3, 5, 23):
        chunks = _contiguous_chunks(items, parts)
        assert len(chunks) == parts
        assert [x for c in chunks for x in c] == items
        assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_encryption_pool_round_trips_in_order(
    key: PrivateKey, decryptor: Decryptor, enc_pool: EncryptionPool
) -> None:
    values = _plaintexts(key, 40)
    ciphertexts = enc_pool.encrypt_many(values)
    assert enc_pool.started
    assert len(ciphertexts) == len(values)
    assert decryptor.decrypt_many(ciphertexts) == values
    # Fresh randomness: encrypting the same batch again gives different ciphertexts.
    again = enc_pool.encrypt_many(values)
    assert all(a != b for a, b in zip(ciphertexts, again, strict=True))
    assert decryptor.decrypt_many(again) == values


def test_decryption_pool_equals_sequential_decryptor(
    key: PrivateKey, decryptor: Decryptor, dec_pool: DecryptionPool
) -> None:
    values = _plaintexts(key, 40)
    ciphertexts = Encryptor(key.public).encrypt_many(values)
    pooled = dec_pool.decrypt_many(ciphertexts)
    assert dec_pool.started
    assert pooled == decryptor.decrypt_many(ciphertexts) == values


def test_pools_are_reused_across_batches(
    key: PrivateKey, decryptor: Decryptor, enc_pool: EncryptionPool, dec_pool: DecryptionPool
) -> None:
    enc_pool.encrypt_many(_plaintexts(key, 20))
    executor = enc_pool._executor
    assert executor is not None
    for size in (17, 33):  # uneven splits
        values = _plaintexts(key, size)
        ciphertexts = enc_pool.encrypt_many(values)
        assert enc_pool._executor is executor
        assert dec_pool.decrypt_many(ciphertexts) == values
        assert decryptor.decrypt_many(ciphertexts) == values


def test_small_batches_stay_in_process(key: PrivateKey, decryptor: Decryptor) -> None:
    # Default threshold: 64 values per worker, so 100 values on 2 workers stay local.
    enc = EncryptionPool(key.public, workers=2)
    dec = DecryptionPool(key, workers=2)
    try:
        values = _plaintexts(key, 100)
        ciphertexts = enc.encrypt_many(values)
        assert dec.decrypt_many(ciphertexts) == values
        assert enc.encrypt_many([]) == [] and dec.decrypt_many([]) == []
        assert not enc.started and not dec.started
    finally:
        enc.close()
        dec.close()
    # One worker never starts a pool, whatever the batch size.
    single = EncryptionPool(key.public, workers=1, min_per_worker=1)
    assert decryptor.decrypt_many(single.encrypt_many(values[:10])) == values[:10]
    single.start()
    assert not single.started


def test_close_then_reuse_restarts_lazily(key: PrivateKey, decryptor: Decryptor) -> None:
    pool = EncryptionPool(key.public, workers=WORKERS, min_per_worker=MIN_PER_WORKER)
    values = _plaintexts(key, 20)
    assert decryptor.decrypt_many(pool.encrypt_many(values)) == values
    pool.close()
    assert not pool.started
    pool.close()  # idempotent
    assert decryptor.decrypt_many(pool.encrypt_many(values)) == values
    assert pool.started
    pool.close()


def test_out_of_range_plaintext_is_refused_before_dispatch(enc_pool: EncryptionPool) -> None:
    n = enc_pool.public.n
    for bad in (-1, n):
        with pytest.raises(EncodingError, match="out of range"):
            enc_pool.encrypt_many([5] * 30 + [bad])


def test_bad_arguments(key: PrivateKey) -> None:
    with pytest.raises(ValueError, match="workers"):
        EncryptionPool(key.public, workers=0)
    with pytest.raises(ValueError, match="randomizer"):
        EncryptionPool(key.public, randomizer="weak")
    with pytest.raises(ValueError, match="min_per_worker"):
        DecryptionPool(key, min_per_worker=0)
