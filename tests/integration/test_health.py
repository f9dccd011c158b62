"""Standard gRPC health and reflection on every service, through real processes.

A CSP, an aggregator (with `--health-listen`) and an outbound owner (with LETEO_HEALTH_LISTEN)
run as separate processes with mTLS. Probes: the plaintext health ports answer SERVING through
`leteo-fed health` (the command compose uses); the services' mTLS ports answer the standard
Health service and list their services by reflection to a party holding a certificate; the CSP
turns NOT_SERVING while its key folder has no current key and SERVING again once it has; a port
already in use is one readable line and exit 2, not a traceback.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from integration_helpers import write_parts
from sklearn.datasets import load_iris

from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.demo.ports import free_port
from leteo_fed.transport import health

pytestmark = pytest.mark.slow

NAMES = ["a", "b", "c", "d"]


def _probe(address: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "leteo_fed", "health", address, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _until(status: str, channel: grpc.Channel, service: str, seconds: float = 20.0) -> str:
    end, got = time.monotonic() + seconds, ""
    while time.monotonic() < end:
        got = health.check(channel, service)
        if got == status:
            break
        time.sleep(0.2)
    return got


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    work = tmp_path_factory.mktemp("health")
    parts = write_parts(load_iris().data, NAMES, 1, work / "data", seed=3)
    probes = {"aggregator": f"127.0.0.1:{free_port()}", "site-1": f"127.0.0.1:{free_port()}"}
    owner = OwnerSpec("site-1", parts[0], env={"LETEO_HEALTH_LISTEN": probes["site-1"]})
    with LocalCluster(
        work / "run", [owner], aggregator_args=["--health-listen", probes["aggregator"]]
    ) as running:
        running.probes = probes
        yield running


def test_plaintext_probe_ports_answer_serving(cluster):
    for name, address in cluster.probes.items():
        done = _probe(address)
        assert done.returncode == 0, (name, done.stdout, done.stderr)
        assert "SERVING" in done.stdout
    agg = _probe(cluster.probes["aggregator"], "--service", "leteo.v1.Aggregator")
    assert agg.returncode == 0 and "leteo.v1.Aggregator: SERVING" in agg.stdout
    unknown = _probe(cluster.probes["aggregator"], "--service", "leteo.v1.Nothing")
    assert unknown.returncode == 1 and "SERVICE_UNKNOWN" in unknown.stdout
    nobody = _probe(f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert nobody.returncode == 1 and "UNAVAILABLE" in nobody.stderr


def test_mtls_ports_answer_health_and_reflection(cluster):
    analyst = cluster.tls("analyst", "analyst")
    for name, service in (
        ("csp", "leteo.v1.CryptoServiceProvider"),
        ("aggregator", "leteo.v1.Aggregator"),
    ):
        with analyst.channel(cluster.addresses[name], peer=name) as channel:
            assert health.check(channel) == "SERVING"
            assert health.check(channel, service) == "SERVING"
            listed = set(ProtoReflectionDescriptorDatabase(channel).get_services())
            assert {service, "grpc.health.v1.Health"} <= listed
    # the same probe through the command, with a certificate
    done = _probe(
        cluster.addresses["csp"],
        *("--tls-dir", str(cluster.certs), "--name", "analyst", "--role", "analyst"),
        *("--peer", "csp"),
    )
    assert done.returncode == 0, done.stderr


def test_the_csp_is_not_serving_without_a_current_key(cluster):
    pointer = cluster.workdir / "csp-keys" / "current"
    assert pointer.exists()
    kept = pointer.read_text()
    service = "leteo.v1.CryptoServiceProvider"
    with cluster.tls("analyst", "analyst").channel(cluster.addresses["csp"], peer="csp") as ch:
        pointer.unlink()
        try:
            assert _until("NOT_SERVING", ch, service) == "NOT_SERVING"
            assert health.check(ch) == "NOT_SERVING"  # the server as a whole, too
        finally:
            pointer.write_text(kept)
        assert _until("SERVING", ch, service) == "SERVING"


def _serve_on(cluster, service: str, listen: str, tmp_path) -> list[str]:
    """The command line of `service` told to listen on `listen` (the owner: through the
    `listen` of a copy of site-1's config)."""
    tls = ["--tls-dir", str(cluster.certs), "--name", service]
    if service == "aggregator":
        return ["aggregator", "serve", "--listen", listen, *tls]
    if service == "csp":
        return ["csp", "serve", "--listen", listen, "--key-dir", str(tmp_path / "keys"), *tls]
    lines = (cluster.workdir / "config" / "site-1.toml").read_text().splitlines()
    config = tmp_path / "site-1-listen.toml"
    config.write_text("\n".join([lines[0], f'listen = "{listen}"', *lines[1:]]) + "\n")
    return ["owner", "serve", "--config", str(config)]


@pytest.mark.parametrize("service", ["aggregator", "csp", "owner"])
def test_a_port_in_use_is_one_line_and_exit_2(cluster, tmp_path, service):
    """Our one line only: the port is found busy before gRPC tries it and logs its own
    `add_port` error."""
    taken = cluster.addresses["aggregator"]  # held by a running gRPC server (SO_REUSEPORT)
    cmd = [sys.executable, "-m", "leteo_fed", *_serve_on(cluster, service, taken, tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert _busy_line(service, taken) in done.stderr
    assert "add_port" not in done.stderr and "Traceback" not in done.stderr
    with socket.socket() as held:  # a plain listener (no SO_REUSEPORT) is found as well
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = f"127.0.0.1:{held.getsockname()[1]}"
        cmd = [sys.executable, "-m", "leteo_fed", *_serve_on(cluster, service, busy, tmp_path)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert _busy_line(service, busy) in done.stderr
    assert "add_port" not in done.stderr and "Traceback" not in done.stderr


def _busy_line(service: str, address: str) -> str:
    """The line naming the busy address (the owner's start-up check names its config key)."""
    if service == "owner":
        return f"listen = '{address}': cannot listen there: [Errno 98] Address already in use"
    return f"cannot listen on {address} (--listen): the address is in use by another process"


def test_a_health_port_in_use_is_named_as_such(cluster, tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = f"127.0.0.1:{held.getsockname()[1]}"
        cmd = [sys.executable, "-m", "leteo_fed", "aggregator", "serve"]
        cmd += ["--listen", f"127.0.0.1:{free_port()}", "--health-listen", busy]
        cmd += ["--tls-dir", str(cluster.certs), "--name", "aggregator"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "(--health-listen)" in done.stderr
    assert "add_port" not in done.stderr and "Traceback" not in done.stderr


def test_an_owners_own_listener_answers_standard_health(tmp_path):
    """An inbound owner's mTLS port (an outbound owner's optional `listen` serves the same):
    the standard Health service and reflection, to a party holding a certificate."""
    parts = write_parts(load_iris().data, NAMES, 1, tmp_path / "data", seed=5)
    with LocalCluster(tmp_path / "run", [OwnerSpec("site-1", parts[0])], owner_mode="inbound") as c:
        with c.tls("analyst", "analyst").channel(c.addresses["site-1"], peer="owner") as channel:
            assert health.check(channel) == "SERVING"
            assert health.check(channel, "leteo.v1.OwnerAgent") == "SERVING"
            listed = set(ProtoReflectionDescriptorDatabase(channel).get_services())
            assert "leteo.v1.OwnerAgent" in listed
