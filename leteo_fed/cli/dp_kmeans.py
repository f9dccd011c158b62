"""`leteo-fed dp-kmeans`: differentially private k-means of a dataset, in process or on Spark.

`add_parser` adds the sub-command to the main parser; `run` executes it. Every parameter is
checked before a row is read; errors are LeteoError subclasses, which the main entry point
turns into one line and exit code 2. The run writes into the folder --out (default
out/dp-kmeans): dp_kmeans.png, then dp_kmeans.json, each atomically; the JSON comes last, so its
presence means the run succeeded, and a refused run writes nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from leteo_fed import extras
from leteo_fed.cli.options import csv_list, set_handler
from leteo_fed.errors import ConfigError

DESCRIPTION = """\
Differentially private k-means, in process or on Spark (--engine):

  auto   (default) in process when the data is a local file of at most
         min(256 MiB, available memory / 8), else Spark
  local  in process: pyarrow reads the file, NumPy counts, noises and clusters
  spark  on Spark (local[*] unless SPARK_MASTER is set, e.g. spark://host:7077). Rows stay on
         the executors; the driver (the trusted curator) receives aggregates only: per-cell
         counts (eugkm), per-node counts and per-leaf sums (lsh), and adds the noise itself;
         for ldp the rows are perturbed on the executors and only MLlib's centers come back.

The same seed gives the same eugkm centers on both engines (while the synopsis has at most
200,000 points; above that Spark clusters it with MLlib), lsh centers equal to rounding (sums
in another order), and ldp the same guarantee from another random stream. Methods:

  eugkm  two-level adaptive grid synopsis (EUGkM): Laplace noisy counts per grid cell, grid
         sizes from N, epsilon and d; weighted k-means on the noisy cell centers. Pure
         epsilon-DP. Needs --bounds. Suits low dimensions (about d <= 8): the grid has at least
         ceil(100^(1/d))^d cells and the run is refused when that is too many.
  lsh    private LSH core-set: random-hyperplane prefix tree with noisy counts, noisy sums per
         leaf, weighted k-means on the core-set. (epsilon, delta)-DP, any dimension. Needs
         --radius (and optionally --center): points outside the ball are projected onto it.
  ldp    every row perturbed locally by n-dimensional Laplace noise (epsilon-LDP per row), then
         MLlib k-means. Needs --bounds. Far noisier; for data that must be perturbed at source.

What is public: k, epsilon, delta, the bounds or the radius and center (fix them from the
domain, e.g. a 0-100 score, NEVER from the data), the feature names and the seed if given.
Points outside the bounds are clipped to them (eugkm, ldp). Rows with a missing or non-finite
feature are dropped before anything else (a per-row filter; the number dropped is not shown).

Output (the folder --out DIR, default out/dp-kmeans; each file written atomically):
DIR/dp_kmeans.json holds centers, k, method, epsilon, delta, features, bounds / radius, the
budget split, noisy synopsis sizes and timings; DIR/dp_kmeans.png shows the DP synopsis or
core-set and the centers (first two features, or a PCA projection of the synopsis when d > 2).
Both are DP outputs; a refused run writes nothing. The k-means loss on the private rows is NOT
in the output unless --evaluate-loss is given: that number is not private and is for experiments.

Examples:
  leteo-fed dp-kmeans --data scores.csv --k 4 --epsilon 1 --method eugkm --bounds 0,100 \\
      --features math,reading --out out/scores
  leteo-fed dp-kmeans --data hdfs:///pool/usage.parquet --k 8 --epsilon 1 --delta 1e-6 \\
      --method lsh --radius 50 --center 20 --out out/usage
  leteo-fed dp-kmeans --data z.csv --k 3 --epsilon 1 --method eugkm --bounds -3,3 --out out/z

Exit codes: 0 done; 2 refused (bad parameter, missing or non-numeric feature, unreadable data),
nothing written; 1 the run itself failed.
"""

METHODS = ("eugkm", "lsh", "ldp")
DEFAULT_OUT = Path("out/dp-kmeans")
RESULT_JSON = "dp_kmeans.json"
RESULT_PNG = "dp_kmeans.png"


def _floats(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError("expected comma-separated numbers") from exc
    return values


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `dp-kmeans` on the main parser's sub-parsers."""
    p = subparsers.add_parser(
        "dp-kmeans",
        help="differentially private k-means of a dataset on Spark (EUGkM grid or LSH core-set)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", required=True, metavar="PATH", help="CSV (header) or Parquet path")
    p.add_argument(
        "--engine",
        choices=["auto", "local", "spark"],
        default="auto",
        help="where the job runs (default: auto, by the size of the data)",
    )
    p.add_argument(
        "--format", choices=["csv", "parquet"], default=None, help="input format (default: name)"
    )
    p.add_argument("--k", type=int, required=True, help="number of clusters (public)")
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget epsilon > 0")
    p.add_argument(
        "--delta",
        type=float,
        default=None,
        help="lsh only: delta in (0, 1) (default: 1e-6); eugkm and ldp are pure epsilon-DP",
    )
    p.add_argument("--method", choices=METHODS, required=True, help="eugkm, lsh or ldp")
    p.add_argument(
        "--bounds",
        type=_floats,
        default=None,
        metavar="LO,HI",
        help="eugkm/ldp: public bounds, LO,HI for every feature or lo1,hi1,lo2,hi2,... per "
        "feature (in --features order), e.g. --bounds -1,1",
    )
    p.add_argument(
        "--radius", type=float, default=None, metavar="R", help="lsh: public radius of the ball"
    )
    p.add_argument(
        "--center",
        type=_floats,
        default=None,
        metavar="C",
        help="lsh: public center of the ball, one value or one per feature (default: 0); "
        "write --center=-1,2 when the list starts with a minus sign",
    )
    p.add_argument(
        "--features",
        type=csv_list,
        default=None,
        metavar="A,B",
        help="numeric feature columns (default: every numeric column)",
    )
    p.add_argument(
        "--n-public",
        type=int,
        default=None,
        metavar="N",
        help="eugkm: the row count if it is genuinely public (saves the 5%% of epsilon spent "
        "on a noisy count)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the noise (experiments only: whoever knows it can remove the noise)",
    )
    p.add_argument(
        "--evaluate-loss",
        action="store_true",
        help="also compute the k-means loss on the raw rows: NOT differentially private",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"output folder: writes DIR/{RESULT_JSON} and DIR/{RESULT_PNG} (default: "
        f"{DEFAULT_OUT})",
    )
    g = p.add_argument_group(
        "noise preview",
        "--dry-run reads no row and spends nothing: it prints the noise of every noisy count "
        "and the expected center error under a stated assumption you can replace",
    )
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="print the noise and the expected center error, then exit (needs --features when "
        "--bounds or --center does not give one value per feature)",
    )
    g.add_argument(
        "--rows", type=int, default=None, help="--dry-run: your estimate of the row count"
    )
    g.add_argument(
        "--expect-std",
        type=_floats,
        default=None,
        metavar="SIGMA",
        help="--dry-run: the spread you expect of each cluster, one value or one per feature "
        "(default: a quarter of the bounds' width)",
    )
    g = p.add_argument_group(
        "privacy ledger",
        "charge the run to a persistent budget of the data set (the same ledger format the owner "
        "agents keep): the spend is reserved before any row is read, committed once the result is "
        "written, and returned if the run fails or is refused before releasing anything",
    )
    g.add_argument("--ledger", type=Path, default=None, metavar="FILE.json", help="ledger file")
    g.add_argument(
        "--ledger-epsilon", type=float, default=None, help="the data set's total epsilon budget"
    )
    g.add_argument(
        "--ledger-delta",
        type=float,
        default=0.0,
        help="the data set's total delta budget (default: 0, pure DP only)",
    )
    set_handler(p, run)
    return p


