"""`leteo-fed demo kmeans`: federated k-means through real services, compared with centralized Lloyd.

The harness splits a data set across N owner agents (separate processes, mTLS, a fresh 2048-bit
Paillier key), asks the aggregator for a k-means job from the given initial centers, then runs
centralized Lloyd on the pooled rows from the same centers and prints the largest difference.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from leteo_fed.client import RoundOptions
from leteo_fed.data import sources
from leteo_fed.demo.cluster import (
    LocalCluster,
    OwnerSpec,
    check_stop,
    stop_on_signals,
)
from leteo_fed.demo.runner import (
    Progress,
    analyst_session,
    check_demo_parties,
    security_label,
    write_site_files,
)
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.fileio import atomic_save_figure, atomic_write_json
from leteo_fed.privacy import distributed_noise as noise
from leteo_fed.protocols import kmeans as km
from leteo_fed.protocols import kmeans_centers
from leteo_fed.protocols.kmeans_centers import UNIFORM_SOURCE
from leteo_fed.protocols.kmeans_round import KmeansRequest

# Published ranges of the iris features (scikit-learn's description of the data set): public
# knowledge, so uniform initial centers in this box cost no privacy.
IRIS_BOUNDS = ([4.3, 2.0, 1.0, 0.1], [7.9, 4.4, 6.9, 2.5])


@dataclass
class KmeansDemoOptions:
    data: Path | None = None
    features: list[str] | None = None
    label_column: str | None = None  # excluded from the features; colours nothing
    owners: int = 3
    k: int = 0  # 0: from --init, else 3
    rounds: int = 10
    tolerance: float = 0.0
    init: Path | None = None
    init_bounds: tuple[float, float] | None = None
    seed: int = 7
    key_bits: int = 2048
    allow_small_key: bool = False
    keyholders: tuple[int, int] | None = None  # (m, t): a threshold key instead of one CSP
    value_bound: float = 0.0
    deadline: float = 120.0
    out: Path = Path("out/demo-kmeans")
    insecure: bool = False
    epsilon: float | None = None
    delta: float | None = None
    row_norm_bound: float | None = None


def load_table(opts: KmeansDemoOptions) -> tuple[pa.Table, str | None, str, bool]:
    """(table, label column, description, whether it is the built-in iris set)."""
    if opts.data is None:
        from sklearn.datasets import load_iris

        bunch = load_iris()
        names = [n.replace(" (cm)", "").replace(" ", "_") for n in bunch.feature_names]
        columns = {n: bunch.data[:, i] for i, n in enumerate(names)}
        columns["species"] = np.asarray(bunch.target_names)[bunch.target]
        return pa.table(columns), "species", "scikit-learn iris (150 x 4)", True
    table = sources.read_table(str(opts.data))
    if opts.label_column and opts.label_column not in table.column_names:
        raise DataError(f"label column '{opts.label_column}' is not in {opts.data}")
    return table, opts.label_column, str(opts.data), False


def initial_centers(
    opts: KmeansDemoOptions, k: int, d: int, x: np.ndarray, builtin: bool
) -> tuple[np.ndarray, dict]:
    """--init file, else uniform (seeded) in public bounds; see docs/federated-kmeans.md."""
    if opts.init is not None:
        centers = kmeans_centers.load_centers(opts.init)
        return centers, {"source": "file", "path": str(opts.init)}
    lo: float | list[float] | np.ndarray  # one bound for every feature, or one per feature
    hi: float | list[float] | np.ndarray
    if opts.init_bounds is not None:
        lo, hi = opts.init_bounds
        how = UNIFORM_SOURCE
    elif builtin:
        lo, hi = IRIS_BOUNDS
        how = "uniform in the published iris feature ranges"
    else:
        # demo convenience only: the harness holds the pooled file anyway (for the centralized
        # reference). `leteo-fed kmeans` never reads data: it needs --init or --init-bounds.
        x_lo, x_hi = np.nanmin(x, axis=0), np.nanmax(x, axis=0)
        lo, hi = x_lo, np.where(x_hi > x_lo, x_hi, x_lo + 1.0)
        how = "uniform in the demo file's per-feature range (demo shortcut; pass --init-bounds)"
    if opts.epsilon is not None and opts.row_norm_bound is not None:
        c = opts.row_norm_bound  # DP jobs need |c_i| <= C
        lo, hi = np.clip(lo, -c, c), np.clip(hi, -c, c)
        hi = np.where(hi > lo, hi, np.minimum(lo + 1e-9, c))
    lower = np.broadcast_to(lo, (d,)).tolist()
    upper = np.broadcast_to(hi, (d,)).tolist()
    centers = kmeans_centers.random_centers(k, lower, upper, d, opts.seed)
    return centers, {"source": how, "seed": opts.seed, "bounds": [lower, upper]}


def run_kmeans_demo(opts: KmeansDemoOptions) -> dict:
    stop_on_signals()
    say = Progress()
    check_demo_parties(opts.owners, opts.key_bits, opts.allow_small_key)
    if not 1 <= opts.rounds <= km.MAX_ITERATIONS:
        raise ConfigError(f"--rounds must be in 1..{km.MAX_ITERATIONS}", field="rounds")
    if opts.epsilon is not None and opts.row_norm_bound is None:
        raise ConfigError("--epsilon needs --row-norm-bound (rows are clipped to it)")
    table, label, source_name, builtin = load_table(opts)
    exclude = [label] if label else []
    features = opts.features or sources.numeric_columns(table, exclude=exclude)
    if not features:
        raise DataError("no numeric feature columns found; pass --features")
    missing = [f for f in features if f not in table.column_names]
    if missing:
        raise DataError(f"column '{missing[0]}' is not in {source_name}", field=missing[0])
    x = sources.to_matrix(table, features)
    if table.num_rows < 2 * opts.owners:
        raise DataError(f"{table.num_rows} rows cannot be split across {opts.owners} owners")
    d = len(features)
    k = opts.k or 3
    init, init_info = initial_centers(opts, k, d, x, builtin)
    if opts.init is not None and opts.k and opts.k != init.shape[0]:
        raise ConfigError(f"--k {opts.k} but {opts.init} holds {init.shape[0]} centers", field="k")
    k = init.shape[0]
    if init.shape[1] != d:
        raise ConfigError(
            f"{opts.init} has centers of dimension {init.shape[1]}; the job has {d} features "
            f"({', '.join(features)})",
            field="init",
        )
    say(
        f"data: {source_name}; {table.num_rows} rows, {d} features; {opts.owners} owners; "
        f"k = {k}, at most {opts.rounds} iteration(s); initial centers: {init_info['source']}"
    )

    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=out))
    owners = [
        OwnerSpec(name, path)
        for name, path in write_site_files(table, opts.owners, opts.seed, workdir)
    ]
    budget = (max(10.0, opts.epsilon or 0.0), max(1e-4, opts.delta or 0.0))
    cluster = LocalCluster(
        workdir,
        owners,
        key_bits=opts.key_bits,
        insecure=opts.insecure,
        privacy_budget=budget,
        keyholders=opts.keyholders,
    )
    timings: dict[str, float] = {}
    with analyst_session(cluster, opts.owners, say, security_label(opts.insecure)) as (
        client,
        startup,
    ):
        timings["startup_seconds"] = startup
        request = KmeansRequest(
            features=tuple(features),
            k=k,
            centers=tuple(float(v) for row in init.tolist() for v in row),
            iterations=opts.rounds,
            tolerance=opts.tolerance,
        )
        options = RoundOptions(
            min_owners=opts.owners,
            deadline_seconds=opts.deadline,
            value_bound=opts.value_bound,
            dp_epsilon=opts.epsilon,
            dp_delta=opts.delta,
            row_norm_bound=opts.row_norm_bound,
        )
        last = [""]

        def tick(status) -> None:
            check_stop()
            if status.message != last[0]:
                last[0] = status.message
                say(f"job {status.round_id}: {status.message}")

        say(f"starting the k-means job ({opts.key_bits}-bit Paillier)")
        start = time.perf_counter()
        result = client.run(request, options, on_tick=tick).to_dict()
        timings["job_seconds"] = time.perf_counter() - start
        say(f"job {result['job_id']} completed: {result['iterations_run']} iteration(s)")
    check_stop()

    comparison = compare_with_lloyd(result, x, init, opts)
    result["timings"]["demo"] = timings
    result["comparison_with_centralized_lloyd"] = comparison
    result["data_source"] = source_name
    result["init"] = init_info
    json_path, plot_path = out / "kmeans.json", out / "kmeans_clusters.png"
    atomic_write_json(json_path, result)
    plot_clusters(x, result, plot_path)
    print_summary(result, comparison, json_path, plot_path)
    return result


def compare_with_lloyd(result: dict, x: np.ndarray, init: np.ndarray, opts) -> dict:
    """Centralized Lloyd on the pooled rows (clipped like the owners clip them, in DP jobs) from
    the same initial centers and with the same stopping rule."""
    dp = result.get("dp")
    pooled = noise.clip_rows(x, dp["row_norm_bound"]) if dp else x
    ref = km.lloyd(pooled, init, opts.rounds, opts.tolerance)
    fed = np.array(result["centers"])
    doc = {
        "centralized_centers": ref.centers.tolist(),
        "centralized_iterations": ref.iterations,
        "max_abs_difference": float(np.max(np.abs(fed - ref.centers))),
        "inertia_federated": km.inertia(x, fed),
        "inertia_centralized": km.inertia(x, ref.centers),
        "rows": len(x),
    }
    if not dp:
        n = min(ref.iterations, len(result["iterations"]))
        doc["max_abs_difference_any_iteration"] = float(
            max(
                np.max(np.abs(np.array(result["iterations"][i]["centers"]) - ref.history[i]))
                for i in range(n)
            )
        )
    return doc


def plot_clusters(x: np.ndarray, result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    centers = np.array(result["centers"])
    labels = km.assign(x, centers)
    d = x.shape[1]
    features = result["features"]
    if d > 2:  # a PCA projection of the pooled rows (the harness has them; plotting only)
        mean = x.mean(axis=0)
        _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
        basis = vt[:2].T

        def proj(a):
            return (np.asarray(a) - mean) @ basis

        xlabel, ylabel = "PC1 of the pooled rows", "PC2 of the pooled rows"
    else:

        def proj(a):
            a = np.asarray(a, dtype=float).reshape(-1, d)
            return a if d == 2 else np.column_stack([a[:, 0], np.zeros(len(a))])

        xlabel, ylabel = features[0], features[1] if d == 2 else ""
    fig, ax = plt.subplots(figsize=(7, 5.5), dpi=110)
    px = proj(x)
    for j in range(len(centers)):
        mask = labels == j
        ax.scatter(px[mask, 0], px[mask, 1], s=10, alpha=0.6, label=f"cluster {j}")
    path_j = np.array([result["initial_centers"]] + [it["centers"] for it in result["iterations"]])
    for j in range(len(centers)):
        trail = proj(path_j[:, j, :])
        ax.plot(trail[:, 0], trail[:, 1], "-", color="0.3", lw=0.8)
    pi, pc = proj(result["initial_centers"]), proj(centers)
    ax.scatter(pi[:, 0], pi[:, 1], marker="+", s=90, c="k", label="initial centers")
    ax.scatter(pc[:, 0], pc[:, 1], marker="X", s=120, c="k", label="federated centers")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    dp = f", DP epsilon {result['epsilon']:g}" if result.get("epsilon") else ""
    ax.set_title(
        f"Federated k-means (k = {result['k']}): {len(x)} rows, {len(result['owners'])} owners, "
        f"{result['iterations_run']} iteration(s){dp}",
        fontsize=10,
    )
    ax.legend(markerscale=1.5, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def print_summary(result: dict, comparison: dict, out: Path, plot: Path) -> None:
    w = sys.stdout.write
    dp = result.get("dp")
    w(f"\nFederated k-means, k = {result['k']}, on {', '.join(result['features'])}")
    w(f" (epsilon {result['epsilon']:g}, delta {result['delta']:g})\n" if dp else "\n")
    w(f"{'iter':>4} {'contributors':<28} {'max center shift':>17} {'round s':>8}\n")
    for it in result["iterations"]:
        who = ",".join(it["contributors"])
        w(
            f"{it['iteration']:>4} {who:<28} {it['center_shift']:>17.6g} "
            f"{it['timings']['round_seconds']:>8.3f}\n"
        )
        if it["missing"] or it["declined"]:
            w(
                f"     missing: {', '.join(it['missing']) or '-'}; declined: {it['declined'] or '-'}\n"
            )
    w(f"converged: {result['converged']} after {result['iterations_run']} iteration(s)\n")
    w("final centers:\n")
    for j, c in enumerate(result["centers"]):
        w(f"  {j}: [{', '.join(f'{v:.6f}' for v in c)}]  ({result['counts'][j]} rows)\n")
    w(
        f"\ncentralized Lloyd on the pooled rows, same initial centers: "
        f"{comparison['centralized_iterations']} iteration(s)\n"
    )
    w(f"max |federated - centralized| = {comparison['max_abs_difference']:.3e}\n")
    w(
        f"inertia (sum of squared distances): federated {comparison['inertia_federated']:.6g}, "
        f"centralized {comparison['inertia_centralized']:.6g}\n"
    )
    if dp:
        w(
            f"DP: (epsilon {dp['epsilon']:.4g}, delta {dp['delta']:.3g}) for the iterations "
            f"together ({dp['accountant']} accountant; spent {dp['epsilon_spent']:.4g} in "
            f"{result['iterations_run']} iteration(s)); noise std per sum {dp['noise_std_sum_with_quorum']:.4g}, "
            f"per count {dp['noise_std_count_with_quorum']:.4g} rows\n"
        )
    t = result["timings"]
    w(
        f"\nTimings: start-up {t['demo']['startup_seconds']:.1f} s, job {t['demo']['job_seconds']:.2f} s, "
        f"mean iteration {t['mean_iteration_seconds']:.3f} s\n"
    )
    w(f"\nwrote {out} and {plot}\n")
