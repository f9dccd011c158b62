"""Separate certificate authorities, through real processes: the aggregator and the CSP refuse an
owner certificate minted by the services' CA (the platform operator's), by the analysts' CA or
by a CA nobody trusts, and the aggregator refuses an analyst certificate from any CA but the
analysts'. A genuine owner and analyst get through the same calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from leteo_fed.client import AnalystClient, RoundParams, RpcRefused
from leteo_fed.demo.cluster import LocalCluster
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.certs import Party, create_pki, issue, load_ca
from leteo_fed.transport.grpc_io import TlsConfig

pytestmark = pytest.mark.slow

OWNER = Party("site-1", "owner")
ANALYST = Party("analyst", "analyst")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A CSP (small key: nothing is decrypted) and an aggregator; site-1 has a certificate only."""
    work = tmp_path_factory.mktemp("authorities")
    with LocalCluster(work, [], key_bits=1024, extra_owner_ids=["site-1"]) as cluster:
        yield cluster


def minted(cluster: LocalCluster, authority: str, party: Party, out: Path) -> TlsConfig:
    """`party`'s certificate from the deployment's `authority` CA, which certifies other roles;
    it chains to the deployment's trust bundle, so only the per-role check can refuse it."""
    ca_cert, ca_key = load_ca(cluster.certs, authority)
    issue(out, party, ca_cert, ca_key, [])
    return TlsConfig(
        party, cluster.certs / "ca.crt", out / f"{party.name}.crt", out / f"{party.name}.key"
    )


def register(tls: TlsConfig, cluster: LocalCluster) -> None:
    with tls.channel(cluster.addresses["aggregator"]) as channel:
        pb_grpc.AggregatorStub(channel).RegisterOwner(
            pb.OwnerRegistration(site_id=tls.identity.name, address="127.0.0.1:9"), timeout=10
        )


def public_key(tls: TlsConfig, cluster: LocalCluster) -> None:
    with tls.channel(cluster.addresses["csp"]) as channel:
        pb_grpc.CryptoServiceProviderStub(channel).GetPublicKey(pb.PublicKeyRequest(), timeout=10)


def start_round(tls: TlsConfig, cluster: LocalCluster) -> None:
    with AnalystClient(cluster.addresses["aggregator"], tls) as client:
        client.start_round(RoundParams(features=["x"], components=1, min_owners=2))


def test_a_genuine_owner_is_accepted(cluster: LocalCluster) -> None:
    owner = cluster.tls("site-1", "owner")
    register(owner, cluster)
    public_key(owner, cluster)


@pytest.mark.parametrize("authority", ["services", "analysts"])
def test_an_owner_from_another_authority_is_refused(
    cluster: LocalCluster, tmp_path: Path, authority: str
) -> None:
    rogue = minted(cluster, authority, OWNER, tmp_path)
    for call in (register, public_key):
        with pytest.raises(grpc.RpcError) as err:
            call(rogue, cluster)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED, call.__name__
        assert (
            "certificate for role owner was not issued by the owners' certificate authority"
            in err.value.details()
        )


def test_an_owner_from_a_rogue_authority_is_refused(cluster: LocalCluster, tmp_path: Path) -> None:
    create_pki(tmp_path, ["site-1"])  # the same names under authorities nobody trusts
    rogue = TlsConfig.from_dir(tmp_path, "site-1", "owner")
    for call in (register, public_key):
        with pytest.raises(grpc.RpcError) as err:
            call(rogue, cluster)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, call.__name__  # TLS refuses it


@pytest.mark.parametrize("authority", ["services", "owners"])
def test_an_analyst_from_another_authority_cannot_start_rounds(
    cluster: LocalCluster, tmp_path: Path, authority: str
) -> None:
    rogue = minted(cluster, authority, ANALYST, tmp_path)
    with pytest.raises(RpcRefused) as err:
        start_round(rogue, cluster)
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    # refused for its TLS identity (require_role), before its signature is even looked at
    assert (
        "certificate for role analyst was not issued by the analysts' certificate authority"
        in str(err.value)
    )


def test_a_genuine_analyst_gets_past_the_certificate_check(cluster: LocalCluster) -> None:
    try:  # one registered owner is below any quorum: the round itself may well be refused
        start_round(cluster.tls("analyst", "analyst"), cluster)
    except RpcRefused as exc:
        assert exc.code != grpc.StatusCode.PERMISSION_DENIED, str(exc)
