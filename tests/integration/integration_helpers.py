"""Shared pieces of the multi-process tests: data splits and an owner driven by the test itself."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from leteo_fed.crypto.paillier import Encryptor
from leteo_fed.encoding.packing import masks_from_seed, new_mask_seed, pack
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import pca
from leteo_fed.transport.grpc_io import TlsConfig, make_server
from leteo_fed.transport.messages import (
    batches,
    encoding_from_proto,
    encoding_to_proto,
    public_key_from_proto,
)
from leteo_fed.transport.statements import ciphertext_digest, sign_statement, spec_digest

# Owners draw LDP noise from unseeded generators, as a deployment must, so an end-to-end LDP
# check cannot fix its seed. Each such check allows Z_UNSEEDED standard errors of the exact
# (or empirical) variance: test_integration_ldp makes 10 of them, so a correct estimator fails
# a run with probability at most 10 * P(|N(0,1)| > 5) = 6e-6, while a bias of 5 s.e. still
# fails it. (tests/aggregator/test_spark_ldp.py, which cannot import this, does the same.)
Z_UNSEEDED = 5.0


def write_parts(
    x: np.ndarray, names: list[str], parts: int, folder: Path, seed: int = 3
) -> list[Path]:
    """Seeded horizontal split of a real data set into one CSV per site."""
    folder.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(seed).permutation(len(x))
    paths = []
    for i, idx in enumerate(np.array_split(order, parts), start=1):
        path = folder / f"part-{i}.csv"
        pacsv.write_csv(pa.table({n: x[np.sort(idx), j] for j, n in enumerate(names)}), path)
        paths.append(path)
    return paths


def numpy_reference(x: np.ndarray, k: int):
    return pca.reference_pca(x, k)


def assert_matches_numpy(result: dict, x: np.ndarray, k: int, rel: float = 1e-9) -> None:
    evals, comps, mean = pca.reference_pca(x, k)
    got = np.array(result["eigenvalues"])
    assert result["n_samples"] == len(x)
    np.testing.assert_allclose(got, evals, rtol=rel, atol=0)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    assert np.all(cos >= 1 - rel), cos
    np.testing.assert_allclose(result["mean"], mean, rtol=1e-9, atol=1e-12)
    norms = np.linalg.norm(np.array(result["components"]), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-12)


class ManualOwner(pb_grpc.OwnerAgentServicer):
    """An owner whose every move the test makes by hand (to send bad, partial or late shares)."""

    def __init__(
        self, site_id: str, tls: TlsConfig, aggregator: str, csp: str, x: np.ndarray
    ) -> None:
        self.site_id = site_id
        self.tls = tls
        self.x = x
        self.specs: queue.Queue[pb.RoundSpec] = queue.Queue()
        self.results: dict[str, pb.RoundStatus] = {}
        self.server, port = make_server(tls, "127.0.0.1:0", workers=4)
        pb_grpc.add_OwnerAgentServicer_to_server(self, self.server)
        self.server.start()
        self.address = f"127.0.0.1:{port}"
        self.aggregator = pb_grpc.AggregatorStub(tls.channel(aggregator, peer="aggregator"))
        self.csp = pb_grpc.CryptoServiceProviderStub(tls.channel(csp, peer="csp"))
        self.encryptor = Encryptor(
            public_key_from_proto(self.csp.GetPublicKey(pb.PublicKeyRequest(), timeout=10))
        )

    def Health(self, request, context):
        return pb.HealthReply(party=self.site_id, role="owner", status="SERVING")

    refuse = ""  # set: later invitations are declined with this reason (still queued)

    def Invite(self, request, context):
        self.specs.put(request)
        if self.refuse:
            return pb.InviteReply(accepted=False, reason=self.refuse)
        return pb.InviteReply(accepted=True)

    def PublishResult(self, request, context):
        self.results[request.round_id] = request
        return pb.Ack(ok=True)

    def register(self) -> None:
        self.aggregator.RegisterOwner(
            pb.OwnerRegistration(site_id=self.site_id, address=self.address), timeout=10
        )

    def next_spec(self, timeout: float = 20) -> pb.RoundSpec:
        return self.specs.get(timeout=timeout)

    def share(
        self, spec: pb.RoundSpec, statement_overrides: dict | None = None, **header_overrides
    ) -> tuple[pb.ShareHeader, list[int]]:
        """This owner's PCA share, built as the owner agent builds it."""
        enc, _ = encoding_from_proto(spec.encoding, self.encryptor.public.bits)
        values = pca.share_values(pca.local_statistics(self.x), enc)
        dimension = len(spec.moments.features)
        return self.seal(spec, values, dimension, statement_overrides, **header_overrides)

    def seal(
        self,
        spec: pb.RoundSpec,
        values: list[int],
        dimension: int,
        statement_overrides: dict | None = None,
        **header_overrides,
    ) -> tuple[pb.ShareHeader, list[int]]:
        """Encoded values packed, masked with this owner's own seed, encrypted, and their
        statement signed with this owner's certificate key."""
        enc, layout = encoding_from_proto(spec.encoding, self.encryptor.public.bits)
        packed = pack(values, layout)
        seed = new_mask_seed()
        masks = masks_from_seed(seed, len(packed), layout)
        packed = [p + r for p, r in zip(packed, masks, strict=True)]
        ciphertexts = self.encryptor.encrypt_many(packed)
        public = self.encryptor.public
        claims = dict(
            round_id=spec.round_id,
            site_id=self.site_id,
            key_id=public.key_id,
            protocol=spec.protocol,
            invited_root=spec.invited_root,
            n_invited=spec.n_invited,
            quorum=spec.min_owners,
            n_ciphertexts=len(ciphertexts),
            ciphertext_digest=ciphertext_digest(ciphertexts, public.ciphertext_bytes),
            masked=True,
            reveal="projection" if spec.moments.rotation else "blinded",
            spec_digest=spec_digest(spec),
        )
        claims.update(statement_overrides or {})
        statement = sign_statement(pb.ShareStatement(**claims), self.tls.signer())
        fields = dict(
            statement=statement,
            mask_seed=seed,
            round_id=spec.round_id,
            site_id=self.site_id,
            key_id=spec.key_id,
            dimension=dimension,
            encoding=encoding_to_proto(enc, layout),
            n_ciphertexts=len(ciphertexts),
        )
        fields.update(header_overrides)
        return pb.ShareHeader(**fields), ciphertexts

    def chunks(self, header: pb.ShareHeader, ciphertexts: list[int]):
        yield pb.ShareChunk(header=header)
        for chunk in batches(ciphertexts, self.encryptor.public.ciphertext_bytes):
            yield pb.ShareChunk(batch=pb.CiphertextBatch(ciphertexts=chunk))

    def submit(self, header: pb.ShareHeader, ciphertexts: list[int]) -> pb.Ack:
        return self.aggregator.SubmitShare(self.chunks(header, ciphertexts), timeout=30)

    def submit_then_vanish(self, header: pb.ShareHeader, ciphertexts: list[int]) -> None:
        """Send the header and part of the share, then drop the call mid-stream."""
        release = threading.Event()

        def partial():
            yield pb.ShareChunk(header=header)
            yield pb.ShareChunk(
                batch=pb.CiphertextBatch(
                    ciphertexts=[
                        c.to_bytes(self.encryptor.public.ciphertext_bytes, "big")
                        for c in ciphertexts[:3]
                    ]
                )
            )
            release.wait(10)

        future = self.aggregator.SubmitShare.future(partial(), timeout=30)
        threading.Event().wait(0.5)
        future.cancel()
        release.set()
        try:
            future.result()
        except grpc.FutureCancelledError:
            pass
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.CANCELLED, exc

    def close(self) -> None:
        self.server.stop(0)
