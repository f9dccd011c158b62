"""DP k-means at ε = 1: EUGkM and the LSH core-set vs diffprivlib's KMeans and k-means++.

A dev tool, not a test. Method:

1. **Data.** Three sets, each with PUBLIC bounds fixed from how the data are made, never from
   the rows:
   - ``gmm-d100``: the benchmark shape the private LSH clustering method was published with,
     100,000 points in 100 dimensions from a mixture of 64 Gaussians (centers uniform in
     [-1, 1]^100, std 0.2 per coordinate, weights equal), clipped to the public box
     [-1.5, 1.5]^100;
   - ``gmm-d4``: the same recipe in 4 dimensions (std 0.05), box [-1.2, 1.2]^4: EUGkM's regime;
   - ``digits``: scikit-learn's handwritten digits (1,797 x 64, pixel values 0..16), box [0, 16].
   The generators use fixed seeds (data seed 0), so every run sees the same points.
2. **Splits.** For each seed s in 0..S-1: one random 80/20 train/test split (seeded by s). The
   split is written to .npy files that every method reads, diffprivlib included.
3. **Methods**, all at ε = 1 (δ = 1e-6 for the LSH core-set, its published setting):
   - ``eugkm``: `leteo_fed.clustering.eugkm_numpy` (the NumPy reference; the Spark path releases
     the identical synopsis, tests/leteo_fed/clustering/test_dp_kmeans.py) with the box as bounds. On d = 100 and
     d = 64 it needs 2^d grid cells and is refused ("n/a"), as the method's design implies;
   - ``lsh``: `lsh_numpy` with the ball that encloses the box (center = box center,
     radius = half its diagonal): the same public knowledge as the box;
   - ``diffprivlib``: ``diffprivlib.models.KMeans(n_clusters=k, epsilon=1, bounds=(lo, hi),
     random_state=s)``, run by ANOTHER interpreter (``--diffprivlib-python``) because
     diffprivlib 0.6.6 needs scikit-learn < 1.7; it reads the same .npy splits;
   - ``kmeans++``: non-private ``sklearn.cluster.KMeans(k, init="k-means++", n_init=3,
     random_state=s)``, the floor;
   - ``trivial``: one center at the training mean (non-private), the ceiling any useful
     clustering must beat.
   Each DP method gets noise seed s.
4. **Metric.** Normalized k-means loss = mean squared distance of each TEST point to its
   nearest center (the TRUE points, not a noisy synopsis), for k in {2, 4, 8, 16}. Reported:
   the median over the S seeds (25th-75th percentiles in the JSON) and the ratio to k-means++.
   Target: lower loss than diffprivlib at the same ε.
5. **Scaling.** EUGkM on Spark (local[*]) on gmm-d4 drawn with 100,000 x {1, 2, 5, 10} rows
   (fresh points of the same mixture, Parquet in a temporary folder, written before the clock
   starts); wall time of read + ``eugkm_spark`` at k = 8, after one untimed warm-up run, and the
   ratio to x1. Target: x10 rows cost at most x10 time.

Setting up diffprivlib (its own venv)::

    python3 -m venv /tmp/dpl-venv
    /tmp/dpl-venv/bin/pip install diffprivlib==0.6.6 "scikit-learn<1.7" numpy

Run::

    .venv/bin/python benchmarks/dp_kmeans_bench.py --diffprivlib-python /tmp/dpl-venv/bin/python
    .venv/bin/python benchmarks/dp_kmeans_bench.py --quick   # 2 seeds, k in {2, 8}, scales 1, 2

Writes ``out/dp_kmeans_bench.json``, ``.md`` (the tables, also printed) and ``.png`` (loss vs k
per data set, time vs rows); ``_quick`` in the names with --quick. Without a diffprivlib
interpreter its column reads "not available". Exit status 0 whether or not the target is met
(verdicts are printed and stored).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from leteo_fed.clustering import eugkm_numpy, kmeans_loss, lsh_numpy  # noqa: E402
from leteo_fed.errors import ConfigError  # noqa: E402
from leteo_fed.fileio import atomic_save_figure, atomic_write_bytes, atomic_write_json  # noqa: E402

EPSILON = 1.0
DELTA = 1e-6
METHODS = ("eugkm", "lsh", "diffprivlib", "kmeans++", "trivial")

# diffprivlib runs in its own interpreter: this script is handed to it with a JSON job list.
DPL_RUNNER = r"""
import json, sys, time, warnings
import numpy as np
import diffprivlib
from diffprivlib.models import KMeans
spec = json.load(open(sys.argv[1]))
lo, hi = np.array(spec["lo"]), np.array(spec["hi"])
out = {"version": diffprivlib.__version__, "runs": []}
for job in spec["jobs"]:
    x = np.load(job["train"])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        km = KMeans(n_clusters=job["k"], epsilon=spec["epsilon"], bounds=(lo, hi),
                    random_state=job["seed"]).fit(x)
    out["runs"].append({"k": job["k"], "seed": job["seed"], "seconds": time.perf_counter() - t0,
                        "centers": np.asarray(km.cluster_centers_, dtype=float).tolist()})
