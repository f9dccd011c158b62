"""Utility of the federated projection vs the centralized one (weighted F1 of an SVM on each).

For each data set (sklearn breast cancer, wine, digits) and each method (DCA, LDA, PCA), with
seeded stratified k-fold cross-validation:

1. the training rows of the fold are split horizontally (seeded) across ``--owners`` CSV files;
2. a real deployment is started on loopback (CSP, aggregator and one owner agent per file as
   separate processes, mTLS, ``--key-bits`` Paillier; one cluster per data set and fold, all
   methods run in it) and the analyst runs one federated round per method;
3. the same projection is computed centrally on the pooled training rows
   (``discriminant.reference`` / ``pca.reference_pca``);
4. train and test rows are projected with each, ``(x - mean) @ W``; an SVM (standardized
   projected features, ``SVC(gamma="scale")``, kernel in {rbf, linear}, C in {0.1, 1, 10, 100},
   chosen by 3-fold inner CV on weighted F1) is trained on the training fold and scored with the
   weighted F1 on the test fold. The same SVM on the raw features is reported as context.

k = K - 1 components for DCA and LDA (K classes), and the same k for PCA. The features are used
as the owners hold them (no standardization), for the federated and centralized runs alike.

    .venv/bin/python benchmarks/dca_utility.py           # 3 data sets x 5 folds, 10 owners
    .venv/bin/python benchmarks/dca_utility.py --quick   # wine only, 2 folds

Writes ``out/dca_utility.json`` (``out/dca_utility_quick.json`` with ``--quick``) and prints a
plain-text table: mean weighted F1 (%) over folds, federated vs centralized, their difference,
the raw-feature SVM, and the largest 1 - |cos| between federated and centralized directions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.fileio import atomic_write_json
from leteo_fed.protocols import discriminant, pca
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest

DATASETS = {
    "breast_cancer": load_breast_cancer,
    "wine": load_wine,
    "digits": load_digits,
}
METHODS = ("dca", "lda", "pca")
INPUTS = ("raw", "standardized")
SHORT = {"raw": "raw", "standardized": "std"}
LABEL = "label"
SVM_GRID = {"svc__kernel": ["rbf", "linear"], "svc__C": [0.1, 1.0, 10.0, 100.0]}

# Published reference figures (private DCA vs NumPy, weighted F1 %, 10 owners, SVM), for the note.
BOOK_TABLE_9_3 = {
    "Diabetes": (76.5, 76.4),
    "Breast cancer": (96.9, 96.8),
    "Australian": (86.1, 85.5),
    "German": (72.7, 73.8),
    "Ionosphere": (84.3, 83.4),
    "SensIT": (67.8, 68.4),
}


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    bunch = DATASETS[name]()
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target, dtype=np.int64)


def write_owner_files(
    parts: list[np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    columns: dict[str, np.ndarray],
    folder: Path,
) -> list[OwnerSpec]:
    """One CSV per site: its training rows of every column in `columns` plus the label."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for i, idx in enumerate(parts, start=1):
        cols = {n: col[idx] for n, col in columns.items()}
        cols[LABEL] = y[idx]
        path = folder / f"site-{i}.csv"
        pacsv.write_csv(pa.table(cols), path)
        specs.append(OwnerSpec(f"site-{i}", path))
    return specs


def scale_from_variance(var: np.ndarray) -> np.ndarray:
    """Standard deviations, with 1 for (numerically) constant columns such as blank pixels."""
    var = np.asarray(var, dtype=np.float64)
    return np.where(var > 1e-12 * max(float(var.max()), 1e-300), np.sqrt(np.abs(var)), 1.0)


