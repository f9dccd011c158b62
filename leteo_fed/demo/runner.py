"""`leteo-fed demo pca|dca`: a complete federated deployment on this machine, end to end."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from leteo_fed import defaults
from leteo_fed.client import AnalystClient, RoundOptions
from leteo_fed.data import sources
from leteo_fed.demo import codebooks
from leteo_fed.demo.cluster import (
    STOP_REQUESTED,
    LocalCluster,
    OwnerSpec,
    check_stop,
    stop_on_signals,
)
from leteo_fed.errors import ConfigError, DataError
from leteo_fed.fileio import atomic_save_figure, atomic_write_json
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.protocols import discriminant
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.pca import reference_pca


@dataclass
class DemoOptions:
    method: str = "pca"
    privacy_label_column: str | None = None
    rho: float | None = None
    rho_prime: float | None = None
    data: Path | None = None
    features: list[str] | None = None
    label_column: str | None = None
    owners: int = 3
    components: int = 0  # 0: the method's default (PCA 2, discriminants classes - 1)
    key_bits: int = 2048
    allow_small_key: bool = False
    keyholders: tuple[int, int] | None = None  # (m, t): a threshold key instead of one CSP
    standardize: bool = False
    value_bound: float = 0.0
    out: Path = Path("out/demo-pca")
    seed: int = 7
    insecure: bool = False
    projection_only: bool = False
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    row_norm_bound: float | None = None
    bounds: tuple[ColumnBounds, ...] = ()  # DP: public bounds per column (natural units)


class Progress:
    """One line per step with the elapsed time: enough to see where the time goes."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.t0:6.1f}s] {message}", flush=True)


def load_demo_table(opts: DemoOptions) -> tuple[pa.Table, str | None, str]:
    if opts.data is None:
        from sklearn.datasets import load_breast_cancer

        bunch = load_breast_cancer()
        names = [n.replace(" ", "_") for n in bunch.feature_names]
        columns = {n: bunch.data[:, i] for i, n in enumerate(names)}
        columns["diagnosis"] = np.asarray(bunch.target_names)[bunch.target]
        return (
            pa.table(columns),
            opts.label_column or "diagnosis",
            "scikit-learn breast cancer (569 x 30)",
        )
    table = sources.read_table(str(opts.data))
    if opts.label_column and opts.label_column not in table.column_names:
        raise DataError(
            f"label column '{opts.label_column}' is not in {opts.data}", field="label_column"
        )
    return table, opts.label_column, str(opts.data)


def split_rows(n_rows: int, parts: int, seed: int) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(n_rows)
    return [np.sort(chunk) for chunk in np.array_split(order, parts)]


def write_site_files(table, parts: int, seed: int, workdir: Path) -> list[tuple[str, Path]]:  # noqa: ANN001
    """A random horizontal split of ``table`` into one CSV per site: (site name, file)."""
    sites = []
    for i, rows in enumerate(split_rows(table.num_rows, parts, seed), start=1):
        path = workdir / "data" / f"site-{i}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        pacsv.write_csv(table.take(rows), path)
        sites.append((f"site-{i}", path))
    return sites


@contextlib.contextmanager
def analyst_session(
    cluster: LocalCluster, n_owners: int, say: Callable[[str], None], detail: str
) -> Iterator[tuple[AnalystClient, float]]:
    """Start every process and connect as the analyst once all owners registered; stop every
    process on the way out, also on Ctrl-C or an error. Yields (client, start-up seconds)."""
    start = time.perf_counter()
    try:
        cluster.start()
        say(
            f"started {decryptor_label(cluster)}, aggregator and {n_owners} owner agents as "
            f"processes ({detail})"
        )
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(n_owners, should_stop=STOP_REQUESTED.is_set)
            yield client, time.perf_counter() - start
    finally:
        cluster.stop()
        say("all processes stopped")


def security_label(insecure: bool) -> str:
    return "plaintext gRPC (INSECURE)" if insecure else "mTLS with fresh certificates"


def check_demo_parties(owners: int, key_bits: int, allow_small_key: bool) -> None:
    """What every demo refuses before it starts anything: too many owner processes, a small
    key without the flag that allows it."""
    if not 2 <= owners <= defaults.DEMO_MAX_OWNERS:
        raise ConfigError(
            f"--owners must be in 2..{defaults.DEMO_MAX_OWNERS} (one process each; for more, "
            f"leteo-fed simulate), got {owners}",
            field="owners",
        )
    check_demo_key_size(key_bits, allow_small_key)


