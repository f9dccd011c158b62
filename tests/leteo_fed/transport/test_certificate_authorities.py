"""Four certificate authorities, one per role: what `leteo-fed certs` writes (one folder, or one
custodian at a time), which authority each role maps to, `require_role` refusing a certificate
that an authority issued for a role it does not certify, and a TLS client refusing a server whose
certificate is not from the authority of the role it dials (a "CSP" minted by the aggregators'
CA, the platform operator's, in particular)."""

from __future__ import annotations

import contextlib
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from leteo_fed.cli.main import main
from leteo_fed.errors import AccessDenied, ConfigError
from leteo_fed.transport.certs import (
    Authorities,
    Party,
    create_ca,
    create_pki,
    issue,
    issue_from,
    issued_by,
    load_ca,
    write_trust,
)
from leteo_fed.transport.grpc_io import TlsConfig, make_server, require_role, rpc_method
from leteo_fed.transport.roles import AUTHORITIES, AUTHORITY_OF, ROLES, TLS_TRUST, ca_file

FOREIGN_OWNER = "certificate for role owner was not issued by the owners' certificate authority"
FOREIGN_CSP = "certificate for role csp was not issued by the csps' certificate authority"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pki")
    create_pki(out, ["site-1"])
    return out


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mint(ca_folder: Path, authority: str, party: Party, out: Path) -> TlsConfig:
    """`party`'s certificate issued by `authority` (whatever role it certifies), trusted by the
    bundle of `ca_folder`: what a custodian could make beyond its remit."""
    ca_cert, ca_key = load_ca(ca_folder, authority)
    issue(out, party, ca_cert, ca_key, [])
    return TlsConfig(
        party, ca_folder / "ca.crt", out / f"{party.name}.crt", out / f"{party.name}.key"
    )


# ---------------------------------------------------------------- layout


def test_one_folder_form_has_four_authorities_and_a_bundle_of_them(pki: Path) -> None:
    assert AUTHORITIES == ("owners", "analysts", "aggregators", "csps")
    cas = {a: cert(pki / ca_file(a)) for a in AUTHORITIES}
    assert len({c.subject for c in cas.values()}) == 4, "each authority needs its own name"
    assert len({c.public_key().public_numbers() for c in cas.values()}) == 4, "and its own key"
    bundle = x509.load_pem_x509_certificates((pki / "ca.crt").read_bytes())
    assert {c.fingerprint(hashes.SHA256()) for c in bundle} == {
        c.fingerprint(hashes.SHA256()) for c in cas.values()
    }
    for name in ("ca.crt", *(ca_file(a) for a in AUTHORITIES)):
        assert b"PRIVATE KEY" not in (pki / name).read_bytes()
        assert stat.S_IMODE((pki / name).stat().st_mode) & 0o022 == 0
    for authority in AUTHORITIES:
        assert stat.S_IMODE((pki / ca_file(authority, "key")).stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("name", "role"),
    [("site-1", "owner"), ("analyst", "analyst"), ("csp", "csp"), ("aggregator", "aggregator")],
)
def test_each_party_is_issued_by_its_roles_authority_only(pki: Path, name: str, role: str) -> None:
    leaf = cert(pki / f"{name}.crt")
    for authority in AUTHORITIES:
        assert issued_by(leaf, cert(pki / ca_file(authority))) == (authority == AUTHORITY_OF[role])


def test_role_ca_maps_each_role_to_its_authority_file(pki: Path) -> None:
    tls = TlsConfig.from_dir(pki, "site-1", "owner")
    expected = {
        "owner": "owners-ca.crt",
        "analyst": "analysts-ca.crt",
        "aggregator": "aggregators-ca.crt",
        "csp": "csps-ca.crt",
    }
    for role, name in expected.items():
        assert tls.role_ca(role) == (pki / name).read_bytes(), role
    assert TlsConfig.insecure_as("site-1", "owner").role_ca("owner") is None
    with pytest.raises(ConfigError, match="unknown role"):
        tls.role_ca("admin")


