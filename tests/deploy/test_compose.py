"""Static checks of the docker compose deployment: docker-compose.yml, Dockerfile, deploy/compose/.

No Docker engine is needed: the compose file is parsed with PyYAML and every piece is checked
against the CLI parser, the owner-config loader and the other services it has to agree with.
Each check runs on both variants: the single CSP (docker-compose.yml) and the threshold key
holders (docker-compose.yml merged with deploy/compose/threshold.yml as compose merges them).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import tomllib

from leteo_fed.cli.main import build_parser
from leteo_fed.config import load_owner_config
from leteo_fed.transport.certs import AUTHORITIES_DIR

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DEPLOY = REPO / "deploy" / "compose"
THRESHOLD_FILE = DEPLOY / "threshold.yml"
DOCKERFILE = REPO / "Dockerfile"
SITES = ["site-1", "site-2", "site-3"]
KEYHOLDERS = ["keyholder-1", "keyholder-2", "keyholder-3"]
SINGLE, THRESHOLD = "single-csp", "threshold"
VARIANTS = {SINGLE: [COMPOSE_FILE], THRESHOLD: [COMPOSE_FILE, THRESHOLD_FILE]}
ENABLED_PROFILES = {"tools"}  # the analyst's: `run --rm analyst` enables it


# ---------------------------------------------------------------------------- compose files


class Override:
    """A value tagged `!override`: it replaces the earlier files' instead of merging."""

    def __init__(self, value):
        self.value = value


class Reset:
    """A value tagged `!reset`: it removes the earlier files' key."""


class ComposeLoader(yaml.SafeLoader):
    pass


def _override(loader, node):
    if isinstance(node, yaml.MappingNode):
        return Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Override(loader.construct_sequence(node, deep=True))
    return Override(loader.construct_scalar(node))


ComposeLoader.add_constructor("!override", _override)
ComposeLoader.add_constructor("!reset", lambda loader, node: Reset())

REPLACED = {"command", "entrypoint", "test"}  # merged by replacing (compose's merge rules)
UNIQUE_BY_TARGET = {"volumes", "ports"}  # sequences whose entries replace by their target


def _mount_target(entry) -> str:
    if isinstance(entry, dict):
        return str(entry.get("target"))
    parts = str(entry).split(":")
    return parts[1] if len(parts) > 1 else parts[0]


def _normal(key: str, value):
    """The long form of the keys whose short form merges differently."""
    if key == "depends_on" and isinstance(value, list):
        return {name: {"condition": "service_started"} for name in value}
    if key == "environment" and isinstance(value, list):
        return dict(item.split("=", 1) if "=" in item else (item, None) for item in value)
    return value


def merge(base, override, key: str = ""):
    """`override` merged into `base` by the compose specification's rules: mappings merge,
    sequences append, command/entrypoint/healthcheck.test are replaced, volumes and ports are
    unique by their target, `!override` replaces and `!reset` removes."""
    if isinstance(override, Override):
        return _normal(key, copy.deepcopy(override.value))
    base, override = _normal(key, base), _normal(key, override)
    if key in REPLACED or not isinstance(base, (dict, list)) or type(base) is not type(override):
        return copy.deepcopy(override)
    if isinstance(base, dict):
        out = copy.deepcopy(base)
        for k, v in override.items():
            if isinstance(v, Reset):
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = merge(None, v, k) if isinstance(v, Override) else _plain(k, v)
        return out
    if key in UNIQUE_BY_TARGET:
        targets = {_mount_target(e) for e in override}
        return [e for e in base if _mount_target(e) not in targets] + copy.deepcopy(override)
    return copy.deepcopy(base) + copy.deepcopy(override)


def _plain(key: str, value):
    """A new value (no earlier one): its tags resolved as if merged into nothing."""
    if isinstance(value, Reset):
        return None
    if isinstance(value, Override):
        return _normal(key, value.value)
    if isinstance(value, dict):
        return {k: _plain(k, v) for k, v in _normal(key, value).items() if not isinstance(v, Reset)}
    return copy.deepcopy(_normal(key, value))


def load_compose(files: list[Path]) -> dict:
    """The compose files merged in order, as `docker compose -f A -f B` merges them (anchors
    are each file's own)."""
    merged = None
    for path in files:
        doc = yaml.load(path.read_text(), Loader=ComposeLoader)
        merged = _plain("", doc) if merged is None else merge(merged, doc)
    return merged


def enabled(all_services: dict) -> dict:
    """The services `up` (and `run analyst`) start: no profile, or an enabled one."""
    return {
        name: svc
        for name, svc in all_services.items()
        if not svc.get("profiles") or ENABLED_PROFILES & set(svc["profiles"])
    }


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def compose(variant) -> dict:
    return load_compose(VARIANTS[variant])


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return enabled(compose["services"])


