"""The CSP keys an owner agent encrypts its shares under: by key id, each with its prepared
encryptor and, once a large share needs one, its encryption pool.

A round names its key; a key not seen before is fetched (`fetch`: from the CSP, by id) and its
fixed-base randomizer table built once, so later rounds under it pay only the encryptions. A
share of LARGE_SHARE_CIPHERTEXTS or more is encrypted on every core.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.crypto.parallel import EncryptionPool

log = logging.getLogger("leteo.owner")

LARGE_SHARE_CIPHERTEXTS = 512  # from here on a share is encrypted on all cores (d >~ 100)
CACHED_KEYS = 3  # CSP keys kept with their encryptors: the current one and the last rotated


class ShareKeys:
    def __init__(self, fetch: Callable[[str], PublicKey], randomizer: str) -> None:
        self._fetch = fetch  # key id ("" = the current key) -> the CSP's public key
        self.randomizer = randomizer
        # least recently used first
        self._encryptors: OrderedDict[str, Encryptor] = OrderedDict()
        self._pools: dict[str, EncryptionPool] = {}
        self._lock = threading.Lock()

    def add(self, encryptor: Encryptor) -> None:
        """Use this prepared encryptor for its key (one shared by several agents of a process)."""
        with self._lock:
            self._encryptors[encryptor.public.key_id] = encryptor

    def encryptor(self, key_id: str = "") -> Encryptor:
        """The encryptor (public key, prepared fixed-base table) for the CSP key `key_id`, the
        key a round spec names; without one, for the CSP's current key. A key not seen before
        is fetched by id (`fetch` checks its id against the hash of n), so rounds opened
        before a key rotation finish on their key and later ones use the new key."""
        with self._lock:
            if key_id in self._encryptors:
                self._encryptors.move_to_end(key_id)
                return self._encryptors[key_id]
            public = self._fetch(key_id)
            if public.key_id in self._encryptors:  # the current key, known already
                self._encryptors.move_to_end(public.key_id)
                return self._encryptors[public.key_id]
            start = time.perf_counter()
            enc = Encryptor(public, self.randomizer)
            enc.prepare()
            log.info(
                "CSP key %s (%d bits); randomizer table built in %.2f s",
                public.key_id,
                public.bits,
                time.perf_counter() - start,
            )
            self._encryptors[public.key_id] = enc
            stale = []
            while len(self._encryptors) > CACHED_KEYS:
                old, _ = self._encryptors.popitem(last=False)
                stale.append(self._pools.pop(old, None))
        for pool in stale:
            if pool is not None:
                pool.close()
        return enc

    def encrypt(self, packed: list[int], key_id: str) -> list[int]:
        """A share's packed plaintexts encrypted under `key_id`: in this thread, or on every
        core from LARGE_SHARE_CIPHERTEXTS on."""
        encryptor = self.encryptor(key_id)
        if len(packed) >= LARGE_SHARE_CIPHERTEXTS:
            with self._lock:
                pool = self._pools.get(encryptor.public.key_id)
                if pool is None:
                    pool = self._pools[encryptor.public.key_id] = EncryptionPool(
                        encryptor.public,
                        randomizer=self.randomizer,
                        min_per_worker=LARGE_SHARE_CIPHERTEXTS // 2,
                    )
            log.info("encrypting %d ciphertexts on %d worker processes", len(packed), pool.workers)
            return pool.encrypt_many(packed)
        return encryptor.encrypt_many(packed)

    def close(self) -> None:
        """Stop the encryption pools' workers."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
