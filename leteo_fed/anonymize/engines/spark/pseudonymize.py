"""Keyed pseudonyms: HMAC-SHA256 of an identifier, computed by Spark SQL on the executors.

A bare hash of an identifier is not a pseudonym: anyone can hash every plausible value and match.
HMAC with a secret key is. Spark has ``sha2`` but no HMAC, so we build the standard construction
(RFC 2104) from ``sha2``, ``unhex`` and binary ``concat``::

    HMAC(K, m) = H((K0 ^ opad) || H((K0 ^ ipad) || m))

where K0 is the key zero-padded to the 64-byte block (hashed first if longer). The two padded keys
travel as a one-row broadcast DataFrame, not as literals, so they never appear in a query plan
(``explain()``, error messages, the Spark UI). The message is the value's UTF-8 string form as
Spark prints it; a null identifier stays null.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_BLOCK = 64  # SHA-256 block size in bytes
_IPAD_COL = "_leteo_hmac_ipad"
_OPAD_COL = "_leteo_hmac_opad"


def padded_keys(key: bytes) -> tuple[bytes, bytes]:
    """(K0 ^ ipad, K0 ^ opad) of RFC 2104 for SHA-256."""
    if len(key) > _BLOCK:
        key = hashlib.sha256(key).digest()
    k0 = key.ljust(_BLOCK, b"\0")
    return bytes(b ^ 0x36 for b in k0), bytes(b ^ 0x5C for b in k0)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def pseudonymize(df: DataFrame, columns: list[str] | tuple[str, ...], key: bytes) -> DataFrame:
    """Replace each named column by the lowercase hex HMAC-SHA256 of its value (same position)."""
    if not columns:
        return df
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    ipad, opad = padded_keys(key)
    schema = T.StructType(
        [
            T.StructField(_IPAD_COL, T.BinaryType(), False),
            T.StructField(_OPAD_COL, T.BinaryType(), False),
        ]
    )
    keys = df.sparkSession.createDataFrame([(bytearray(ipad), bytearray(opad))], schema)
    joined = df.crossJoin(F.broadcast(keys))
    targets = set(columns)
    out = []
    for name in df.columns:
        col = F.col(_quoted(name))
        if name in targets:
            msg = col.cast("string").cast("binary")  # UTF-8 bytes
            inner = F.unhex(F.sha2(F.concat(F.col(_IPAD_COL), msg), 256))
            col = F.sha2(F.concat(F.col(_OPAD_COL), inner), 256)
        out.append(col.alias(name))
    return joined.select(*out)
