"""The coefficient plot of the regression commands (linreg, logreg): each coefficient with its
confidence interval and, for a DP release, lighter, the interval widened by the noise's own
error. The intercept, usually on another scale, goes in the title."""

from __future__ import annotations

import math
from pathlib import Path


def plot_coefficients(result: dict, path: Path, xlabel: str, title: str) -> None:
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
