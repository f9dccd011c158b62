"""Geo points as a report statistic: n-dimensional Laplace (planar for 2 columns) in a public box.

Each owner clips its points into the box and perturbs each with the n-dimensional Laplace
mechanism, epsilon per unit of Euclidean distance (geo-indistinguishability), then fits the
report into the box: remapped onto it (post-processing) or redrawn until inside, each draw at
epsilon / 2 (`draw_epsilon`). The aggregator keeps the perturbed points for the data user (at
most `MAX_POINTS`) and states their mean location and a density grid over the box.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from leteo_fed.errors import DataError, ProtocolError
from leteo_fed.ldp import geo
from leteo_fed.privacy.noise_gate import ReleaseWarning, SignalCheck
from leteo_fed.protocols.ldp_noise import Expectation, finish, per_column
from leteo_fed.protocols.ldp_spec import MAX_POINTS, LdpRequest, LdpSpec, box_spec, column_spec
from leteo_fed.protocols.reports import ColumnReports, ReportFacts, facts, finite, register
from leteo_fed.protocols.results import result_type

GEO = "geo"  # the mechanism's name in a spec
BOX_FITS = ("remap", "resample")  # clip a report into the box, or redraw it (ldp/geo.py)
DEFAULT_BINS = 20  # density grid bins per axis
MAX_BINS = 200
PILED_UP = 0.10  # (remap) more than this share of reports on the box's faces is heavy
GEO_SAMPLE = 20_000  # points of the preview's seeded simulation of the box's bias
GEO_POSITIONS = np.linspace(0.0, 0.5, 11)  # where the preview's default spread's mean may sit


@result_type
@dataclass(frozen=True, kw_only=True)
class LdpPointsResult(ReportFacts):
    wire: ClassVar[str] = "ldp_points"
    columns: list[str]
    box: list[list[float]]
    points: list[list[float]]
    box_fit: str = "remap"
    mean: list[float] = field(default_factory=list)
    std_errors: list[float] = field(default_factory=list)
    bins: int = 0
    bin_edges: list[list[float]] = field(default_factory=list)
    density_kind: str = ""
    density: list[list[float]] = field(default_factory=list)

    def table(self) -> tuple[dict[str, list], list, str]:
        cols = {c: [p[j] for p in self.points] for j, c in enumerate(self.columns)}
        return cols, list(range(len(self.points))), "report"


def draw_epsilon(spec: LdpSpec) -> float:
    """The rate each geo draw uses: resampling until inside the box costs twice the rate of a
    draw (ldp/geo.py `resample_in_box`), so each draw takes epsilon / 2 and the report stays
    epsilon-geo-indistinguishable, as with remapping at epsilon."""
    return spec.epsilon / 2 if spec.box_fit == "resample" else spec.epsilon


def geo_noise_variance(spec: LdpSpec) -> float:
    """Each coordinate's noise variance before the box: the radius of m-D Laplace is
    Gamma(m, 1/e), so E[r^2] = m (m + 1) / e^2, shared equally by m coordinates."""
    return (len(spec.columns) + 1) / draw_epsilon(spec) ** 2


def geo_estimate(points: np.ndarray, spec: LdpSpec) -> dict:
    """The mean report with its standard error from theory, and the reports' density grid over
    the box: the joint bins x bins histogram for 2 columns, each column's marginal otherwise."""
    n, m = points.shape
    edges = [
        np.linspace(a, b, spec.bins + 1)
        for a, b in zip(spec.box_lower, spec.box_upper, strict=True)
    ]
    if m == 2:
        grid, _, _ = np.histogram2d(points[:, 0], points[:, 1], bins=[edges[0], edges[1]])
        kind, density = "joint", grid.tolist()
    else:
        kind = "marginals"
        density = [
            np.histogram(points[:, j], bins=edges[j])[0].astype(float).tolist() for j in range(m)
        ]
    se = math.sqrt(geo_noise_variance(spec) / n)
    return {
        "box_fit": spec.box_fit,
        "mean": points.mean(axis=0).tolist(),
        "std_errors": [se] * m,
        "bins": spec.bins,
        "bin_edges": [e.tolist() for e in edges],
        "density_kind": kind,
        "density": density,
        "estimator": (
            f"{m}-dimensional Laplace points (epsilon per unit of Euclidean distance), "
            + (
                "remapped into"
                if spec.box_fit == "remap"
                else "each drawn at epsilon/2 until inside"
            )
            + " the public box; the mean report estimates the pooled mean location, standard "
            "error sqrt((m + 1) / (e^2 n)) per coordinate from the noise alone (the box only "
            "shrinks it, biasing toward the box); density: report counts per bin"
        ),
    }