def test_role_ca_falls_back_only_to_a_single_ca_bundle(pki: Path, tmp_path: Path) -> None:
    legacy = tmp_path / "legacy"  # the old layout: one CA in ca.crt
    ca_cert, ca_key = create_ca(legacy, "owners")
    (legacy / "owners-ca.crt").rename(legacy / "ca.crt")
    issue(legacy, Party("site-1", "owner"), ca_cert, ca_key, [])
    tls = TlsConfig.from_dir(legacy, "site-1", "owner")
    assert tls.role_ca("aggregator") == (legacy / "ca.crt").read_bytes()
    authorities = tls.authorities()
    assert authorities is not None
    authorities.check((legacy / "site-1.crt").read_bytes(), Party("site-1", "owner"))

    bundle_only = tmp_path / "bundle-only"  # four CAs in ca.crt, the role files missing
    bundle_only.mkdir()
    shutil.copy(pki / "ca.crt", bundle_only / "ca.crt")
    with pytest.raises(ConfigError, match="owners-ca.crt not found"):
        TlsConfig.from_dir(bundle_only, "site-1", "owner").role_ca("owner")


# ---------------------------------------------------------------- the issuer check


@pytest.mark.parametrize(
    ("authority", "party"),
    [
        ("aggregators", Party("site-1", "owner")),  # the platform operator minting an owner
        ("analysts", Party("site-1", "owner")),
        ("csps", Party("site-1", "owner")),
        ("aggregators", Party("analyst", "analyst")),
        ("owners", Party("analyst", "analyst")),
        ("aggregators", Party("csp", "csp")),  # the platform operator minting a CSP
        ("owners", Party("csp", "csp")),
        ("csps", Party("aggregator", "aggregator")),  # the CSP's organization minting one
        ("analysts", Party("aggregator", "aggregator")),
    ],
)
def test_authorities_refuse_a_role_from_another_authority(
    pki: Path, tmp_path: Path, authority: str, party: Party
) -> None:
    authorities = TlsConfig.from_dir(pki, "csp", "csp").authorities()
    assert authorities is not None
    authorities.check((pki / f"{party.name}.crt").read_bytes(), party)  # the genuine one
    rogue = mint(pki, authority, party, tmp_path)
    assert rogue.cert is not None
    with pytest.raises(AccessDenied, match=f"not issued by the {AUTHORITY_OF[party.role]}'"):
        authorities.check(rogue.cert.read_bytes(), party)


def test_the_check_is_cheap(pki: Path) -> None:
    pem = (pki / "site-1.crt").read_bytes()
    party = Party("site-1", "owner")
    tls = TlsConfig.from_dir(pki, "csp", "csp")
    uncached = 0.0
    for _ in range(20):  # a fresh cache each time: parse and verify the signature
        fresh = tls.authorities()
        assert fresh is not None
        t0 = time.perf_counter()
        fresh.check(pem, party)
        uncached += (time.perf_counter() - t0) / 20
    authorities = Authorities({"owner": [cert(pki / "owners-ca.crt")]})
    authorities.check(pem, party)
    t0 = time.perf_counter()
    for _ in range(1000):
        authorities.check(pem, party)
    cached = (time.perf_counter() - t0) / 1000
    assert cached < 1e-4, f"{cached * 1e6:.1f} us per cached check"
    assert uncached < 5e-3, f"{uncached * 1e3:.2f} ms per uncached check"


class _Context:
    def __init__(self, pem: bytes) -> None:
        self._pem = pem

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_pem_cert": [self._pem]}

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return []


def test_require_role_refuses_when_no_server_bound_authorities(pki: Path) -> None:
    context = _Context((pki / "site-1.crt").read_bytes())
    with pytest.raises(AccessDenied, match="no certificate authorities"):
        require_role(context, "owner")


