"""Federated PCA the way a deployment runs it: separate processes, real gRPC over mTLS,
real 2048-bit Paillier keys, real data sets; checked against NumPy PCA on the pooled rows."""

from __future__ import annotations

import json
import time

import grpc
import numpy as np
import pytest
from integration_helpers import ManualOwner, assert_matches_numpy, write_parts
from sklearn.datasets import load_breast_cancer, load_digits

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions, RpcRefused
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import pca
from leteo_fed.protocols.ldp_collection import LdpRequest
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.protocols.moments_round import encoding as moments_encoding
from leteo_fed.transport.certs import create_pki
from leteo_fed.transport.grpc_io import TlsConfig
from leteo_fed.transport.rounds import result_document
from owner_agent.audit import read as audit_read

pytestmark = pytest.mark.slow


def _names(bunch) -> list[str]:
    return [str(n).replace(" ", "_") for n in bunch.feature_names]


@pytest.fixture(scope="module")
def cancer():
    bunch = load_breast_cancer()
    return bunch.data, _names(bunch)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, cancer):
    """3 owner processes on breast cancer rows + 2 test-driven owners holding 2 more parts."""
    x, names = cancer
    work = tmp_path_factory.mktemp("pca-deployment")
    parts = write_parts(x, names, 5, work / "data")
    owners = [OwnerSpec(f"site-{i}", parts[i - 1]) for i in (1, 2, 3)]
    cluster = LocalCluster(work, owners, extra_owner_ids=["site-x", "site-y"], csp_transcript=True)
    with cluster:
        manual = {}
        for site, part in (("site-x", parts[3]), ("site-y", parts[4])):
            tls = cluster.tls(site, "owner")
            from leteo_fed.data.sources import read_matrix

            manual[site] = ManualOwner(
                site,
                tls,
                cluster.addresses["aggregator"],
                cluster.addresses["csp"],
                read_matrix(str(part), names),
            )
            manual[site].register()
        client = AnalystClient(cluster.addresses["aggregator"], cluster.tls("analyst", "analyst"))
        client.wait_for_owners(5)
        yield cluster, client, manual, parts
        client.close()
        for m in manual.values():
            m.close()


def _pooled(parts, names, sites) -> np.ndarray:
    from leteo_fed.data.sources import read_matrix

    index = {"site-1": 0, "site-2": 1, "site-3": 2, "site-x": 3, "site-y": 4}
    return np.vstack([read_matrix(str(parts[index[s]]), names) for s in sites])


def test_share_validation_and_mid_round_disconnect(deployment, cancer):
    cluster, client, manual, parts = deployment
    x, names = cancer
    sx, sy = manual["site-x"], manual["site-y"]
    status = client.start(
        MomentsRequest(features=tuple(names), components=4),
        RoundOptions(min_owners=5, deadline_seconds=60),
    )
    spec_x, spec_y = sx.next_spec(), sy.next_spec()
    assert spec_x.round_id == status.round_id == spec_y.round_id

    header, cts = sx.share(spec_x)
    # unknown round
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(pb.ShareHeader(**{**_fields(header), "round_id": "pca-unknown"}), cts)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    # wrong dimension
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(pb.ShareHeader(**{**_fields(header), "dimension": 29}), cts)
    assert (
        err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "dimension" in err.value.details()
    )
    # too few ciphertexts for the declared layout
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(header, cts[:-1])
    assert (
        err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        and "incomplete" in err.value.details()
    )
    # a share submitted in another owner's name
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(pb.ShareHeader(**{**_fields(header), "site_id": "site-1"}), cts)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # disconnect mid-upload: nothing is folded in, the owner may come back
    sx.submit_then_vanish(header, cts)
    time.sleep(0.3)
    assert client.wait(status.round_id, 0).state == "OPEN"

    assert sx.submit(header, cts).ok
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(header, cts)
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS

    hy, cy = sy.share(spec_y)
    assert sy.submit(hy, cy).ok
    final = client.wait(status.round_id, 60)
    assert final.state == "COMPLETED", final.message
    result = result_document(final)
    assert sorted(result["owners"]) == ["site-1", "site-2", "site-3", "site-x", "site-y"]
    assert_matches_numpy(result, x, 4)

    # a share for a closed round is refused and changes nothing
    with pytest.raises(grpc.RpcError) as err:
        sy.submit(hy, cy)
    assert (
        err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "closed" in err.value.details()
    )
    # owners receive the published result
    deadline = time.time() + 10
    while status.round_id not in sx.results and time.time() < deadline:
        time.sleep(0.1)
    assert sx.results[status.round_id].state == "COMPLETED"


