"""The simulation's table: what a site reads before go-live."""

from __future__ import annotations

import math
from typing import Any


def _f(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(figure, value) pairs, in reading order."""
    opts = report["options"]
    out = [
        ("virtual owners / worker processes", f"{opts['owners']} / {report['workers']}"),
        ("Paillier key", f"{opts['key_bits']} bits{_key_service(opts.get('keyholders'))}"),
        ("certificates and keys", _f(report.get("certificates_seconds"), " s", 1)),
    ]
    c = report.get("connect")
    if c:
        out += [
            ("connect: all owners connected", _f(c["seconds"], " s", 1)),
            ("connect: owners per second", _f(c["owners_per_second"], "", 0)),
            ("aggregator CPU per owner connecting", _f(c["aggregator_cpu_ms_per_owner"], " ms")),
            (
                "aggregator RSS per connected owner",
                _f(c["aggregator_rss_kib_per_owner"], " KiB", 1),
            ),
            ("aggregator RSS, all connected", _f(c["aggregator"]["rss_mib"], " MiB", 0)),
        ]
    h = report.get("hold")
    if h:
        out += [
            ("hold: seconds, fewest connected", f"{h['seconds']:.0f} s, {h['fewest_connected']}"),
            (
                "hold: aggregator CPU (share of one core)",
                _f(100 * h["aggregator_cpu_share"], " %", 1),
            ),
            (
                "hold: aggregator RSS now / peak",
                f"{h['aggregator']['rss_mib']:.0f} / {h['aggregator']['peak_rss_mib']:.0f} MiB",
            ),
        ]
    r = report.get("round")
    if r:
        out += [
            (
                "round: invited / quorum / stopped",
                f"{r['invited']} / {r['quorum']} / {r['stopped']}",
            ),
            ("round: state, shares summed", f"{r['state']}, {r['submitted']}"),
            ("round time (StartRound -> result)", _f(r["round_seconds"], " s")),
        ]
        t = r.get("timings")
        if t:
            out += [
                ("collect (invitations -> all shares in)", _f(t["collect_seconds"], " s")),
                (
                    "answer latency p50 / p99 / max",
                    " / ".join(
                        _f(t[k], " s", 3)
                        for k in ("answer_p50_seconds", "answer_p99_seconds", "answer_max_seconds")
                    ),
                ),
            ]
            threshold = "holders" in t
            out += _holder_rows(t) if threshold else _csp_rows(t)
            out += [
                ("aggregator CPU per invited owner", _f(r["aggregator_cpu_ms_per_owner"], " ms")),
                _holders_cpu(r)
                if threshold
                else ("CSP CPU over the round", _f(r["csp_cpu_seconds"], " s")),
                ("workers' CPU over the round", _f(r["workers_cpu_seconds"], " s")),
            ]
            b = r["bytes_per_owner"]
            out.append(
                (
                    "bytes per owner: spec / statement / ciphertexts / result",
                    " / ".join(
                        _f(b[k], "", 0)
                        for k in (
                            "round_spec",
                            "share_statement",
                            "ciphertexts",
                            "published_status",
                        )
                    ),
                )
            )
        a = r.get("accuracy")
        if a:
            out += [
                (
                    "vs pooled PCA: eigenvalues (rel) / mean",
                    f"{a['max_rel_eigenvalue_error']:.1e} / {a['max_mean_error']:.1e}",
                ),
                ("vs pooled PCA: within 1e-9", "yes" if a["within_tolerance"] else "NO"),
            ]
    p = report.get("processes")
    if p:
        w = p["workers"]
        owners = max(1, opts["owners"])
        out += [
            (
                "workers' RSS (all) / per owner",
                f"{w['rss_mib']:.0f} MiB / {1024 * w['rss_mib'] / owners:.0f} KiB",
            ),
        ]
        for name in ("aggregator", "csp"):
            if name in p:
                out.append((f"{name} peak RSS", _f(p[name]["peak_rss_mib"], " MiB", 0)))
        holders = sorted((n for n in p if n.startswith("keyholder-")), key=_holder_number)
        if holders:
            out.append(
                (
                    "key holders' peak RSS, each",
                    " / ".join(f"{p[n]['peak_rss_mib']:.0f}" for n in holders) + " MiB",
                )
            )
    return out


def _key_service(keyholders: Any) -> str:
    if not keyholders:
        return ""  # one CSP
    m, t = keyholders
    return f", {m} key holders, any {t} decrypt"


def _holder_number(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def _csp_rows(t: dict[str, Any]) -> list[tuple[str, str]]:
    """The CSP's phases of the round."""
    return [
        (
            "CSP verify / sum / decrypt",
            " / ".join(
                _f(t[k], " s", 3)
                for k in ("csp_verify_seconds", "csp_sum_seconds", "csp_decrypt_seconds")
            ),
        ),
    ]


HOLDER_COLUMNS = ("verify", "sum", "partial", "prove")


def _holder_rows(t: dict[str, Any]) -> list[tuple[str, str]]:
    """The key holders' phases: how many answered validly, the aggregator's round trip to
    them, its proof checks and combination, each holder's own verify / sum / partial / prove."""
    each = t["holders"]
    answered = [
        f"{int(t[k])} {k.split('_')[1]}"
        for k in ("holders_valid", "holders_wrong", "holders_failed")
        if t.get(k)
    ]
    out = [
        ("key holders answering", ", ".join(answered) or "-"),
        (
            "holders round trip / verify proofs / combine",
            " / ".join(
                _f(t[k], " s", 3)
                for k in ("holder_round_trip_seconds", "verify_proofs_seconds", "combine_seconds")
            ),
        ),
    ]
    for label, phases in each.items():
        out.append(
            (
                f"holder {label} verify / sum / partial / prove",
                " / ".join(_f(phases.get(k), " s", 3) for k in HOLDER_COLUMNS),
            )
        )
    return out


def _holders_cpu(r: dict[str, Any]) -> tuple[str, str]:
    cpu = r.get("keyholders_cpu_seconds") or {}
    names = sorted(cpu, key=_holder_number)
    each = " / ".join(f"{cpu[n]:.2f}" for n in names)
    return ("key holders' CPU over the round, each", f"{each} s" if names else "-")


def table(report: dict[str, Any]) -> str:
    pairs = rows(report)
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in pairs)