class _Who:
    """One method that answers with the caller's name, if `require_role` lets one of `roles`
    through (AccessDenied becomes PERMISSION_DENIED, as in every service)."""

    def __init__(self, roles: tuple[str, ...]) -> None:
        self.roles = roles

    @rpc_method
    def Who(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        return require_role(context, *self.roles).name.encode()


@contextlib.contextmanager
def who_server(tls: TlsConfig, roles: tuple[str, ...] = ("owner", "analyst")) -> Iterator[str]:
    server, port = make_server(tls, "127.0.0.1:0", workers=2)
    handler = grpc.unary_unary_rpc_method_handler(_Who(roles).Who)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {"Who": handler})])
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def call_who(tls: TlsConfig, address: str, peer: str = "csp") -> bytes:
    """Who, over a channel that expects the server to be `peer`."""
    with tls.channel(address, peer=peer) as channel:
        return channel.unary_unary("/t.T/Who")(b"", timeout=10)


def test_require_role_checks_the_issuer_over_tls(pki: Path, tmp_path: Path) -> None:
    with who_server(TlsConfig.from_dir(pki, "csp", "csp")) as address:
        assert call_who(TlsConfig.from_dir(pki, "site-1", "owner"), address) == b"site-1"
        assert call_who(TlsConfig.from_dir(pki, "analyst", "analyst"), address) == b"analyst"
        rogue = mint(pki, "aggregators", Party("site-1", "owner"), tmp_path / "owner")
        with pytest.raises(grpc.RpcError) as err:
            call_who(rogue, address)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert FOREIGN_OWNER in err.value.details()
        rogue = mint(pki, "owners", Party("analyst", "analyst"), tmp_path / "analyst")
        with pytest.raises(grpc.RpcError) as err:
            call_who(rogue, address)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "role analyst was not issued by the analysts' certificate" in err.value.details()


def test_require_role_refuses_a_csp_from_the_aggregators_authority(
    pki: Path, tmp_path: Path
) -> None:
    """The platform operator's CA cannot make a caller count as the CSP."""
    with who_server(TlsConfig.from_dir(pki, "aggregator", "aggregator"), ("csp",)) as address:
        genuine = TlsConfig.from_dir(pki, "csp", "csp")
        assert call_who(genuine, address, peer="aggregator") == b"csp"
        rogue = mint(pki, "aggregators", Party("csp", "csp"), tmp_path)
        with pytest.raises(grpc.RpcError) as err:
            call_who(rogue, address, peer="aggregator")
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert FOREIGN_CSP in err.value.details()


def test_insecure_servers_check_no_issuer() -> None:
    with who_server(TlsConfig.insecure_as("csp", "csp")) as address:
        assert call_who(TlsConfig.insecure_as("site-1", "owner"), address) == b"site-1"
        # without TLS nothing tells servers apart: the peer role is only checked for a typo
        owner = TlsConfig.insecure_as("site-1", "owner")
        assert call_who(owner, address, peer="aggregator") == b"site-1"
        with pytest.raises(ConfigError, match="unknown role"):
            owner.channel(address, peer="services")


# ---------------------------------------------------------------- the client checks the server


# Who serves: the party its certificate names and the authority that issued it.
SERVERS = {
    "genuine csp": (Party("csp", "csp"), "csps"),
    "csp minted by the aggregators' CA": (Party("csp", "csp"), "aggregators"),
    "csp minted by the owners' CA": (Party("csp", "csp"), "owners"),
    "genuine aggregator": (Party("aggregator", "aggregator"), "aggregators"),
    "aggregator minted by the csps' CA": (Party("aggregator", "aggregator"), "csps"),
    "genuine owner": (Party("site-1", "owner"), "owners"),
    "owner minted by the aggregators' CA": (Party("site-1", "owner"), "aggregators"),
}


@pytest.mark.parametrize("server", SERVERS)
def test_a_channel_trusts_only_the_authority_of_the_peer_it_dials(
    pki: Path, tmp_path: Path, server: str
) -> None:
    """Every server chains to the bundle, so it would pass a client that trusts the bundle; a
    channel to role R accepts it only if R's authority issued its certificate."""
    party, authority = SERVERS[server]
    served = mint(pki, authority, party, tmp_path)
    caller = TlsConfig.from_dir(pki, "analyst", "analyst")
    with who_server(served, ROLES) as address:
        for peer in ("csp", "aggregator", "owner"):
            if authority == AUTHORITY_OF[peer]:
                assert call_who(caller, address, peer=peer) == b"analyst", peer
                continue
            with pytest.raises(grpc.RpcError) as err:
                call_who(caller, address, peer=peer)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE, peer  # the handshake fails