def _fields(header: pb.ShareHeader) -> dict:
    return {
        f.name: getattr(header, f.name) for f in header.DESCRIPTOR.fields if f.name != "timings"
    }


def test_silent_owners_do_not_stall_the_round(deployment, cancer):
    """Two owners accept the invitation and never send: the round ends at its deadline."""
    cluster, client, manual, parts = deployment
    _, names = cancer
    start = time.monotonic()
    status = client.start(
        MomentsRequest(features=tuple(names), components=3),
        RoundOptions(min_owners=3, deadline_seconds=6),
    )
    manual["site-x"].next_spec()
    manual["site-y"].next_spec()
    final = client.wait(status.round_id, 30)
    elapsed = time.monotonic() - start
    assert final.state == "COMPLETED", final.message
    assert 5.5 <= elapsed < 15
    result = result_document(final)
    assert result["owners"] == ["site-1", "site-2", "site-3"]
    assert sorted(final.missing) == ["site-x", "site-y"]
    assert_matches_numpy(result, _pooled(parts, names, ["site-1", "site-2", "site-3"]), 3)


def test_missing_column_fails_round_with_named_column(deployment, cancer):
    cluster, client, _, _ = deployment
    _, names = cancer
    params = (
        MomentsRequest(features=tuple([*names[:3], "no_such_column"]), components=2),
        RoundOptions(deadline_seconds=30, owners=("site-1", "site-2", "site-3")),
    )
    start = time.monotonic()
    with pytest.raises(RoundFailed) as err:
        client.run(*params).to_dict()
    assert "columns: a column the round reads is not in this site's data" in str(
        err.value
    ) and "quorum not met" in str(err.value)
    assert (
        time.monotonic() - start < 15
    )  # declines end the round early, no waiting for the deadline


def test_bad_requests_are_refused_and_service_survives(deployment, cancer):
    cluster, client, _, _ = deployment
    _, names = cancer
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple(names), components=31), RoundOptions())
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "components" in str(err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple(names)), RoundOptions(min_owners=1))
    assert "min_owners" in str(err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple([names[0], names[0]])), RoundOptions())
    assert "duplicates" in str(err.value)
    with pytest.raises(RpcRefused) as err:
        client.start(MomentsRequest(features=tuple(names)), RoundOptions(owners=("site-404",)))
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert len(client.owners()) == 5


def test_roles_are_enforced_by_certificate(deployment, cancer):
    cluster, _, manual, _ = deployment
    owner_tls = cluster.tls("site-x", "owner")
    agg = pb_grpc.AggregatorStub(
        owner_tls.channel(cluster.addresses["aggregator"], peer="aggregator")
    )
    with pytest.raises(grpc.RpcError) as err:
        agg.StartRound(pb.StartRoundRequest(request=pb.Signed(body=b"")), timeout=10)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as err:  # cannot register under another site's name
        agg.RegisterOwner(pb.OwnerRegistration(site_id="site-1", address="127.0.0.1:1"), timeout=10)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    analyst_csp = pb_grpc.CryptoServiceProviderStub(
        cluster.tls("analyst", "analyst").channel(cluster.addresses["csp"], peer="csp")
    )
    with pytest.raises(grpc.RpcError) as err:
        list(
            analyst_csp.DecryptBlinded(
                iter([pb.DecryptChunk(header=pb.CspRoundRequest(round_id="r"))]), timeout=10
            )
        )
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as err:
        pb_grpc.CryptoServiceProviderStub(
            owner_tls.channel(cluster.addresses["csp"], peer="csp")
        ).OpenRound(pb.CspRoundRequest(round_id="r", n_ciphertexts=1), timeout=10)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_callers_without_a_valid_certificate_are_rejected(deployment, tmp_path):
    cluster, client, _, _ = deployment
    create_pki(tmp_path / "rogue", ["site-1"])  # same names, different CA
    rogue = TlsConfig.from_dir(tmp_path / "rogue", "analyst", "analyst")
    for name in ("aggregator", "csp"):
        stub_cls = (
            pb_grpc.AggregatorStub if name == "aggregator" else pb_grpc.CryptoServiceProviderStub
        )
        with pytest.raises(grpc.RpcError) as err:
            stub_cls(rogue.channel(cluster.addresses[name], peer=name)).Health(
                pb.HealthRequest(), timeout=5
            )
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    plaintext = TlsConfig.insecure_as("analyst", "analyst")
    with pytest.raises(grpc.RpcError):
        pb_grpc.AggregatorStub(
            plaintext.channel(cluster.addresses["aggregator"], peer="aggregator")
        ).ListOwners(pb.ListOwnersRequest(), timeout=5)
    assert len(client.owners()) == 5  # the services are still up for legitimate callers


