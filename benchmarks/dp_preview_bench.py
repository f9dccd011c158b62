"""DP releases on real data in natural units: the preview against repeated releases, per
protocol and released figure (issue 28's table).

Held-out UCI Adult (15,060 rows drawn with seed 0, three sites; age, education-num and
hours-per-week with the public bounds 17..90, 1..16, 1..99; income for logistic regression),
epsilon 1, delta 1e-6. For each protocol: the unhinted preview's expected error of every
figure, then R releases through the protocols' own owner and aggregator code with the owners'
noise seeded, and per figure: the measured RMS error around the noise-free release, the mean
error the releases stated of themselves, and the exact figure next to the pooled reference.

    .venv/bin/python benchmarks/dp_preview_bench.py [--releases 40] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from leteo_fed.data.adult import locate_wheel, read_adult
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.protocols import registry
from leteo_fed.protocols.dp_release import ArraySite, Assumption
from leteo_fed.protocols.kmeans_round import KmeansRequest
from leteo_fed.protocols.linreg import LinregRequest
from leteo_fed.protocols.logreg import LogregRequest
from leteo_fed.protocols.moments_round import LabelClasses, MomentsRequest
from leteo_fed.protocols.release_preview import NoNoise, preview_release, run_in_process
from leteo_fed.protocols.requests import Common, DpRequest
from leteo_fed.protocols.weighted_stats import WeightedStatsRequest

COLUMNS = ["age", "education-num", "hours-per-week"]
BOUNDS = (
    ColumnBounds("age", 17, 90),
    ColumnBounds("education-num", 1, 16),
    ColumnBounds("hours-per-week", 1, 99),
)
REQUESTS = {
    "pca": MomentsRequest(method="pca", features=tuple(COLUMNS), components=3),
    "lda": MomentsRequest(
        method="lda",
        features=tuple(COLUMNS),
        components=1,
        groupings=(LabelClasses("income", ("<=50K", ">50K")),),
    ),
    "stats": WeightedStatsRequest(features=tuple(COLUMNS)),
    "linreg": LinregRequest(features=("age", "education-num"), label_column="hours-per-week"),
    "logreg": LogregRequest(
        features=tuple(COLUMNS), label_column="income", positive_class=">50K", max_iterations=8
    ),
    "kmeans": KmeansRequest(
        k=3,
        centers=(25.0, 9.0, 40.0, 45.0, 13.0, 45.0, 60.0, 10.0, 30.0),
        iterations=10,
        features=tuple(COLUMNS),
    ),
}


def adult_sites(rows: int = 15060) -> list[dict[str, np.ndarray]]:
    data = read_adult(locate_wheel())
    order = np.random.default_rng(0).permutation(len(data["age"]))[:rows]
    table = {c: data[c].astype(float)[order] for c in COLUMNS}
    table["income"] = np.asarray(data["income"])[order]
    return [{c: v[part] for c, v in table.items()} for part in np.array_split(np.arange(rows), 3)]


def figures(result) -> dict[str, float]:
    return dict(result.dp.figures)


def measure(name: str, parts, releases: int, epsilon: float) -> list[dict]:
    request = REQUESTS[name]
    protocol = registry.for_request(request)
    dp = DpRequest(epsilon, 1e-6, 0.0, BOUNDS)
    plan = protocol.plan(request, Common(n_invited=3, min_owners=3, dp=dp))
    sites = [ArraySite(p) for p in parts]
    rows = sum(len(p["age"]) for p in parts)
    preview = preview_release(protocol, plan, rows, Assumption())["expected_error"]
    exact_plan = protocol.plan(request, Common(n_invited=3, min_owners=3, dp=None))
    exact_result = run_in_process(protocol, exact_plan, sites)
    rng = np.random.default_rng(2028)
    start = time.perf_counter()
    results = [run_in_process(protocol, plan, sites, rng) for _ in range(releases)]
    seconds = (time.perf_counter() - start) / releases
    # the noise-free bounded release: the same owners' code without noise
    noise_free = run_in_process(protocol, plan, sites, NoNoise())
    exact = figures(noise_free)
    rows_out = []
    for fig in sorted(exact):
        got = np.array([figures(r)[fig] for r in results])
        measured = float(np.sqrt(np.mean((got - exact[fig]) ** 2)))
        stated = float(np.mean([r.dp.figure_noise_std[fig] for r in results]))
        within2 = float(
            np.mean(
                np.abs(got - exact[fig])
                <= 2 * np.array([r.dp.figure_noise_std[fig] for r in results])
            )
        )
        row = {
            "protocol": name,
            "figure": fig,
            "noise_free": exact[fig],
            "non_dp": _non_dp(exact_result, fig),
            "preview": preview.get(fig) if preview else None,
            "measured": measured,
            "stated": stated,
            "within_2_stated": within2,
            "seconds_per_release": seconds,
        }
        rows_out.append(row)
    return rows_out


def _non_dp(result, fig: str) -> float | None:
    kind, _, rest = fig.partition(" ")
    try:
        if kind == "eigenvalue":
            return float(result.eigenvalues[int(rest) - 1])
        if kind == "coefficient":
            return float(result.coefficients[rest])
        if kind == "mean":
            name = rest.removeprefix("of ")
            if hasattr(result, "means"):
                return float(result.means[name])
            return float(result.mean[result.features.index(name)])
        if kind == "variance":
            return float(result.variances[rest.removeprefix("of ")])
        if fig == "r_squared":
            return float(result.r_squared)
    except (AttributeError, KeyError, IndexError, ValueError):
        return None
    return None


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--releases", type=int, default=40)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--protocols", default=",".join(REQUESTS))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    parts = adult_sites()
    table = []
    print(
        f"{'protocol':8} {'figure':32} {'non-DP':>10} {'preview':>9} {'measured':>9} {'stated':>9} {'meas/prev':>9} {'stat/meas':>9} {'in 2 st':>7}"
    )
    for name in args.protocols.split(","):
        for r in measure(name, parts, args.releases, args.epsilon):
            table.append(r)
            prev = r["preview"]
            ratio = f"{r['measured'] / prev:9.2f}" if prev else f"{'-':>9}"
            non_dp = f"{r['non_dp']:10.4g}" if r["non_dp"] is not None else f"{'-':>10}"
            print(
                f"{r['protocol']:8} {r['figure']:32} {non_dp} "
                f"{(prev or float('nan')):9.3g} {r['measured']:9.3g} {r['stated']:9.3g} {ratio} "
                f"{r['stated'] / r['measured']:9.2f} {r['within_2_stated']:7.2f}"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