def federated_moments(result: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean and per-feature standard deviation from a full-rank federated PCA round.

    The covariance is W diag(lambda) W^T; its diagonal is a sum of non-negative terms, so it is
    recovered to ~1e-10 relative. An owner standardizes its own rows with these public numbers.
    """
    w = np.array(result["components"], dtype=np.float64).T
    var = (w**2) @ np.array(result["eigenvalues"], dtype=np.float64)
    return np.array(result["mean"], dtype=np.float64), scale_from_variance(var)


def centralized(x: np.ndarray, y: np.ndarray, method: str, k: int):
    """(eigenvalues, W d x k, mean) on the pooled training rows."""
    if method == "pca":
        return pca.reference_pca(x, k)
    evals, w = discriminant.reference(x, [y], method, k)
    return evals, w, x.mean(axis=0)


def federated_rounds(
    x: np.ndarray, y: np.ndarray, k: int, args: argparse.Namespace, workdir: Path, seed: int
) -> tuple[dict, dict[str, float]]:
    """All rounds of one fold in one deployment.

    Round 1 is a full-rank PCA on the raw features (the federated mean and variances); the owners
    then add standardized columns computed with them, and each method runs on raw and on
    standardized features. Owners read their file at every round.
    """
    d = x.shape[1]
    raw_names = [f"x{j:02d}" for j in range(d)]
    std_names = [f"z{j:02d}" for j in range(d)]
    order = np.random.default_rng(seed).permutation(len(x))
    parts = [np.sort(idx) for idx in np.array_split(order, args.owners)]
    raw_cols = {n: x[:, j] for j, n in enumerate(raw_names)}
    specs = write_owner_files(parts, x, y, raw_cols, workdir / "data")
    classes = tuple(str(c) for c in np.unique(y))
    cluster = LocalCluster(workdir / "run", specs, key_bits=args.key_bits, log_level="WARNING")
    out: dict = {"owner_rows": [len(p) for p in parts], "rounds": {}}
    timings: dict[str, float] = {}
    start = time.perf_counter()
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(args.owners)
            timings["startup_s"] = time.perf_counter() - start

            def run(method: str, names: list[str], components: int) -> dict:
                params = (
                    MomentsRequest(
                        features=tuple(names),
                        method=method,
                        components=components,
                        groupings=tuple(
                            LabelClasses(c, tuple(k))
                            for c, k in (() if method == "pca" else ((LABEL, classes),))
                        ),
                    ),
                    RoundOptions(min_owners=args.owners, deadline_seconds=600.0),
                )
                t0 = time.perf_counter()
                result = client.run(*params).to_dict()
                timings[f"{method}_{names[0][0]}_round_s"] = time.perf_counter() - t0
                return result

            moments = run("pca", raw_names, d)
            out["mean"], out["scale"] = federated_moments(moments)
            if "standardized" in args.inputs:
                z = (x - out["mean"]) / out["scale"]
                cols = {**raw_cols, **{n: z[:, j] for j, n in enumerate(std_names)}}
                write_owner_files(parts, x, y, cols, workdir / "data")  # same paths, in place
            for inputs in args.inputs:
                names = raw_names if inputs == "raw" else std_names
                for method in args.methods:
                    out["rounds"][(inputs, method)] = run(method, names, k)
    return out, timings


def from_result(result: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w = np.array(result["components"], dtype=np.float64).T  # d x k
    mean = np.array(result["mean"], dtype=np.float64) if result.get("mean") else np.zeros(len(w))
    return np.array(result["eigenvalues"], dtype=np.float64), w, mean


def svm_f1(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, seed: int
) -> tuple[float, dict]:
    search = GridSearchCV(
        make_pipeline(StandardScaler(), SVC(gamma="scale")),
        SVM_GRID,
        scoring="f1_weighted",
        cv=StratifiedKFold(3, shuffle=True, random_state=seed),
        n_jobs=1,
    )
    search.fit(x_train, y_train)
    pred = search.predict(x_test)
    best = {k.removeprefix("svc__"): v for k, v in search.best_params_.items()}
    return 100.0 * f1_score(y_test, pred, average="weighted"), best


def cos_deviation(w_fed: np.ndarray, w_ref: np.ndarray) -> float:
    """Largest 1 - |cos| between matching federated and centralized directions."""
    a = w_fed / np.linalg.norm(w_fed, axis=0)
    b = w_ref / np.linalg.norm(w_ref, axis=0)
    return float(max(0.0, np.max(1.0 - np.abs(np.sum(a * b, axis=0)))))


def direction_gap(w_fed: np.ndarray, w_ref: np.ndarray) -> float:
    """Largest |w_fed - (+-)w_ref| entry, sign-aligned: resolves gaps 1 - |cos| rounds to 0."""
    a = w_fed / np.linalg.norm(w_fed, axis=0)
    b = w_ref / np.linalg.norm(w_ref, axis=0)
    signs = np.where(np.sum(a * b, axis=0) < 0, -1.0, 1.0)
    return float(np.max(np.abs(a - b * signs)))


def evaluate(
    fed_rows: tuple[np.ndarray, np.ndarray],
    cen_rows: tuple[np.ndarray, np.ndarray],
    ytr: np.ndarray,
    yte: np.ndarray,
    fed_result: dict,
    method: str,
    k: int,
    seed: int,
) -> dict:
    """Federated vs centralized projection; each arm projects its own (train, test) rows."""
    f_evals, f_w, f_mean = from_result(fed_result)
    c_evals, c_w, c_mean = centralized(cen_rows[0], ytr, method, k)
    row = {
        "components": k,
        "max_1_minus_abs_cos": cos_deviation(f_w, c_w),
        "max_component_gap": direction_gap(f_w, c_w),
        "max_rel_eigenvalue_error": float(
            np.max(np.abs(f_evals - c_evals) / np.maximum(np.abs(c_evals), 1e-300))
        ),
        "max_mean_error": float(np.max(np.abs(f_mean - c_mean))),
    }
    if "ridge" in fed_result:
        row["ridge"] = fed_result["ridge"]
    for which, (xtr, xte), w, mean in (
        ("federated", fed_rows, f_w, f_mean),
        ("centralized", cen_rows, c_w, c_mean),
    ):
        score, params = svm_f1((xtr - mean) @ w, ytr, (xte - mean) @ w, yte, seed)
        row[f"{which}_f1"] = score
        row[f"{which}_svm"] = params
    return row


def run_fold(name, f, x, y, train, test, k, args, root) -> dict:
    t0 = time.perf_counter()
    xtr, ytr, xte, yte = x[train], y[train], x[test], y[test]
    fed, timings = federated_rounds(xtr, ytr, k, args, root / f"{name}-fold{f}", args.seed + f)
    raw_f1, raw_params = svm_f1(xtr, ytr, xte, yte, args.seed)
    # each arm standardizes with its own statistics: federated round vs pooled training rows
    c_mean, c_scale = xtr.mean(axis=0), scale_from_variance(xtr.var(axis=0, ddof=1))
    rows = {
        "raw": ((xtr, xte), (xtr, xte)),
        "standardized": (
            ((xtr - fed["mean"]) / fed["scale"], (xte - fed["mean"]) / fed["scale"]),
            ((xtr - c_mean) / c_scale, (xte - c_mean) / c_scale),
        ),
    }
    fold = {
        "fold": f,
        "train_rows": len(train),
        "test_rows": len(test),
        "owner_rows": fed["owner_rows"],
        "raw_f1": raw_f1,
        "raw_svm": raw_params,
        "standardization": {
            "max_mean_error": float(np.max(np.abs(fed["mean"] - c_mean))),
            "max_rel_scale_error": float(np.max(np.abs(fed["scale"] / c_scale - 1.0))),
        },
        "timings": timings,
        "results": {inputs: {} for inputs in args.inputs},
    }
    for inputs in args.inputs:
        fed_rows, cen_rows = rows[inputs]
        for method in args.methods:
            fold["results"][inputs][method] = evaluate(
                fed_rows, cen_rows, ytr, yte, fed["rounds"][(inputs, method)], method, k, args.seed
            )
    fold["timings"]["fold_s"] = time.perf_counter() - t0
    return fold


def summarize(rows: list[dict], k: int) -> dict:
    fed_f1 = np.array([r["federated_f1"] for r in rows])
    cen_f1 = np.array([r["centralized_f1"] for r in rows])
    many = len(rows) > 1
    return {
        "components": k,
        "federated_f1_mean": float(fed_f1.mean()),
        "federated_f1_std": float(fed_f1.std(ddof=1)) if many else 0.0,
        "centralized_f1_mean": float(cen_f1.mean()),
        "centralized_f1_std": float(cen_f1.std(ddof=1)) if many else 0.0,
        "difference_mean": float((fed_f1 - cen_f1).mean()),
        "max_abs_fold_difference": float(np.max(np.abs(fed_f1 - cen_f1))),
        "max_1_minus_abs_cos": float(max(r["max_1_minus_abs_cos"] for r in rows)),
        "max_component_gap": float(max(r["max_component_gap"] for r in rows)),
        "max_rel_eigenvalue_error": float(max(r["max_rel_eigenvalue_error"] for r in rows)),
    }


def run_dataset(name: str, args: argparse.Namespace, root: Path) -> dict:
    x, y = load(name)
    n_classes = len(np.unique(y))
    k = n_classes - 1
    folds = StratifiedKFold(args.folds, shuffle=True, random_state=args.seed)
    per_fold = []
    for f, (train, test) in enumerate(folds.split(x, y)):
        fold = run_fold(name, f, x, y, train, test, k, args, root)
        per_fold.append(fold)
        parts = [
            f"{SHORT[inputs]} {m} {r['federated_f1']:.1f}/{r['centralized_f1']:.1f}"
            for inputs, rs in fold["results"].items()
            for m, r in rs.items()
        ]
        print(
            f"  {name} fold {f + 1}/{args.folds}: raw SVM {fold['raw_f1']:.1f}; "
            f"{', '.join(parts)} (fed/central F1 %; {fold['timings']['fold_s']:.0f} s)",
            flush=True,
        )
    raw = np.array([fold["raw_f1"] for fold in per_fold])
    return {
        "rows": len(x),
        "features": x.shape[1],
        "classes": n_classes,
        "raw_f1_mean": float(raw.mean()),
        "raw_f1_std": float(raw.std(ddof=1)) if len(raw) > 1 else 0.0,
        "results": {
            inputs: {
                m: summarize([fold["results"][inputs][m] for fold in per_fold], k)
                for m in args.methods
            }
            for inputs in args.inputs
        },
        "max_rel_scale_error": float(
            max(fold["standardization"]["max_rel_scale_error"] for fold in per_fold)
        ),
        "folds": per_fold,
    }


def table(report: dict) -> str:
    head = (
        f"{'data set':<14} {'n x d':>9} {'K':>3} {'inputs':<6} {'method':<6} {'k':>2} "
        f"{'federated':>10} {'central':>8} {'diff':>6} {'raw SVM':>8} {'max 1-|cos|':>12} "
        f"{'max |dw|':>9}"
    )
    lines = [head, "-" * len(head)]
    for name, ds in report["datasets"].items():
        first = True
        for inputs, methods in ds["results"].items():
            for method, m in methods.items():
                lead = (
                    f"{name:<14} {ds['rows']:>4}x{ds['features']:<4} {ds['classes']:>3}"
                    if first
                    else f"{'':<14} {'':>9} {'':>3}"
                )
                raw = f"{ds['raw_f1_mean']:>8.1f}" if first else f"{'':>8}"
                lines.append(
                    f"{lead} {SHORT[inputs]:<6} {method.upper():<6} {m['components']:>2} "
                    f"{m['federated_f1_mean']:>10.1f} {m['centralized_f1_mean']:>8.1f} "
                    f"{m['difference_mean']:>+6.1f} {raw} {m['max_1_minus_abs_cos']:>12.1e} "
                    f"{m['max_component_gap']:>9.1e}"
                )
                first = False
    cfg = report["config"]
    lines += [
        f"weighted F1 (%), mean over {cfg['folds']} stratified folds (seed {cfg['seed']}); "
        f"{cfg['owners']} owners, {cfg['key_bits']}-bit Paillier.",
        "SVM: standardized projected features, SVC(gamma='scale'), kernel {rbf, linear} x "
        "C {0.1, 1, 10, 100} by 3-fold inner CV; raw SVM = same SVM on all features.",
        "inputs: raw = features as held; std = z-scored (federated arm: mean and variances from "
        "a federated round; centralized arm: pooled).",
        "max 1-|cos|, max |dw|: largest over folds and components between federated and "
        "centralized unit directions (|dw|: largest sign-aligned entry difference).",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated subset")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
    p.add_argument("--inputs", default=",".join(INPUTS), help="raw and/or standardized")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--owners", type=int, default=10)
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default out/...)")
    p.add_argument("--quick", action="store_true", help="wine only, 2 folds")
    p.add_argument(
        "--workdir", type=Path, default=None, help="keep data, certificates and logs here"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.datasets, args.folds = "wine", 2
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    args.inputs = [i.strip() for i in args.inputs.split(",") if i.strip()]
    unknown = (
        [d for d in args.datasets if d not in DATASETS]
        + [m for m in args.methods if m not in METHODS]
        + [i for i in args.inputs if i not in INPUTS]
    )
    if unknown:
        p.error(f"unknown data set or method: {', '.join(unknown)}")
    if args.key_bits < 2048:
        p.error("--key-bits below 2048 is not supported here")
    if args.out is None:
        args.out = Path("out") / ("dca_utility_quick.json" if args.quick else "dca_utility.json")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    report: dict = {
        "config": {
            "datasets": args.datasets,
            "methods": args.methods,
            "folds": args.folds,
            "owners": args.owners,
            "key_bits": args.key_bits,
            "seed": args.seed,
            "svm_grid": SVM_GRID,
            "svm_inner_cv": 3,
            "inputs": args.inputs,
            "components": "K - 1 for every method",
        },
        "book_table_9_3": {
            name: {"private_dca": a, "numpy": b} for name, (a, b) in BOOK_TABLE_9_3.items()
        },
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="dca-utility-") as tmp:
        root = args.workdir or Path(tmp)
        for name in args.datasets:
            print(f"{name}: {args.folds} folds, {args.owners} owners", flush=True)
            report["datasets"][name] = run_dataset(name, args, root)
    report["runtime_s"] = time.perf_counter() - start
    atomic_write_json(args.out, report)  # never a half-written report
    print()
    print(table(report))
    print(f"runtime {report['runtime_s']:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