def test_csp_sees_only_blinded_values(deployment, cancer):
    """Leakage check: every plaintext the CSP decrypted carries the owners' masks."""
    cluster, _, _, parts = deployment
    _, names = cancer
    lines = (cluster.workdir / "csp-transcript.jsonl").read_text().splitlines()
    assert lines, "the CSP decrypted nothing"
    # slots are sized for the round's invited owners (3 to 5 in this module's rounds)
    layouts = {n: moments_encoding(max_owners=n).layout(2048) for n in range(2, 6)}
    for line in lines:
        record = json.loads(line)
        plaintexts = [int(p, 16) for p in record["plaintexts"]]
        layout = next(
            (
                lay
                for lay in layouts.values()
                if lay.n_ciphertexts(pca.n_values(len(names))) == len(plaintexts)
            ),
            None,
        )
        assert layout is not None, f"{len(plaintexts)} plaintexts: no layout for 2..5 owners"
        # An unmasked sum of packed shares is below 2^(k w) = 2^(mask_bits - kappa); a masked one
        # contains at least one owner mask uniform on [0, 2^mask_bits): above the line below
        # with probability 1 - 2^-40 per plaintext.
        unmasked_ceiling = layout.mask_bits - layout.statistical_security
        assert min(p.bit_length() for p in plaintexts) > unmasked_ceiling + 24


