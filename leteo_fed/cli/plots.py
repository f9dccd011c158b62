"""The figures of the analyst's round commands, drawn from a result's document: those of the
declared statistics (`cli.statistics`) and of the LDP collections (`cli.ldp`);
`cli.jobs.PLOTTERS` finds each by its result's wire name, for the command and for
`leteo-fed result`."""

from __future__ import annotations

import itertools
import math
from pathlib import Path


def plot_counts(result: dict, path: Path) -> None:
    """A cross-tabulation's bar chart: a bar per category of the first column, stacked by the
    other columns' categories; DP: error bars at 2 std of the bar's total (the margin's noise)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    names = result["columns"]
    cats = result["categories"]
    counts = np.array(result["counts"], dtype=np.float64)
    x = np.arange(counts.shape[0])
    fig, ax = plt.subplots(figsize=(max(6.4, 0.35 * len(x) + 2), 4.8), dpi=110)
    stacks = [" / ".join(map(str, key)) for key in itertools.product(*[cats[n] for n in names[1:]])]
    bottom = np.zeros(len(x))
    for j, label in enumerate(stacks):
        ax.bar(x, counts[:, j], 0.8, bottom=bottom, label=label or "count")
        bottom += counts[:, j]
    dp = result.get("dp")
    if dp:
        std = dp["noise_std_per_value"] * math.sqrt(len(stacks))
        ax.errorbar(x, bottom, yerr=2 * std, fmt="none", ecolor="black", capsize=3)
    ax.set_xticks(x, cats[names[0]], rotation=45 if len(x) > 6 else 0, ha="right")
    ax.set_xlabel(names[0])
    ax.set_ylabel("count")
    title = f"{' x '.join(names)}: n = {result['n']}, {len(result['owners'])} owners"
    if dp:
        title += f", ε = {dp['epsilon']:g} (±2 std)"
    ax.set_title(title)
    if len(names) > 1 and len(stacks) <= 20:
        ax.legend(title=" / ".join(names[1:]), fontsize="small")
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_quantiles(result: dict, path: Path) -> None:
    """Percentiles: a panel per feature, the released histogram, a marker per percentile."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    features = result["features"]
    fig, axes = plt.subplots(
        len(features), 1, figsize=(7.0, 2.8 * len(features) + 0.6), dpi=110, squeeze=False
    )
    lo, width = result["lower"], result["bin_width"]
    dp = result.get("dp")
    for ax, name in zip(axes[:, 0], features, strict=True):
        counts = np.asarray(result["histogram"][name], dtype=np.float64)
        left = lo + width * np.arange(len(counts))
        ax.bar(left, counts, width, align="edge", color="0.75", edgecolor="0.5", linewidth=0.3)
        for p, q in zip(result["percentiles"], result["quantiles"][name], strict=True):
            ax.axvline(q, color="tab:red", linewidth=1)
            ax.annotate(
                f"p{p:g}",
                (q, 1),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize="small",
                color="tab:red",
            )
        ax.set_ylabel("count")
        ax.set_title(f"{name}: n = {result['n'][name]:.0f}", fontsize="medium")
    axes[-1, 0].set_xlabel("value")
    title = f"percentiles, {len(result['owners'])} owners, {result['bins']} bins"
    if dp:
        title += f", ε = {dp['epsilon']:g}"
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_regression(result: dict, path: Path) -> None:
    """A linear regression: each coefficient (effect on the label) with its confidence
    interval."""
    what = "ridge" if result["method"] == "ridge" else "OLS"
    plot_coefficients(
        result,
        path,
        f"coefficient (effect on {result['label_column']})",
        f"{what}: n={result['n_rows']}, R^2={result['r_squared']:.3f}",
    )


def plot_logistic(result: dict, path: Path) -> None:
    """A logistic regression: each coefficient (log-odds per unit of its feature) with its
    confidence interval."""
    state = "converged" if result["converged"] else "NOT converged"
    plot_coefficients(
        result,
        path,
        f"coefficient (log-odds of {result['label_column']} = {result['positive_class']})",
        f"logistic: n={result['n_rows']}, {result['iterations_run']} iterations ({state})",
    )


