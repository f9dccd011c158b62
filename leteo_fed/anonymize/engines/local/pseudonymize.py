"""Keyed pseudonyms (HMAC-SHA256, lowercase hex) in process: the same as the Spark job's.

The message is the value's text as Spark prints it (:func:`~engines.local.text.spark_text`), UTF-8
encoded; a null identifier stays null. Each distinct value is hashed once (``hmac.digest``, a
single C call); there is no vectorized HMAC, and identifiers are usually all distinct, so this
is the one step whose cost is a Python call per row (about half a microsecond).
"""

from __future__ import annotations

import hmac

import pyarrow as pa
import pyarrow.compute as pc

from leteo_fed.anonymize.engines.local.text import spark_text


def pseudonyms(column: pa.ChunkedArray, key: bytes) -> pa.ChunkedArray:
    """HMAC-SHA256(key, value) in hex for every value of the column."""
    encoded = pc.dictionary_encode(spark_text(column)).combine_chunks()
    digests = [
        hmac.digest(key, v.encode("utf-8"), "sha256").hex() for v in encoded.dictionary.to_pylist()
    ]
    out = pa.DictionaryArray.from_arrays(encoded.indices, pa.array(digests, pa.string()))
    return pa.chunked_array([out.dictionary_decode()])
