"""What a DP secure-sum release is worth, before and after: one code path for every protocol.

Before (`simulate_preview`): rows are drawn under a stated assumption about the data (each
bounded column normal with mean the middle of its bounds and standard deviation a sixth of
their width, unless the analyst says otherwise), the protocol's own owner code turns them into
a share, the round's exact noise is added many times and the protocol's own aggregator code
turns each noisy total into the released figures: the spread of each figure is its expected
error. Nothing is sent and no budget is spent. Because the owner's clipping, the encoding, the
post-processing and the return to natural units are the real ones, the preview cannot flatter
the way a formula at the clipping bound did (it assumed rows as spread as the bound allows).

After (`release_truth`): the same noise is drawn again around the released totals (a
parametric bootstrap: post-processing of the release, no privacy cost), giving the noise's std
of each released figure; a figure whose noise is at least its size is named in a warning, and
so is heavy clipping (the owners' noisy count of clipped rows).

Owners never see any of this; the aggregator computes it from what it already holds.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from leteo_fed.errors import DataError, LeteoError
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.mechanisms import Skellam
from leteo_fed.privacy.noise_gate import ReleaseWarning

Figures = Callable[[list[int]], dict[str, float]]  # noisy totals -> released figures

BOOTSTRAP_REPEATS = 100  # relative error of a std estimate ~ 1/sqrt(2 R): 7% at R = 100
PREVIEW_REPEATS = 200
NOISE_MULTIPLE = 2.0  # a figure within this many noise std of 0 is said to be noise
HEAVY_CLIPPING = 0.10  # warn when about this share of the rows (or more) was clipped
SPREAD_OF_BOUNDS = 6.0  # the default assumption: std = (upper - lower) / 6


@dataclass(frozen=True)
class Assumption:
    """What the preview assumes of the data, per bounded column: mean and std (natural
    units). The analyst's hints replace the default (the middle, a sixth of the width)."""

    means: Mapping[str, float] = field(default_factory=dict)
    stds: Mapping[str, float] = field(default_factory=dict)

    def of(self, b: ColumnBounds) -> tuple[float, float]:
        mean = float(self.means.get(b.column, b.center))
        std = float(self.stds.get(b.column, (b.upper - b.lower) / SPREAD_OF_BOUNDS))
        if not (math.isfinite(mean) and math.isfinite(std) and std >= 0):
            raise DataError(f"the expected mean/std of '{b.column}' must be finite, std >= 0")
        return mean, std

    def describe(self, bounds: Sequence[ColumnBounds]) -> str:
        parts = []
        for b in bounds:
            mean, std = self.of(b)
            given = b.column in self.means or b.column in self.stds
            parts.append(
                f"{b.column} ~ normal(mean {mean:.4g}, std {std:.4g})"
                + (" (your hint)" if given else "")
            )
        return (
            "; ".join(parts)
            + " (default: the middle of its bounds and a sixth of their width; give "
            "`expect_std` COL=S / `expect_mean` COL=M for what you know)"
        )


class ArrayTable:
    """Rows held in memory, read as a site's table (the preview's simulated site)."""

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        self._columns = dict(columns)

    def matrix(self, columns: Sequence[str]) -> np.ndarray:
        return np.column_stack([self._columns[c] for c in columns]).astype(np.float64)

    def labels(self, column: str) -> list[str]:
        return [str(v) for v in self._columns[column]]


class ArraySite:
    is_local = True
    uses_spark = False

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        self._table = ArrayTable(columns)

    def read(self, columns: Sequence[str]) -> ArrayTable:
        return self._table

    def spark_moments(self, *args, **kwargs):  # pragma: no cover - never Spark
        raise DataError("a simulated site has no Spark engine")


