"""A simulation worker process: hosts a slice of the virtual owners until SIGTERM.

    python -m leteo_fed.simulation.worker --configs LIST [--stop-sites LIST] [--threads 8]

LIST files name one owner config (TOML, as `owner serve` reads it) or one site per line. Start-up:
every protocol module loaded, the current key fetched with the first owner's certificate (the
CSP's, or with `[keyholders]` the threshold key at least t of the holders agree on, the rule an
agent applies: `fetch_key`) and its randomizer table built once (shared, see `virtual_owner`),
then each owner built (its
config, certificate, signing key, audit log, ledger) and connected over its own mTLS channel, at
most `--handshakes` connection attempts at a time. Every second the worker writes its counts
(owners built, connected, stopped) to `--status` as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import resource
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from leteo_fed.config import OwnerConfig, load_owner_config
from leteo_fed.crypto.paillier import Encryptor, PublicKey
from leteo_fed.fileio import atomic_write_bytes
from leteo_fed.proto import leteo_pb2_grpc as pb_grpc
from leteo_fed.protocols import registry
from leteo_fed.simulation.virtual_owner import TRAFFIC, VirtualOwner
from leteo_fed.transport.messages import fetch_public_key
from leteo_fed.transport.threshold_keys import describe_key, fetch_agreed_key

log = logging.getLogger("leteo.simulation")


def raise_open_files_limit() -> None:
    """One socket per owner (more if it ever calls the CSP or the key holders): as many files
    as the system allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _lines(path: Path | None) -> list[str]:
    if path is None:
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def fetch_key(config: OwnerConfig) -> PublicKey:
    """The current key, fetched as the agent fetches it with `config` (its certificate): the
    CSP's, or with `[keyholders]` the threshold key at least t of the m configured holders
    return identically, with exactly the configured t and m (`threshold_keys`)."""
    holders = config.keyholders
    if holders is None:
        channel = config.tls.channel(config.csp, peer="csp")
        try:
            return fetch_public_key(pb_grpc.CryptoServiceProviderStub(channel), config.csp)
        finally:
            channel.close()
    channels = {a: config.tls.channel(a, peer="keyholder") for a in holders.addresses}
    try:
        stubs = {a: pb_grpc.KeyHolderStub(c) for a, c in channels.items()}
        key, answers = fetch_agreed_key(stubs, holders.threshold)
    finally:
        for channel in channels.values():
            channel.close()
    agreeing = sum(1 for a in answers if a.key == key)
    log.info(
        "%s: %d of %d holders agree (%d answered by then)",
        describe_key(key),
        agreeing,
        holders.holders,
        len(answers),
    )
    return key.public


class Counts:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.built = self.connected = 0

    def connection(self, up: bool) -> None:
        with self._lock:
            self.connected += 1 if up else -1


def run(args: argparse.Namespace) -> int:
    raise_open_files_limit()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    configs = [Path(p) for p in _lines(args.configs)]
    stop_sites = set(_lines(args.stop_sites))
    start = time.perf_counter()
    registry.names()  # every protocol module, as an agent loads them before connecting
    first = load_owner_config(configs[0])
    public = fetch_key(first)
    encryptor = Encryptor(public, first.randomizer)
    encryptor.prepare()
    log.info("key %s and its table ready in %.2f s", public.key_id, time.perf_counter() - start)

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="owners-loop", daemon=True).start()
    gate = asyncio.run_coroutine_threadsafe(_semaphore(args.handshakes), loop).result()
    pool = ThreadPoolExecutor(max_workers=args.threads, thread_name_prefix="owner")
    counts = Counts()
    owners: list[VirtualOwner] = []
    status = args.status

    def write_status(final: bool = False) -> None:
        if status is None:
            return
        doc = {
            "owners": len(configs),
            "built": counts.built,
            "connected": counts.connected,
            "stopped": sum(o.stopped for o in owners),
            "traffic": {k: sum(o.traffic[k] for o in owners) for k in TRAFFIC},
            "final": final,
        }
        atomic_write_bytes(status, json.dumps(doc).encode())

    def status_loop() -> None:
        while not stopping.wait(1.0):
            write_status()

    threading.Thread(target=status_loop, name="status", daemon=True).start()
    for path in configs:
        if stopping.is_set():
            break
        config = load_owner_config(path)
        owner = VirtualOwner(
            config,
            loop,
            pool,
            encryptor,
            stop_before_upload=config.site_id in stop_sites,
            on_connected=counts.connection,
        )
        owners.append(owner)
        counts.built += 1
        asyncio.run_coroutine_threadsafe(owner.run_link(gate), loop)
    log.info("%d virtual owners built in %.2f s", len(owners), time.perf_counter() - start)
    while not stopping.wait(0.5):
        pass
    for owner in owners:
        owner.closing()
    try:  # every channel closed at once, not one loop round trip per owner
        asyncio.run_coroutine_threadsafe(_close_all(owners), loop).result(20)
    except Exception:  # the process exits anyway
        log.warning("not every channel closed in time")
    pool.shutdown(wait=False, cancel_futures=True)
    write_status(final=True)
    loop.call_soon_threadsafe(loop.stop)
    return 0


async def _close_all(owners: list[VirtualOwner]) -> None:
    await asyncio.gather(*(o.close_channels() for o in owners), return_exceptions=True)


async def _semaphore(n: int) -> asyncio.Semaphore:
    return asyncio.Semaphore(n)  # made on the loop that uses it


def main(argv: list[str] | None = None) -> int:
    from leteo_fed.demo.parent import die_with_parent_if_asked

    parser = argparse.ArgumentParser(prog="python -m leteo_fed.simulation.worker")
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--configs", type=Path, required=True, help="owner config per line")
    parser.add_argument("--stop-sites", type=Path, help="sites that crash before uploading")
    parser.add_argument("--threads", type=int, default=8, help="the owners' shared pool")
    parser.add_argument("--handshakes", type=int, default=16, help="connections at a time")
    parser.add_argument("--status", type=Path, help="JSON counts, rewritten every second")
    args = parser.parse_args(argv)
    die_with_parent_if_asked()
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