@dataclass
class GeoAccumulator:
    """The accepted points, kept for the data user (so never spilled)."""

    spec: LdpSpec
    n: int = 0
    points: list[np.ndarray] = field(default_factory=list)
    engine: str = "numpy"
    keeps_points: ClassVar[bool] = True

    def check(self, reports: np.ndarray) -> None:
        lo, hi = np.asarray(self.spec.box_lower), np.asarray(self.spec.box_upper)
        ok = reports.ndim == 2 and reports.shape[1] == len(lo) and reports.dtype == np.float64
        if not ok or not np.all((reports >= lo) & (reports <= hi)):
            raise ProtocolError("geo reports must be points inside the public box")
        if self.n + len(reports) > MAX_POINTS:  # checked before anything is folded
            raise ProtocolError(f"more than {MAX_POINTS} points in one round")

    def partial(self, reports: np.ndarray) -> tuple[int, np.ndarray]:
        self.check(reports)
        return len(reports), reports.copy()

    def fold(self, part: tuple[int, np.ndarray]) -> None:
        n, points = part
        self.n += n
        self.points.append(points)

    def add(self, n: int, contribution: Any, engine: str) -> None:
        raise ProtocolError("geo rounds keep their points in memory")

    def result(self, consistency: bool = False) -> dict:
        spec = self.spec
        doc = facts(spec, self.n)
        doc["columns"] = list(spec.columns)
        doc["box"] = [list(spec.box_lower), list(spec.box_upper)]
        points = np.vstack(self.points)
        doc["points"] = points.tolist()
        doc.update(geo_estimate(points, spec))
        doc["engine"] = "numpy"
        return doc


class GeoReports(ColumnReports):
    kind = "geo"
    mechanisms = (GEO,)
    marks = ("points",)

    def spec(self, request: LdpRequest) -> LdpSpec:
        """Points in a public box; how reports are fitted into it, and the density grid."""
        spec = box_spec(request, column_spec(request))
        fit = request.box_fit or "remap"
        if fit not in BOX_FITS:
            raise DataError(f"box_fit must be one of {BOX_FITS}, got {fit!r}", field="box_fit")
        bins = request.bins or DEFAULT_BINS
        if not 1 <= bins <= MAX_BINS:
            raise DataError(f"bins must be in [1, {MAX_BINS}], got {bins}", field="bins")
        return replace(spec, box_fit=fit, bins=bins)

    def mechanism(self, spec: LdpSpec) -> None:
        """No mechanism object: `perturb_chunk` draws with `leteo_fed.ldp.geo`."""
        return None

    def read(self, spec: LdpSpec, table: Any) -> np.ndarray:
        return table.matrix(self.columns(spec))

    def encode(self, values: Sequence | np.ndarray, spec: LdpSpec) -> np.ndarray:
        """The points, clipped into the box."""
        x = finite(values, spec.column, "the point columns have missing or non-finite values")
        return np.clip(x, np.asarray(spec.box_lower), np.asarray(spec.box_upper))

    def perturb_chunk(
        self, encoded: np.ndarray, spec: LdpSpec, rng: np.random.Generator
    ) -> np.ndarray:
        lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
        if spec.box_fit == "resample":  # each draw at epsilon / 2 (`draw_epsilon`)
            return geo.resample_in_box(encoded, draw_epsilon(spec), lo, hi, rng)
        noisy = geo.nd_laplace(encoded, spec.epsilon, rng)
        return geo.remap_to_box(noisy, lo, hi)  # post-processing: the guarantee holds

    def accumulator(self, spec: LdpSpec) -> GeoAccumulator:
        return GeoAccumulator(spec)

    def result_type(self, spec: LdpSpec) -> type[LdpPointsResult]:
        return LdpPointsResult

    def preview(self, doc: dict, spec: LdpSpec, rows: int | None, expect: Expectation) -> dict:
        """(m + 1) / (e^2 n) per coordinate, and the bias of fitting reports into the box."""
        per_report = geo_noise_variance(spec)
        m = len(spec.columns)
        doc["kind"] = "geo"
        doc["columns"] = list(spec.columns)
        doc["box_fit"] = spec.box_fit
        doc["draw_epsilon"] = draw_epsilon(spec)
        doc["variance_per_report"] = per_report  # per coordinate, in the columns' unit squared
        doc["mean_noise_distance"] = m / draw_epsilon(spec)  # E[r], r ~ Gamma(m, 1/e)
        if rows is None:
            return doc
        std = math.sqrt(per_report / rows)
        doc["mean_std_error"] = std
        bias, basis = _geo_bias(spec, expect)
        doc["box_bias"] = bias.tolist()
        figures = [
            {
                "figure": f"mean of {c}",
                "expected_std": math.hypot(std, float(b)),
                "noise_std": std,
                "bias": float(b),
            }
            for c, b in zip(spec.columns, bias, strict=True)
        ]
        half = min(b - a for a, b in zip(spec.box_lower, spec.box_upper, strict=True)) / 2
        assumption = (
            f"{rows} reports; each mean's error is its noise (the same for every column) and the "
            f"bias of fitting reports into the box ({spec.box_fit}), under {basis}"
        )
        return finish(doc, rows, figures, assumption, [SignalCheck("mean location", std, half)])

    def release_warnings(self, doc: Mapping[str, Any]) -> list[ReleaseWarning]:
        """A mean location whose std error exceeds half the box's side, or (remap) more than
        `PILED_UP` of the reports clipped onto the box's faces."""
        found: list[ReleaseWarning] = []
        lo, hi = (np.asarray(b, dtype=np.float64) for b in doc["box"])
        for j, column in enumerate(doc["columns"]):
            se, half = doc["std_errors"][j], (hi[j] - lo[j]) / 2
            if se > half:
                found.append(
                    ReleaseWarning(
                        f"mean of {column}",
                        f"mean of {column} has a std error ({se:.3g}) above half the box's side "
                        f"({half:.3g}): it is noise; raise epsilon or collect more points",
                    )
                )
        points = np.asarray(doc["points"], dtype=np.float64)
        if doc.get("box_fit", "remap") == "remap" and points.size:
            on_face = float(np.mean(np.any((points <= lo) | (points >= hi), axis=1)))
            if on_face > PILED_UP:
                found.append(
                    ReleaseWarning(
                        "points",
                        f"{on_face:.0%} of the reports were clipped onto the box's faces: the "
                        "density piles up there and the mean is pulled toward the box; widen the "
                        "box, raise epsilon, or use `box_fit` resample",
                    )
                )
        return found