@pytest.mark.parametrize("n_owners", [3, 10])
def test_federated_pca_equals_numpy(tmp_path, n_owners):
    """3 owners on breast cancer (569 x 30), 10 owners on digits (1797 x 64)."""
    bunch = load_breast_cancer() if n_owners == 3 else load_digits()
    x = bunch.data.astype(float)
    names = [f"f{i}" for i in range(x.shape[1])] if n_owners == 10 else _names(bunch)
    parts = write_parts(x, names, n_owners, tmp_path / "data", seed=n_owners)
    owners = [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    k = 5
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(n_owners)
            result = client.run(
                MomentsRequest(features=tuple(names), components=k),
                RoundOptions(min_owners=n_owners, deadline_seconds=120),
            ).to_dict()
    assert result["owners"] == sorted(o.site_id for o in owners)
    assert result["encoding"]["paillier_bits"] == 2048
    assert_matches_numpy(result, x, k)


def test_vanished_owner_process(tmp_path, cancer):
    """An owner killed before the round is reported unreachable; quorum decides the outcome.
    An owner with NaN in its data declines, naming the rule (the column stays in its audit log)."""
    x, names = cancer
    parts = write_parts(x, names, 3, tmp_path / "data")
    # site-3's file gets a missing value in 'mean_area'
    text = parts[2].read_text().splitlines()
    header = text[0].split(",")
    col = header.index('"mean_area"') if '"mean_area"' in header else header.index("mean_area")
    row = text[1].split(",")
    row[col] = ""
    text[1] = ",".join(row)
    parts[2].write_text("\n".join(text) + "\n")
    owners = [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            result = client.run(
                MomentsRequest(features=tuple(names), components=2),
                RoundOptions(min_owners=2, deadline_seconds=60),
            ).to_dict()
            assert result["owners"] == ["site-1", "site-2"]
            # the aggregator learns the rule, not the column or the row: that stays at the site
            why = "values: a value the round reads is missing or not a number"
            assert result["declined"]["site-3"] == why
            failed = [
                e
                for e in audit_read(cluster.workdir / "config" / "audit-site-3.jsonl")
                if e["event"] == "failed"
            ]
            assert "column 'mean_area' has 1 missing" in failed[0]["detail"]
            assert failed[0]["data_dependent"] is True
            from leteo_fed.data.sources import read_matrix

            pooled = np.vstack([read_matrix(str(p), names) for p in parts[:2]])
            assert_matches_numpy(result, pooled, 2)

            cluster.kill("site-2")
            start = time.monotonic()
            with pytest.raises(RoundFailed) as err:
                client.run(
                    MomentsRequest(features=tuple(names), components=2),
                    RoundOptions(min_owners=2, deadline_seconds=60),
                ).to_dict()
            assert time.monotonic() - start < 20
            message = str(err.value)
            assert "site-2: unreachable" in message and why in message


def test_owners_started_before_their_peers(tmp_path, cancer):
    """Owners that start before the CSP and the aggregator still find them and take part."""
    x, names = cancer
    parts = write_parts(x, names, 3, tmp_path / "data")
    cluster = LocalCluster(
        tmp_path / "run", [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    )
    try:
        cluster.prepare()
        for owner in cluster.owners:
            cluster.start_owner(owner)
        time.sleep(6)  # several failed connection attempts: gRPC is in reconnect backoff
        cluster.start_services()
        cluster.wait_healthy()
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3, timeout=30)
            result = client.run(
                MomentsRequest(features=tuple(names), components=3),
                RoundOptions(min_owners=3, deadline_seconds=60),
            ).to_dict()
        assert_matches_numpy(result, x, 3)
    finally:
        cluster.stop()


@pytest.mark.spark
def test_owners_on_parquet_and_spark_engines(tmp_path, cancer):
    """One owner reads CSV with NumPy, one Parquet with NumPy, one computes its share with Spark."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    x, names = cancer
    parts = write_parts(x, names, 3, tmp_path / "data")
    parquet = tmp_path / "data" / "part-2.parquet"
    pq.write_table(pacsv.read_csv(parts[1]), parquet)
    owners = [
        OwnerSpec("site-1", parts[0]),
        OwnerSpec("site-2", parquet),
        OwnerSpec("site-3", parts[2], engine="spark"),
    ]
    with LocalCluster(tmp_path / "run", owners) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            result = client.run(
                MomentsRequest(features=tuple(names), components=4),
                RoundOptions(min_owners=3, deadline_seconds=240),
            ).to_dict()
        spark_log = (cluster.logs / "site-3.log").read_text()
    assert "computing statistics with Spark" in spark_log
    assert result["owners"] == ["site-1", "site-2", "site-3"]
    assert_matches_numpy(result, x, 4)


def test_pca_command_against_running_services(deployment, cancer, tmp_path):
    cluster, _, _, parts = deployment
    _, names = cancer
    import subprocess
    import sys

    out = tmp_path / "cli-out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "leteo_fed",
            "pca",
            "--aggregator",
            cluster.addresses["aggregator"],
            "--features",
            ",".join(names),
            "--components",
            "2",
            "--owners",
            "site-1,site-2,site-3",
            "--min-owners",
            "3",
            "--tls-dir",
            str(cluster.certs),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((out / "pca.json").read_text())
    assert json.loads(proc.stdout)["round_id"] == result["round_id"]
    assert_matches_numpy(result, _pooled(parts, names, ["site-1", "site-2", "site-3"]), 2)


def test_large_share_uses_all_cores(tmp_path, cancer):
    """d = 132 (breast cancer features, their squares, neighbour products, roots and logs): over
    512 ciphertexts per share, so owners encrypt and the CSP decrypts on worker processes."""
    x0, names0 = cancer
    x = np.hstack([x0, x0**2, x0[:, :-1] * x0[:, 1:], np.sqrt(x0 + 1), np.log1p(x0)])[:, :132]
    names = [f"f{i}" for i in range(x.shape[1])]
    parts = write_parts(x, names, 3, tmp_path / "data")
    with LocalCluster(
        tmp_path / "run", [OwnerSpec(f"site-{i + 1}", p) for i, p in enumerate(parts)]
    ) as cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(3)
            result = client.run(
                MomentsRequest(features=tuple(names), components=3),
                RoundOptions(min_owners=3, value_bound=1e8, deadline_seconds=240),
            ).to_dict()
        owner_log = (cluster.logs / "site-1.log").read_text()
    assert result["encoding"]["ciphertexts_per_share"] >= 512
    assert "worker processes" in owner_log
    assert_matches_numpy(result, x, 3)


def test_upload_of_the_wrong_kind_is_refused(deployment, cancer):
    """An encrypted share sent to an LDP round (or reports to a PCA round) is refused clearly."""
    from leteo_fed.client import RoundOptions

    cluster, client, manual, _ = deployment
    _, names = cancer
    sx = manual["site-x"]
    status = client.start(
        LdpRequest(column=names[0], mechanism="pm", epsilon=1.0, lower=0.0, upper=100.0),
        RoundOptions(owners=("site-x",), min_owners=1, deadline_seconds=5),
    )
    spec = sx.next_spec()
    assert spec.round_id == status.round_id and spec.protocol == "ldp"
    header = pb.ShareHeader(round_id=spec.round_id, site_id="site-x", key_id="k", dimension=30)
    with pytest.raises(grpc.RpcError) as err:
        sx.submit(header, [])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "does not take an encrypted share" in err.value.details()
    assert client.wait(status.round_id, 15).state == "FAILED"  # no reports by the deadline
