"""Figures for release reports, as PNG bytes (None when matplotlib is not installed: the page
then says so instead of failing the release)."""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import Any

from leteo_fed import extras


def png(
    draw: Callable[[Any], None], size: tuple[float, float] = (6.4, 3.4), tight: bool = True
) -> bytes | None:
    """Run `draw(ax)` on a fresh figure and return it as PNG bytes (`tight`: let matplotlib
    lay it out; False when `draw` places its own axes)."""
    if not extras.installed("matplotlib"):
        return None
    # A figure on its own Agg canvas: the same PNG bytes as pyplot's, without importing pyplot
    # (its backend machinery is a good part of a release job's start-up) or its global state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    draw(ax)
    if tight:
        fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def bars(labels: Sequence[str], values: Sequence[float], xlabel: str, ylabel: str) -> bytes | None:
    def draw(ax: Any) -> None:
        ax.bar(range(len(values)), values, color="#0969da")
        ax.set_xticks(range(len(values)), [str(v) for v in labels], rotation=30, ha="right")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)

    return png(draw)