def bundle_channel(tls: TlsConfig, address: str) -> grpc.Channel:
    """A channel that trusts the whole bundle `ca.crt`: what every client did before channels
    named their peer's role."""
    assert tls.ca is not None and tls.cert is not None and tls.key is not None
    creds = grpc.ssl_channel_credentials(
        root_certificates=tls.ca.read_bytes(),
        private_key=tls.key.read_bytes(),
        certificate_chain=tls.cert.read_bytes(),
    )
    return grpc.secure_channel(address, creds)


def test_an_owner_refuses_a_csp_minted_by_the_aggregators_authority(
    pki: Path, tmp_path: Path
) -> None:
    """The attack: the aggregator's operator mints a CSP certificate with its own CA and, given
    the owner's connection, serves as the CSP. The bundle would let it through; the owner's
    channel to the CSP does not."""
    owner = TlsConfig.from_dir(pki, "site-1", "owner")
    rogue = mint(pki, "aggregators", Party("csp", "csp"), tmp_path)
    with who_server(rogue) as address:
        with bundle_channel(owner, address) as channel:  # the rogue is a working server
            assert channel.unary_unary("/t.T/Who")(b"", timeout=10) == b"site-1"
        with pytest.raises(grpc.RpcError) as err:
            call_who(owner, address, peer="csp")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    with who_server(TlsConfig.from_dir(pki, "csp", "csp")) as address:
        assert call_who(owner, address, peer="csp") == b"site-1"


def test_a_single_ca_folder_still_makes_channels(tmp_path: Path) -> None:
    """The legacy layout (one CA in ca.crt) certifies every role, so every peer checks out."""
    ca_cert, ca_key = create_ca(tmp_path, "owners")
    (tmp_path / "owners-ca.crt").rename(tmp_path / "ca.crt")
    for party in (Party("site-1", "owner"), Party("csp", "csp")):
        issue(tmp_path, party, ca_cert, ca_key, [])
    with who_server(TlsConfig.from_dir(tmp_path, "csp", "csp")) as address:
        assert call_who(TlsConfig.from_dir(tmp_path, "site-1", "owner"), address) == b"site-1"


# ---------------------------------------------------------------- one custodian at a time


def certs(*argv: object) -> int:
    return main(["certs", *map(str, argv)])


# A party's ca.crt: the authorities of the peers it calls and of the callers it accepts.
EXPECTED_TRUST = {
    "owner": {"aggregators", "csps"},  # calls both, accepts the aggregator
    "analyst": {"aggregators", "csps"},  # calls both (the CSP for its public key)
    "aggregator": set(AUTHORITIES),  # calls the CSP and owners; owners, analysts call it
    "csp": {"owners", "analysts", "aggregators"},  # calls nobody
}


