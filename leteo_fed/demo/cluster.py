"""A whole deployment on this machine: CSP, aggregator and owner agents as separate processes.

Used by `leteo-fed demo` and by the integration tests. Every child gets the parent-death
signal, so even a killed parent leaves no orphans; `stop()` terminates, then kills stragglers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from leteo_fed.demo.parent import PARENT_ENV
from leteo_fed.demo.ports import free_port
from leteo_fed.errors import PeerUnavailable
from leteo_fed.proto import leteo_pb2 as pb
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.transport.certs import create_pki, keyholder_name
from leteo_fed.transport.grpc_io import TlsConfig

STOP_REQUESTED = threading.Event()


def stop_on_signals() -> None:
    """SIGINT/SIGTERM stop a local deployment: a flag every wait checks, plus KeyboardInterrupt.

    The flag matters because an interrupt that lands inside a blocking gRPC call can surface as
    an RpcError (and be taken for a peer that is not up yet) instead of KeyboardInterrupt.
    """

    def handler(signum, frame) -> None:
        STOP_REQUESTED.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def check_stop() -> None:
    if STOP_REQUESTED.is_set():
        raise KeyboardInterrupt


@dataclass
class OwnerSpec:
    site_id: str
    data_path: Path | None = None  # a CSV / Parquet file (or give `data`)
    engine: str = "numpy"
    label_column: str | None = None
    policy: str = ""  # the body of the owner's [policy] table (TOML), if any
    # the body of the owner's [data] table (TOML) instead of data_path and engine, e.g. a
    # database's url, query and password_env
    data: str = ""
    env: dict[str, str] = field(default_factory=dict)  # added to the owner process's environment


@dataclass
class LocalCluster:
    workdir: Path
    owners: list[OwnerSpec]
    key_bits: int = 2048
    insecure: bool = False
    csp_transcript: bool = False  # also the aggregator's transcript
    log_level: str = "INFO"
    extra_owner_ids: list[str] = field(default_factory=list)  # certificates only, no process
    privacy_budget: tuple[float, float] | None = (10.0, 1e-4)  # per-owner ledger (epsilon, delta)
    aggregator_args: list[str] = field(default_factory=list)  # appended to `aggregator serve`
    csp_args: list[str] = field(default_factory=list)  # appended to `csp serve`
    # the caller serves the aggregator at addresses["aggregator"] itself (tests of a deviating
    # aggregator): start_services starts only the CSP; bring it up between prepare() and the owners
    external_aggregator: bool = False
    # "outbound" (owners connect out to the aggregator, serve no port) or "inbound" (owners
    # serve and the aggregator dials them); default: outbound, inbound for an external
    # aggregator (a test aggregator dials the owners' Invite)
    owner_mode: str = ""
    # (m, t): m key holders of a threshold key, any t of whom decrypt, instead of one CSP
    # (docs/threshold-keys.md); their processes are keyholder-1..keyholder-m
    keyholders: tuple[int, int] | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)

    @property
    def certs(self) -> Path:
        return self.workdir / "certs"

    @property
    def logs(self) -> Path:
        return self.workdir / "logs"

    def tls(self, name: str, role: str) -> TlsConfig:
        if self.insecure:
            return TlsConfig.insecure_as(name, role)
        return TlsConfig.from_dir(self.certs, name, role)

    def _tls_args(self, name: str) -> list[str]:
        return (
            ["--insecure", "--name", name]
            if self.insecure
            else ["--tls-dir", str(self.certs), "--name", name]
        )

    def _spawn(
        self,
        name: str,
        args: list[str],
        env: dict[str, str] | None = None,
        module: str = "leteo_fed",
    ) -> None:
        """Start `python -m module --log-level LEVEL args...` as `name` (its log in `logs`),
        dying with this process; `module` is the CLI unless another entry point is named (the
        simulation's workers, `leteo_fed.simulation.worker`)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
        cmd = [sys.executable, "-m", module, "--log-level", self.log_level, *args]
        env = {**os.environ, **(env or {}), PARENT_ENV: str(os.getpid())}
        self.procs[name] = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
            env=env,
        )
        log.close()

    def __post_init__(self) -> None:
        self.workdir = Path(self.workdir).resolve()  # children run inside it
        if not self.owner_mode:
            self.owner_mode = "inbound" if self.external_aggregator else "outbound"
        if self.owner_mode not in ("inbound", "outbound"):
            raise ValueError(f"owner_mode must be inbound or outbound, got {self.owner_mode!r}")

    def start(self, timeout: float = 90.0) -> None:
        self.prepare()
        self.start_services()
        self.wait_healthy(timeout)  # owners find their peers up when they start
        for owner in self.owners:
            self.start_owner(owner)
        self.wait_healthy(timeout)

    def prepare(self) -> None:
        """Certificates (the owners', analysts' and aggregators. and CSPs. CAs and one certificate per
        party, all in `certs`) and the CSP / aggregator addresses; nothing is started."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        holders = self.keyholders[0] if self.keyholders else 0
        if not self.insecure:
            sites = [o.site_id for o in self.owners] + self.extra_owner_ids
            create_pki(self.certs, sites, keyholders=holders)
        if self.keyholders:
            self.deal_keyholders()
        else:
            self.addresses["csp"] = f"127.0.0.1:{free_port()}"
        self.addresses["aggregator"] = f"127.0.0.1:{free_port()}"

    @property
    def keyholder_names(self) -> list[str]:
        return [keyholder_name(i) for i in range(1, (self.keyholders or (0, 0))[0] + 1)]

    def deal_keyholders(self) -> None:
        """The key ceremony (`keys deal`) and every holder's `keyholder add-share`, in process."""
        from csp.dealing import add_share, deal_to

        assert self.keyholders is not None
        holders, threshold = self.keyholders
        dealt = deal_to(
            self.workdir / "dealt", self.key_bits, holders, threshold, self.key_bits < 2048
        )
        for name, share_file in zip(self.keyholder_names, dealt.shares, strict=True):
            add_share(share_file, self.workdir / f"{name}-keys")
            self.addresses[name] = f"127.0.0.1:{free_port()}"

    def start_services(self) -> None:
        if self.keyholders:
            for name in self.keyholder_names:
                self.start_keyholder(name)
        else:
            self.start_csp()
        if not self.external_aggregator:
            self.start_aggregator()

    def start_keyholder(self, name: str) -> None:
        """A key holder's process; after `kill(name)` it restarts on the same address and
        folder, so with its share and its record of opened rounds."""
        args = ["keyholder", "serve", "--listen", self.addresses[name]]
        args += ["--key-dir", str(self.workdir / f"{name}-keys")]
        if self.key_bits < 2048:
            args.append("--insecure-small-key")
        self._spawn(name, args + self._tls_args(name))

    def decryptor_args(self) -> list[str]:
        """How the aggregator reaches the key: the CSP, or every key holder."""
        if self.keyholders:
            return ["--keyholders", ",".join(self.addresses[n] for n in self.keyholder_names)]
        return ["--csp", self.addresses["csp"]]

    @property
    def aggregator_state(self) -> Path:
        return self.workdir / "aggregator-state"

    def start_aggregator(self) -> None:
        """The aggregator process; after `kill("aggregator")` it restarts on the same address
        and state dir, so it knows the owners, fails the rounds it interrupted and resumes
        k-means jobs."""
        agg_args = ["--state-dir", str(self.aggregator_state)]
        if self.csp_transcript:  # audit transcripts of what the CSP and the aggregator learn
            agg_args += ["--transcript", str(self.workdir / "aggregator-transcript.jsonl")]
        self._spawn(
            "aggregator",
            [
                "aggregator",
                "serve",
                "--listen",
                self.addresses["aggregator"],
                *self.decryptor_args(),
            ]
            + agg_args
            + self._tls_args("aggregator")
            + self.aggregator_args,
        )

    def start_csp(self) -> None:
        """The CSP process; after `kill("csp")` it restarts on the same address and key dir, so
        with the same key and its record of decrypted rounds."""
        csp_args = [
            "csp",
            "serve",
            "--listen",
            self.addresses["csp"],
            "--key-dir",
            str(self.workdir / "csp-keys"),
            "--key-bits",
            str(self.key_bits),
        ]
        if self.key_bits < 2048:
            csp_args.append("--insecure-small-key")
        if self.csp_transcript:
            csp_args += ["--transcript", str(self.workdir / "csp-transcript.jsonl")]
        self._spawn("csp", csp_args + self._tls_args("csp") + self.csp_args)

    def owner_config(self, owner: OwnerSpec) -> Path:
        """The owner's TOML. Its [policy] is always explicit: the demo's permissive one
        (`owner_policy.DEMO_POLICY`) under the keys `owner.policy` sets."""
        from leteo_fed.demo.owner_policy import policy_lines

        lines = [f'site_id = "{owner.site_id}"', f'mode = "{self.owner_mode}"']
        if self.owner_mode == "inbound":
            port = free_port()
            self.addresses[owner.site_id] = f"127.0.0.1:{port}"
            lines += [f'listen = "127.0.0.1:{port}"', f'advertise = "127.0.0.1:{port}"']
        lines += [f'results_dir = "results/{owner.site_id}"', "", "[data]"]
        if owner.data:
            lines.append(owner.data.strip())
        elif owner.data_path is not None:
            lines += [
                f'path = "{Path(owner.data_path).resolve()}"',
                f'engine = "{owner.engine}"',
            ]
        else:
            raise ValueError(f"owner {owner.site_id} needs data_path or data")
        if owner.label_column:
            lines.append(f'label_column = "{owner.label_column}"')
        lines += [
            "",
            "[peers]",
            f'aggregator = "{self.addresses["aggregator"]}"',
        ]
        if self.keyholders:
            addresses = ", ".join(f'"{self.addresses[n]}"' for n in self.keyholder_names)
            lines += [
                "",
                "[keyholders]",
                f"addresses = [{addresses}]",
                f"threshold = {self.keyholders[1]}",
            ]
        else:
            lines.append(f'csp = "{self.addresses["csp"]}"')
        lines += [
            "",
            "[tls]",
            "insecure = true" if self.insecure else f'dir = "{self.certs.resolve()}"',
        ]
        if self.privacy_budget:
            eps, delta = self.privacy_budget
            lines += [
                "",
                "[privacy]",
                f'ledger = "ledgers/{owner.site_id}.json"',
                f"epsilon_total = {eps!r}",
                f"delta_total = {delta!r}",
            ]
        lines += ["", *policy_lines(owner.policy)]
        path = self.workdir / "config" / f"{owner.site_id}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
        return path

    def spawn(self, name: str, module: str, args: list[str]) -> subprocess.Popen:
        """Another process of this deployment (`python -m module args`), stopped with it."""
        self._spawn(name, args, module=module)
        return self.procs[name]

    def start_owner(self, owner: OwnerSpec, name: str = "") -> None:
        """The owner's agent process, known here as `name` (default: its site id; another
        name runs a second agent with the same identity, as an operator's mistake would)."""
        config = self.owner_config(owner)
        cmd = ["owner", "serve", "--config", str(config)]
        self._spawn(name or owner.site_id, cmd, owner.env)

    def _health(self, name: str) -> bool:
        """The service answers Health (outbound owners, which serve no port, are checked in
        `wait_healthy` through the aggregator's listing)."""
        role = "analyst"
        holder = name in self.keyholder_names
        peer = name if name in ("csp", "aggregator") else "keyholder" if holder else "owner"
        channel = self.tls(role, role).channel(self.addresses[name], peer=peer)
        try:
            stub: (
                pb_grpc.CryptoServiceProviderStub
                | pb_grpc.AggregatorStub
                | pb_grpc.OwnerAgentStub
                | pb_grpc.KeyHolderStub
            )
            if name == "csp":
                stub = pb_grpc.CryptoServiceProviderStub(channel)
            elif holder:
                stub = pb_grpc.KeyHolderStub(channel)
            elif name == "aggregator":
                stub = pb_grpc.AggregatorStub(channel)
            else:
                stub = pb_grpc.OwnerAgentStub(channel)
            stub.Health(pb.HealthRequest(), timeout=2)
            return True
        except grpc.RpcError:
            return False
        finally:
            channel.close()

    def connected_owners(self) -> set[str]:
        """The owners the aggregator can reach now (empty if it does not answer)."""
        channel = self.tls("analyst", "analyst").channel(
            self.addresses["aggregator"], peer="aggregator"
        )
        try:
            listing = pb_grpc.AggregatorStub(channel).ListOwners(pb.ListOwnersRequest(), timeout=2)
            return {o.site_id for o in listing.owners if o.connected}
        except grpc.RpcError:
            return set()
        finally:
            channel.close()

    def wait_healthy(self, timeout: float = 90.0, names: list[str] | None = None) -> None:
        pending = list(names or self.procs)
        owner_ids = {o.site_id for o in self.owners}
        end = time.monotonic() + timeout
        while pending:
            check_stop()
            connected: set[str] | None = None  # asked once per pass, for every outbound owner
            for name in list(pending):
                proc = self.procs[name]
                if proc.poll() is not None:
                    raise PeerUnavailable(
                        f"{name} exited with code {proc.returncode} during start-up:\n{self.log_tail(name)}"
                    )
                # an owner is healthy once the aggregator lists it (connected, or registered in
                # the inbound mode, after the agent got ready): a round can invite it. (The
                # caller of an external aggregator waits for its inbound owners itself.)
                inbound = name in self.addresses
                healthy = not inbound or self._health(name)
                if healthy and name in owner_ids and (not inbound or "aggregator" in self.procs):
                    if connected is None:
                        connected = self.connected_owners()
                    healthy = name in connected
                if healthy:
                    pending.remove(name)
            if pending and time.monotonic() > end:
                raise PeerUnavailable(f"not healthy after {timeout:.0f} s: {', '.join(pending)}")
            if pending:
                time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.logs / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Loss of a party, for failure tests: abrupt (SIGKILL, the default), or as an operator
        stops it (SIGINT: Ctrl-C, SIGTERM)."""
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a stop that never came: a test must not hang
            proc.kill()
            proc.wait()
            raise PeerUnavailable(f"{name} ignored signal {sig} for 30 s and was killed") from None

    def stop(self, grace: float = 8.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