def check_demo_key_size(key_bits: int, allow_small_key: bool) -> None:
    """`--key-bits` below 2048 only with `--insecure-small-key` (the demos, `simulate`)."""
    if key_bits < 2048 and not allow_small_key:
        raise ConfigError(
            f"--key-bits {key_bits} is below 2048; add --insecure-small-key to allow it",
            field="key_bits",
        )


def demo_keyholders(holders: int, threshold: int) -> tuple[int, int] | None:
    """`--keyholders M --threshold T` as (m, t), T defaulting to the smallest majority; None
    for one CSP. ConfigError naming the flag for a threshold that is not a majority."""
    from leteo_fed.crypto.threshold import check_threshold
    from leteo_fed.errors import EncodingError

    if not holders:
        if threshold:
            raise ConfigError("--threshold needs --keyholders", field="threshold")
        return None
    t = threshold or holders // 2 + 1
    try:
        check_threshold(holders, t)
    except EncodingError as exc:
        raise ConfigError(
            f"--keyholders {holders} --threshold {t}: {exc}", field="keyholders"
        ) from None
    return holders, t


def decryptor_label(cluster: LocalCluster) -> str:
    if cluster.keyholders:
        m, t = cluster.keyholders
        return f"{m} key holders (any {t} decrypt)"
    return "CSP"


def run_demo(opts: DemoOptions) -> dict:
    stop_on_signals()  # Ctrl-C and SIGTERM stop every child, whatever the demo is doing
    say = Progress()
    check_demo_parties(opts.owners, opts.key_bits, opts.allow_small_key)
    table, label, source_name = load_demo_table(opts)
    discriminant_method = opts.method != "pca"
    if discriminant_method and not label:
        raise ConfigError(
            f"--label-column is required for --method {opts.method}", field="label_column"
        )
    if opts.method == "mdr" and not opts.privacy_label_column:
        raise ConfigError(
            "--privacy-label-column is required for --method mdr", field="privacy_label_column"
        )
    labels_used = [c for c in (label, opts.privacy_label_column) if c]
    for column in labels_used:
        if column not in table.column_names:
            raise DataError(f"label column '{column}' is not in {source_name}", field=column)
    features = opts.features or sources.numeric_columns(table, exclude=labels_used)
    if not features:
        raise DataError("no numeric feature columns found; pass --features")
    missing = [f for f in features if f not in table.column_names]
    if missing:
        raise DataError(f"column '{missing[0]}' is not in {source_name}", field=missing[0])
    x = sources.to_matrix(table, features)
    if table.num_rows < 2 * opts.owners:
        raise DataError(f"{table.num_rows} rows cannot be split across {opts.owners} owners")
    groupings = []
    if discriminant_method:
        for group_column in [label, opts.privacy_label_column][: 2 if opts.method == "mdr" else 1]:
            if group_column is None:  # both were required above for the discriminant methods
                raise ConfigError(f"a label column is required for --method {opts.method}")
            classes = tuple(
                sorted(set(sources.label_strings(table, group_column)), key=natural_order)
            )
            groupings.append((group_column, classes))
    default_k = (
        min(2, len(features)) if not discriminant_method else max(1, len(groupings[0][1]) - 1)
    )
    components = opts.components or min(default_k, len(features))
    if not 1 <= components <= len(features):
        raise ConfigError(f"--components must be in 1..{len(features)}", field="components")
    say(
        f"data: {source_name}; {table.num_rows} rows, {len(features)} features; {opts.owners} owners"
    )

    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="run-", dir=out))
    owners = [
        OwnerSpec(name, path, label_column=label)
        for name, path in write_site_files(table, opts.owners, opts.seed, workdir)
    ]
    say(f"split rows across {opts.owners} site files in {workdir / 'data'}")

    cluster = LocalCluster(
        workdir,
        owners,
        key_bits=opts.key_bits,
        insecure=opts.insecure,
        keyholders=opts.keyholders,
    )
    timings: dict[str, float] = {}
    with analyst_session(cluster, opts.owners, say, security_label(opts.insecure)) as (
        client,
        startup,
    ):
        timings["startup_seconds"] = startup
        say(
            f"all {opts.owners} owners registered; starting the {opts.method.upper()} round "
            f"({opts.key_bits}-bit Paillier)"
        )
        start = time.perf_counter()
        request = MomentsRequest(
            features=tuple(features),
            method=opts.method,
            components=components,
            standardize=opts.standardize,
            groupings=tuple(LabelClasses(c, tuple(k)) for c, k in groupings),
            rho=opts.rho,
            rho_prime=opts.rho_prime,
            projection_only=opts.projection_only,
        )
        options = RoundOptions(
            min_owners=opts.owners,
            deadline_seconds=300.0,
            value_bound=opts.value_bound,
            dp_epsilon=opts.dp_epsilon,
            dp_delta=opts.dp_delta,
            row_norm_bound=opts.row_norm_bound,
            bounds=demo_bounds(opts, features, say),
        )

        def tick(status) -> None:
            check_stop()
            say(f"round {status.round_id}: {len(status.submitted)}/{len(status.invited)} shares in")

        result = client.run(request, options, on_tick=tick).to_dict()
        timings["round_seconds"] = time.perf_counter() - start
        say(f"round {result['round_id']} completed with owners {', '.join(result['owners'])}")
    check_stop()  # interrupted while stopping: write nothing

    if discriminant_method:
        label_index = [
            np.array([classes.index(v) for v in sources.label_strings(table, column)])
            for column, classes in groupings
        ]
        comparison = compare_discriminant(result, x, label_index, components, opts)
    else:
        comparison = compare_with_numpy(result, x, components, opts.standardize)
    result["timings"]["demo"] = timings
    result["comparison_with_numpy"] = comparison
    result["data_source"] = source_name
    name = "pca" if not discriminant_method else "dca"
    atomic_write_json(out / f"{name}.json", result)
    plot_path = out / f"{name}_scatter.png"
    labels = sources.label_strings(table, label) if label else None
    plot_projection(x, result, labels, plot_path)
    # the shares carry no row count: the demo knows its own split
    site_rows = {
        f"site-{i}": len(rows)
        for i, rows in enumerate(split_rows(table.num_rows, opts.owners, opts.seed), start=1)
    }
    print_summary(result, comparison, out / f"{name}.json", plot_path, site_rows)
    return result