def test_custodians_build_working_party_folders(tmp_path: Path) -> None:
    """Each CA in its own folder; party folders get certificates only, and work over TLS."""
    for authority in AUTHORITIES:
        assert certs("ca", authority, "--out", tmp_path / authority) == 0
        key = tmp_path / authority / ca_file(authority, "key")
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    parties = {"site-1": "owner", "csp": "csp", "aggregator": "aggregator", "analyst": "analyst"}
    for name, role in parties.items():
        folder = tmp_path / name
        ca_dir = tmp_path / AUTHORITY_OF[role]
        issuing = ["--ca-dir", ca_dir, "--role", role, "--name", name, "--out", folder]
        assert certs("issue", *issuing) == 0
        args = [x for a in AUTHORITIES for x in (f"--{a}-ca", tmp_path / a / ca_file(a))]
        assert certs("bundle", "--role", role, *args, "--out", folder) == 0
        files = {p.name for p in folder.iterdir()}
        assert files == {"ca.crt", f"{name}.crt", f"{name}.key", *(ca_file(a) for a in AUTHORITIES)}
        assert stat.S_IMODE((folder / f"{name}.key").stat().st_mode) == 0o600
        bundle = x509.load_pem_x509_certificates((folder / "ca.crt").read_bytes())
        trusted = {a for a in AUTHORITIES if cert(tmp_path / a / ca_file(a)) in bundle}
        assert trusted == EXPECTED_TRUST[role] == set(TLS_TRUST[role]), role

    def party(name: str) -> TlsConfig:
        return TlsConfig.from_dir(tmp_path / name, name, parties[name])

    # the assembled folders make every call of the protocol, each channel naming its peer
    calls = {"csp": ("site-1", "analyst", "aggregator"), "aggregator": ("site-1", "analyst")}
    calls["site-1"] = ("aggregator",)
    for server, callers in calls.items():
        with who_server(party(server), ROLES) as address:
            for caller in callers:
                assert call_who(party(caller), address, peer=parties[server]) == caller.encode()
    # and the checks hold there too: an owner minted by the platform operator's CA ...
    owner = party("site-1")
    with who_server(party("csp")) as address:
        minted = mint(tmp_path / "aggregators", "aggregators", owner.identity, tmp_path / "rogue")
        rogue = TlsConfig(owner.identity, owner.ca, minted.cert, minted.key)
        with pytest.raises(grpc.RpcError) as err:
            call_who(rogue, address)
        assert FOREIGN_OWNER in err.value.details()
    # ... and a CSP minted by it, which the owner's own folder refuses to take for the CSP
    csp = party("csp")
    minted = mint(tmp_path / "aggregators", "aggregators", csp.identity, tmp_path / "rogue-csp")
    with who_server(TlsConfig(csp.identity, csp.ca, minted.cert, minted.key)) as address:
        with pytest.raises(grpc.RpcError) as err:
            call_who(owner, address, peer="csp")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def test_custody_mistakes_are_refused(tmp_path: Path, capsys) -> None:
    for authority in AUTHORITIES:
        certs("ca", authority, "--out", tmp_path / authority)
    before = (tmp_path / "owners" / "owners-ca.key").read_bytes()
    assert certs("ca", "owners", "--out", tmp_path / "owners") == 2  # would orphan its certificates
    assert (tmp_path / "owners" / "owners-ca.key").read_bytes() == before
    # the aggregators' CA folder (the platform operator's) can issue neither a CSP nor an owner
    out = tmp_path / "x"
    for name, role in (("csp", "csp"), ("site-1", "owner")):
        issuing = ["--ca-dir", tmp_path / "aggregators", "--role", role, "--name", name]
        assert certs("issue", *issuing, "--out", out) == 2
        assert not (out / f"{name}.crt").exists()
    assert "csps-ca.crt not found" in capsys.readouterr().err
    # the aggregators' CA certificate passed as the CSPs' one
    aggregators_ca = tmp_path / "aggregators" / "aggregators-ca.crt"
    swapped = [x for a in AUTHORITIES for x in (f"--{a}-ca", tmp_path / a / ca_file(a))]
    swapped[swapped.index("--csps-ca") + 1] = aggregators_ca
    assert certs("bundle", "--role", "owner", *swapped, "--out", out) == 2
    assert "is not the csps' CA certificate" in capsys.readouterr().err
    one = cert(aggregators_ca)
    with pytest.raises(ConfigError, match="two authorities"):
        write_trust(out, {a: [one] for a in AUTHORITIES})
    with pytest.raises(ConfigError, match="missing CA certificate"):
        write_trust(out, {"owners": [one], "analysts": [one], "services": [one]})
    with pytest.raises(ConfigError, match="invalid site id"):
        issue_from(tmp_path / "owners", out, Party("../escape", "owner"), [])
    for reserved in ("csps-ca", "aggregators-ca"):
        with pytest.raises(ConfigError, match="invalid site id"):
            issue_from(tmp_path / "owners", out, Party(reserved, "owner"), [])
    assert certs("--out", out) == 2  # the one-folder form needs --owners


# ---------------------------------------------------------------- one machine, a folder per party