def parse_cli(command: list[str]):
    """The CLI arguments of a service, parsed exactly as `leteo-fed` would; fails on errors."""
    assert isinstance(command, list), f"command must be a list of CLI arguments: {command!r}"
    assert all(isinstance(a, str) for a in command), f"non-string argument in {command!r}"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(command)
    except SystemExit as exc:
        pytest.fail(
            f"`leteo-fed {' '.join(command)}` does not parse: {err.getvalue().strip()} ({exc})"
        )


def mounts(service: dict) -> list[tuple[str, str, str, bool]]:
    """(kind, source, target, read_only) for each entry of a service's `volumes`."""
    out = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            kind, source, target = entry["type"], entry.get("source", ""), entry["target"]
            out.append((kind, source, target, bool(entry.get("read_only", False))))
            continue
        parts = entry.split(":")
        assert 2 <= len(parts) <= 3, f"unexpected volume syntax {entry!r}"
        source, target = parts[0], parts[1]
        mode = parts[2] if len(parts) == 3 else "rw"
        kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        out.append((kind, source, target, "ro" in mode.split(",")))
    return out


def host_path(service: dict, container_path: str) -> Path | None:
    """The repository file behind a path inside the container, via the service's bind mounts."""
    p = PurePosixPath(container_path)
    for kind, source, target, _ in mounts(service):
        t = PurePosixPath(target)
        if kind == "bind" and (p == t or t in p.parents):
            return (REPO / source / p.relative_to(t)).resolve()
    return None


def named_volume_at(service: dict, container_dir: str | Path) -> str | None:
    d = PurePosixPath(str(container_dir))
    for kind, source, target, _ in mounts(service):
        t = PurePosixPath(target)
        if kind == "volume" and (d == t or t in d.parents):
            return source
    return None


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    assert host and port.isdigit(), f"not host:port: {address!r}"
    return host, int(port)


def owner_services(services: dict) -> dict[str, dict]:
    return {
        name: svc
        for name, svc in services.items()
        if isinstance(svc.get("command"), list) and svc["command"][:2] == ["owner", "serve"]
    }


def owner_config(service: dict):
    args = parse_cli(service["command"])
    path = host_path(service, str(args.config))
    assert path is not None, f"--config {args.config} is not bind-mounted into the service"
    assert path.is_file(), f"owner config {path} does not exist"
    return load_owner_config(path)


def listen_port(services: dict, name: str) -> int:
    args = parse_cli(services[name]["command"])
    return split_address(args.listen)[1]


def csv_header(path: Path) -> list[str]:
    with path.open(newline="") as fh:
        return next(csv.reader(fh))


# ---------------------------------------------------------------------------- compose file


def decryptors(variant: str) -> list[str]:
    """The services that decrypt in a variant."""
    return ["csp"] if variant == SINGLE else KEYHOLDERS


def test_compose_file_shape(compose, services, variant):
    assert "version" not in compose, "the compose spec has no top-level `version:`"
    up = ["certs", "aggregator", *SITES, *decryptors(variant)]
    if variant == THRESHOLD:
        up.append("keys")
    assert set(services) == {*up, "analyst"}, f"services: {sorted(services)}"
    assert services["analyst"].get("profiles") == ["tools"]
    for name in up:
        assert not services[name].get("profiles"), f"{name} must start with a plain `up`"
    assert "50052:50052" in [str(p) for p in services["aggregator"].get("ports", [])]
    if variant == THRESHOLD:  # the CSP is defined (the root file's) but not started
        assert compose["services"]["csp"].get("profiles"), "the csp must not start"
        assert not ENABLED_PROFILES & set(compose["services"]["csp"]["profiles"])


def test_every_command_parses_with_the_cli(services, variant):
    with_command = {name: svc for name, svc in services.items() if "command" in svc}
    assert set(with_command) == set(services), "every service runs a leteo-fed command"
    commands = {name: parse_cli(svc["command"]) for name, svc in with_command.items()}
    assert commands["certs"].command == "certs"
    assert commands["aggregator"].command == "aggregator"
    assert commands["analyst"].command == "pca"
    for site in SITES:
        assert commands[site].command == "owner"
    if variant == SINGLE:
        assert commands["csp"].command == "csp"
        return
    assert (commands["keys"].command, commands["keys"].action) == ("keys", "deal")
    for holder in KEYHOLDERS:
        args = commands[holder]
        assert (args.command, args.action, args.name) == ("keyholder", "serve", holder)


def test_every_service_uses_the_one_image(services):
    images = set()
    for name, svc in services.items():
        build = svc.get("build")
        context = build if isinstance(build, str) else (build or {}).get("context")
        assert context == ".", f"{name} must build from the repository's Dockerfile"
        if isinstance(build, dict):
            assert build.get("dockerfile", "Dockerfile") == "Dockerfile"
        images.add(svc.get("image"))
    assert len(images) == 1 and None not in images, f"one shared image name, got {images}"


def test_entrypoints_end_in_leteo_fed(services):
    """The image's ENTRYPOINT is leteo-fed; an override must still hand `command` to it."""
    for name, svc in services.items():
        entry = svc.get("entrypoint")
        if entry is None:
            continue
        assert entry[:2] == ["sh", "-c"], f"{name}: unexpected entrypoint {entry!r}"
        assert 'leteo-fed "$$@"' in entry[2], (
            f"{name}: entrypoint must run leteo-fed with the command"
        )


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_certs_entrypoint_runs_once(services, variant, tmp_path):
    """The guard runs `leteo-fed certs ...` into empty volumes and skips it afterwards; each
    run hands the party folders to the services' user and keeps the CA keys root's."""
    svc = services["certs"]
    args = parse_cli(svc["command"])
    script = svc["entrypoint"][2].replace("$$", "$")  # compose's escape for a literal `$`
    marker = f"{args.out}/{AUTHORITIES_DIR}/ca.crt"  # what `certs --per-party` writes last
    assert f"test -s {marker} ||" in script, "the guard must look for the file written last"
    assert svc.get("user") in {"root", "0", "0:0"}, "fresh volumes are root's: write as root"
    certs = tmp_path / "certs"
    for folder in certs_folders(services):  # the volumes' mount points
        (certs / folder).mkdir(parents=True)
    script = script.replace(str(args.out), str(certs))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.txt"
    chowns = tmp_path / "chown.txt"
    fake = bindir / "leteo-fed"
    marker_file = certs / AUTHORITIES_DIR / "ca.crt"
    # writes each party's certificate, then the marker (last, as `certs --per-party`)
    parties = [f for f in certs_folders(services) if f != AUTHORITIES_DIR]
    writes = "".join(f'echo x > "{certs / p / p}.crt"\n' for p in parties)
    fake.write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\n{writes}echo x > "{marker_file}"\n'
    )
    fake.chmod(0o755)
    (bindir / "chown").write_text(f'#!/bin/sh\necho "$@" >> "{chowns}"\n')
    (bindir / "chown").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    argv = ["sh", "-c", script, *svc["entrypoint"][3:], *svc["command"]]
    subprocess.run(argv, env=env, check=True)
    assert log.read_text().splitlines() == svc["command"]
    expected = [f"-R leteo:leteo {certs}", f"-R root:root {certs / AUTHORITIES_DIR}"]
    assert chowns.read_text().splitlines() == expected, "the CA keys must end up root's"
    subprocess.run(argv, env=env, check=True)
    assert log.read_text().splitlines() == svc["command"], "second run must not remake the CAs"
    assert chowns.read_text().splitlines() == expected * 2
    # a failed `leteo-fed certs` fails the job (and the services that wait for it)
    marker_file.unlink()
    fake.write_text("#!/bin/sh\nexit 3\n")
    assert subprocess.run(argv, env=env).returncode == 3
    assert chowns.read_text().splitlines() == expected * 2
    if variant == THRESHOLD:
        # certificates made by the single-CSP deployment (none for the key holders): the job
        # fails, saying so, instead of leaving the holders without a certificate
        marker_file.write_text("x")
        for holder in KEYHOLDERS:
            (certs / holder / f"{holder}.crt").unlink()
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        assert done.returncode == 1 and "without key holders" in done.stderr
        assert "down -v" in done.stderr
        assert chowns.read_text().splitlines() == expected * 2


def test_bind_mounts_exist_and_named_volumes_are_declared(compose):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in compose["services"].items():  # started or not
        for kind, source, target, _read_only in mounts(svc):
            assert target.startswith("/"), f"{name}: container path {target!r} must be absolute"
            if kind == "bind":
                assert not Path(source).is_absolute(), (
                    f"{name}: bind {source} must be repo-relative"
                )
                assert (REPO / source).exists(), f"{name}: bind-mounted {source} is not in the repo"
            else:
                assert source in declared, f"{name}: named volume {source!r} is not declared"
                used.add(source)
    assert declared == used, f"declared but unused volumes: {sorted(declared - used)}"


def test_depends_on_names_real_services(services):
    """Every dependency is a service that starts: compose refuses to wait for one that a
    profile keeps from starting (and podman-compose fails on it)."""
    for name, svc in services.items():
        deps = svc.get("depends_on", {})
        for dep in deps:
            assert dep in services, f"{name} depends on {dep!r}, which is not started"
            assert dep != name
        if isinstance(deps, dict):
            for dep, spec in deps.items():
                if spec.get("condition") == "service_healthy":
                    assert "healthcheck" in services[dep], (
                        f"{name} waits for {dep}'s missing healthcheck"
                    )


def certs_folders(services: dict) -> dict[str, str]:
    """The folders `certs --per-party` writes, by name (`authorities`, `csp`, `site-1`, ...),
    each with the named volume the certs job mounts there."""
    svc = services["certs"]
    args = parse_cli(svc["command"])
    assert args.per_party, "the certs job must give every party its own folder (--per-party)"
    out = PurePosixPath(str(args.out))
    folders = {}
    for kind, source, target, read_only in mounts(svc):
        t = PurePosixPath(target)
        assert kind == "volume" and t.parent == out, f"certs: unexpected mount {target}"
        assert not read_only, "the certs job must be able to write its volumes"
        folders[t.name] = source
    assert len(set(folders.values())) == len(folders), "one volume per folder"
    return folders


ROLE_OF_COMMAND = {
    "csp": "csp",
    "keyholder": "keyholder",
    "aggregator": "aggregator",
    "pca": "analyst",
    "owner": "owner",
}
NO_TLS = {"certs", "keys"}  # one-shot jobs that dial nobody (the certs job writes the folders)


def tls_identity(name: str, svc: dict) -> tuple[str, str, list[str]]:
    """The party a service runs as, its role, and its certificate files in the container."""
    args = parse_cli(svc["command"])
    role = ROLE_OF_COMMAND[args.command]
    if hasattr(args, "tls_dir"):
        assert not args.insecure, f"{name} must use mTLS"
        d = PurePosixPath(str(args.tls_dir))
        files = [d / "ca.crt", d / f"{args.name}.crt", d / f"{args.name}.key"]
        return args.name, role, [str(f) for f in files]
    config = owner_config(svc)
    return config.site_id, role, [str(config.tls.ca), str(config.tls.cert), str(config.tls.key)]


def waits_for_certs(services: dict, name: str) -> bool:
    """Whether `name` starts only once the certs job has completed: it waits for that itself,
    or for a service that does (compose starts a service after its dependencies)."""
    deps = services[name].get("depends_on", {})
    assert isinstance(deps, dict), f"{name}: depends_on needs conditions"
    if deps.get("certs", {}).get("condition") == "service_completed_successfully":
        return True
    return any(waits_for_certs(services, dep) for dep in deps if dep != "certs")


def test_each_service_mounts_only_its_own_certificates(compose, services):
    """No service can read a CA key or another party's key: each mounts one folder, its own."""
    folders = certs_folders(services)
    assert AUTHORITIES_DIR in folders, "the CA keys need a folder of their own"
    for name, svc in services.items():
        if name in NO_TLS:
            if name != "certs":
                assert not {src for _, src, _, _ in mounts(svc)} & set(folders.values()), (
                    f"{name} dials nobody: it must mount no certificates"
                )
            continue
        party, _role, paths = tls_identity(name, svc)
        assert party in folders, f"{name}: the certs job writes no folder for {party}"
        for path in paths:
            assert named_volume_at(svc, path) == folders[party], (
                f"{name}: {path} is not in its own certificate volume {folders[party]}"
            )
        certificate_volumes = [
            (source, read_only)
            for _kind, source, _, read_only in mounts(svc)
            if source in folders.values()
        ]
        assert certificate_volumes == [(folders[party], True)], (
            f"{name} must mount its own certificates read-only, and no one else's"
        )
        assert waits_for_certs(services, name), f"{name} may start before its certificates"
    # every folder is some service's (the csp's also when a profile keeps it from starting)
    used = {tls_identity(n, s)[0] for n, s in compose["services"].items() if n not in NO_TLS}
    assert set(folders) == {AUTHORITIES_DIR, *used}, "a certificate folder no service uses"


def test_certs_job_writes_what_each_service_reads(services, variant, tmp_path):
    """The certs job's command, run for real into a folder per volume: every service finds its
    certificate files there, its folder holds no CA key and no other party's key, and the
    channels it opens load from that folder alone (the calls themselves are tested in
    tests/leteo_fed/transport/test_certificate_authorities.py)."""
    from leteo_fed.cli.main import main
    from leteo_fed.transport.grpc_io import TlsConfig

    command = list(services["certs"]["command"])
    out = command.index("--out") + 1
    command[out] = str(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(command) == 0
    folders = certs_folders(services)
    assert {p.name for p in tmp_path.iterdir()} == set(folders)
    assert any(p.name.endswith("-ca.key") for p in (tmp_path / AUTHORITIES_DIR).iterdir())
    tls = {}
    for name, svc in services.items():
        if name in NO_TLS:
            continue
        party, role, paths = tls_identity(name, svc)
        folder = tmp_path / party
        for path in paths:
            assert (folder / PurePosixPath(path).relative_to("/certs")).is_file(), path
        keys = sorted(p.name for p in folder.iterdir() if b"PRIVATE KEY" in p.read_bytes())
        assert keys == [f"{party}.key"], f"{name} could read {keys}"
        tls[name] = TlsConfig.from_dir(folder, party, role)
        assert tls[name].authorities() is not None
    # the channels each service opens load from its own folder alone
    decrypts = "csp" if variant == SINGLE else "keyholder"
    calls = {
        "aggregator": (decrypts, "owner"),
        "site-1": ("aggregator", decrypts),
        "analyst": ("aggregator",),
    }
    for caller, peers in calls.items():
        for peer in peers:
            tls[caller].channel("localhost:1", peer=peer).close()


def test_certs_cover_every_party(compose, services, variant):
    args = parse_cli(services["certs"]["command"])
    owners = owner_services(services)
    assert sorted(owners) == SITES
    assert sorted(args.owners) == sorted(owners), "certs --owners must match the owner services"
    for name, svc in owners.items():
        assert owner_config(svc).site_id == name
    holders = [n for n, s in services.items() if parse_cli(s["command"]).command == "keyholder"]
    assert args.keyholders == len(holders), "certs --keyholders must match the key holders"
    assert sorted(holders) == ([] if variant == SINGLE else KEYHOLDERS)
    # every name a peer dials must be in the certificates (server-name check under mTLS)
    assert {"aggregator", *owners, *decryptors(variant)} <= set(args.hosts)
    assert set(args.hosts) <= set(compose["services"]), "--hosts should only name services"


def test_server_addresses_agree(services, variant):
    agg_args = parse_cli(services["aggregator"]["command"])
    assert split_address(agg_args.listen)[0] == "0.0.0.0"
    for name in decryptors(variant):
        assert split_address(parse_cli(services[name]["command"]).listen)[0] == "0.0.0.0"
    if variant == SINGLE:
        assert split_address(agg_args.csp) == ("csp", listen_port(services, "csp"))
        assert not getattr(agg_args, "keyholders", None)
    else:  # every holder, each at its service's port
        assert [split_address(a) for a in agg_args.keyholders] == [
            (h, listen_port(services, h)) for h in KEYHOLDERS
        ]
    analyst = parse_cli(services["analyst"]["command"])
    assert split_address(analyst.aggregator) == ("aggregator", listen_port(services, "aggregator"))
    assert analyst.name == "analyst"
    assert host_path(services["analyst"], str(analyst.out)) is not None, (
        "analyst --out is not bind-mounted"
    )


def config_keyholders(config):
    return getattr(config, "keyholders", None)


@pytest.mark.parametrize("site", SITES)
def test_owner_config_matches_compose(services, variant, site):
    svc = services[site]
    config = owner_config(svc)
    assert config.site_id == site
    # outbound: the site connects out to the aggregator and serves no port (its probe port is
    # the health-only loopback one), and its service publishes and exposes no port
    assert config.mode == "outbound"
    assert not config.listen, "an outbound owner serves no gRPC port"
    assert not svc.get("ports") and not svc.get("expose"), f"{site} must publish no port"
    assert split_address(config.aggregator) == ("aggregator", listen_port(services, "aggregator"))
    if variant == SINGLE:
        assert split_address(config.csp) == ("csp", listen_port(services, "csp"))
        assert config_keyholders(config) is None
    else:  # every holder, and the threshold the keys job deals
        assert not config.csp
        deal = parse_cli(services["keys"]["command"])
        held = config_keyholders(config)
        assert [split_address(a) for a in held.addresses] == [
            (h, listen_port(services, h)) for h in KEYHOLDERS
        ]
        assert (held.holders, held.threshold) == (deal.holders, deal.threshold)
    assert not config.tls.insecure
    assert PurePosixPath(str(config.tls.cert)).name == f"{site}.crt"
    assert PurePosixPath(str(config.tls.key)).name == f"{site}.key"
    assert PurePosixPath(str(config.tls.ca)).name == "ca.crt"
    # the data file is bind-mounted read-only and is in the repository
    data = host_path(svc, config.data.path)
    assert data is not None, f"{config.data.path} is not bind-mounted into {site}"
    assert data.is_file(), f"{data} does not exist"
    for kind, _source, target, read_only in mounts(svc):
        if kind == "bind" and PurePosixPath(target) in PurePosixPath(config.data.path).parents:
            assert read_only, f"{site}: data must be mounted read-only"
    if config.data.label_column:
        assert config.data.label_column in csv_header(data)


@pytest.mark.parametrize("folder", [DEPLOY, DEPLOY / "threshold"], ids=[SINGLE, THRESHOLD])
def test_owner_config_files_are_plain_toml(folder):
    for site in SITES:
        doc = tomllib.loads((folder / f"{site}.toml").read_text())
        assert doc["site_id"] == site
        assert {"ca", "cert", "key"} <= set(doc["tls"])
        for key in ("ca", "cert", "key"):
            assert doc["tls"][key].startswith("/certs/"), (
                "cert paths must be absolute in the container"
            )
        if folder == DEPLOY:
            assert "csp" in doc["peers"] and "keyholders" not in doc
            continue
        # the threshold variant's: the single-CSP file but for [keyholders] instead of peers.csp
        assert "csp" not in doc["peers"]
        assert doc["keyholders"]["addresses"] == [f"{h}:50061" for h in KEYHOLDERS]
        single = tomllib.loads((DEPLOY / f"{site}.toml").read_text())
        del single["peers"]["csp"], doc["keyholders"]
        assert doc == single, f"threshold/{site}.toml differs from {site}.toml elsewhere"


def test_healthchecks_are_standard_grpc_health_probes_of_the_loopback_port(services):
    """Every long-running service has a healthcheck, and it is `leteo-fed health` against the
    health-only port the service opens on its container's loopback (LETEO_HEALTH_LISTEN)."""
    from leteo_fed.cli.main import build_parser

    for name, svc in services.items():
        if svc.get("restart") == "no":  # one-shot jobs (certs, analyst)
            continue
        test = svc["healthcheck"]["test"]
        assert test[:3] == ["CMD", "leteo-fed", "health"], f"{name}: unexpected {test!r}"
        probe = build_parser().parse_args(test[2:])
        listen = svc["environment"]["LETEO_HEALTH_LISTEN"]
        assert probe.address == listen, f"{name}: the probe does not hit its health port"
        assert split_address(listen)[0] == "127.0.0.1", f"{name}: health port off loopback"
        assert probe.tls_dir is None  # plaintext: the port serves Health only


def test_every_service_serves_metrics_on_its_loopback(services, monkeypatch):
    """Every long-running service sets LETEO_METRICS_LISTEN (its own `environment` replaces the
    anchor's, as the CSP's does): a loopback address its `serve` command takes as --metrics."""
    for name, svc in services.items():
        if svc.get("restart") == "no":  # one-shot jobs (certs, analyst)
            continue
        listen = svc["environment"].get("LETEO_METRICS_LISTEN")
        assert listen, f"{name}: no LETEO_METRICS_LISTEN"
        assert split_address(listen)[0] == "127.0.0.1", f"{name}: metrics port off loopback"
        assert listen != svc["environment"]["LETEO_HEALTH_LISTEN"], f"{name}: one port twice"
        monkeypatch.setenv("LETEO_METRICS_LISTEN", listen)
        assert parse_cli(svc["command"]).metrics == listen, name


def test_the_health_probe_exits_0_only_while_serving():
    """The compose probe against a real health-only port: 0 while SERVING, 1 when draining
    or when nothing answers."""
    from leteo_fed.demo.ports import free_port
    from leteo_fed.transport.health import ServiceHealth

    address = f"127.0.0.1:{free_port()}"
    health = ServiceHealth(["leteo.v1.Aggregator"])
    health.serve_probes(address)
    probe = [sys.executable, "-m", "leteo_fed", "health", address, "--timeout", "2"]
    try:
        assert subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
        health.drain()
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        assert done.returncode == 1 and "NOT_SERVING" in done.stdout
    finally:
        health.close()
    assert subprocess.run(probe, capture_output=True, timeout=30).returncode == 1


def test_analyst_features_exist_at_every_site(services):
    args = parse_cli(services["analyst"]["command"])
    assert args.min_owners <= len(SITES)
    for site in SITES:
        data = host_path(services[site], owner_config(services[site]).data.path)
        header = csv_header(data)
        # a generated command keeps its request's fields as request_<field>
        missing = [f for f in args.request_features if f not in header]
        assert not missing, f"{site}: analyst features missing from {data.name}: {missing}"


# ---------------------------------------------------------------------------- threshold variant


@pytest.fixture(scope="module")
def threshold_services() -> dict:
    return enabled(load_compose(VARIANTS[THRESHOLD])["services"])


def test_threshold_variant_overrides_only_what_it_must():
    """deploy/compose/threshold.yml is an override of docker-compose.yml: the services both
    define are the root file's but for the key holders' changes."""
    single = load_compose(VARIANTS[SINGLE])["services"]
    merged = load_compose(VARIANTS[THRESHOLD])["services"]
    assert set(merged) == {*single, "keys", *KEYHOLDERS}
    changed = {n for n in single if merged[n] != single[n]}
    assert changed == {"certs", "csp", "aggregator", *SITES}
    assert merged["csp"] == {**single["csp"], "profiles": merged["csp"]["profiles"]}
    for site in SITES:  # the config file alone
        assert {**merged[site], "volumes": single[site]["volumes"]} == single[site]
        diff = set(merged[site]["volumes"]) ^ set(single[site]["volumes"])
        assert diff == {
            f"./deploy/compose/{site}.toml:/config/{site}.toml:ro",
            f"./deploy/compose/threshold/{site}.toml:/config/{site}.toml:ro",
        }
    keep = ("environment", "ports", "volumes", "healthcheck", "image", "build", "restart")
    for key in keep:
        assert merged["aggregator"].get(key) == single["aggregator"].get(key), key
    assert set(merged["aggregator"]["depends_on"]) == set(KEYHOLDERS)


def test_each_keyholder_mounts_only_its_own_volumes(threshold_services):
    """Holder N mounts its own certificates (read-only) and its own key volume, nobody else's;
    besides it only the dealer (`keys`) mounts that key volume, which holds no certificate."""
    services = threshold_services
    deal = parse_cli(services["keys"]["command"])
    assert (deal.holders, deal.threshold) == (len(KEYHOLDERS), 2)
    assert "--key-bits" not in services["keys"]["command"], "the default, 2048-bit, key"
    key_volumes = {}
    for holder in KEYHOLDERS:
        svc = services[holder]
        args = parse_cli(svc["command"])
        volume = named_volume_at(svc, args.key_dir)
        assert volume == f"{holder}-keys"
        assert sorted(mounts(svc)) == sorted(
            [
                ("volume", volume, str(args.key_dir), False),
                ("volume", f"certs-{holder}", str(args.tls_dir), True),
            ]
        ), f"{holder} must mount its own volumes and no other"
        key_volumes[holder] = volume
        deps = svc["depends_on"]
        for job in ("certs", "keys"):
            assert deps[job]["condition"] == "service_completed_successfully", (holder, job)
        assert svc["restart"] == "unless-stopped"
    # the key volumes: holder N's and the dealer's, at /keys/<holder>, nobody else's
    dealer = {target: src for _kind, src, target, _ in mounts(services["keys"])}
    assert dealer == {f"/keys/{h}": v for h, v in key_volumes.items()}
    for name, svc in services.items():
        if name in ("keys", *KEYHOLDERS):
            continue
        assert not {src for _, src, _, _ in mounts(svc)} & set(key_volumes.values()), name
    # the dealt files go to a tmpfs, never to a volume, and the dealer runs once
    assert services["keys"]["tmpfs"] == [str(deal.out)]
    assert services["keys"]["restart"] == "no" and services["keys"]["user"] == "root"
    assert not services["keys"].get("depends_on")
    # every holder's passphrase reaches the dealer (which seals the share) and the holder
    for holder in KEYHOLDERS:
        variable = f"LETEO_{holder.upper().replace('-', '_')}_PASSPHRASE"
        assert services["keys"]["environment"][variable] == f"${{{variable}:-}}"
        env = services[holder]["environment"]
        assert env["LETEO_CSP_PASSPHRASE"] == f"${{{variable}:-}}"


def test_the_aggregator_waits_for_every_key_holder(threshold_services):
    deps = threshold_services["aggregator"]["depends_on"]
    assert set(deps) == set(KEYHOLDERS), "the CSP is not started: it must not be waited for"


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell")
def test_dealer_files_each_share_in_its_holders_volume_once(threshold_services, tmp_path):
    """The keys job's entrypoint and command, run for real (with a small key) into a folder per
    key volume: share N ends up in holder N's folder alone, sealed with holder N's passphrase,
    nothing of the dealt files is left; a second run deals nothing, and a run that finds only
    some holders with a share fails and says what to do."""
    from csp.keys import KeyFolder
    from leteo_fed.errors import KeyStoreError

    svc = threshold_services["keys"]
    deal = parse_cli(svc["command"])
    script = svc["entrypoint"][2].replace("$$", "$")
    keys, dealt = tmp_path / "keys", tmp_path / "dealt"
    for holder in KEYHOLDERS:  # the volumes' mount points
        (keys / holder).mkdir(parents=True)
    dealt.mkdir()  # the tmpfs
    assert script.count("/keys/keyholder-*") == 2
    script = script.replace("/keys/", f"{keys}/").replace(f"{deal.out}/", f"{dealt}/")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    chowns = tmp_path / "chown.txt"
    calls = tmp_path / "calls.txt"
    (bindir / "leteo-fed").write_text(  # the real CLI; `keys deal` with a small key
        f'#!/bin/sh\necho "$1 $2" >> "{calls}"\n'
        'if [ "$1" = keys ]; then set -- "$@" --key-bits 512 --insecure-small-key; fi\n'
        f'exec "{sys.executable}" -m leteo_fed "$@"\n'
    )
    (bindir / "chown").write_text(f'#!/bin/sh\necho "$@" >> "{chowns}"\n')
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "LETEO_KEYHOLDER_2_PASSPHRASE": "holder two's",
    }
    env.pop("LETEO_CSP_PASSPHRASE", None)
    command = [*svc["command"]]
    command[command.index("--out") + 1] = str(dealt)
    argv = ["sh", "-c", script, *svc["entrypoint"][3:], *command]

    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert list(dealt.iterdir()) == [], "the dealt files must be gone"
    key_ids = set()
    for index, holder in enumerate(KEYHOLDERS, start=1):
        folder = KeyFolder.open(keys / holder)
        key_id = folder.current_id()
        key_ids.add(key_id)
        assert [p.name for p in (keys / holder / "keys").glob("*.key")] == [f"{key_id}.key"]
        passphrase = "holder two's" if holder == "keyholder-2" else None
        share = folder.load(key_id, passphrase)
        assert (share.index, share.key.holders, share.key.threshold) == (index, 3, 2)
        if passphrase:
            with pytest.raises(KeyStoreError):
                folder.load(key_id)  # sealed: unreadable without holder 2's passphrase
    assert len(key_ids) == 1, "one key, a share of it in each holder's volume"
    assert chowns.read_text().split() == [
        w for h in KEYHOLDERS for w in ("-R", "leteo:leteo", str(keys / h))
    ]
    dealt_calls = calls.read_text().splitlines()
    assert dealt_calls == ["keys deal"] + ["keyholder add-share"] * 3

    # again (a restart, a later `up`): nothing is dealt
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing dealt" in again.stdout
    assert calls.read_text().splitlines() == dealt_calls
    assert {KeyFolder.open(keys / h).current_id() for h in KEYHOLDERS} == key_ids

    # one holder's volume lost: no new key for it alone
    shutil.rmtree(keys / "keyholder-3")
    (keys / "keyholder-3").mkdir()
    lost = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert lost.returncode == 1 and "not keyholder-3" in lost.stderr, lost.stderr
    assert "down -v" in lost.stderr
    assert calls.read_text().splitlines() == dealt_calls


@pytest.mark.skipif(shutil.which("podman-compose") is None, reason="needs podman-compose")
def test_podman_compose_merges_the_variant_as_these_tests_do(tmp_path):
    """The merge these tests emulate agrees with podman-compose's own (`config`) on what the
    services run, mount and wait for."""
    done = subprocess.run(
        ["podman-compose", *(a for f in VARIANTS[THRESHOLD] for a in ("-f", str(f))), "config"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    theirs = yaml.safe_load(done.stdout)["services"]
    ours = enabled(load_compose(VARIANTS[THRESHOLD])["services"])
    ours.pop("analyst")  # profile tools: podman-compose's `config` leaves it out
    assert set(theirs) == set(ours)

    def unescaped(value):  # `config` prints the values interpolated: $$ is a literal $
        if isinstance(value, list):
            return [unescaped(v) for v in value]
        return value.replace("$$", "$") if isinstance(value, str) else value

    for name, svc in ours.items():
        for key in ("command", "entrypoint", "user", "tmpfs", "restart"):
            assert theirs[name].get(key) == unescaped(svc.get(key)), (name, key)
        assert sorted(theirs[name].get("volumes", [])) == sorted(svc.get("volumes", [])), name
        conditions = {d: c["condition"] for d, c in svc.get("depends_on", {}).items()}
        assert {
            d: c["condition"] for d, c in theirs[name].get("depends_on", {}).items()
        } == conditions, name


# ---------------------------------------------------------------------------- data


def test_site_data_is_the_breast_cancer_split():
    rows = {}
    for site in SITES:
        with (DEPLOY / "data" / site / f"{site}.csv").open(newline="") as fh:
            reader = csv.DictReader(fh)
            assert len(reader.fieldnames) == 31 and reader.fieldnames[-1] == "diagnosis"
            assert all(" " not in c for c in reader.fieldnames)
            rows[site] = list(reader)
    assert sorted(len(r) for r in rows.values()) == [189, 190, 190]
    for site_rows in rows.values():
        assert {r["diagnosis"] for r in site_rows} == {"malignant", "benign"}
    keys = [tuple(r.values()) for site_rows in rows.values() for r in site_rows]
    assert len(set(keys)) == 569, "the three parts must be disjoint"


def test_make_data_regenerates_the_committed_csvs(tmp_path):
    pytest.importorskip("sklearn")
    subprocess.run(
        [sys.executable, str(DEPLOY / "make_data.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    for site in SITES:
        fresh = (tmp_path / site / f"{site}.csv").read_bytes()
        assert fresh == (DEPLOY / "data" / site / f"{site}.csv").read_bytes(), (
            f"{site}.csv is stale"
        )


# ---------------------------------------------------------------------------- Dockerfile


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile():
    assert DOCKERFILE.is_file()
    instructions = dockerfile_instructions()
    entrypoints = [rest for word, rest in instructions if word == "ENTRYPOINT"]
    assert len(entrypoints) == 1 and json.loads(entrypoints[0]) == ["leteo-fed"]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert "leteo-fed" in scripts, "the entrypoint must be an installed console script"

    froms = [rest for word, rest in instructions if word == "FROM"]
    assert len(froms) == 1 and froms[0].startswith("python:3.11-slim")
    runs = " ".join(rest for word, rest in instructions if word == "RUN")
    assert "openjdk-17-jre-headless" in runs
    assert re.search(r"pip install (--no-deps )?\.(\s|$)", runs), (
        "the project must be pip-installed"
    )
    assert "[dev]" not in runs

    users = [rest for word, rest in instructions if word == "USER"]
    assert users and users[-1] not in {"root", "0"}, "the image must run as a non-root user"
    words = [word for word, _ in instructions]
    assert words.index("ENTRYPOINT") > words.index("USER")

    # pyproject.toml is copied on its own, before the sources, for layer caching
    copies = [rest.split() for word, rest in instructions if word == "COPY"]
    assert copies[0][0] == "pyproject.toml"
    copied = {src.rstrip("/") for c in copies for src in c[:-1]}
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]
    for package in (p.rstrip("*") for p in patterns["include"]):
        assert package in copied or "." in copied, f"package {package} is not copied into the image"
    readme = tomllib.loads((REPO / "pyproject.toml").read_text())["project"].get("readme")
    if readme:
        assert readme in copied or "." in copied, "pyproject's readme must be in the build"
    for src in copied:
        assert (REPO / src).exists(), f"COPY source {src} does not exist"
