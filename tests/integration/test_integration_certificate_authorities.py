"""Separate certificate authorities, one per role, through real processes.

Callers: the aggregator and the CSP refuse an owner certificate minted by the aggregators' CA
(the platform operator's), by the CSPs', by the analysts' CA or by a CA nobody trusts; the
aggregator refuses an analyst certificate from any CA but the analysts', and the CSP an
aggregator certificate from any CA but the aggregators'. A genuine owner and analyst get
through the same calls.

Servers: a CSP certificate minted by the aggregators' CA does not let the aggregator's operator
pose as the CSP. An owner's channel to the CSP trusts the CSPs' CA alone, so it refuses such a
fake CSP (and its Paillier key, whose secret the operator would know), while the genuine CSP
serves its key."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from leteo_fed import defaults
from leteo_fed.client import AnalystClient, RoundOptions, RpcRefused
from leteo_fed.crypto.paillier import PublicKey, generate_keypair
from leteo_fed.demo.cluster import LocalCluster
from leteo_fed.demo.ports import free_port
from leteo_fed.errors import PeerUnavailable
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols.moments_round import MomentsRequest
from leteo_fed.transport.certs import Party, create_pki, issue, load_ca
from leteo_fed.transport.grpc_io import TlsConfig, make_server
from leteo_fed.transport.messages import fetch_public_key, public_key_to_proto

pytestmark = pytest.mark.slow

OWNER = Party("site-1", "owner")
ANALYST = Party("analyst", "analyst")
AGGREGATOR = Party("aggregator", "aggregator")
CSP = Party("csp", "csp")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A CSP (small key: nothing is decrypted) and an aggregator; site-1 has a certificate only."""
    work = tmp_path_factory.mktemp("authorities")
    with LocalCluster(work, [], key_bits=1024, extra_owner_ids=["site-1"]) as cluster:
        yield cluster


def minted(cluster: LocalCluster, authority: str, party: Party, out: Path) -> TlsConfig:
    """`party`'s certificate from the deployment's `authority` CA, which certifies another role;
    it chains to the deployment's trust bundle, so only the per-role checks can refuse it."""
    ca_cert, ca_key = load_ca(cluster.certs, authority)
    issue(out, party, ca_cert, ca_key, [])
    return TlsConfig(
        party, cluster.certs / "ca.crt", out / f"{party.name}.crt", out / f"{party.name}.key"
    )


def register(tls: TlsConfig, cluster: LocalCluster) -> None:
    with tls.channel(cluster.addresses["aggregator"], peer="aggregator") as channel:
        pb_grpc.AggregatorStub(channel).RegisterOwner(
            pb.OwnerRegistration(site_id=tls.identity.name, address="127.0.0.1:9"), timeout=10
        )


def public_key(tls: TlsConfig, cluster: LocalCluster) -> None:
    with tls.channel(cluster.addresses["csp"], peer="csp") as channel:
        pb_grpc.CryptoServiceProviderStub(channel).GetPublicKey(pb.PublicKeyRequest(), timeout=10)


def start_round(tls: TlsConfig, cluster: LocalCluster) -> None:
    with AnalystClient(cluster.addresses["aggregator"], tls) as client:
        client.start(
            MomentsRequest(features=tuple(["x"]), components=1), RoundOptions(min_owners=2)
        )


def test_a_genuine_owner_is_accepted(cluster: LocalCluster) -> None:
    owner = cluster.tls("site-1", "owner")
    register(owner, cluster)
    public_key(owner, cluster)


@pytest.mark.parametrize("authority", ["aggregators", "csps", "analysts"])
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
        # TLS refuses it: neither side's authorities know the other's certificate
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE, call.__name__


@pytest.mark.parametrize("authority", ["aggregators", "csps", "owners"])
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