def plot_coefficients(result: dict, path: Path, xlabel: str, title: str) -> None:
    """A regression's coefficients (linreg, logreg): each with its confidence interval and,
    for a DP release, lighter, the interval widened by the noise's own error. The intercept,
    usually on another scale, goes in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from leteo_fed.fileio import atomic_save_figure

    features = list(result["features"])
    coef = [result["coefficients"][f] for f in features]
    lower = [coef[i] - result["ci_lower"][f] for i, f in enumerate(features)]
    upper = [result["ci_upper"][f] - coef[i] for i, f in enumerate(features)]
    rows = list(range(len(features)))[::-1]
    fig, ax = plt.subplots(figsize=(6.4, 1.9 + 0.45 * len(features)))
    noise = result.get("noise_std_errors")
    if noise:
        se = result["std_errors"]
        half = [  # the interval's half-width with the noise's error added in quadrature
            math.hypot(se[f], noise[f])
            * (result["ci_upper"][f] - result["ci_lower"][f])
            / (2 * se[f])
            if se[f] > 0
            else 0.0
            for f in features
        ]
        ax.errorbar(
            coef,
            rows,
            xerr=half,
            fmt="none",
            ecolor="tab:orange",
            alpha=0.5,
            elinewidth=6,
            label=f"{result['ci_level']:.0%} interval with the DP noise's error",
        )
    ax.errorbar(
        coef,
        rows,
        xerr=[lower, upper],
        fmt="o",
        color="tab:blue",
        capsize=4,
        label=f"{result['ci_level']:.0%} confidence interval",
    )
    ax.axvline(0.0, color="0.6", lw=1, ls="--")
    ax.set_yticks(rows)
    ax.set_yticklabels(features)
    ax.set_xlabel(xlabel)
    dp = result.get("dp")
    privacy = f", DP epsilon={dp['epsilon']:g}" if dp else ""
    intercept = result["coefficients"]["intercept"]
    ax.set_title(f"{title}, intercept={intercept:.4g}{privacy}", fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, fontsize=8)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_correlation(result: dict, path: Path) -> None:
    """The correlation matrix as a heatmap, each cell with r and its interval; DP: the noise's
    std of each coefficient under it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    names = result["features"]
    r = np.asarray(result["correlation"], dtype=np.float64)
    lower, upper = np.asarray(result["ci_lower"]), np.asarray(result["ci_upper"])
    noise = (result.get("dp") or {}).get("figure_noise_std") or {}
    d = len(names)
    size = max(4.8, 1.1 * d + 1.5)
    fig, ax = plt.subplots(figsize=(size + 1.2, size), dpi=110)
    image = ax.imshow(r, vmin=-1.0, vmax=1.0, cmap="RdBu_r")
    for i in range(d):
        for j in range(d):
            if i == j:
                continue
            text = f"{r[i, j]:.2f}\n[{lower[i, j]:.2f}, {upper[i, j]:.2f}]"
            std = noise.get(f"r({names[min(i, j)]}, {names[max(i, j)]})")
            if std is not None:
                text += f"\n± {std:.2g} noise"
            color = "white" if abs(r[i, j]) > 0.6 else "black"
            ax.text(j, i, text, ha="center", va="center", fontsize="x-small", color=color)
    ax.set_xticks(range(d), names, rotation=45, ha="right")
    ax.set_yticks(range(d), names)
    fig.colorbar(image, ax=ax, label="Pearson r")
    title = f"n = {result['n_rows']}, {len(result['owners'])} owners, "
    title += f"{result['confidence']:.0%} intervals"
    dp = result.get("dp")
    if dp:
        title += f", ε = {dp['epsilon']:g}"
    ax.set_title(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_naive_bayes(result: dict, path: Path) -> None:
    """One panel per feature: a numeric feature's mean +/- one standard deviation per class,
    a categorical feature's P(value | class) as grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    classes = result["classes"]
    numeric = result["numeric_features"]
    categorical = result["categorical"]
    panels = len(numeric) + len(categorical)
    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), dpi=110, squeeze=False)
    x = np.arange(len(classes))
    flat = list(axes.ravel())
    for ax, name in zip(flat, numeric, strict=False):
        mean = np.array(result["theta"][name])
        std = np.sqrt(np.array(result["var"][name]))
        ax.errorbar(x, mean, yerr=std, fmt="o", capsize=4)
        ax.set_xticks(x, classes, rotation=45 if len(classes) > 4 else 0)
        ax.set_title(f"{name}: mean ± 1 std")
        ax.set_xlabel(result["label_column"])
    for ax, table in zip(flat[len(numeric) :], categorical, strict=False):
        prob = np.exp(np.array(table["log_prob"]))  # a row per class
        width = 0.8 / max(len(table["categories"]), 1)
        for v, cat in enumerate(table["categories"]):
            ax.bar(
                x + (v - (len(table["categories"]) - 1) / 2) * width, prob[:, v], width, label=cat
            )
        ax.set_xticks(x, classes, rotation=45 if len(classes) > 4 else 0)
        ax.set_ylim(0, 1)
        ax.set_title(f"P({table['feature']} | class)")
        ax.set_xlabel(result["label_column"])
        if len(table["categories"]) <= 12:
            ax.legend(fontsize="small")
    for ax in flat[panels:]:
        ax.axis("off")
    title = f"naive Bayes of {result['label_column']}: n = {result['n']:.0f}"
    title += f", {len(result['owners'])} owners"
    if result.get("dp"):
        title += f", ε = {result['dp']['epsilon']:g}"
    fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_ldp_points(result: dict, path: Path) -> None:
    """The reports' density over the box with the estimated mean (+-2 standard errors); more
    than 2 columns: each column's marginal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    cols, edges, mean = result["columns"], result["bin_edges"], result["mean"]
    se = result["std_errors"]
    title = f"geo, epsilon {result['epsilon']:g} per unit, n = {result['n']}"
    if result["density_kind"] == "joint":
        fig, ax = plt.subplots(figsize=(6.0, 5.0), dpi=110)
        grid = np.asarray(result["density"], dtype=np.float64)
        mesh = ax.pcolormesh(edges[0], edges[1], grid.T, cmap="Greys", shading="flat")
        fig.colorbar(mesh, ax=ax, label="reports per bin")
        ax.errorbar(
            [mean[0]],
            [mean[1]],
            xerr=[2 * se[0]],
            yerr=[2 * se[1]],
            fmt="o",
            color="tab:red",
            label="estimated mean (+-2 s.e.)",
        )
        ax.set_xlabel(cols[0])
        ax.set_ylabel(cols[1])
        ax.legend(loc="upper right", fontsize="small")
        ax.set_title(title, fontsize="medium")
    else:
        fig, axes = plt.subplots(
            len(cols), 1, figsize=(6.0, 2.4 * len(cols) + 0.6), dpi=110, squeeze=False
        )
        for j, (ax, name) in enumerate(zip(axes[:, 0], cols, strict=True)):
            e = np.asarray(edges[j])
            ax.bar(e[:-1], result["density"][j], np.diff(e), align="edge", color="0.75")
            ax.axvline(mean[j], color="tab:red", label="estimated mean")
            ax.axvspan(mean[j] - 2 * se[j], mean[j] + 2 * se[j], color="tab:red", alpha=0.2)
            ax.set_xlabel(name)
            ax.set_ylabel("reports")
        axes[0, 0].legend(fontsize="small")
        fig.suptitle(title)
    fig.tight_layout()
    atomic_save_figure(fig, path)


def plot_ldp_naive_bayes(result: dict, path: Path) -> None:
    """A panel per feature: P(value | class) as grouped bars, one colour per class."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from leteo_fed.fileio import atomic_save_figure

    features, classes = result["features"], result["classes"]
    fig, axes = plt.subplots(
        len(features), 1, figsize=(7.0, 2.6 * len(features) + 0.8), dpi=110, squeeze=False
    )
    width = 0.8 / len(classes)
    for ax, name in zip(axes[:, 0], features, strict=True):
        cond = result["conditionals"][name]
        x = np.arange(len(cond["values"]))
        for j, c in enumerate(classes):
            ax.bar(
                x + j * width,
                cond["by_class"][c],
                width,
                label=f"{c} (prior {result['priors'][c]:.2f})",
            )
        ax.set_xticks(x + width * (len(classes) - 1) / 2, cond["values"])
        ax.set_ylabel(f"P({name} | class)")
        ax.set_ylim(0, 1)
    axes[0, 0].legend(fontsize="small")
    title = (
        f"LDP naive Bayes, {result['mechanism']}, epsilon {result['epsilon']:g}, n = {result['n']}"
    )
    if "test" in result:
        title += f", test accuracy {result['test']['accuracy']:.3f}"
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    atomic_save_figure(fig, path)