def geo_box_bias(
    spec: LdpSpec, means: Sequence[float], stds: Sequence[float], seed: int = 0
) -> np.ndarray:
    """Per column, how far fitting the reports into the box moves the mean report, for points
    drawn N(mean, std) per column (clipped into the box, as owners clip them): a seeded
    simulation through the owner's own perturbation (`GeoReports.perturb`). Remap: the mean
    displacement of the clipped reports (exact in expectation, no noise term); resample: the
    mean report minus the mean point."""
    rng = np.random.default_rng(seed)
    lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
    q = (np.arange(GEO_SAMPLE) + 0.5) / GEO_SAMPLE
    from scipy.special import ndtri

    z = ndtri(q)
    x = np.column_stack(
        [
            np.clip(mu + sd * rng.permutation(z), a, b)
            for mu, sd, a, b in zip(means, stds, lo, hi, strict=True)
        ]
    )
    if spec.box_fit == "resample":
        reports = np.vstack(list(GEO_POINTS.perturb(x, spec, rng)))
        return reports.mean(axis=0) - x.mean(axis=0)
    raw = geo.nd_laplace(x, spec.epsilon, rng)
    return (np.clip(raw, lo, hi) - raw).mean(axis=0)


def _geo_bias(spec: LdpSpec, expect: Expectation) -> tuple[np.ndarray, str]:
    """The box's bias under what the analyst expects, else under the worst placement of a
    spread of a sixth of the box per column."""
    m = len(spec.columns)
    lo, hi = np.asarray(spec.box_lower), np.asarray(spec.box_upper)
    width = hi - lo
    means = per_column(expect.mean, m, "mean")
    stds = per_column(expect.std, m, "std")
    if all(v is not None for v in means) and all(v is not None for v in stds):
        bias = geo_box_bias(spec, means, stds)  # type: ignore[arg-type]
        return np.abs(bias), "the points N(mean, std) per column as you expect them"
    sd = [s if s is not None else w / 6 for s, w in zip(stds, width, strict=True)]
    worst = np.zeros(m)
    for t in GEO_POSITIONS:
        mu = [v if v is not None else a + t * w for v, a, w in zip(means, lo, width, strict=True)]
        worst = np.maximum(worst, np.abs(geo_box_bias(spec, mu, sd)))
    return worst, (
        "the points spread a sixth of the box per column (or `expect_std`) around the worst "
        "mean (or `expect_mean`) for the box's bias"
    )


GEO_POINTS = register(GeoReports())