def test_per_party_form_keeps_the_ca_keys_out_of_every_party_folder(tmp_path: Path, capsys) -> None:
    """`certs --per-party` (docker compose): the CAs in out/authorities, and each party's folder
    as `issue` and `bundle` make it: its own key, its role's bundle, no CA key."""
    out = tmp_path / "certs"
    assert certs("--out", out, "--owners", "site-1,site-2", "--hosts", "h1", "--per-party") == 0
    assert "authorities holds every CA key" in capsys.readouterr().out
    parties = {
        "csp": "csp",
        "aggregator": "aggregator",
        "analyst": "analyst",
        "site-1": "owner",
        "site-2": "owner",
    }
    assert {p.name for p in out.iterdir()} == {"authorities", *parties}
    authorities = out / "authorities"
    assert stat.S_IMODE(authorities.stat().st_mode) == 0o700
    ca_files = {ca_file(a) for a in AUTHORITIES}
    assert {p.name for p in authorities.iterdir()} == {
        "ca.crt",
        *ca_files,
        *(ca_file(a, "key") for a in AUTHORITIES),
    }
    for authority in AUTHORITIES:
        assert stat.S_IMODE((authorities / ca_file(authority, "key")).stat().st_mode) == 0o600
    cas = {a: cert(authorities / ca_file(a)) for a in AUTHORITIES}
    assert set(x509.load_pem_x509_certificates((authorities / "ca.crt").read_bytes())) == set(
        cas.values()
    )
    for name, role in parties.items():
        folder = out / name
        expected = {"ca.crt", f"{name}.crt", f"{name}.key", *ca_files}
        assert {p.name for p in folder.iterdir()} == expected, name
        for path in folder.iterdir():
            assert (b"PRIVATE KEY" in path.read_bytes()) == (path.name == f"{name}.key"), path
        assert stat.S_IMODE((folder / f"{name}.key").stat().st_mode) == 0o600
        for authority in AUTHORITIES:
            assert (folder / ca_file(authority)).read_bytes() == (
                authorities / ca_file(authority)
            ).read_bytes()
        bundle = x509.load_pem_x509_certificates((folder / "ca.crt").read_bytes())
        assert {a for a, c in cas.items() if c in bundle} == EXPECTED_TRUST[role], name
        leaf = cert(folder / f"{name}.crt")
        assert [a for a, c in cas.items() if issued_by(leaf, c)] == [AUTHORITY_OF[role]], name
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert {name, "localhost", "h1"} <= set(sans.get_values_for_type(x509.DNSName))

    def party(name: str) -> TlsConfig:
        return TlsConfig.from_dir(out / name, name, parties[name])

    # every call of the protocol works between the folders, each holding only its own key
    calls = {
        "csp": ("site-1", "analyst", "aggregator"),
        "aggregator": ("site-1", "analyst", "aggregator"),
        "site-1": ("aggregator",),
    }
    for server, callers in calls.items():
        with who_server(party(server), ROLES) as address:
            for caller in callers:
                assert call_who(party(caller), address, peer=parties[server]) == caller.encode()
    # the authorities folder is a custodian's --ca-dir: it can certify one more site later
    issuing = ["--ca-dir", authorities, "--role", "owner", "--name", "site-3"]
    assert certs("issue", *issuing, "--out", out / "site-3") == 0
    assert issued_by(cert(out / "site-3" / "site-3.crt"), cas["owners"])


def test_per_party_form_refuses_what_would_mix_folders(tmp_path: Path, capsys) -> None:
    with pytest.raises(ConfigError, match="holds the CA keys"):
        create_pki(tmp_path / "a", ["site-1", "authorities"], per_party=True)
    assert not (tmp_path / "a").exists()
    assert certs("--per-party", "ca", "owners", "--out", tmp_path / "b") == 2
    assert "--per-party belongs to the one-folder form" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    # without --per-party, one folder as before
    create_pki(tmp_path / "c", ["site-1"])
    assert not (tmp_path / "c" / "authorities").exists()
    assert (tmp_path / "c" / "owners-ca.key").is_file()
