"""How a measured figure grows with the number of owners: the slope of log y against log x
(0 = flat, 1 = linear, 2 = quadratic), what the scale benchmarks report."""

from __future__ import annotations

import math
from collections.abc import Sequence


def loglog_slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of log y against log x over the points where both are positive;
    None with fewer than two distinct x."""
    pts = [
        (math.log(x), math.log(y))
        for x, y in zip(xs, ys, strict=True)
        if y is not None and x > 0 and y > 0
    ]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx
