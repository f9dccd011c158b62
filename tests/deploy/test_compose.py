"""Static checks of the docker compose deployment: docker-compose.yml, Dockerfile, deploy/compose/.

No Docker engine is needed: the compose file is parsed with PyYAML and every piece is checked
against the CLI parser, the owner-config loader and the other services it has to agree with.
"""

from __future__ import annotations

import contextlib
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
DOCKERFILE = REPO / "Dockerfile"
SITES = ["site-1", "site-2", "site-3"]


# ---------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


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


def test_compose_file_shape(compose, services):
    assert "version" not in compose, "the compose spec has no top-level `version:`"
    expected = {"certs", "csp", "aggregator", "analyst", *SITES}
    assert expected <= set(services), f"missing services: {sorted(expected - set(services))}"
    assert services["analyst"].get("profiles") == ["tools"]
    for name in ("certs", "csp", "aggregator", *SITES):
        assert not services[name].get("profiles"), f"{name} must start with a plain `up`"
    assert "50052:50052" in [str(p) for p in services["aggregator"].get("ports", [])]


def test_every_command_parses_with_the_cli(services):
    with_command = {name: svc for name, svc in services.items() if "command" in svc}
    assert set(with_command) == set(services), "every service runs a leteo-fed command"
    commands = {name: parse_cli(svc["command"]).command for name, svc in with_command.items()}
    assert commands["certs"] == "certs"
    assert commands["csp"] == "csp"
    assert commands["aggregator"] == "aggregator"
    assert commands["analyst"] == "pca"
    for site in SITES:
        assert commands[site] == "owner"


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
def test_certs_entrypoint_runs_once(services, tmp_path):
    """The guard runs `leteo-fed certs ...` into empty volumes and skips it afterwards; each
    run hands the party folders to the services' user and keeps the CA keys root's."""
    svc = services["certs"]
    args = parse_cli(svc["command"])
    script = svc["entrypoint"][2].replace("$$", "$")  # compose's escape for a literal `$`
    marker = f"{args.out}/{AUTHORITIES_DIR}/ca.crt"  # what `certs --per-party` writes last
    assert f"test -s {marker} ||" in script, "the guard must look for the file written last"
    assert svc.get("user") in {"root", "0", "0:0"}, "fresh volumes are root's: write as root"
    certs = tmp_path / "certs"
    (certs / AUTHORITIES_DIR).mkdir(parents=True)
    script = script.replace(str(args.out), str(certs))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "calls.txt"
    chowns = tmp_path / "chown.txt"
    fake = bindir / "leteo-fed"
    marker_file = certs / AUTHORITIES_DIR / "ca.crt"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >> "{log}"\necho x > "{marker_file}"\n')
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


def test_bind_mounts_exist_and_named_volumes_are_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in services.items():
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
    for name, svc in services.items():
        deps = svc.get("depends_on", {})
        for dep in deps:
            assert dep in services, f"{name} depends on unknown service {dep!r}"
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


ROLE_OF_COMMAND = {"csp": "csp", "aggregator": "aggregator", "pca": "analyst", "owner": "owner"}


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


def test_each_service_mounts_only_its_own_certificates(services):
    """No service can read a CA key or another party's key: each mounts one folder, its own."""
    folders = certs_folders(services)
    assert AUTHORITIES_DIR in folders, "the CA keys need a folder of their own"
    for name, svc in services.items():
        if name == "certs":
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
        deps = svc.get("depends_on", {})
        assert isinstance(deps, dict), f"{name}: depends_on needs conditions"
        if name != "analyst":  # analyst waits for services that waited for certs
            assert deps.get("certs", {}).get("condition") == "service_completed_successfully", name
    used = {tls_identity(n, s)[0] for n, s in services.items() if n != "certs"}
    assert set(folders) == {AUTHORITIES_DIR, *used}, "a certificate folder no service uses"


def test_certs_job_writes_what_each_service_reads(services, tmp_path):
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
        if name == "certs":
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
    calls = {
        "aggregator": ("csp", "owner"),
        "site-1": ("aggregator", "csp"),
        "analyst": ("aggregator",),
    }
    for caller, peers in calls.items():
        for peer in peers:
            tls[caller].channel("localhost:1", peer=peer).close()


def test_certs_cover_every_party(services):
    args = parse_cli(services["certs"]["command"])
    owners = owner_services(services)
    assert sorted(owners) == SITES
    assert sorted(args.owners) == sorted(owners), "certs --owners must match the owner services"
    for name, svc in owners.items():
        assert owner_config(svc).site_id == name
    # every name a peer dials must be in the certificates (server-name check under mTLS)
    assert {"csp", "aggregator", *owners} <= set(args.hosts)
    assert set(args.hosts) <= set(services), "--hosts should only name compose services"


def test_server_addresses_agree(services):
    csp_args = parse_cli(services["csp"]["command"])
    agg_args = parse_cli(services["aggregator"]["command"])
    assert split_address(csp_args.listen)[0] == "0.0.0.0"
    assert split_address(agg_args.listen)[0] == "0.0.0.0"
    assert split_address(agg_args.csp) == ("csp", listen_port(services, "csp"))
    analyst = parse_cli(services["analyst"]["command"])
    assert split_address(analyst.aggregator) == ("aggregator", listen_port(services, "aggregator"))
    assert analyst.name == "analyst"
    assert host_path(services["analyst"], str(analyst.out)) is not None, (
        "analyst --out is not bind-mounted"
    )


@pytest.mark.parametrize("site", SITES)
def test_owner_config_matches_compose(services, site):
    svc = services[site]
    config = owner_config(svc)
    assert config.site_id == site
    # outbound: the site connects out to the aggregator and serves no port (its probe port is
    # the health-only loopback one), and its service publishes and exposes no port
    assert config.mode == "outbound"
    assert not config.listen, "an outbound owner serves no gRPC port"
    assert not svc.get("ports") and not svc.get("expose"), f"{site} must publish no port"
    assert split_address(config.aggregator) == ("aggregator", listen_port(services, "aggregator"))
    assert split_address(config.csp) == ("csp", listen_port(services, "csp"))
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


def test_owner_config_files_are_plain_toml():
    for site in SITES:
        doc = tomllib.loads((DEPLOY / f"{site}.toml").read_text())
        assert doc["site_id"] == site
        assert {"ca", "cert", "key"} <= set(doc["tls"])
        for key in ("ca", "cert", "key"):
            assert doc["tls"][key].startswith("/certs/"), (
                "cert paths must be absolute in the container"
            )


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
    from leteo_fed.demo.cluster import free_port
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