def seeded_rng(*parts: str) -> np.random.Generator:
    """A generator seeded from public text (the round id): a result can be recomputed."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def noise_draws(
    figures_of: Figures, totals: Sequence[int], mu: float, repeats: int, rng: np.random.Generator
) -> list[dict[str, float]]:
    """The figures of `totals` plus fresh aggregate noise Skellam(mu), `repeats` times (draws
    the protocol refuses, e.g. a non-positive noisy count, are left out)."""
    noise = Skellam(mu)
    out = []
    for _ in range(repeats):
        e = noise.sample(len(totals), rng)
        try:
            out.append(
                figures_of([int(t) + int(z) for t, z in zip(totals, e.tolist(), strict=True)])
            )
        except LeteoError:
            continue
    return out


def spread(draws: list[dict[str, float]], centre: Mapping[str, float]) -> dict[str, float]:
    """Root mean square deviation of each figure from `centre` over the draws."""
    if not draws:
        return {k: math.inf for k in centre}
    out = {}
    for k, c in centre.items():
        vals = np.array([d[k] for d in draws if k in d], dtype=np.float64)
        out[k] = float(np.sqrt(np.mean((vals - c) ** 2))) if len(vals) else math.inf
    return out


def buried(figures: Mapping[str, float], noise: Mapping[str, float]) -> list[ReleaseWarning]:
    """Figures within two noise std of 0 (a 95% interval of the noise alone reaches them), or
    held at 0 by the post-processing (a noisy eigenvalue or variance at its floor)."""
    out = []
    for name, value in figures.items():
        e = noise.get(name)
        if e is None or not math.isfinite(value):
            continue
        if value == 0.0 and e == 0.0:
            out.append(
                ReleaseWarning(
                    name,
                    f"{name} is at its floor (0): the DP noise buried it and the release's "
                    "post-processing held it at 0 (raise epsilon or pool more rows)",
                )
            )
        elif NOISE_MULTIPLE * e >= abs(value):
            out.append(
                ReleaseWarning(
                    name,
                    f"{name} = {value:.4g} +/- {e:.2g}: the DP noise is about as large as the "
                    "figure itself (within two noise std of 0); raise epsilon, pool more rows, "
                    "or narrow the public bounds to the data's real range",
                )
            )
    return out


def clipping_warning(clipped_rows: float | None, n_rows: float) -> list[ReleaseWarning]:
    if clipped_rows is None or not n_rows > 0:
        return []
    share = max(clipped_rows, 0.0) / n_rows
    if share < HEAVY_CLIPPING:
        return []
    return [
        ReleaseWarning(
            "clipped rows",
            f"about {min(share, 1.0):.0%} of the rows had a value outside its public bounds "
            "and were clipped: the figures are biased toward the bounds; widen the public bounds",
        )
    ]


@dataclass(frozen=True)
class Truth:
    """What a release says of its own noise: `DpFacts` fields."""

    figure_noise_std: dict[str, float]
    warnings: list[ReleaseWarning]
    clipped_rows: float | None
    figures: dict[str, float]


def release_truth(
    figures_of: Figures,
    totals: Sequence[int],
    mu: float,
    round_id: str,
    n_rows: float,
    clipped_rows: float | None = None,
    extra: Sequence[ReleaseWarning] = (),
    repeats: int = BOOTSTRAP_REPEATS,
) -> Truth:
    """After a release: each figure's noise std (noise redrawn around the released totals,
    seeded by the round id) and the warnings."""
    released = figures_of(list(totals))
    draws = noise_draws(figures_of, totals, mu, repeats, seeded_rng("truth", round_id))
    return stated_truth(released, spread(draws, released), n_rows, clipped_rows, extra)


def stated_truth(
    figures: Mapping[str, float],
    noise: Mapping[str, float],
    n_rows: float,
    clipped_rows: float | None = None,
    extra: Sequence[ReleaseWarning] = (),
) -> Truth:
    """A release's figures with each one's noise std (redrawn, or in closed form) and the
    warnings: heavy clipping, the figures the noise buries, the protocol's `extra` ones."""
    found = [*clipping_warning(clipped_rows, n_rows), *buried(figures, noise), *extra]
    return Truth(dict(noise), found, clipped_rows, dict(figures))


def correlated_columns(
    columns: dict[str, np.ndarray], names: Sequence[str], rho: float
) -> tuple[dict[str, np.ndarray], str]:
    """The preview's columns `names` made pairwise correlated `rho`, each keeping its mean and
    std: real data's columns are correlated, and independent ones would flatter (an eigenvector
    mixing columns is noisier; a correlation of 0 is all noise)."""
    k = len(names)
    if k < 2:
        return columns, ""
    corr = np.full((k, k), rho)
    np.fill_diagonal(corr, 1.0)
    z = np.column_stack([(columns[n] - columns[n].mean()) / columns[n].std() for n in names])
    z = z @ np.linalg.cholesky(corr).T
    mixed = {n: columns[n].mean() + columns[n].std() * z[:, j] for j, n in enumerate(names)}
    return columns | mixed, f"the columns pairwise correlated {rho:g}"


Shape = Callable[[dict[str, np.ndarray], np.random.Generator], tuple[dict[str, np.ndarray], str]]


def simulate_preview(
    share_of: Callable[[ArraySite], list[int]],
    figures_of: Figures,
    bounds: Sequence[ColumnBounds],
    mu: float,
    rows: int,
    assumption: Assumption,
    shape: Shape | None = None,
    repeats: int = PREVIEW_REPEATS,
    seed: int = 0,
) -> dict:
    """Before a release: the expected error (std) of each released figure, and the figures
    the noise would bury, for `rows` rows drawn under `assumption` (stated in the document).

    `share_of` is the protocol's owner code on a site; `figures_of` its aggregator code on
    the totals (both with the clipped-rows value of a bounded release)."""
    if rows < 2:
        raise DataError("rows must be at least 2", field="rows")
    rng = np.random.default_rng(seed)
    columns = {}
    for b in bounds:
        mean, std = assumption.of(b)
        columns[b.column] = rng.normal(mean, std, size=rows)
    added = ""
    if shape is not None:
        columns, added = shape(columns, rng)
    totals = share_of(ArraySite(columns))
    exact = figures_of(totals)
    draws = noise_draws(figures_of, totals, mu, repeats, rng)
    errors = spread(draws, exact)
    return {
        "assumption": assumption.describe(bounds) + (f"; {added}" if added else ""),
        "assumed_rows": rows,
        "expected_figures": exact,
        "expected_error": errors,
        "refused_draws": repeats - len(draws),
        "noise_buries": [w.figure for w in buried(exact, errors)],
    }


__all__ = [
    "Assumption",
    "ArraySite",
    "Truth",
    "buried",
    "clipping_warning",
    "release_truth",
    "seeded_rng",
    "simulate_preview",
]
