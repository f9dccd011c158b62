"""The release report page of `leteo-fed synthesize`, from its report.json and, for the data
holder, the measures against the real rows (`holder_only`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leteo_fed.report.dp_release import DpRelease
from leteo_fed.report.figures import png

HOLDER_NOTE = (
    "For the data holder. This page shows the seed, the command that reproduces the release "
    "and measures computed on the real rows: none of them is covered by epsilon. Publish the "
    "synthetic table and report.json without its holder_only section, not this page."
)


def _budget_rows(budget: dict[str, Any]) -> dict[str, str]:
    rows: dict[str, str] = {}
    if "one_way" in budget:  # the marginal-based method: epsilon (pure) or rho (zCDP) each
        unit = "rho" if "rho" in budget else "epsilon"
        return {
            f"1-way marginals ({budget['one_way']['marginals']})": (
                f"{unit} {budget['one_way'][unit]:.4g}"
            ),
            f"tree selection ({budget['select']['rounds']} exponential mechanisms)": (
                f"{unit} {budget['select'][unit]:.4g}"
            ),
            f"2-way marginals ({budget['two_way']['marginals']})": (
                f"{unit} {budget['two_way'][unit]:.4g}"
            ),
        }
    if budget.get("grouping"):
        grouping = budget["grouping"]
        rows["feature grouping (DP)"] = f"epsilon {grouping.get('epsilon', 0):.4g}" + (
            f" of {grouping['planned_epsilon']:.4g} planned ({picks['picks_made']} of "
            f"{picks['picks']} picks made; the rest went to the groups)"
            if (picks := grouping.get("pair_picks")) and "picks_made" in picks
            else ""
        )
    for i, g in enumerate(budget.get("groups", []), start=1):
        parts = " + ".join(
            f"{part} {g[part]['epsilon']:.3g}"
            for part in ("histogram", "sums", "covariance")
            if g.get(part)
        )
        rows[f"group {i}: {', '.join(g['columns'])}"] = f"epsilon {g['epsilon']:.4g} = {parts}"
    return rows


def _marginals_figure(marginals: Mapping[str, Any]) -> bytes | None:
    names = list(marginals)

    def draw(ax: Any) -> None:
        fig = ax.figure
        fig.delaxes(ax)
        cols = 3
        rows = (len(names) + cols - 1) // cols
        for i, name in enumerate(names):
            labels, real, syn = marginals[name]
            sub = fig.add_subplot(rows, cols, i + 1)
            x = range(len(labels))
            sub.bar([v - 0.2 for v in x], real, width=0.4, color="#0969da", label="real")
            sub.bar([v + 0.2 for v in x], syn, width=0.4, color="#fb8f44", label="synthetic")
            sub.set_title(name, fontsize=9)
            sub.set_xticks([])
            sub.tick_params(labelsize=7)
            if i == 0:
                sub.legend(fontsize=7)
        fig.subplots_adjust(hspace=0.5)

    rows = (len(names) + 2) // 3
    return png(draw, size=(9.0, 2.0 * rows + 0.5))


def _correlation_figure(corr: dict[str, Any]) -> bytes | None:
    def draw(ax: Any) -> None:
        fig = ax.figure
        fig.delaxes(ax)
        names = corr["columns"]
        image = None
        for left, key in ((0.1, "real"), (0.55, "synthetic")):
            sub = fig.add_axes((left, 0.28, 0.32, 0.62))
            image = sub.imshow(corr[key], vmin=-1, vmax=1, cmap="RdBu_r")
            sub.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
            sub.set_yticks(range(len(names)), names if key == "real" else [], fontsize=7)
            sub.set_title(f"Pearson correlation, {key}", fontsize=9)
        fig.colorbar(image, cax=fig.add_axes((0.91, 0.3, 0.015, 0.58)))

    return png(draw, size=(9.0, 4.4), tight=False)


def _disclosure_rows(doc: dict[str, Any] | None) -> dict[str, Any]:
    if not doc:
        return {}
    dcr, attack = doc["dcr"], doc["membership"]
    rows = {
        "distance to closest record: rows the model saw, median (5th pct)": (
            f"{dcr['train_median']:.4g} ({dcr['train_p5']:.4g})"
        ),
        "distance to closest record: held-out rows, median (5th pct)": (
            f"{dcr['holdout_median']:.4g} ({dcr['holdout_p5']:.4g})"
        ),
        "DCR share: nearer a seen row than a held-out one (0.5 = no memorising)": dcr["dcr_share"],
        "synthetic rows that copy a real row": f"{dcr['exact_copy_share']:.2%}",
        "membership attack: ROC AUC (0.5 = no signal)": attack["auc"],
        "membership attack: best balanced accuracy": attack["balanced_accuracy"],
    }
    if "dp_accuracy_bound" in attack:
        rows["any attack's accuracy under the DP guarantee, at most"] = attack["dp_accuracy_bound"]
    return rows


def synthetic_release(
    report: dict[str, Any],
    parameters: dict[str, dict[str, Any]],
    marginals: Mapping[str, tuple[Sequence[str], Any, Any]]
    | None,  # labels, real, synthetic shares
    version: str,
) -> DpRelease:
    holder = report.get("holder_only", {})
    utility = holder.get("utility")
    figures: list[tuple[bytes | None, str]] = []
    summary: dict[str, Any] = {}
    note = "Measured against the real rows (holder only). "
    if utility:
        summary["1-way marginals: mean TVD"] = utility["tvd_1way_mean"]
        summary["2-way marginals: mean TVD"] = utility["tvd_2way_mean"]
        worst = utility["tvd_2way_worst"]
        if worst:
            summary["worst 2-way marginal"] = (
                f"{' x '.join(worst[0]['columns'])}: {worst[0]['tvd']:.3f}"
            )
        corr = utility.get("correlation")
        if corr:
            summary["numeric correlations: mean |error|"] = corr["abs_error_mean"]
            summary["numeric correlations: largest |error|"] = corr["abs_error_max"]
            figures.append((_correlation_figure(corr), "numeric correlations, real and synthetic"))
        if marginals:
            figures.insert(
                0, (_marginals_figure(marginals), "every column's marginal on the public grid")
            )
        note += "TVD: 0 = the same distribution, 1 = disjoint."
    else:
        note = (
            "Not measured: the input was read by Spark (beyond memory); compare a sample with "
            "the synthetic table yourself."
        )
    disclosure = _disclosure_rows(holder.get("disclosure"))
    output = report["output"]
    released: dict[str, Any] = {
        "table": output["path"],
        "rows": output["rows"],
        "columns": [c["name"] for c in report["columns"]],
    }
    if report.get("tree") is not None:
        title = "DP synthetic data (marginals: a DP tree of 2-way marginals)"
        released["tree"] = ", ".join(f"{a}-{b}" for a, b in report["tree"]["edges"])
    else:
        title = f"DP synthetic data (k = {report['k']})"
        groups = report["groups"]
        released["feature groups"] = f"{len(groups['columns'])} ({groups['provenance']})"
        released["clusters"] = sum(c["clusters"] for c in report["clusters"])
    released["report"] = "report.json (publish without holder_only)"
    if report.get("warnings"):
        released["warnings"] = "; ".join(report["warnings"])
    return DpRelease(
        kind="synthesize",
        title=title,
        released=released,
        epsilon=float(report["epsilon"]),
        delta=float(report["delta"]),
        adjacency=report["budget"].get("neighbouring", "add/remove one record"),
        accountant=report["budget"].get("composition", "sequential composition"),
        budget=_budget_rows(report["budget"]),
        utility=summary,
        utility_note=note,
        risk=disclosure,
        risk_note=(
            "Below, measured against real rows (holder only): how close synthetic rows come to "
            "the rows the model saw and to held-out rows, and a distance-based membership attack."
            if disclosure
            else "Distance to closest record and a membership attack were not measured: run "
            "with --holdout 0.2 (in process) to measure them against held-out rows."
        ),
        parameters=parameters,
        reproduce=" ".join(holder.get("command", [])) or None,
        reproduce_note="With this seed the command gives this exact release again: keep the seed "
        "private (it determines the noise).",
        figures=figures,
        version=version,
        holder_note=HOLDER_NOTE,
    )