json.dump(out, open(sys.argv[2], "w"))
"""


# ------------------------------------------------------------------------------ data


def gaussian_mixture(
    n: int, d: int, components: int, std: float, box: float, seed: int
) -> np.ndarray:
    """n points from `components` equal-weight spherical Gaussians, clipped to [-box, box]^d."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-1.0, 1.0, size=(components, d))
    x = centers[rng.integers(components, size=n)] + rng.normal(0.0, std, size=(n, d))
    return np.clip(x, -box, box)


def load_datasets(names: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if "gmm-d100" in names:
        out["gmm-d100"] = {
            "x": gaussian_mixture(100_000, 100, 64, 0.2, 1.5, seed=0),
            "lo": -1.5,
            "hi": 1.5,
            "source": "64-component Gaussian mixture, d=100, std 0.2, box [-1.5, 1.5]",
        }
    if "gmm-d4" in names:
        out["gmm-d4"] = {
            "x": gaussian_mixture(100_000, 4, 64, 0.05, 1.2, seed=0),
            "lo": -1.2,
            "hi": 1.2,
            "source": "64-component Gaussian mixture, d=4, std 0.05, box [-1.2, 1.2]",
        }
    if "digits" in names:
        from sklearn.datasets import load_digits

        out["digits"] = {
            "x": load_digits().data.astype(np.float64),
            "lo": 0.0,
            "hi": 16.0,
            "source": "scikit-learn digits, 1797 x 64, pixel range [0, 16]",
        }
    return out


def split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(round(0.8 * n))
    return perm[:cut], perm[cut:]


# ------------------------------------------------------------------------------ methods


def ball_of_box(lo: float, hi: float, d: int) -> tuple[float, float]:
    """(center, radius) of the smallest ball holding the box [lo, hi]^d."""
    return (lo + hi) / 2.0, (hi - lo) / 2.0 * math.sqrt(d)


def run_ours(method: str, train: np.ndarray, k: int, ds: dict, seed: int) -> dict[str, Any]:
    d = train.shape[1]
    t0 = time.perf_counter()
    try:
        if method == "eugkm":
            res = eugkm_numpy(train, k, EPSILON, ds["lo"], ds["hi"], seed=seed)
        else:
            center, radius = ball_of_box(ds["lo"], ds["hi"], d)
            res = lsh_numpy(train, k, EPSILON, radius, delta=DELTA, center=center, seed=seed)
    except ConfigError as exc:
        return {"centers": None, "na": str(exc)}
    return {
        "centers": res.centers,
        "seconds": time.perf_counter() - t0,
        "summary_points": int(res.summary_points.shape[0]),
    }


def run_kmeanspp(train: np.ndarray, k: int, seed: int) -> dict[str, Any]:
    from sklearn.cluster import KMeans

    t0 = time.perf_counter()
    km = KMeans(n_clusters=k, init="k-means++", n_init=3, random_state=seed).fit(train)
    return {"centers": km.cluster_centers_, "seconds": time.perf_counter() - t0}


def run_diffprivlib(
    python: str | None, ds: dict, jobs: list[dict[str, Any]], workdir: Path
) -> tuple[dict[tuple[int, int], dict[str, Any]], str]:
    """All (k, seed) fits of one data set in one subprocess; {(k, seed): run}, version."""
    if not python:
        return {}, "not available (no --diffprivlib-python)"
    d = ds["x"].shape[1]
    spec = {
        "epsilon": EPSILON,
        "lo": [float(ds["lo"])] * d,
        "hi": [float(ds["hi"])] * d,
        "jobs": jobs,
    }
    spec_path, out_path, script = (
        workdir / "dpl_spec.json",
        workdir / "dpl_out.json",
        workdir / "dpl.py",
    )
    spec_path.write_text(json.dumps(spec))
    script.write_text(DPL_RUNNER)
    proc = subprocess.run(
        [python, str(script), str(spec_path), str(out_path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {}, f"not available (diffprivlib failed: {tail})"
    out = json.loads(out_path.read_text())
    runs = {
        (r["k"], r["seed"]): {"centers": np.array(r["centers"]), "seconds": r["seconds"]}
        for r in out["runs"]
    }
    return runs, f"diffprivlib {out['version']} ({python})"


# ------------------------------------------------------------------------------ accuracy


def accuracy(
    datasets: dict[str, dict[str, Any]], ks: list[int], seeds: int, dpl_python: str | None
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dpkm-bench-") as tmp:
        workdir = Path(tmp)
        for name, ds in datasets.items():
            x = ds["x"]
            _stderr(f"{name}: {x.shape[0]} x {x.shape[1]}")
            splits, jobs = [], []
            for s in range(seeds):
                tr, te = split(x.shape[0], s)
                path = workdir / f"{name}_train_{s}.npy"
                np.save(path, x[tr])
                splits.append((np.load(path), x[te]))  # everyone uses the saved split
                jobs += [{"k": k, "seed": s, "train": str(path)} for k in ks]
            dpl_runs, dpl_version = run_diffprivlib(dpl_python, ds, jobs, workdir)
            rows: dict[str, dict[str, Any]] = {m: {} for m in METHODS}
            for k in ks:
                per: dict[str, list[float]] = {m: [] for m in METHODS}
                secs: dict[str, list[float]] = {m: [] for m in METHODS}
                na: dict[str, str] = {}
                for s, (train, test) in enumerate(splits):
                    runs: dict[str, dict[str, Any]] = {
                        "eugkm": run_ours("eugkm", train, k, ds, s),
                        "lsh": run_ours("lsh", train, k, ds, s),
                        "kmeans++": run_kmeanspp(train, k, s),
                        "trivial": {"centers": train.mean(axis=0, keepdims=True), "seconds": 0.0},
                    }
                    if (k, s) in dpl_runs:
                        runs["diffprivlib"] = dpl_runs[(k, s)]
                    else:
                        runs["diffprivlib"] = {"centers": None, "na": dpl_version}
                    for m, run in runs.items():
                        if run["centers"] is None:
                            na[m] = run["na"]
                            continue
                        per[m].append(kmeans_loss(test, run["centers"]))
                        secs[m].append(run["seconds"])
                for m in METHODS:
                    if not per[m]:
                        rows[m][str(k)] = {"na": na.get(m, "not run")}
                        continue
                    q25, med, q75 = np.percentile(per[m], [25, 50, 75])
                    rows[m][str(k)] = {
                        "median_loss": float(med),
                        "p25": float(q25),
                        "p75": float(q75),
                        "losses": [float(v) for v in per[m]],
                        "median_seconds": float(np.median(secs[m])),
                    }
                _stderr(
                    f"  k={k}: "
                    + ", ".join(
                        f"{m} {rows[m][str(k)].get('median_loss', float('nan')):.4g}"
                        for m in METHODS
                    )
                )
            results[name] = {
                "source": ds["source"],
                "rows": int(x.shape[0]),
                "dimension": int(x.shape[1]),
                "bounds": [ds["lo"], ds["hi"]],
                "lsh_ball": dict(
                    zip(
                        ("center", "radius"),
                        ball_of_box(ds["lo"], ds["hi"], x.shape[1]),
                        strict=True,
                    )
                ),
                "diffprivlib": dpl_version,
                "methods": rows,
            }
    return results


# ------------------------------------------------------------------------------ scaling


def scaling(scales: list[int], base_rows: int, k: int) -> list[dict[str, Any]]:
    """Wall time of read + eugkm_spark on gmm-d4 at base_rows x scale (fresh points)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from leteo_fed.clustering.spark_eugkm import eugkm_spark
    from leteo_fed.clustering.spark_io import load_features
    from leteo_fed.data.spark_stats import get_spark

    get_spark()
    out = []
    with tempfile.TemporaryDirectory(prefix="dpkm-scale-") as tmp:

        def write(rows: int, tag: str) -> str:
            x = gaussian_mixture(rows, 4, 64, 0.05, 1.2, seed=0)
            path = os.path.join(tmp, f"{tag}.parquet")
            pq.write_table(pa.table({f"f{i}": x[:, i] for i in range(4)}), path)
            return path

        warm = write(5_000, "warmup")
        df, _ = load_features(warm)
        eugkm_spark(df, k, EPSILON, -1.2, 1.2, seed=0)
        for scale in scales:
            path = write(base_rows * scale, f"x{scale}")
            load = _load_1m()
            t0 = time.perf_counter()
            df, _ = load_features(path)
            res = eugkm_spark(df, k, EPSILON, -1.2, 1.2, seed=scale)
            seconds = time.perf_counter() - t0
            out.append(
                {
                    "scale": scale,
                    "rows": base_rows * scale,
                    "seconds": seconds,
                    "m1": res.details["m1"],
                    "level2_cells": res.details["level2_cells"],
                    "synopsis_cells": res.details["synopsis_cells"],
                    "phases_s": res.timings,
                    "load_1m_before": load,
                }
            )
            _stderr(f"  EUGkM Spark x{scale}: {base_rows * scale} rows in {seconds:.1f} s")
    base = out[0]["seconds"] if out else 1.0
    for row in out:
        row["ratio_to_x1"] = row["seconds"] / base
    return out


def _load_1m() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


# ------------------------------------------------------------------------------ report


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per data set and k: is the best of our methods below diffprivlib?"""
    out = []
    for name, res in results.items():
        rows = res["methods"]
        for k in rows["kmeans++"]:
            dpl = rows["diffprivlib"][k].get("median_loss")
            ours = {m: rows[m][k].get("median_loss") for m in ("eugkm", "lsh")}
            ours = {m: v for m, v in ours.items() if v is not None}
            if dpl is None or not ours:
                continue
            best = min(ours, key=ours.get)
            out.append(
                {
                    "dataset": name,
                    "k": int(k),
                    "best_method": best,
                    "best_loss": ours[best],
                    "diffprivlib_loss": dpl,
                    "lower_than_diffprivlib": ours[best] < dpl,
                }
            )
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# DP k-means at epsilon = {EPSILON:g} (delta = {DELTA:g} for lsh)",
        "",
        "Normalized k-means loss (mean squared distance of held-out TRUE points to the nearest "
        f"center), median over {report['seeds']} seeds; (x) = ratio to non-private k-means++.",
        "",
    ]
    for name, res in report["accuracy"].items():
        lines += [f"## {name}: {res['source']}", "", f"diffprivlib: {res['diffprivlib']}", ""]
        ks = list(res["methods"]["kmeans++"])
        lines.append("| method | " + " | ".join(f"k={k}" for k in ks) + " |")
        lines.append("|---|" + "---|" * len(ks))
        for m in METHODS:
            cells = []
            for k in ks:
                cell = res["methods"][m][k]
                if "median_loss" not in cell:
                    cells.append("n/a")
                    continue
                ref = res["methods"]["kmeans++"][k]["median_loss"]
                cells.append(f"{cell['median_loss']:.4g} ({cell['median_loss'] / ref:.2f}x)")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        notes = {
            m: res["methods"][m][ks[0]]["na"] for m in METHODS if "na" in res["methods"][m][ks[0]]
        }
        for m, why in notes.items():
            lines += ["", f"{m}: {why}"]
        lines.append("")
    if report["verdicts"]:
        met = sum(v["lower_than_diffprivlib"] for v in report["verdicts"])
        lines += [
            f"Target (lower loss than diffprivlib): met in {met} of {len(report['verdicts'])} "
            "(data set, k) cells.",
            "",
        ]
    if report.get("scaling"):
        lines += [
            "## EUGkM on Spark: time vs rows (gmm-d4, k = 8, read + fit)",
            "",
            "| scale | rows | seconds | ratio to x1 | m1 | level-2 cells |",
            "|---|---|---|---|---|---|",
        ]
        for row in report["scaling"]:
            lines.append(
                f"| x{row['scale']} | {row['rows']} | {row['seconds']:.1f} | "
                f"{row['ratio_to_x1']:.2f} | {row['m1']} | {row['level2_cells']} |"
            )
        lines.append("")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    acc = report["accuracy"]
    colors = dict(
        zip(METHODS, ("tab:blue", "tab:orange", "tab:green", "tab:gray", "tab:red"), strict=True)
    )
    panels = len(acc) + (1 if report.get("scaling") else 0)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.0), squeeze=False)
    for ax, (name, res) in zip(axes[0], acc.items(), strict=False):
        for m in METHODS:
            ks = [int(k) for k, c in res["methods"][m].items() if "median_loss" in c]
            if not ks:
                continue
            med = [res["methods"][m][str(k)]["median_loss"] for k in ks]
            lo = [res["methods"][m][str(k)]["p25"] for k in ks]
            hi = [res["methods"][m][str(k)]["p75"] for k in ks]
            ax.plot(ks, med, marker="o", label=m, color=colors[m])
            ax.fill_between(ks, lo, hi, alpha=0.15, color=colors[m])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("k")
        ax.set_ylabel("normalized k-means loss (test)")
        ax.set_title(name)
        ax.legend(fontsize=8)
    if report.get("scaling"):
        ax = axes[0][-1]
        rows = [r["rows"] for r in report["scaling"]]
        ax.plot(rows, [r["seconds"] for r in report["scaling"]], marker="o", label="EUGkM Spark")
        ax.plot(
            rows,
            [report["scaling"][0]["seconds"] * r / rows[0] for r in rows],
            "--",
            label="linear",
        )
        ax.set_xlabel("rows")
        ax.set_ylabel("seconds")
        ax.set_title("EUGkM on Spark (gmm-d4, k=8)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--diffprivlib-python", default=None, help="interpreter with diffprivlib 0.6.6")
    p.add_argument("--seeds", type=int, default=5, help="splits / noise seeds (default: 5)")
    p.add_argument("--k", default="2,4,8,16", help="k values (default: 2,4,8,16)")
    p.add_argument("--datasets", default="gmm-d100,gmm-d4,digits", help="data sets to run")
    p.add_argument(
        "--scales", default="1,2,5,10", help="row multipliers for Spark (default: 1,2,5,10)"
    )
    p.add_argument("--base-rows", type=int, default=100_000, help="rows at x1 (default: 100000)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark scaling runs")
    p.add_argument("--quick", action="store_true", help="2 seeds, k in {2, 8}, scales 1, 2")
    p.add_argument("--out", type=Path, default=ROOT / "out", help="output folder (default: out/)")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.k, args.scales = 2, "2,8", "1,2"
    args.k = [int(v) for v in args.k.split(",")]
    args.scales = [int(v) for v in args.scales.split(",")]
    args.datasets = [v.strip() for v in args.datasets.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    datasets = load_datasets(args.datasets)
    report: dict[str, Any] = {
        "benchmark": "dp_kmeans_bench",
        "epsilon": EPSILON,
        "delta_lsh": DELTA,
        "seeds": args.seeds,
        "k": args.k,
        "accuracy": accuracy(datasets, args.k, args.seeds, args.diffprivlib_python),
    }
    report["verdicts"] = verdicts(report["accuracy"])
    if not args.no_spark:
        _stderr("EUGkM on Spark, time vs rows")
        report["scaling"] = scaling(args.scales, args.base_rows, k=8)
    report["total_seconds"] = time.perf_counter() - start
    stem = "dp_kmeans_bench_quick" if args.quick else "dp_kmeans_bench"
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(report)
    atomic_write_json(args.out / f"{stem}.json", report)
    atomic_write_bytes(args.out / f"{stem}.md", text.encode())
    plot(report, args.out / f"{stem}.png")
    print(text)
    _stderr(f"wrote {args.out / stem}.json/.md/.png in {report['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
