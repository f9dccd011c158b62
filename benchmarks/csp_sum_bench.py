"""The CSP's sum of a round's shares: in-process against its worker processes (csp/share_sum.py).

A dev tool. Shares of ``--ciphertexts`` ciphertexts each under a fresh 2048-bit key (random
units mod n^2 with the digest an owner would sign: the check and the product cost what they cost
for real ciphertexts, and encrypting hundreds of thousands first would take minutes), fed share
by share to `ShareSum` as the CSP's handler does, in-process and on a `TaskPool` of one worker per
core. Both products must be equal. Wall-clock seconds, and ciphertexts per second.

    .venv/bin/python benchmarks/csp_sum_bench.py --shares 200 400 --ciphertexts 1000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

from csp.share_check import ShareCiphertexts
from csp.share_sum import ShareSum
from leteo_fed.crypto.paillier import generate_keypair
from leteo_fed.crypto.parallel import TaskPool
from leteo_fed.transport.statements import ciphertext_digest


def make_shares(n: int, shares: int, per_share: int, seed: int) -> list[ShareCiphertexts]:
    rng = random.Random(seed)
    n2, width = n * n, (2 * n.bit_length() + 7) // 8
    out = []
    for s in range(shares):
        cts = [rng.randrange(1, n2) for _ in range(per_share)]
        out.append(ShareCiphertexts(f"site-{s}", ciphertext_digest(cts, width), cts))
    return out


def timed_sum(n: int, width: int, shares: list[ShareCiphertexts], pool: TaskPool | None):
    start = time.perf_counter()
    summer = ShareSum(n, width, pool)
    for share in shares:
        summer.add(share)
    product = summer.total()
    return time.perf_counter() - start, product


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--shares", type=int, nargs="+", default=[200, 400])
    p.add_argument("--ciphertexts", type=int, default=1000, help="per share")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    key = generate_keypair(2048)
    n, width = key.public.n, key.public.ciphertext_bytes
    rows = []
    with TaskPool() as pool:
        pool.start()  # as the CSP's first large round would; not timed
        for count in args.shares:
            shares = make_shares(n, count, args.ciphertexts, args.seed)
            local_s, local = timed_sum(n, width, shares, None)
            pool_s, parallel = timed_sum(n, width, shares, pool)
            if local != parallel:
                print("error: the two sums differ", file=sys.stderr)
                return 1
            total = count * args.ciphertexts
            rows.append(
                {
                    "shares": count,
                    "ciphertexts": total,
                    "in_process_s": local_s,
                    "workers": pool.workers,
                    "workers_s": pool_s,
                    "speedup": local_s / pool_s,
                    "ciphertexts_per_s_workers": total / pool_s,
                }
            )
    print("| shares | ciphertexts | in-process (s) | workers | on workers (s) | speed-up |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['shares']} | {r['ciphertexts']:,} | {r['in_process_s']:.2f} | {r['workers']} | "
            f"{r['workers_s']:.2f} | {r['speedup']:.2f} |"
        )
    print(json.dumps(rows), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