def demo_bounds(opts: DemoOptions, features: list[str], say) -> tuple[ColumnBounds, ...]:
    """The public bounds of a DP demo: the user's, else (on the bundled breast cancer set with
    no row-norm bound) its published codebook, said on screen."""
    if opts.dp_epsilon is None or opts.bounds or opts.row_norm_bound is not None:
        return tuple(opts.bounds)
    if opts.data is not None:
        raise ConfigError(
            "a DP demo on your data needs public bounds per column: give --bounds COL=LO,HI "
            "(or --codebook FILE), or --row-norm-bound"
        )
    say(
        "public bounds: the breast cancer set's published codebook (examples/breast-cancer-codebook.toml)"
    )
    return tuple(b for b in codebooks.breast_cancer() if b.column in features)


def natural_order(value: str) -> tuple:
    """Class order: numbers numerically, then text."""
    try:
        return (0, float(value), value)
    except ValueError:
        return (1, 0.0, value)


def compare_discriminant(
    result: dict, x: np.ndarray, labels: list[np.ndarray], k: int, opts
) -> dict:
    ridge = discriminant.Ridge(opts.rho, opts.rho_prime)
    evals, comps = discriminant.reference(x, labels, opts.method, k, ridge)
    fed_evals = np.array(result["eigenvalues"])
    rel = np.abs(fed_evals - evals) / np.maximum(np.abs(evals), np.finfo(float).tiny)
    cos = np.abs(np.sum(np.array(result["components"]).T * comps, axis=0))
    return {
        "numpy_eigenvalues": evals.tolist(),
        "max_relative_eigenvalue_error": float(rel.max()),
        "min_abs_cosine": float(cos.min()),
    }


def compare_with_numpy(result: dict, x: np.ndarray, k: int, standardize: bool) -> dict:
    evals, comps, mean = reference_pca(x, k, standardize)
    fed_evals = np.array(result["eigenvalues"])
    fed_comps = np.array(result["components"]).T
    rel = np.abs(fed_evals - evals) / np.abs(evals)
    cos = np.abs(np.sum(fed_comps * comps, axis=0))
    doc = {
        "numpy_eigenvalues": evals.tolist(),
        "max_relative_eigenvalue_error": float(rel.max()),
        "min_abs_cosine": float(cos.min()),
    }
    if "mean" in result:  # projection-only results withhold the mean
        doc["max_mean_error"] = float(np.max(np.abs(np.array(result["mean"]) - mean)))
    return doc


