"""Conversions between the library's types and protobuf messages that the codec cannot do by
field name: keys, the share encoding (big integers as bytes, a derived layout), report arrays."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence

import grpc
import numpy as np

from leteo_fed import defaults
from leteo_fed.crypto.paillier import PublicKey, bytes_to_int, int_to_bytes
from leteo_fed.crypto.threshold import PartialProof, ThresholdKey
from leteo_fed.encoding.packing import SlotLayout, check_declared_layout
from leteo_fed.encoding.share import ShareEncoding
from leteo_fed.errors import PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.ldp_spec import REPORT_DTYPES
from leteo_fed.transport.grpc_io import rpc_error_message

BATCH_SIZE = 256  # ciphertexts per stream message: ~128 KiB at 2048-bit keys
_KEY_ID = re.compile(r"[0-9a-f]{32}")  # paillier.key_id_of


def public_key_to_proto(key: PublicKey) -> pb.PublicKey:
    return pb.PublicKey(n=int_to_bytes(key.n), bits=key.bits, key_id=key.key_id)


def threshold_key_to_proto(key: ThresholdKey, index: int) -> pb.PublicKey:
    """A key holder's answer to GetPublicKey: the Paillier key and its threshold side, with
    the holder's own index."""
    width = key.public.ciphertext_bytes
    msg = public_key_to_proto(key.public)
    msg.threshold.CopyFrom(
        pb.ThresholdKeyInfo(
            threshold=key.threshold,
            holders=key.holders,
            v=int_to_bytes(key.v, width),
            verification=[int_to_bytes(x, width) for x in key.verification],
            index=index,
        )
    )
    return msg


def threshold_key_from_proto(msg: pb.PublicKey) -> tuple[ThresholdKey, int]:
    """(the threshold key, the answering holder's index); ProtocolError if the message holds
    no threshold key or an inconsistent one."""
    public = public_key_from_proto(msg)
    if not msg.HasField("threshold"):
        raise ProtocolError(f"key {public.key_id} is not a threshold key")
    info = msg.threshold
    key = ThresholdKey(
        public,
        info.threshold,
        info.holders,
        bytes_to_int(info.v),
        tuple(bytes_to_int(x) for x in info.verification),
    )
    key.check_index(info.index)
    return key, info.index


def proof_to_proto(proof: PartialProof, batch: pb.PartialDecryptionBatch) -> None:
    batch.proof_challenge = int_to_bytes(proof.challenge)
    batch.proof_response = int_to_bytes(proof.response)


def proof_from_proto(batch: pb.PartialDecryptionBatch) -> PartialProof:
    return PartialProof(bytes_to_int(batch.proof_challenge), bytes_to_int(batch.proof_response))


def public_key_from_proto(msg: pb.PublicKey) -> PublicKey:
    key = PublicKey(bytes_to_int(msg.n))
    if key.n < 3 or key.key_id != msg.key_id or key.bits != msg.bits:
        raise ProtocolError("public key message is inconsistent (n, bits and key_id disagree)")
    return key


def fetch_public_key(stub, address: str, key_id: str = "") -> PublicKey:
    """The CSP's current public key, or with `key_id` that key (checked: its key id is the hash
    of its modulus, so the CSP cannot answer with another key); PeerUnavailable naming the CSP
    address if it cannot be fetched."""
    if key_id and not _KEY_ID.fullmatch(key_id):  # not worth a call: no CSP key has this id
        raise ProtocolError(f"{key_id[:40]!r} is not a CSP key id (32 hex digits)")
    what = f"public key {key_id}" if key_id else "public key"
    try:
        msg = stub.GetPublicKey(
            pb.PublicKeyRequest(key_id=key_id),
            timeout=defaults.PUBLIC_KEY_TIMEOUT_SECONDS,
            wait_for_ready=True,
        )
    except grpc.RpcError as exc:
        raise PeerUnavailable(
            f"cannot fetch the {what} from the CSP at {address}: {rpc_error_message(exc)}"
        ) from exc
    key = public_key_from_proto(msg)
    if key_id and key.key_id != key_id:
        raise ProtocolError(f"the CSP at {address} answered key {key.key_id} for key {key_id}")
    return key


def encoding_to_proto(enc: ShareEncoding, layout: SlotLayout) -> pb.Encoding:
    return pb.Encoding(
        scale_bits=enc.scale_bits,
        value_bound=enc.value_bound,
        max_rows_per_owner=enc.max_rows_per_owner,
        max_owners=enc.max_owners,
        slot_bits=layout.slot_bits,
        slots_per_ciphertext=layout.slots_per_ciphertext,
        slot_offset=int_to_bytes(layout.offset),
        mask_bits=layout.mask_bits,
        statistical_security=enc.statistical_security,
        rotation_dimension=enc.rotation_dimension,
        count_scale_bits=enc.count_scale_bits,
        noise_bound=int_to_bytes(enc.noise_bound),
    )


def encoding_from_proto(msg: pb.Encoding, key_bits: int) -> tuple[ShareEncoding, SlotLayout]:
    """Rebuild the encoding and check the declared layout is the one its parameters imply.

    The slot offset is the per-owner bound: the protocol's bound on its statistics plus the
    noise bound, so the statistics' bound is the offset minus the noise bound."""
    offset, noise_bound = bytes_to_int(msg.slot_offset), bytes_to_int(msg.noise_bound)
    if offset <= noise_bound:
        raise ProtocolError("encoding leaves no room for statistics beside the noise bound")
    enc = ShareEncoding(
        scale_bits=msg.scale_bits,
        value_bound=msg.value_bound,
        data_bound=offset - noise_bound,
        max_rows_per_owner=msg.max_rows_per_owner,
        max_owners=msg.max_owners,
        statistical_security=msg.statistical_security,
        rotation_dimension=msg.rotation_dimension,
        count_scale_bits=msg.count_scale_bits,
        noise_bound=noise_bound,
    )
    layout = enc.layout(key_bits)
    check_declared_layout(layout, msg.slot_bits, msg.slots_per_ciphertext, offset, msg.mask_bits)
    return enc, layout


def batches(values: Sequence[int], width: int) -> Iterator[list[bytes]]:
    """Fixed-width big-endian framing, BATCH_SIZE values per message."""
    for start in range(0, len(values), BATCH_SIZE):
        yield [int_to_bytes(v, width) for v in values[start : start + BATCH_SIZE]]


def reports_to_batch(reports: np.ndarray) -> pb.ReportBatch:
    arr = np.ascontiguousarray(reports)
    return pb.ReportBatch(data=arr.tobytes(), dtype=arr.dtype.str, shape=list(arr.shape))


def reports_from_batch(msg: pb.ReportBatch) -> np.ndarray:
    if msg.dtype not in REPORT_DTYPES:
        raise ProtocolError(f"report dtype {msg.dtype!r} is not accepted")
    dtype = np.dtype(msg.dtype)
    shape = tuple(int(s) for s in msg.shape)
    if not shape or math.prod(shape) * dtype.itemsize != len(msg.data):
        raise ProtocolError("report batch size does not match its shape")
    return np.frombuffer(msg.data, dtype=dtype).reshape(shape)
