"""A throwaway PostgreSQL server for the tests of database sources (and their benchmark).

The binaries come from `pgserver` (the [dev] extra ships PostgreSQL in a wheel), so a fresh
machine with only `pip install -e '.[all,dev]'` has them; without it, a system install
(/usr/lib/postgresql/*/bin) does, or LETEO_TEST_PG_BIN names a bin folder. pgserver's own
server manager is not used: it serves a Unix socket only, with `trust` authentication, and as
root it creates a system user and opens the permissions of every parent folder of its data.

Here `initdb` and `postgres` run in a fresh folder of the system's temporary directory, with
password (SCRAM) authentication, on 127.0.0.1 and a free port. PostgreSQL refuses to run as
root, so when the tests run as root both run as the unprivileged `nobody` (a `leteo-pg` system
user is created where there is no `nobody`); if that user cannot reach the binaries (a virtual
environment in a private home), they are copied into the server's folder first. The server gets
the parent-death signal, so even a killed test run leaves no postgres behind; `stop()` shuts
it down (fast mode) and removes its folder.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leteo_fed.demo.ports import free_port

SUPERUSER = "postgres"
_SYSTEM_USERS = ("nobody", "leteo-pg")

# becomes the server's user (when started as root), asks for SIGINT (fast shutdown) when the
# launching thread dies (after the user change, which would clear it), then execs postgres; the
# signal setting survives exec. It runs as root because the interpreter may sit in a private home.
_LAUNCHER = """
import ctypes, os, signal, sys
parent, uid, gid = (int(a) for a in sys.argv[1:4])
if uid >= 0:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGINT)
if os.getppid() != parent:
    sys.exit(1)
os.execv(sys.argv[4], sys.argv[4:])
"""


def find_binaries() -> Path | None:
    """A folder with initdb and postgres: LETEO_TEST_PG_BIN, pgserver's, or the system's."""
    if os.environ.get("LETEO_TEST_PG_BIN"):
        return Path(os.environ["LETEO_TEST_PG_BIN"])
    spec = importlib.util.find_spec("pgserver")  # no import: it sets up lock files at import
    if spec is not None and spec.submodule_search_locations:
        folder = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
        if (folder / "initdb").exists():
            return folder
    system = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name or 0)
    )
    for folder in reversed(system):
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    return None


def _unprivileged_user() -> pwd.struct_passwd:
    for name in _SYSTEM_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "leteo-pg"],
        check=True,
        capture_output=True,
    )
    return pwd.getpwnam("leteo-pg")


@dataclass
class PostgresServer:
    """One running server; `url()` names a database on it (no password: see `connect`)."""

    root: Path
    bin_dir: Path
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    host: str = "127.0.0.1"
    proc: subprocess.Popen | None = None
    _user: pwd.struct_passwd | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    def _as_user(self) -> dict[str, Any]:
        """subprocess arguments running the child as the server's user."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "TZ": "UTC"}
        if self._user is None:
            return {"env": env, "cwd": self.root}
        user = self._user
        env["HOME"] = str(self.root)
        return {
            "env": env,
            "cwd": self.root,
            "user": user.pw_uid,
            "group": user.pw_gid,
            "extra_groups": [],
        }

    # ---------------------------------------------------------------- life cycle

    def start(self, timeout: float = 60.0) -> None:
        if os.geteuid() == 0:  # postgres refuses to run as root
            self._user = _unprivileged_user()
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
            self.bin_dir = self._reachable_binaries()
        pwfile = self.root / "superuser-password"
        pwfile.write_text(self.password + "\n")
        pwfile.chmod(0o600)
        if self._user is not None:
            os.chown(pwfile, self._user.pw_uid, self._user.pw_gid)
        initdb = subprocess.run(
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                SUPERUSER,
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            **self._as_user(),
        )
        pwfile.unlink()
        if initdb.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}")
        for _attempt in range(3):  # a probed port may be taken before postgres binds it
            self.port = free_port()
            if self._launch(timeout):
                return
        raise RuntimeError(f"postgres did not start:\n{self.log_tail()}")

    def _reachable_binaries(self) -> Path:
        """The bin folder if the server's user can run it, else a copy of the installation."""
        try:
            probe = subprocess.run(
                [str(self.bin_dir / "postgres"), "--version"],
                capture_output=True,
                check=False,
                **self._as_user(),
            )
            if probe.returncode == 0:
                return self.bin_dir
        except OSError:  # PermissionError: a folder on the way is private
            pass
        install = self.bin_dir.parent
        base = self.root / "pgcopy"
        copy = base / "pgserver" / "pginstall"
        for part in ("bin", "lib", "share"):
            if (install / part).exists():
                shutil.copytree(install / part, copy / part, symlinks=True)
        # pgserver's binaries find libpq through the rpath $ORIGIN/../../../pgserver.libs
        libs = install.parent.parent / "pgserver.libs"
        if libs.is_dir():
            shutil.copytree(libs, base / "pgserver.libs", symlinks=True)
        subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
        return copy / "bin"

    def _launch(self, timeout: float) -> bool:
        """Start postgres on self.port; True once it accepts the superuser's password."""
        log = open(self.log, "ab")  # noqa: SIM115 - owned by the child
        argv = [
            str(self.bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-h",
            self.host,
            "-p",
            str(self.port),
            "-k",
            str(self.root),
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]
        uid, gid = (self._user.pw_uid, self._user.pw_gid) if self._user else (-1, -1)
        env = self._as_user()["env"]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(os.getpid()), str(uid), str(gid), *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
            env=env,
        )
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                self.connect("postgres", SUPERUSER, self.password).close()
                return True
            except Exception:  # not up yet
                time.sleep(0.1)
        self.stop(remove=False)
        raise RuntimeError(f"postgres not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, remove: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if remove:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    # ---------------------------------------------------------------- use

    def url(self, database: str, user: str) -> str:
        """The owner config's `data.url`: no password in it."""
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    def connect(self, database: str, user: str, password: str, autocommit: bool = True) -> Any:
        import adbc_driver_postgresql.dbapi as pg

        uri = f"{self.url(database, user)}?password={password}"
        return pg.connect(uri, autocommit=autocommit)

    def admin(self, database: str = "postgres") -> Any:
        return self.connect(database, SUPERUSER, self.password)

    def create_database(self, name: str, owner: str, password: str) -> None:
        """A login role (created once, with this password) owning a new database."""
        with self.admin() as conn, conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_roles WHERE rolname = $1", parameters=(owner,))
            if cur.fetchone() is None:
                secret = password.replace("'", "''")
                cur.execute(f"CREATE ROLE \"{owner}\" LOGIN PASSWORD '{secret}'")
            cur.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')


def start_server(timeout: float = 60.0) -> PostgresServer:
    """A running server in a fresh temporary folder, or RuntimeError saying why not."""
    bin_dir = find_binaries()
    if bin_dir is None:
        raise FileNotFoundError(
            "no PostgreSQL binaries: install the [dev] extra (pgserver) or set LETEO_TEST_PG_BIN"
        )
    # not under pytest's tmp folders: they are private to root, and the server may run as nobody
    root = Path(tempfile.mkdtemp(prefix="leteo-pg-"))
    server = PostgresServer(root, bin_dir)
    try:
        server.start(timeout)
    except BaseException:
        server.stop()
        raise
    return server