def plot_projection(x: np.ndarray, result: dict, labels: list | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comps = np.array(result["components"])
    # projection-only results carry no mean: the demo harness centres its own pooled copy
    centered = x - np.array(result.get("mean") or x.mean(axis=0))
    if result.get("standardized"):
        centered = centered / centered.std(axis=0, ddof=1)
    proj = centered @ comps.T
    fig, ax = plt.subplots(figsize=(7, 5.5), dpi=110)
    ys = proj[:, 1] if proj.shape[1] > 1 else np.zeros(len(proj))
    groups = sorted(set(labels), key=str) if labels is not None else [None]
    for g in groups:
        if g is None or labels is None:  # labels is None only with the single group None
            mask = np.ones(len(proj), bool)
        else:
            mask = np.array([lab == g for lab in labels])
        ax.scatter(proj[mask, 0], ys[mask], s=10, alpha=0.7, label=None if g is None else str(g))
    method = result.get("method", "pca").upper()
    evr = result.get("explained_variance_ratio")
    if evr:
        ax.set_xlabel(f"PC1 ({evr[0]:.1%} of variance)")
        ax.set_ylabel(f"PC2 ({evr[1]:.1%} of variance)" if len(evr) > 1 else "")
    else:
        ax.set_xlabel(f"{method} component 1")
        ax.set_ylabel(f"{method} component 2" if proj.shape[1] > 1 else "")
    ax.set_title(
        f"Federated {method}: {len(x)} rows from {len(result['owners'])} owners "
        f"(Paillier {result['encoding']['paillier_bits']}-bit)"
    )
    if labels is not None:
        ax.legend(title="label", markerscale=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def print_summary(
    result: dict, comparison: dict, out: Path, plot: Path, site_rows: dict[str, int]
) -> None:
    w = sys.stdout.write
    method = result.get("method", "pca").upper()
    w(f"\nFederated {method} vs the same computation on the pooled rows (NumPy/SciPy)\n")
    evr = result.get("explained_variance_ratio")
    w(f"{'#':>3} {'federated eigenvalue':>22} {'pooled eigenvalue':>22} {'rel. error':>11}")
    w(f" {'expl. var':>9}\n" if evr else "\n")
    for i, (f, n) in enumerate(
        zip(result["eigenvalues"], comparison["numpy_eigenvalues"], strict=True)
    ):
        w(f"{i + 1:>3} {f:>22.12g} {n:>22.12g} {abs(f - n) / abs(n):>11.2e}")
        w(f" {evr[i]:>9.2%}\n" if evr else "\n")
    w(f"min |cos(federated, numpy)| over components: {comparison['min_abs_cosine']:.15f}\n")
    t = result["timings"]
    w("\nTimings (seconds)\n")
    for site, ph in sorted(t["owners"].items()):
        w(
            f"  owner {site:<10} statistics {ph.get('statistics_seconds', 0):.3f}  encode "
            f"{ph.get('encode_seconds', 0):.3f}  encrypt {ph.get('encrypt_seconds', 0):.3f}  "
            f"({site_rows.get(site, 0)} rows)\n"
        )
    a, csp = t["aggregator"], t["csp"]
    phases = [
        ("homomorphic sum", "homomorphic_sum_seconds"),
        ("mask", "mask_seconds"),
        ("CSP round trip", "csp_round_trip_seconds"),
        ("key holders round trip", "holder_round_trip_seconds"),
        ("verify proofs", "verify_proofs_seconds"),
        ("combine", "combine_seconds"),
        ("unmask", "unmask_seconds"),
        ("eigendecomposition", "eigendecomposition_seconds"),
        ("rotate back", "rotate_back_seconds"),
    ]
    w("  aggregator      " + "".join(f" {n} {a[k]:.4f} " for n, k in phases if k in a) + "\n")
    # key holders: the slowest of those combined (each one's own is in the result's JSON)
    shown = {k: v for k, v in csp.items() if not k.startswith("holder")}
    w(
        ("  key holders     " if len(shown) < len(csp) else "  csp             ")
        + "".join(f" {k.replace('_seconds', '')} {v:.3f} " for k, v in shown.items())
        + "\n"
    )
    d = t["demo"]
    w(f"  demo             start-up {d['startup_seconds']:.1f}  round {d['round_seconds']:.2f}\n")
    w(f"\nwrote {out} and {plot}\n")
