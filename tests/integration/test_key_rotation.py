"""CSP key rotation through real processes: `leteo-fed csp rotate-key` beside a running CSP.

Real CSP, aggregator and owner agents (mTLS, 2048-bit keys) plus one test-driven owner
(site-x) that holds rounds open. A round opened on key A before the rotation finishes on A after
it; the next round uses key B (the real owners fetch B from the CSP by id); retiring the current
key is refused; once A is retired, a round still open on A fails at decryption naming the
retirement, and the CSP refuses A by name. A restarted CSP keeps B (and the retired A stays
retired).
"""

from __future__ import annotations

import os
import subprocess
import sys

import grpc
import numpy as np
import pytest
from integration_helpers import ManualOwner, assert_matches_numpy, write_parts
from sklearn.datasets import load_breast_cancer

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.data.sources import read_matrix
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport.messages import public_key_from_proto
from leteo_fed.transport.rounds import result_document

pytestmark = pytest.mark.slow
REAL = ("site-1", "site-2")
WITH_X = (*REAL, "site-x")


def key_command(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    """`leteo-fed csp ACTION --key-dir <the CSP's key folder> ARGS`, as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if k != "LETEO_CSP_PASSPHRASE"}
    return subprocess.run(
        [sys.executable, "-m", "leteo_fed", "csp", args[0], "--key-dir"]
        + [str(cluster.workdir / "csp-keys"), *args[1:]],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )


def test_rotate_and_retire_while_rounds_run(tmp_path):
    bunch = load_breast_cancer()
    names = [f"f{i}" for i in range(8)]
    x = bunch.data[:, :8]
    parts = write_parts(x, names, 3, tmp_path / "data")
    owners = [OwnerSpec(site, parts[i]) for i, site in enumerate(REAL)]
    cluster = LocalCluster(tmp_path / "run", owners, extra_owner_ids=["site-x"])
    with cluster:
        sx = ManualOwner(
            "site-x",
            cluster.tls("site-x", "owner"),
            cluster.addresses["aggregator"],
            cluster.addresses["csp"],
            read_matrix(str(parts[2]), names),
        )
        sx.register()
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        csp_channel = cluster.tls("aggregator", "aggregator").channel(
            cluster.addresses["csp"], peer="csp"
        )
        csp = pb_grpc.CryptoServiceProviderStub(csp_channel)

        def csp_key(key_id: str = "") -> PublicKey:
            msg = csp.GetPublicKey(pb.PublicKeyRequest(key_id=key_id), timeout=10)
            return public_key_from_proto(msg)

        try:
            client.wait_for_owners(3)
            a = csp_key()
            params = (
                MomentsRequest(features=tuple(names), components=2),
                RoundOptions(owners=WITH_X, min_owners=3),
            )

            # two rounds opened on key A; site-x holds both open
            first = client.start(*params)
            spec_first = sx.next_spec()
            held = client.start(*params)
            spec_held = sx.next_spec()
            assert spec_first.round_id == first.round_id and spec_held.round_id == held.round_id
            assert spec_first.key_id == spec_held.key_id == a.key_id
            sx.encryptor = Encryptor(a)
            share_held = sx.share(spec_held)  # built now, under A, sent after A is retired

            # rotate beside the running CSP: it serves B at once, and A by id
            proc = key_command(cluster, "rotate-key")
            assert proc.returncode == 0, proc.stderr
            b = csp_key()
            assert b.key_id != a.key_id and f"new key {b.key_id}" in proc.stdout
            assert f"previous key {a.key_id} is kept" in proc.stdout
            assert csp_key(a.key_id) == a

            # the round opened before the rotation finishes on A
            assert sx.submit(*sx.share(spec_first)).ok
            final = client.wait(first.round_id, 60)
            assert final.state == "COMPLETED", final.message
            assert_matches_numpy(result_document(final), x, 2)

            # a new round uses B; the owner processes fetch B from the CSP by its id
            second = client.start(*params)
            spec_second = sx.next_spec()
            assert spec_second.key_id == b.key_id
            sx.encryptor = Encryptor(b)
            assert sx.submit(*sx.share(spec_second)).ok
            final = client.wait(second.round_id, 60)
            assert final.state == "COMPLETED", final.message
            result = result_document(final)
            assert_matches_numpy(result, x, 2)
            assert result["encoding"]["paillier_bits"] == b.bits
            for site in REAL:
                assert f"CSP key {b.key_id}" in (cluster.logs / f"{site}.log").read_text()

            # the current key cannot be retired; A can, and the CSP drops it at once
            proc = key_command(cluster, "retire-key", "--key-id", b.key_id)
            assert proc.returncode == 2 and "is the current key" in proc.stderr
            proc = key_command(cluster, "retire-key", "--key-id", a.key_id)
            assert proc.returncode == 0, proc.stderr
            assert f"deleted the secret key of {a.key_id}" in proc.stdout
            assert not (cluster.workdir / "csp-keys" / "keys" / f"{a.key_id}.key").exists()

            # the round still open on A: its shares arrive, the CSP refuses to decrypt them
            sx.encryptor = Encryptor(a)
            assert sx.submit(*share_held).ok
            final = client.wait(held.round_id, 60)
            assert final.state == "FAILED"
            assert f"key {a.key_id} was retired" in final.message, final.message
            for call in (
                lambda: csp_key(a.key_id),
                lambda: csp.OpenRound(
                    pb.CspRoundRequest(round_id="after-retire", key_id=a.key_id, n_ciphertexts=1),
                    timeout=10,
                ),
            ):
                with pytest.raises(grpc.RpcError) as err:
                    call()
                assert err.value.code() == grpc.StatusCode.NOT_FOUND
                assert f"key {a.key_id} was retired" in err.value.details()

            # a restarted CSP keeps B as current, A retired, and its record of used rounds
            cluster.kill("csp")
            cluster.start_csp()
            cluster.wait_healthy(names=["csp"])
            csp_channel.close()
            csp_channel = cluster.tls("aggregator", "aggregator").channel(
                cluster.addresses["csp"], peer="csp"
            )
            csp = pb_grpc.CryptoServiceProviderStub(csp_channel)
            assert csp_key() == b
            with pytest.raises(grpc.RpcError) as err:
                csp.OpenRound(
                    pb.CspRoundRequest(round_id=first.round_id, key_id=b.key_id, n_ciphertexts=1),
                    timeout=10,
                )
            assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
            last = client.run(
                MomentsRequest(features=tuple(names), components=2),
                RoundOptions(owners=REAL, min_owners=2),
            ).to_dict()
            pooled = np.vstack([read_matrix(str(p), names) for p in parts[:2]])
            assert_matches_numpy(last, pooled, 2)
            listing = key_command(cluster, "list-keys")
            states = {r.split()[0]: r.split()[2] for r in listing.stdout.splitlines()[1:]}
            assert states == {a.key_id: "retired", b.key_id: "current"}
        finally:
            csp_channel.close()
            client.close()
            sx.close()
