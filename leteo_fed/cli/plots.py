"""The figures of the commands made from declared statistics (`cli.statistics`), drawn from a
result's document; `cli.jobs.PLOTTERS` finds each by its result's wire name, for the command
and for `leteo-fed result`."""

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
    from leteo_fed.cli import coefficient_plot

    what = "ridge" if result["method"] == "ridge" else "OLS"
    coefficient_plot.plot_coefficients(
        result,
        path,
        f"coefficient (effect on {result['label_column']})",
        f"{what}: n={result['n_rows']}, R^2={result['r_squared']:.3f}",
    )


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
