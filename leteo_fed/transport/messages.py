"""Conversions between protocol dataclasses and protobuf messages."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import grpc

from leteo_fed.crypto.paillier import PublicKey, bytes_to_int, int_to_bytes
from leteo_fed.encoding.packing import SlotLayout, check_declared_layout
from leteo_fed.errors import PeerUnavailable, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.moments import Grouping
from leteo_fed.protocols.pca import PcaEncoding
from leteo_fed.transport.grpc_io import rpc_error_message

BATCH_SIZE = 256  # ciphertexts per stream message: ~128 KiB at 2048-bit keys


def public_key_to_proto(key: PublicKey) -> pb.PublicKey:
    return pb.PublicKey(n=int_to_bytes(key.n), bits=key.bits, key_id=key.key_id)


def public_key_from_proto(msg: pb.PublicKey) -> PublicKey:
    key = PublicKey(bytes_to_int(msg.n))
    if key.n < 3 or key.key_id != msg.key_id or key.bits != msg.bits:
        raise ProtocolError("public key message is inconsistent (n, bits and key_id disagree)")
    return key


def fetch_public_key(stub, address: str) -> PublicKey:
    """The CSP's public key, or PeerUnavailable naming the CSP address."""
    try:
        msg = stub.GetPublicKey(pb.PublicKeyRequest(), timeout=10, wait_for_ready=True)
    except grpc.RpcError as exc:
        raise PeerUnavailable(
            f"cannot fetch the public key from the CSP at {address}: {rpc_error_message(exc)}"
        ) from exc
    return public_key_from_proto(msg)


def encoding_to_proto(enc: PcaEncoding, layout: SlotLayout) -> pb.Encoding:
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


def encoding_from_proto(msg: pb.Encoding, key_bits: int) -> tuple[PcaEncoding, SlotLayout]:
    """Rebuild the encoding and check the declared layout is the one its parameters imply."""
    enc = PcaEncoding(
        scale_bits=msg.scale_bits,
        value_bound=msg.value_bound,
        max_rows_per_owner=msg.max_rows_per_owner,
        max_owners=msg.max_owners,
        statistical_security=msg.statistical_security,
        rotation_dimension=msg.rotation_dimension,
        count_scale_bits=msg.count_scale_bits,
        noise_bound=bytes_to_int(msg.noise_bound),
    )
    layout = enc.layout(key_bits)
    check_declared_layout(
        layout,
        msg.slot_bits,
        msg.slots_per_ciphertext,
        bytes_to_int(msg.slot_offset),
        msg.mask_bits,
    )
    return enc, layout


def batches(values: Sequence[int], width: int) -> Iterator[list[bytes]]:
    """Fixed-width big-endian framing, BATCH_SIZE values per message."""
    for start in range(0, len(values), BATCH_SIZE):
        yield [int_to_bytes(v, width) for v in values[start : start + BATCH_SIZE]]


def grouping_to_proto(g: Grouping) -> pb.Grouping:
    return pb.Grouping(label_column=g.label_column or "", classes=list(g.classes))


def grouping_from_proto(msg: pb.Grouping) -> Grouping:
    return Grouping(msg.label_column, tuple(msg.classes))
