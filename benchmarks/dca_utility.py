"""Utility of the federated projection vs the centralized one (the book's table 9.3).

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
import json
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

from leteo_fed.client import AnalystClient, RoundParams
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.protocols import discriminant, pca

DATASETS = {
    "breast_cancer": load_breast_cancer,
    "wine": load_wine,
    "digits": load_digits,
}
METHODS = ("dca", "lda", "pca")
LABEL = "label"
SVM_GRID = {"svc__kernel": ["rbf", "linear"], "svc__C": [0.1, 1.0, 10.0, 100.0]}

# Book table 9.3 (private DCA vs NumPy, weighted F1 %, 10 owners, SVM), for the note.
BOOK_TABLE_9_3 = {
    "Diabetes": (76.5, 76.4),
    "Breast cancer": (96.9, 96.8),
    "Australian": (86.1, 85.5),
    "German": (72.7, 73.8),
    "Ionosphere": (84.3, 83.4),
    "SensIT": (67.8, 68.4),
}


def load(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    bunch = DATASETS[name]()
    x = np.asarray(bunch.data, dtype=np.float64)
    y = np.asarray(bunch.target, dtype=np.int64)
    features = [f"x{j:02d}" for j in range(x.shape[1])]
    return x, y, features


def write_owner_files(
    x: np.ndarray, y: np.ndarray, features: list[str], owners: int, folder: Path, seed: int
) -> list[OwnerSpec]:
    """Seeded horizontal split of the training rows into one CSV per site."""
    folder.mkdir(parents=True, exist_ok=True)
    order = np.random.default_rng(seed).permutation(len(x))
    specs = []
    for i, idx in enumerate(np.array_split(order, owners), start=1):
        idx = np.sort(idx)
        cols = {n: x[idx, j] for j, n in enumerate(features)}
        cols[LABEL] = y[idx]
        path = folder / f"site-{i}.csv"
        pacsv.write_csv(pa.table(cols), path)
        specs.append(OwnerSpec(f"site-{i}", path))
    return specs


def centralized(x: np.ndarray, y: np.ndarray, method: str, k: int):
    """(eigenvalues, W d x k, mean) on the pooled training rows."""
    if method == "pca":
        return pca.reference_pca(x, k)
    evals, w = discriminant.reference(x, [y], method, k)
    return evals, w, x.mean(axis=0)


def federated_rounds(
    x: np.ndarray,
    y: np.ndarray,
    features: list[str],
    k: int,
    args: argparse.Namespace,
    workdir: Path,
    seed: int,
) -> tuple[dict[str, dict], dict[str, float]]:
    specs = write_owner_files(x, y, features, args.owners, workdir / "data", seed)
    classes = tuple(str(c) for c in np.unique(y))
    cluster = LocalCluster(workdir / "run", specs, key_bits=args.key_bits, log_level="WARNING")
    results: dict[str, dict] = {}
    timings: dict[str, float] = {}
    start = time.perf_counter()
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(args.owners)
            timings["startup_s"] = time.perf_counter() - start
            for method in args.methods:
                params = RoundParams(
                    features=features,
                    method=method,
                    components=k,
                    min_owners=args.owners,
                    deadline_seconds=600.0,
                    groupings=() if method == "pca" else ((LABEL, classes),),
                )
                t0 = time.perf_counter()
                results[method] = client.run_round(params)
                timings[f"{method}_round_s"] = time.perf_counter() - t0
    return results, timings


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
    return float(np.max(1.0 - np.abs(np.sum(a * b, axis=0))))


def run_dataset(name: str, args: argparse.Namespace, root: Path) -> dict:
    x, y, features = load(name)
    n_classes = len(np.unique(y))
    k = n_classes - 1
    folds = StratifiedKFold(args.folds, shuffle=True, random_state=args.seed)
    per_fold = []
    for f, (train, test) in enumerate(folds.split(x, y)):
        t0 = time.perf_counter()
        xtr, ytr, xte, yte = x[train], y[train], x[test], y[test]
        fed, timings = federated_rounds(
            xtr, ytr, features, k, args, root / f"{name}-fold{f}", args.seed + f
        )
        raw_f1, raw_params = svm_f1(xtr, ytr, xte, yte, args.seed)
        fold = {
            "fold": f,
            "train_rows": len(train),
            "test_rows": len(test),
            "owner_rows": [len(p) for p in np.array_split(np.arange(len(train)), args.owners)],
            "raw_f1": raw_f1,
            "raw_svm": raw_params,
            "timings": timings,
            "methods": {},
        }
        for method in args.methods:
            f_evals, f_w, f_mean = from_result(fed[method])
            c_evals, c_w, c_mean = centralized(xtr, ytr, method, k)
            row = {
                "components": k,
                "max_1_minus_abs_cos": cos_deviation(f_w, c_w),
                "max_rel_eigenvalue_error": float(
                    np.max(np.abs(f_evals - c_evals) / np.maximum(np.abs(c_evals), 1e-300))
                ),
                "max_mean_error": float(np.max(np.abs(f_mean - c_mean))),
                "ridge": fed[method].get("ridge"),
            }
            for which, w, mean in (("federated", f_w, f_mean), ("centralized", c_w, c_mean)):
                score, params = svm_f1((xtr - mean) @ w, ytr, (xte - mean) @ w, yte, args.seed)
                row[f"{which}_f1"] = score
                row[f"{which}_svm"] = params
            fold["methods"][method] = row
        fold["timings"]["fold_s"] = time.perf_counter() - t0
        per_fold.append(fold)
        summary = ", ".join(
            f"{m} {fold['methods'][m]['federated_f1']:.1f}/{fold['methods'][m]['centralized_f1']:.1f}"
            for m in args.methods
        )
        print(
            f"  {name} fold {f + 1}/{args.folds}: raw {raw_f1:.1f}; {summary} "
            f"(fed/central F1 %; {fold['timings']['fold_s']:.0f} s)",
            flush=True,
        )
    summary = {}
    for method in args.methods:
        rows = [fold["methods"][method] for fold in per_fold]
        fed_f1 = np.array([r["federated_f1"] for r in rows])
        cen_f1 = np.array([r["centralized_f1"] for r in rows])
        summary[method] = {
            "components": k,
            "federated_f1_mean": float(fed_f1.mean()),
            "federated_f1_std": float(fed_f1.std(ddof=1)) if len(rows) > 1 else 0.0,
            "centralized_f1_mean": float(cen_f1.mean()),
            "centralized_f1_std": float(cen_f1.std(ddof=1)) if len(rows) > 1 else 0.0,
            "difference_mean": float((fed_f1 - cen_f1).mean()),
            "max_abs_fold_difference": float(np.max(np.abs(fed_f1 - cen_f1))),
            "max_1_minus_abs_cos": float(max(r["max_1_minus_abs_cos"] for r in rows)),
            "max_rel_eigenvalue_error": float(max(r["max_rel_eigenvalue_error"] for r in rows)),
        }
    raw = np.array([fold["raw_f1"] for fold in per_fold])
    return {
        "rows": len(x),
        "features": x.shape[1],
        "classes": n_classes,
        "raw_f1_mean": float(raw.mean()),
        "raw_f1_std": float(raw.std(ddof=1)) if len(raw) > 1 else 0.0,
        "methods": summary,
        "folds": per_fold,
    }


def table(report: dict) -> str:
    head = (
        f"{'data set':<14} {'n x d':>9} {'K':>3} {'method':<6} {'k':>2} "
        f"{'federated':>10} {'central':>8} {'diff':>6} {'raw SVM':>8} {'max 1-|cos|':>12}"
    )
    lines = [head, "-" * len(head)]
    for name, ds in report["datasets"].items():
        for i, (method, m) in enumerate(ds["methods"].items()):
            lead = (
                f"{name:<14} {ds['rows']:>4}x{ds['features']:<4} {ds['classes']:>3}"
                if i == 0
                else f"{'':<14} {'':>9} {'':>3}"
            )
            raw = f"{ds['raw_f1_mean']:>8.1f}" if i == 0 else f"{'':>8}"
            lines.append(
                f"{lead} {method.upper():<6} {m['components']:>2} "
                f"{m['federated_f1_mean']:>10.1f} {m['centralized_f1_mean']:>8.1f} "
                f"{m['difference_mean']:>+6.1f} {raw} {m['max_1_minus_abs_cos']:>12.1e}"
            )
    cfg = report["config"]
    lines.append(
        f"weighted F1 (%), mean over {cfg['folds']} stratified folds (seed {cfg['seed']}); "
        f"{cfg['owners']} owners, {cfg['key_bits']}-bit Paillier; SVM grid kernel {{rbf, linear}} "
        "x C {0.1, 1, 10, 100}, 3-fold inner CV"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated subset")
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset")
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
    unknown = [d for d in args.datasets if d not in DATASETS] + [
        m for m in args.methods if m not in METHODS
    ]
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
            "components": "K - 1 for every method",
            "standardized_inputs": False,
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    print(f"runtime {report['runtime_s']:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
