"""`leteo-fed simulate`: load-test a deployment with many virtual owners (docs/simulation.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from leteo_fed.cli.options import SubParsers, add_demo_key_flags, set_handler

DESCRIPTION = """\
Run N virtual owners in a few worker processes against a real CSP and aggregator on this
machine (or, with --keyholders M, the M holders of a threshold key, any --threshold of whom
decrypt), then one PCA round, and print what it cost.

Each virtual owner is the real owner agent (authorization, policy, audit log, privacy ledger,
signed Paillier share) with its own certificate and signing key, its own mTLS connection to
the aggregator and its own data file; the owners of one worker share an event loop, a thread
pool and the key's precomputed encryption table. The round's result is checked against PCA
of the pooled rows (1e-9). Everything lands in --out: certificates, data, configs, logs and
simulation.json.

Examples:
  leteo-fed simulate --owners 200 --out out/sim
  leteo-fed simulate --owners 1000 --out out/sim-1000
  leteo-fed simulate --owners 1000 --keyholders 5 --threshold 3 --out out/sim-holders
  leteo-fed simulate --owners 1000 --stop-fraction 0.1 --quorum 850 --out out/sim-stop
  leteo-fed simulate --owners 10000 --hold 180 --invite 1000 --out out/sim-10k
  leteo-fed simulate --owners 10000 --connected-only --hold 300 --out out/sim-hold
"""


def add_parser(sub: SubParsers) -> None:
    p = sub.add_parser(
        "simulate",
        help="load test: N virtual owners against a real CSP (or key holders) and aggregator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--owners", type=int, default=100, help="virtual owners (default 100)")
    p.add_argument(
        "--processes",
        type=int,
        default=0,
        help="worker processes hosting them (default min(4, owners/250 + 1))",
    )
    p.add_argument(
        "--invite",
        type=int,
        default=-1,
        help="the round invites the first K owners (default: all)",
    )
    p.add_argument(
        "--connected-only",
        action="store_true",
        help="no round: the owners connect and stay connected for --hold seconds",
    )
    p.add_argument(
        "--hold", type=float, default=0.0, help="seconds all stay connected before the round"
    )
    p.add_argument("--quorum", type=int, default=0, help="default: invited less stopped")
    p.add_argument(
        "--stop-fraction",
        type=float,
        default=0.0,
        help="this fraction of the invited owners drop their connection after accepting, "
        "before uploading (a crashed site)",
    )
    p.add_argument("--features", type=int, default=4, help="PCA features (default 4)")
    p.add_argument("--rows-per-owner", type=int, default=20, help="rows per owner (default 20)")
    add_demo_key_flags(p)
    p.add_argument("--threads", type=int, default=8, help="per worker: its owners' thread pool")
    p.add_argument("--seed", type=int, default=1, help="data and stopped owners")
    p.add_argument("--deadline", type=float, default=600.0, help="the round's deadline, s")
    p.add_argument(
        "--connect-timeout", type=float, default=900.0, help="seconds for all to connect"
    )
    p.add_argument("--out", type=Path, default=Path("out/simulation"), help="work dir")
    set_handler(p, run)


def run(args: argparse.Namespace) -> int:
    from leteo_fed.demo.cluster import stop_on_signals
    from leteo_fed.demo.runner import check_demo_key_size, demo_keyholders
    from leteo_fed.simulation.driver import SimOptions, simulate
    from leteo_fed.simulation.report import table

    check_demo_key_size(args.key_bits, args.insecure_small_key)
    opts = SimOptions(
        owners=args.owners,
        processes=args.processes,
        invite=0 if args.connected_only else args.invite,
        quorum=args.quorum,
        stop_fraction=args.stop_fraction,
        hold=args.hold,
        features=args.features,
        rows_per_owner=args.rows_per_owner,
        key_bits=args.key_bits,
        keyholders=demo_keyholders(args.keyholders, args.threshold),
        seed=args.seed,
        threads=args.threads,
        connect_timeout=args.connect_timeout,
        deadline=args.deadline,
    )
    stop_on_signals()
    report = simulate(opts, args.out)
    print()
    print(table(report))
    print(f"\nreport: {Path(args.out) / 'simulation.json'}")
    rnd = report.get("round")
    if rnd is not None and not rnd.get("ok"):
        return 1
    return 0