def _reserve(args: argparse.Namespace) -> tuple[Any, str] | None:
    """Hold this run's (epsilon, delta) in the ledger; refuses (exit 2) when it would overspend."""
    if args.ledger is None:
        if args.ledger_epsilon is not None:
            raise ConfigError("--ledger-epsilon needs --ledger FILE", field="ledger")
        return None
    if args.ledger_epsilon is None:
        raise ConfigError("--ledger needs --ledger-epsilon (the total budget)", field="ledger")
    from leteo_fed.clustering.lsh_coreset import DEFAULT_DELTA
    from leteo_fed.privacy.ledger import Budget, PrivacyLedger

    ledger = PrivacyLedger(args.ledger, args.ledger_epsilon, args.ledger_delta)
    delta = 0.0
    if args.method == "lsh":
        delta = args.delta if args.delta is not None else DEFAULT_DELTA
    run_id = f"dp-kmeans-{uuid.uuid4().hex[:12]}"
    ledger.reserve(
        run_id, f"dp-kmeans/{args.method}", Budget(args.epsilon, delta), note=str(args.data)
    )
    return ledger, run_id


def _check_args(args: argparse.Namespace) -> None:
    """Everything that can be checked without the data, before Spark starts."""
    from leteo_fed.clustering import _checks

    _checks.check_k(args.k)
    _checks.check_epsilon(args.epsilon)
    if args.delta is not None:
        if args.method != "lsh":
            raise ConfigError(
                f"--delta applies to --method lsh only; {args.method} is pure epsilon-DP",
                field="delta",
            )
        _checks.check_delta(args.delta)
    if args.method in ("eugkm", "ldp"):
        if args.bounds is None:
            raise ConfigError(f"--method {args.method} needs --bounds LO,HI", field="bounds")
        if args.radius is not None or args.center is not None:
            raise ConfigError("--radius/--center apply to --method lsh only", field="radius")
        if len(args.bounds) < 2 or len(args.bounds) % 2:
            raise ConfigError("--bounds needs LO,HI or lo1,hi1,lo2,hi2,...", field="bounds")
        _checks.check_bounds(args.bounds[0::2], args.bounds[1::2], len(args.bounds) // 2)
    else:
        if args.radius is None:
            raise ConfigError("--method lsh needs --radius R", field="radius")
        if args.bounds is not None:
            raise ConfigError("--bounds applies to --method eugkm/ldp only", field="bounds")
        _checks.check_radius(args.radius)
        if args.center is not None:
            _checks.check_center(args.center, len(args.center))
    if args.n_public is not None and (args.method != "eugkm" or args.n_public < 1):
        raise ConfigError("--n-public must be >= 1 and applies to --method eugkm", field="n_public")
    _checks.check_seed(args.seed)
    _check_out(args.out, args.data)


def _check_out(out: Path, data_arg: str) -> None:
    """--out is a folder, and nothing written into it may land on or inside the input."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; --out names a folder", field="out")
    data = Path(data_arg)
    if "://" in data_arg or not data.exists():
        return
    data, folder = data.resolve(), out.resolve()
    if data in (folder / RESULT_JSON, folder / RESULT_PNG):
        raise ConfigError(f"--out {out} would overwrite the input {data_arg}", field="out")
    if data == folder or data in folder.parents:
        raise ConfigError(
            f"--out {out} is the input {data_arg} or inside it; write somewhere else", field="out"
        )


def _per_feature(values: list[float], d: int, field: str) -> np.ndarray:
    if len(values) == 1:
        return np.full(d, values[0])
    if len(values) != d:
        raise ConfigError(
            f"--{field} has {len(values)} values for {d} features; give 1 or {d}", field=field
        )
    return np.asarray(values, dtype=np.float64)


def _bounds_for(values: list[float], d: int) -> tuple[np.ndarray, np.ndarray]:
    from leteo_fed.clustering._checks import check_bounds

    lo, hi = values[0::2], values[1::2]
    if len(lo) not in (1, d):
        raise ConfigError(
            f"--bounds has {len(lo)} LO,HI pairs for {d} features; give 1 or {d}", field="bounds"
        )
    return check_bounds(lo if len(lo) > 1 else lo[0], hi if len(hi) > 1 else hi[0], d)


def _nonprivate_loss(df, centers: np.ndarray) -> tuple[float, int]:
    """Mean squared distance of the raw rows to the nearest center, aggregated on Spark."""
    from functools import reduce

    from pyspark.sql import functions as F

    d = centers.shape[1]
    dist = [
        reduce(
            lambda a, b: a + b,
            [(F.col(f"c{i}") - F.lit(float(c[i]))) ** 2 for i in range(d)],
        )
        for c in centers
    ]
    best = F.least(*dist) if len(dist) > 1 else dist[0]
    row = df.agg(F.avg(best).alias("loss"), F.count(F.lit(1)).alias("n")).first()
    return float(row["loss"]) if row["loss"] is not None else math.nan, int(row["n"])


def _plot(result, features: list[str], path: Path) -> None:
    """Synopsis / core-set points (size ~ noisy weight) and the centers: DP outputs only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from leteo_fed.fileio import atomic_save_figure

    pts, w, centers = result.summary_points, result.summary_weights, result.centers
    d = centers.shape[1]
    if d == 1:
        proj = lambda a: np.column_stack([a[:, 0], np.zeros(a.shape[0])])  # noqa: E731
        labels = (features[0], "")
    elif d == 2:
        proj = lambda a: a  # noqa: E731
        labels = (features[0], features[1])
    else:  # PCA of the weighted DP synopsis (post-processing), or of the centers without one
        base, bw = (
            (pts, np.maximum(w, 0)) if pts.shape[0] >= 2 else (centers, np.ones(len(centers)))
        )
        bw = bw if bw.sum() > 0 else np.ones(base.shape[0])
        mean = np.average(base, axis=0, weights=bw)
        cov = np.cov((base - mean).T, aweights=bw) if base.shape[0] > 1 else np.eye(d)
        vecs = np.linalg.eigh(np.atleast_2d(cov))[1][:, ::-1][:, :2]
        proj = lambda a: (a - mean) @ vecs  # noqa: E731
        labels = ("PC1 of the DP summary", "PC2 of the DP summary")
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    if pts.shape[0]:
        p2 = proj(pts)
        size = 4 + 60 * np.maximum(w, 0) / max(float(np.max(w)), 1e-12)
        name = "DP core-set" if result.method == "lsh" else "DP synopsis"
        ax.scatter(p2[:, 0], p2[:, 1], s=size, c="tab:blue", alpha=0.35, lw=0, label=name)
    c2 = proj(centers)
    ax.scatter(c2[:, 0], c2[:, 1], s=140, c="tab:red", marker="X", label="DP centers")
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(f"{result.method}: k={centers.shape[0]}, epsilon={result.epsilon:g}")
    ax.legend(loc="best")
    fig.tight_layout()
    atomic_save_figure(fig, path)


PARAMETERS = (
    "k",
    "method",
    "epsilon",
    "delta",
    "features",
    "bounds",
    "radius",
    "center",
    "n_public",
    "seed",
    "engine",
    "data",
    "format",
)


def _release_report(args: argparse.Namespace, doc: dict[str, Any], result: Any, png: Path) -> Any:
    """report.json and report.html: the release, its guarantee, utility and provenance."""
    from leteo_fed import __version__
    from leteo_fed.cli.options import given_on_command_line
    from leteo_fed.report.dp_release import DpRelease

    given = given_on_command_line(getattr(args, "command_line", None))
    parameters = {
        name: {
            "value": getattr(args, name),
            "source": "command line" if name in given else "default",
        }
        for name in PARAMETERS
        if hasattr(args, name)
    }
    utility: dict[str, Any] = {"synopsis points": doc["synopsis_points"]}
    note = "The centers are the release. The figure shows the noisy synopsis they were fitted to."
    if "nonprivate_evaluation" in doc:
        utility["k-means loss on the raw rows (NOT private)"] = doc["nonprivate_evaluation"]["loss"]
        note += " The loss was computed on the private rows (--evaluate-loss): do not publish it."
    budget = {k: v for k, v in result.budget.items() if k != "adjacency"}
    return DpRelease(
        kind="dp-kmeans",
        title=f"DP k-means ({result.method}, k = {args.k})",
        released={
            "centers": f"{args.out / RESULT_JSON} ({args.k} centers over {', '.join(doc['features'])})",
            "figure": str(png),
            "guarantee": doc["privacy"]["guarantee"],
        },
        epsilon=float(result.epsilon),
        delta=float(result.delta),
        adjacency=str(result.budget.get("adjacency", "add/remove one row")),
        accountant=str(result.budget.get("composition", "sequential composition of the parts")),
        budget={k: v for k, v in budget.items() if k != "composition"},
        utility=utility,
        utility_note=note,
        parameters=parameters,
        reproduce=getattr(args, "command_line", None),
        reproduce_note=(
            "With its --seed the same command and data give this release again (seeded noise: "
            "for experiments)."
            if args.seed is not None
            else "Without --seed the noise is fresh: the same command gives another release, "
            "equally private. Each run spends its epsilon again."
        ),
        figures=[(png.read_bytes(), "the DP synopsis and the released centers")],
        version=__version__,
        warnings=list(doc.get("warnings", [])),
    )


def _engine(args: argparse.Namespace) -> Any:
    """The engine for this run; Spark's extra is required only when Spark runs it."""
    from leteo_fed.anonymize.engines.choice import choose
    from leteo_fed.anonymize.inputs import input_format

    choice = choose(args.engine, args.data, input_format(args.data, args.format), types=False)
    if choice.used == "spark":
        extras.require("pyspark")
    return choice


def run(args: argparse.Namespace) -> int:
    """Check, reserve the budget, read, fit, write the PNG, then the JSON (last, atomically)."""
    # before the ledger is touched; Spark's extra now if asked for, else once the engine is known
    if getattr(args, "dry_run", False):
        _check_args(args)
        return _dry_run(args)
    extras.require(*(["pyspark"] if args.engine == "spark" else []), "matplotlib")
    _check_args(args)
    engine = _engine(args)
    held = _reserve(args)
    released: list[bool] = []  # set once a DP output (PNG or JSON) starts to be written
    try:
        code = _run_checked(args, lambda: released.append(True), engine)
    except BaseException:
        if held is not None:
            if released:  # an output may exist: the spend stands
                held[0].commit(held[1])
            else:  # refused or failed before anything left: give the budget back
                held[0].release(held[1], share_left_owner=False)
        raise
    if held is not None:
        spend = held[0].commit(held[1])
        print(f"charged epsilon {spend.epsilon:g}, delta {spend.delta:g} to {held[0].path}")
    return code


def _dry_run(args: argparse.Namespace) -> int:
    """The preview (`clustering.release_noise.preview`) as JSON on stdout, in words on stderr."""
    from leteo_fed.clustering.release_noise import preview

    lengths = [len(args.features or [])]
    if args.bounds is not None:
        lengths.append(len(args.bounds) // 2)
    if args.center is not None:
        lengths.append(len(args.center))
    if args.expect_std is not None:
        lengths.append(len(args.expect_std))
    d = max(lengths)
    if d < 1:
        raise ConfigError("--dry-run reads no data: name the --features", field="features")
    if args.rows is not None and args.rows < args.k:
        raise ConfigError(f"--rows must be at least --k ({args.k})", field="rows")
    std = _per_feature(args.expect_std, d, "expect-std") if args.expect_std else None
    if args.method == "lsh":
        center = _per_feature(args.center, d, "center") if args.center is not None else None
        doc = preview(
            "lsh",
            args.k,
            args.epsilon,
            d,
            args.rows,
            radius=args.radius,
            center=center,
            delta=args.delta,
            expect_std=std,
        )
    else:
        lo, hi = _bounds_for(args.bounds, d)
        doc = preview(
            args.method,
            args.k,
            args.epsilon,
            d,
            args.rows,
            lo=lo,
            hi=hi,
            n_public=args.n_public,
            expect_std=std,
        )
    print(json.dumps(doc))
    names = {
        "row_count_std": "the noisy row count",
        "level1_cell_count_std": "each level-1 cell's count",
        "level2_cell_count_std": "each level-2 cell's count",
        "node_count_std": "each tree node's count",
        "leaf_sum_std_per_feature": "each leaf sum, per feature",
        "point_noise_std_per_feature": "each perturbed point, per feature",
    }
    print(f"noise (1 std) of {args.method} at epsilon {args.epsilon:g}:", file=sys.stderr)
    for key, name in names.items():
        if key in doc:
            print(f"  {name} +/- {doc[key]:.4g}", file=sys.stderr)
    if "center_error" in doc:
        print(f"assuming {doc['assumption']}:", file=sys.stderr)
        print(f"  each center +/- {doc['center_error']:.4g} (RMS distance)", file=sys.stderr)
    else:
        print(doc["assumption"], file=sys.stderr)
    return 0


def _fit_local(args: argparse.Namespace, x: np.ndarray, doc: dict[str, Any]) -> Any:
    """The chosen method on in-memory points (the NumPy paths of the Spark methods)."""
    d = x.shape[1]
    if args.method == "eugkm":
        from leteo_fed.clustering.eugkm import eugkm_numpy

        lo, hi = _bounds_for(args.bounds, d)
        doc["bounds"] = {"lo": lo.tolist(), "hi": hi.tolist()}
        return eugkm_numpy(x, args.k, args.epsilon, lo, hi, n_public=args.n_public, seed=args.seed)
    if args.method == "ldp":
        from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_numpy

        lo, hi = _bounds_for(args.bounds, d)
        doc["bounds"] = {"lo": lo.tolist(), "hi": hi.tolist()}
        return ldp_kmeans_numpy(x, args.k, args.epsilon, lo, hi, seed=args.seed)
    from leteo_fed.clustering.lsh_coreset import DEFAULT_DELTA, lsh_numpy

    center = _per_feature(args.center, d, "center") if args.center is not None else None
    delta = args.delta if args.delta is not None else DEFAULT_DELTA
    result = lsh_numpy(
        x, args.k, args.epsilon, args.radius, delta=delta, center=center, seed=args.seed
    )
    doc["radius"] = args.radius
    doc["center"] = result.details["center"]
    return result


def _run_checked(args: argparse.Namespace, releasing: Callable[[], object], engine: Any) -> int:
    t_start = time.perf_counter()
    doc: dict[str, Any] = {}
    if engine.used == "local":
        from leteo_fed.clustering.local_io import load_features_local

        x, features = load_features_local(args.data, args.features, args.format)
        t_read = time.perf_counter() - t_start
        result = _fit_local(args, x, doc)
        t_fit = time.perf_counter() - t_start - t_read
        return _finish(args, releasing, engine, doc, result, features, (t_start, t_read, t_fit), x)
    from leteo_fed.clustering.spark_io import load_features

    df, features = load_features(args.data, args.features, args.format)
    d = len(features)
    t_read = time.perf_counter() - t_start
    if args.method == "eugkm":
        from leteo_fed.clustering.spark_eugkm import eugkm_spark

        lo, hi = _bounds_for(args.bounds, d)
        result = eugkm_spark(
            df, args.k, args.epsilon, lo, hi, n_public=args.n_public, seed=args.seed
        )
        doc["bounds"] = {"lo": lo.tolist(), "hi": hi.tolist()}
    elif args.method == "ldp":
        from leteo_fed.clustering.ldp_kmeans import ldp_kmeans_spark

        lo, hi = _bounds_for(args.bounds, d)
        result = ldp_kmeans_spark(df, args.k, args.epsilon, lo, hi, seed=args.seed)
        doc["bounds"] = {"lo": lo.tolist(), "hi": hi.tolist()}
    else:
        from leteo_fed.clustering.lsh_coreset import DEFAULT_DELTA
        from leteo_fed.clustering.spark_lsh import lsh_spark

        center = _per_feature(args.center, d, "center") if args.center is not None else None
        result = lsh_spark(
            df,
            args.k,
            args.epsilon,
            args.radius,
            delta=args.delta if args.delta is not None else DEFAULT_DELTA,
            center=center,
            seed=args.seed,
        )
        doc["radius"] = args.radius
        doc["center"] = result.details["center"]
    t_fit = time.perf_counter() - t_start - t_read
    return _finish(args, releasing, engine, doc, result, features, (t_start, t_read, t_fit), df)


def _finish(
    args: argparse.Namespace,
    releasing: Callable[[], object],
    engine: Any,
    doc: dict[str, Any],
    result: Any,
    features: list[str],
    times: tuple[float, float, float],
    rows: Any,
) -> int:
    """Write the PNG and the JSON; ``rows`` (points or DataFrame) only for --evaluate-loss."""
    from leteo_fed.fileio import atomic_write_json

    t_start, t_read, t_fit = times
    doc = {
        "centers": result.centers.tolist(),
        "k": args.k,
        "method": result.method,
        "epsilon": result.epsilon,
        "delta": result.delta,
        "features": features,
        **doc,
        "privacy": {
            "guarantee": (
                f"epsilon={result.epsilon:g}-LDP per row"
                if result.method == "ldp"
                else f"({result.epsilon:g}, {result.delta:g})-DP, add/remove-one-row adjacency"
            ),
            "budget": result.budget,
            "public_inputs": ["k", "epsilon", "delta", "features", "bounds/radius/center"]
            + (["seed (noise is reproducible: experiments only)"] if args.seed is not None else []),
            "released": "centers, the noisy synopsis/core-set in the PNG, and the details below; "
            "all are DP (post-processing of noisy values) or functions of public inputs",
        },
        "details": result.details,
        "synopsis_points": int(result.summary_points.shape[0]),
        "seed": args.seed,
        "data": args.data,
        "engine": engine.as_dict(),
    }
    if args.evaluate_loss:
        t0 = time.perf_counter()
        if isinstance(rows, np.ndarray):
            from leteo_fed.clustering.lloyd import kmeans_loss

            loss = kmeans_loss(rows, result.centers) if rows.shape[0] else math.nan
            n = int(rows.shape[0])
        else:
            loss, n = _nonprivate_loss(rows, result.centers)
        doc["nonprivate_evaluation"] = {
            "loss": loss,
            "rows": n,
            "definition": "mean squared distance of each raw row to its nearest center",
            "warning": "computed on the private rows: NOT differentially private; for "
            "experiments only, do not publish",
        }
        result.timings["evaluate_loss_s"] = time.perf_counter() - t0
    from leteo_fed.clustering.release_noise import center_noise, release_warnings

    noise = center_noise(result)
    box = doc.get("bounds") or {}
    found = release_warnings(result, noise, box.get("lo"), box.get("hi"))
    doc["center_noise"] = noise
    doc["warnings"] = [w.to_dict() for w in found]
    out_json, png = args.out / RESULT_JSON, args.out / RESULT_PNG
    args.out.mkdir(parents=True, exist_ok=True)
    releasing()
    _plot(result, features, png)
    doc["plot"] = str(png)
    doc["timings"] = {
        "read_s": t_read,
        "fit_s": t_fit,
        **result.timings,
        "total_s": time.perf_counter() - t_start,
    }
    release = _release_report(args, doc, result, png)
    release.page().write(args.out / "report.html")
    atomic_write_json(args.out / "report.json", release.to_dict())
    atomic_write_json(out_json, doc)  # last: its presence means the run succeeded
    summary = {k: doc[k] for k in ("method", "k", "epsilon", "delta", "features")}
    if args.evaluate_loss:
        summary["nonprivate_loss"] = doc["nonprivate_evaluation"]["loss"]
    print(json.dumps(summary))
    _print_centers(result.centers, noise, doc["warnings"])
    print(f"wrote {out_json} and {png}", file=sys.stderr)
    return 0


def _print_centers(centers: np.ndarray, noise: list[dict[str, Any]], warnings: list) -> None:
    """Each released center beside its noise, then a `warning:` line per buried figure."""
    print("released centers (+/- 1 std per feature; noisy count +/- its noise):", file=sys.stderr)
    for i, c in enumerate(centers):
        line = f"  center {i + 1}: (" + ", ".join(f"{v:.4g}" for v in c) + ")"
        if noise:
            n = noise[i]
            line += (
                " +/- ("
                + ", ".join(f"{v:.2g}" for v in n["center_std"])
                + ")"
                + f", count {n['noisy_count']:.4g} +/- {n['count_std']:.3g}"
            )
        print(line, file=sys.stderr)
    for w in warnings:
        print(f"warning: {w['message']}", file=sys.stderr)
