"""Owner configuration files, the private PKI and the encoding message checks."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from leteo_fed.config import load_owner_config
from leteo_fed.crypto.paillier import PublicKey
from leteo_fed.encoding.packing import make_layout
from leteo_fed.encoding.share import ShareEncoding, require_bound
from leteo_fed.errors import ConfigError, EncodingError, ProtocolError
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.protocols.moments_round import encoding as moments_encoding
from leteo_fed.transport.certs import (
    Party,
    check_site_id,
    create_ca,
    create_pki,
    issue,
    read_identity,
)
from leteo_fed.transport.messages import (
    encoding_from_proto,
    encoding_to_proto,
    public_key_from_proto,
    public_key_to_proto,
)
from leteo_fed.transport.roles import AUTHORITIES, authority_of, ca_file

VALID = """\
site_id = "site-1"
listen = "0.0.0.0:50061"
results_dir = "results"

[data]
path = "data/site-1.csv"
format = "csv"
label_column = "diagnosis"
engine = "numpy"

[peers]
aggregator = "aggregator:50052"
csp = "csp:50051"

[tls]
dir = "certs"
"""


def write_config(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "owner.toml"
    path.write_text(text)
    return path


# ------------------------------------------------------------------ owner config


def test_valid_config_resolves_paths_against_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "conf"
    path = write_config(conf_dir, VALID)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the cwd must not matter

    cfg = load_owner_config(path)
    assert cfg.site_id == "site-1"
    assert cfg.listen == "0.0.0.0:50061"
    assert cfg.advertise == cfg.listen  # defaults to listen
    assert cfg.data.path == str(conf_dir.resolve() / "data" / "site-1.csv")
    assert Path(cfg.data.path).is_absolute()
    assert cfg.data.format == "csv" and cfg.data.label_column == "diagnosis"
    assert cfg.data.engine == "numpy"
    assert cfg.aggregator == "aggregator:50052" and cfg.csp == "csp:50051"
    assert cfg.results_dir == conf_dir / "results"
    tls = cfg.tls
    assert tls.identity == Party("site-1", "owner") and not tls.insecure
    assert tls.ca == conf_dir / "certs" / "ca.crt"
    assert tls.cert == conf_dir / "certs" / "site-1.crt"
    assert tls.key == conf_dir / "certs" / "site-1.key"


def test_config_with_relative_config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_config(tmp_path / "conf", VALID)
    monkeypatch.chdir(tmp_path)
    cfg = load_owner_config(Path("conf") / "owner.toml")
    assert cfg.data.path == str((tmp_path / "conf" / "data" / "site-1.csv").resolve())


def test_config_keeps_uris_and_absolute_paths(tmp_path: Path) -> None:
    text = VALID.replace('path = "data/site-1.csv"', 'path = "s3a://bucket/site-1.parquet"')
    text = text.replace('engine = "numpy"', 'engine = "spark"')
    text = text.replace('listen = "0.0.0.0:50061"', 'listen = "0.0.0.0:1"\nadvertise = "h:1"')
    cfg = load_owner_config(write_config(tmp_path / "a", text))
    assert cfg.data.path == "s3a://bucket/site-1.parquet"
    assert cfg.advertise == "h:1"
    absolute = tmp_path / "abs" / "x.csv"
    text = VALID.replace('path = "data/site-1.csv"', f'path = "{absolute}"')
    assert load_owner_config(write_config(tmp_path / "b", text)).data.path == str(absolute)


def test_owner_modes(tmp_path: Path) -> None:
    """Outbound by default (listen optional, Health only); inbound needs listen."""
    outbound = load_owner_config(write_config(tmp_path / "a", _drop_line(VALID, "listen")))
    assert outbound.mode == "outbound" and outbound.outbound and outbound.listen == ""
    inbound = load_owner_config(write_config(tmp_path / "b", 'mode = "inbound"\n' + VALID))
    assert inbound.mode == "inbound" and not inbound.outbound
    assert inbound.listen == inbound.advertise == "0.0.0.0:50061"


def test_config_tls_variants(tmp_path: Path) -> None:
    text = VALID.replace('dir = "certs"', "insecure = true")
    cfg = load_owner_config(write_config(tmp_path / "a", text))
    assert cfg.tls.insecure and cfg.tls.identity == Party("site-1", "owner")
    text = VALID.replace('dir = "certs"', 'ca = "x/ca.pem"\ncert = "x/me.pem"\nkey = "x/me.key"')
    folder = tmp_path / "b"
    cfg = load_owner_config(write_config(folder, text))
    assert (cfg.tls.ca, cfg.tls.cert, cfg.tls.key) == (
        folder / "x/ca.pem",
        folder / "x/me.pem",
        folder / "x/me.key",
    )
    assert not cfg.tls.insecure


def _drop_line(text: str, prefix: str) -> str:
    lines = text.splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.startswith(prefix)]
    assert len(kept) == len(lines) - 1
    return "".join(kept)


def _drop_tls(text: str) -> str:
    return text.replace('[tls]\ndir = "certs"\n', "")


@pytest.mark.parametrize(
    ("text", "needle", "field"),
    [
        (VALID.replace('site_id = "site-1"', 'site_id = "site-1'), "TOML", None),
        (VALID + "\n[data]\npath = 'again'\n", "TOML", None),
        (_drop_line(VALID, "site_id"), "site_id", "site_id"),
        (_drop_line(VALID, "path ="), "data.path", "data.path"),
        (_drop_line('mode = "inbound"\n' + VALID, "listen"), "listen", "listen"),
        (VALID.replace('site_id = "site-1"', 'site_id = "site-1"\nmode = "both"'), "mode", "mode"),
        (_drop_line(VALID, "csp ="), "peers.csp", "peers.csp"),
        ("surprise = 1\n" + VALID, "surprise", "surprise"),
        (VALID.replace('engine = "numpy"', 'engine = "pandas"'), "data.engine", "data.engine"),
        (VALID.replace('site_id = "site-1"', 'site_id = "csp"'), "'csp'", "site_id"),
        (VALID.replace('site_id = "site-1"', 'site_id = "a b"'), "'a b'", "site_id"),
        (VALID.replace('site_id = "site-1"', "site_id = 7"), "site_id", "site_id"),
        (VALID.replace('path = "data/site-1.csv"', "path = 3"), "data.path", "data.path"),
        (_drop_tls(VALID), "[tls]", "tls"),
        (_drop_tls(VALID) + "[tls]\ncert = 'a.crt'\n", "[tls]", "tls"),
    ],
    ids=[
        "malformed",
        "duplicate-table",
        "missing-site-id",
        "missing-data-path",
        "inbound-missing-listen",
        "bad-mode",
        "missing-peer",
        "unknown-key",
        "bad-engine",
        "reserved-site-id",
        "space-in-site-id",
        "site-id-not-string",
        "path-not-string",
        "missing-tls",
        "incomplete-tls",
    ],
)
def test_config_errors_name_the_key(
    tmp_path: Path, text: str, needle: str, field: str | None
) -> None:
    with pytest.raises(ConfigError) as info:
        load_owner_config(write_config(tmp_path, text))
    assert needle in str(info.value)
    if field is not None:
        assert info.value.field == field


def test_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_owner_config(tmp_path / "absent.toml")


def test_config_refuses_non_boolean_insecure(tmp_path: Path) -> None:
    text = VALID.replace('dir = "certs"', 'dir = "certs"\ninsecure = "false"')
    try:
        cfg = load_owner_config(write_config(tmp_path, text))
    except ConfigError as exc:  # refusing the value is a correct outcome
        assert exc.field is not None and "insecure" in exc.field
    else:
        assert not cfg.tls.insecure, "TLS was disabled by insecure = 'false'"


def test_config_refuses_non_string_results_dir(tmp_path: Path) -> None:
    text = VALID.replace('results_dir = "results"', "results_dir = 5")
    with pytest.raises(ConfigError, match="results_dir"):
        load_owner_config(write_config(tmp_path, text))


@pytest.mark.parametrize("site", ["site-1", "a", "Site_2.eu", "x" * 64])
def test_check_site_id_accepts(site: str) -> None:
    check_site_id(site)


@pytest.mark.parametrize(
    "site", ["", "a b", "csp", "aggregator", "analyst", "ca", "x" * 65, "a/b", "a:b", "é\n"]
)
def test_check_site_id_refuses(site: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_site_id(site)
    assert info.value.field == "site_id"


# ------------------------------------------------------------------ PKI


OWNERS = ["site-1", "site-2"]
EXPECTED_PARTIES = [
    Party("csp", "csp"),
    Party("aggregator", "aggregator"),
    Party("analyst", "analyst"),
    Party("site-1", "owner"),
    Party("site-2", "owner"),
]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Party]]:
    out = tmp_path_factory.mktemp("pki")
    parties = create_pki(out, OWNERS, hosts=["node1.example", "10.0.0.5"])
    return out, parties


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_create_pki_files_and_modes(pki) -> None:
    out, parties = pki
    assert sorted(parties, key=lambda p: p.name) == sorted(EXPECTED_PARTIES, key=lambda p: p.name)
    names = {"ca.crt"} | {ca_file(a, ext) for a in AUTHORITIES for ext in ("crt", "key")}
    names |= {f"{p.name}.{ext}" for p in parties for ext in ("crt", "key")}
    assert {p.name for p in out.iterdir()} == names  # nothing else, no temp files
    for name in names:
        mode = stat.S_IMODE((out / name).stat().st_mode)
        if name.endswith(".key"):
            assert mode == 0o600, name
        else:
            assert mode & 0o400 and not mode & 0o022, name  # readable, not writable by others


def test_read_identity_from_each_certificate(pki) -> None:
    out, _ = pki
    for party in EXPECTED_PARTIES:
        assert read_identity((out / f"{party.name}.crt").read_bytes()) == party
    for authority in AUTHORITIES:
        ca_identity = read_identity((out / ca_file(authority)).read_bytes())
        assert ca_identity == Party(f"LETEO-Fed {authority} CA", authority)


def test_certificates_verify_against_ca(pki) -> None:
    out, _ = pki
    for authority in AUTHORITIES:
        ca = load_cert(out / ca_file(authority))
        ca.verify_directly_issued_by(ca)  # self-signed
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for party in EXPECTED_PARTIES:
        ca = load_cert(out / ca_file(authority_of(party.role)))
        cert = load_cert(out / f"{party.name}.crt")
        cert.verify_directly_issued_by(ca)
        assert cert.issuer == ca.subject
        assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = sans.get_values_for_type(x509.DNSName)
        ips = [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
        assert {party.name, "localhost", "node1.example"} <= set(dns)
        assert {"127.0.0.1", "10.0.0.5"} <= set(ips)
        cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert cn == party.name


def test_key_files_match_certificates(pki) -> None:
    out, _ = pki
    for name in [*(f"{a}-ca" for a in AUTHORITIES), *(p.name for p in EXPECTED_PARTIES)]:
        key = serialization.load_pem_private_key((out / f"{name}.key").read_bytes(), None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        cert = load_cert(out / f"{name}.crt")
        assert cert.public_key().public_numbers() == key.public_key().public_numbers()


def test_certificate_from_other_ca_does_not_verify(pki, tmp_path: Path) -> None:
    out, _ = pki
    other_cert, other_key = create_ca(tmp_path, "owners")
    issue(tmp_path, Party("site-1", "owner"), other_cert, other_key, [])
    rogue = load_cert(tmp_path / "site-1.crt")
    assert read_identity((tmp_path / "site-1.crt").read_bytes()) == Party("site-1", "owner")
    with pytest.raises(InvalidSignature):
        rogue.verify_directly_issued_by(load_cert(out / "owners-ca.crt"))


def test_pki_refuses_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        create_pki(tmp_path / "a", ["csp"])
    with pytest.raises(ConfigError):
        create_pki(tmp_path / "b", ["a b"])
    ca_cert, ca_key = create_ca(tmp_path / "c", "owners")
    with pytest.raises(ConfigError, match="role"):
        issue(tmp_path / "c", Party("x", "admin"), ca_cert, ca_key, [])


# ------------------------------------------------------------------ messages


@pytest.fixture(scope="module")
def encoding() -> ShareEncoding:
    return moments_encoding(
        scale_bits=24, value_bound=1000.0, max_rows_per_owner=10_000, max_owners=7
    )


def test_encoding_proto_round_trip(encoding: ShareEncoding) -> None:
    layout = encoding.layout(2048)
    wire = encoding_to_proto(encoding, layout).SerializeToString()
    enc2, layout2 = encoding_from_proto(pb.Encoding.FromString(wire), 2048)
    assert enc2 == encoding
    assert layout2 == layout
    # the layout is the one the parameters imply, independently computed
    assert layout == make_layout(2048, encoding.per_owner_bound(), 7, encoding.statistical_security)


@pytest.mark.parametrize(
    ("field", "delta"),
    [("slot_bits", 1), ("slot_bits", -1), ("slots_per_ciphertext", 1), ("mask_bits", -1)],
)
def test_encoding_from_proto_refuses_tampered_layout(
    encoding: ShareEncoding, field: str, delta: int
) -> None:
    msg = encoding_to_proto(encoding, encoding.layout(2048))
    setattr(msg, field, getattr(msg, field) + delta)
    with pytest.raises(ProtocolError):
        encoding_from_proto(msg, 2048)


def test_encoding_from_proto_refuses_tampered_offset_and_key_size(encoding: ShareEncoding) -> None:
    layout = encoding.layout(2048)
    msg = encoding_to_proto(encoding, layout)
    msg.slot_offset = (layout.offset - 1).to_bytes(32, "big")
    # a forged offset gives a consistent layout, but not the bound the parameters imply:
    # the owner recomputes that bound and refuses before computing anything
    forged, _ = encoding_from_proto(msg, 2048)
    with pytest.raises(ProtocolError, match="slot offset does not follow"):
        require_bound(forged, encoding.data_bound)
    # the same message read against a different key size implies a different layout
    with pytest.raises(ProtocolError):
        encoding_from_proto(encoding_to_proto(encoding, layout), 3072)


def test_encoding_from_proto_refuses_bad_parameters(encoding: ShareEncoding) -> None:
    msg = encoding_to_proto(encoding, encoding.layout(2048))
    msg.scale_bits = 100
    with pytest.raises(EncodingError):
        encoding_from_proto(msg, 2048)


@pytest.mark.insecure_small_key
def test_public_key_proto_round_trip_and_tamper() -> None:
    n = (2**127 - 1) * (2**89 - 1)  # any odd composite will do for framing
    key = PublicKey(n)
    msg = pb.PublicKey.FromString(public_key_to_proto(key).SerializeToString())
    assert public_key_from_proto(msg) == key
    msg.key_id = "0" * 32
    with pytest.raises(ProtocolError):
        public_key_from_proto(msg)
    msg = public_key_to_proto(key)
    msg.bits += 1
    with pytest.raises(ProtocolError):
        public_key_from_proto(msg)


def test_owner_randomizer(tmp_path: Path) -> None:
    assert load_owner_config(write_config(tmp_path / "a", VALID)).randomizer == "short-exponent"
    text = VALID + '\n[crypto]\nrandomizer = "fixed-base"\n'
    assert load_owner_config(write_config(tmp_path / "b", text)).randomizer == "fixed-base"
    for bad, field in (
        ('randomizer = "textbook"', "crypto.randomizer"),
        ("speed = 1", "crypto.speed"),
    ):
        with pytest.raises(ConfigError) as err:
            load_owner_config(write_config(tmp_path / "c", VALID + f"\n[crypto]\n{bad}\n"))
        assert err.value.field == field
