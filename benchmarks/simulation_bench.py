"""Scale with virtual owners: 100, 1,000 and 10,000 owners against one aggregator and one CSP.

A dev tool, not a test (the 10,000-owner run holds its owners connected for ``--hold`` seconds;
with the default 600 it takes about 13 minutes on 2 cores). For each N in ``--owners`` it runs
`leteo_fed.simulation.driver.simulate` (what ``leteo-fed simulate`` runs): N virtual owners in
a few worker processes, each with its own certificate, signing key, mTLS connection, data,
audit log and ledger, running the owner agent's code; a real CSP (2048-bit key) and aggregator
process; one PCA round over ``min(N, --invite)`` of them (quorum: all invited), checked against
PCA of the pooled rows to 1e-9. At the largest N every owner is first held connected for
``--hold`` seconds (idle cost), and ``--stop-fraction`` of its invited owners stop mid-round
(after accepting, before uploading: the quorum is the others).

Figures (from the simulation's report; docs/simulation.md says how each is measured): connect
time and rate, the aggregator's CPU per connecting owner and RSS per connected owner, its CPU
share and RSS over the hold, round and collect time, owners' answer latency p50/p99/max, CSP
verify/sum/decrypt, aggregator CPU per invited owner, bytes per owner per round (spec,
statement, ciphertexts, published status), the error against pooled PCA.

``slopes`` in the JSON: the log-log slope of each figure against N (connect figures) or
against the invited count (round figures): 0 = flat, 1 = linear, 2 = quadratic.

    .venv/bin/python benchmarks/simulation_bench.py                       # 100, 1,000, 10,000
    .venv/bin/python benchmarks/simulation_bench.py --owners 100 1000 --hold 0 --out /tmp/s.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from leteo_fed.bench.scaling import loglog_slope
from leteo_fed.simulation.driver import SimOptions, simulate

OWNER_COUNTS = (100, 1000, 10_000)
INVITE = 1000  # a round invites at most this many (10,000 connected, 1,000 in the round)
HOLD_S = 600.0  # at the largest N: all connected this long before the round

# (label, path in the report, unit, scaled by): what the table shows
CONNECT = [
    ("connect (s)", ("connect", "seconds")),
    ("owners / s", ("connect", "owners_per_second")),
    ("agg CPU / connecting owner (ms)", ("connect", "aggregator_cpu_ms_per_owner")),
    ("agg RSS / connected owner (KiB)", ("connect", "aggregator_rss_kib_per_owner")),
    ("agg RSS, all connected (MiB)", ("connect", "aggregator", "rss_mib")),
]
ROUND = [
    ("round (s)", ("round", "round_seconds")),
    ("collect (s)", ("round", "timings", "collect_seconds")),
    ("answer p50 (s)", ("round", "timings", "answer_p50_seconds")),
    ("answer p99 (s)", ("round", "timings", "answer_p99_seconds")),
    ("answer max (s)", ("round", "timings", "answer_max_seconds")),
    ("CSP verify (s)", ("round", "timings", "csp_verify_seconds")),
    ("CSP sum (s)", ("round", "timings", "csp_sum_seconds")),
    ("CSP decrypt (s)", ("round", "timings", "csp_decrypt_seconds")),
    ("agg CPU / invited owner (ms)", ("round", "aggregator_cpu_ms_per_owner")),
    ("spec bytes / owner", ("round", "bytes_per_owner", "round_spec")),
    ("statement bytes / owner", ("round", "bytes_per_owner", "share_statement")),
    ("ciphertext bytes / owner", ("round", "bytes_per_owner", "ciphertexts")),
    ("published bytes / owner", ("round", "bytes_per_owner", "published_status")),
    ("max rel. eigenvalue error", ("round", "accuracy", "max_rel_eigenvalue_error")),
]


def pick(report: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = report
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, int | float) else None


def slopes(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    owners = [float(r["options"]["owners"]) for r in runs]
    invited = [float(pick(r, ("round", "invited")) or 0) for r in runs]
    out = {label: loglog_slope(owners, [pick(r, path) for r in runs]) for label, path in CONNECT}
    out.update(
        {label: loglog_slope(invited, [pick(r, path) for r in runs]) for label, path in ROUND}
    )
    return out


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    if value != 0 and (abs(value) < 0.01 or abs(value) >= 1e5):
        return f"{value:.2e}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def markdown(report: dict[str, Any]) -> str:
    runs, s = report["runs"], report["slopes"]
    head = " | ".join(f"{r['options']['owners']:,}" for r in runs)
    lines = [
        f"| owners connected | {head} | log-log slope |",
        "|---|" + "---:|" * (len(runs) + 1),
        "| invited to the round | "
        + " | ".join(f"{int(pick(r, ('round', 'invited')) or 0):,}" for r in runs)
        + " | |",
        "| shares summed | "
        + " | ".join(f"{int(pick(r, ('round', 'submitted')) or 0):,}" for r in runs)
        + " | |",
    ]
    for label, path in CONNECT + ROUND:
        cells = " | ".join(_cell(pick(r, path)) for r in runs)
        lines.append(f"| {label} | {cells} | {_cell(s.get(label))} |")
    held = [r for r in runs if r.get("hold")]
    for r in held:
        h = r["hold"]
        lines.append("")
        lines.append(
            f"Hold at {r['options']['owners']:,} owners: {h['seconds']:.0f} s, fewest connected "
            f"{h['fewest_connected']:,}, aggregator CPU {100 * h['aggregator_cpu_share']:.1f}% of "
            f"one core, RSS {h['aggregator']['rss_mib']:.0f} MiB (peak "
            f"{h['aggregator']['peak_rss_mib']:.0f})."
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    counts = sorted(args.owners)
    work = Path(tempfile.mkdtemp(prefix="leteo-simbench-"))
    runs = []
    try:
        for n in counts:
            opts = SimOptions(
                owners=n,
                invite=min(n, args.invite),
                hold=args.hold if n == counts[-1] else 0.0,
                stop_fraction=args.stop_fraction if n == counts[-1] else 0.0,
                seed=args.seed,
            )
            print(f"== {n} owners", file=sys.stderr, flush=True)
            runs.append(
                simulate(opts, work / f"n{n}", progress=lambda m: print(m, file=sys.stderr))
            )
            shutil.rmtree(work / f"n{n}" / "deployment" / "certs", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1m_after": os.getloadavg()[0],
        },
        "runs": runs,
        "slopes": slopes(runs),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--owners", type=int, nargs="+", default=list(OWNER_COUNTS))
    p.add_argument("--invite", type=int, default=INVITE, help=f"default {INVITE}")
    p.add_argument("--hold", type=float, default=HOLD_S, help="seconds, at the largest N")
    p.add_argument("--stop-fraction", type=float, default=0.1, help="at the largest N")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=Path("out/simulation_bench.json"))
    args = p.parse_args(argv)
    report = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1))
    print(markdown(report))
    ok = all(pick(r, ("round", "ok")) for r in report["runs"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