@pytest.mark.parametrize("authority", ["csps", "owners"])
def test_an_aggregator_from_another_authority_cannot_open_csp_rounds(
    cluster: LocalCluster, tmp_path: Path, authority: str
) -> None:
    """The CSP's organization, or the sites', cannot stand in for the aggregator at the CSP."""
    rogue = minted(cluster, authority, AGGREGATOR, tmp_path)
    with rogue.channel(cluster.addresses["csp"], peer="csp") as channel:
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.CryptoServiceProviderStub(channel).OpenRound(
                pb.CspRoundRequest(round_id="r", n_ciphertexts=1), timeout=10
            )
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert (
        "certificate for role aggregator was not issued by the aggregators' certificate authority"
        in err.value.details()
    )


# ---------------------------------------------------------------- a fake CSP


class FakeCsp(pb_grpc.CryptoServiceProviderServicer):
    """The aggregator's operator posing as the CSP: it hands out a Paillier key whose secret
    it knows, so it could decrypt any single owner's share encrypted under it."""

    def __init__(self, public: PublicKey) -> None:
        self.public = public
        self.served = 0

    def Health(self, request, context):
        return pb.HealthReply(party="csp", role="csp", status="SERVING")

    def GetPublicKey(self, request, context):
        self.served += 1
        return public_key_to_proto(self.public)


@contextlib.contextmanager
def fake_csp(tls: TlsConfig) -> Iterator[tuple[str, FakeCsp]]:
    servicer = FakeCsp(generate_keypair(512).public)
    server, port = make_server(tls, f"127.0.0.1:{free_port()}", workers=2)
    pb_grpc.add_CryptoServiceProviderServicer_to_server(servicer, server)
    server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        server.stop(0)


def bundle_channel(tls: TlsConfig, address: str) -> grpc.Channel:
    """A channel that trusts the whole bundle ca.crt, as every client did before channels named
    their peer's role: the control that shows the fake CSP would otherwise be believed."""
    assert tls.ca is not None and tls.cert is not None and tls.key is not None
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls.ca.read_bytes(),
        private_key=tls.key.read_bytes(),
        certificate_chain=tls.cert.read_bytes(),
    )
    return grpc.secure_channel(address, creds)


def test_a_csp_minted_by_the_aggregators_authority_cannot_pose_as_the_csp(
    cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = cluster.tls("site-1", "owner")
    rogue = minted(cluster, "aggregators", CSP, tmp_path)  # the platform operator's own CA
    with fake_csp(rogue) as (address, fake):
        with bundle_channel(owner, address) as channel:  # the attack, before the fix
            key = pb_grpc.CryptoServiceProviderStub(channel).GetPublicKey(
                pb.PublicKeyRequest(), timeout=10
            )
        assert key.key_id == fake.public.key_id and fake.served == 1
        # the owner's channel to the CSP, as its agent builds it, refuses the handshake
        with owner.channel(address, peer="csp") as channel:
            stub = pb_grpc.CryptoServiceProviderStub(channel)
            with pytest.raises(grpc.RpcError) as err:
                stub.GetPublicKey(pb.PublicKeyRequest(), timeout=10)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            monkeypatch.setattr(defaults, "PUBLIC_KEY_TIMEOUT_SECONDS", 2.0)
            with pytest.raises(PeerUnavailable, match="cannot fetch the public key"):
                fetch_public_key(stub, address)  # the agent's own fetch, which waits for ready
        assert fake.served == 1, "the fake CSP's key never reached the owner's channel"
    # the genuine CSP, on the same owner's channel to the CSP
    address = cluster.addresses["csp"]
    with owner.channel(address, peer="csp") as channel:
        genuine = fetch_public_key(pb_grpc.CryptoServiceProviderStub(channel), address)
    assert genuine.key_id != fake.public.key_id


def test_the_genuine_csp_is_not_taken_for_the_aggregator(cluster: LocalCluster) -> None:
    """A channel checks the server's role, not merely that some trusted authority issued it:
    the real CSP at the aggregator's address would not do either."""
    owner = cluster.tls("site-1", "owner")
    with owner.channel(cluster.addresses["csp"], peer="aggregator") as channel:
        with pytest.raises(grpc.RpcError) as err:
            pb_grpc.AggregatorStub(channel).Health(pb.HealthRequest(), timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
