"""What the noise of a DP moments round (PCA, DCA, LDA, MDR) will do, from public parameters
only: the previews of `leteo-fed pca --dry-run` and `dca --dry-run`, and the preview's
simulated rows of a bounded release (`dp_release`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.privacy.noise_gate import SignalCheck
from leteo_fed.protocols import dp_release, pca
from leteo_fed.protocols.dp_facts import preview_facts

PREVIEW_CORRELATION = 0.5  # the preview's columns: mixed eigenvectors, the noisier case
PREVIEW_CLASS_SHIFT = 0.5  # the preview's classes: means this many std apart per column


def pca_noise_preview(
    plan: Any,
    rows: int | None = None,
    eigenvalues: Sequence[float] | None = None,
    components: Sequence[Sequence[float]] | None = None,
    mean: Sequence[float] | None = None,
) -> dict:
    """What the noise of a DP PCA round will do (`plan`: its `secure_sum.StatisticPlan`).

    Every released value (R = sum x x^T, V = sum x, the row count Q) carries Skellam noise of
    standard deviation sigma = sqrt(2 mu) / 2^f in real units (with the quorum's shares). To
    first order an eigenvalue lambda of the covariance (R - V V^T / Q) / (Q - 1), with unit
    eigenvector u and pooled mean m, has standard error
    sigma sqrt(2 - sum u_i^4 + 4 (u.m)^2 + ((u.m)^2 - lambda)^2) / (rows - 1):
    the analyst's guesses of the eigenpairs and mean if given, else a spread eigenvector, a mean
    of 0 and lambda of 0 (the smallest error; data far from 0 is noisier). A projection-only
    round releases the same moments in a secretly rotated frame, where a spread eigenvector is
    the expected case: the same figures hold.
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    if plan.spec.method != pca.PROTOCOL:
        raise DataError("a discriminant round's preview is discriminant_noise_preview")
    d = len(plan.spec.features)
    doc["noise_std_per_value"] = sigma
    if rows is None:
        return doc
    if rows < 2:
        raise DataError("rows must be at least 2", field="rows")
    k = plan.settings.components or d
    lams = list(eigenvalues) if eigenvalues is not None else [0.0] * k
    vecs = (
        np.asarray(components, dtype=np.float64)
        if components is not None
        else np.full((k, d), 1 / math.sqrt(d))
    )
    m = np.asarray(mean, dtype=np.float64) if mean is not None else np.zeros(d)
    errors = []
    for lam, u in zip(lams, vecs, strict=True):
        um = float(u @ m)
        spread = 2.0 - float(np.sum(u**4))
        errors.append(sigma * math.sqrt(spread + 4 * um * um + (um * um - lam) ** 2) / (rows - 1))
    doc["eigenvalue_std_error"] = errors
    bound = plan.dp.row_norm_bound  # preview_facts checked it
    checks = [SignalCheck("row count", sigma, float(rows))]
    if not plan.settings.standardize:  # a covariance eigenvalue is at most E||x||^2 <= C^2
        checks.append(SignalCheck("eigenvalue 1", errors[0], bound * bound))
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


def discriminant_noise_preview(
    plan: Any, rows: int | None = None, class_sizes: Sequence[float] | None = None
) -> dict:
    """What the noise of a DP DCA / LDA / MDR round will do, from public parameters only.

    The round releases R = sum x x^T and, per declared class c, V_c = sum of its rows and its
    row count N_c, each value with Skellam noise of standard deviation sigma (real units). The
    scatter matrices are built from the class means V_c / N_c, which move (root mean square of
    the distance, to first order, for a mean near 0) by sigma sqrt(d) / N_c: with the analyst's
    guesses of the class sizes if given, else rows / classes each.
    """
    doc, sigma = preview_facts(plan.dp, plan.encoding.scale_bits)
    if plan.spec.method == pca.PROTOCOL:
        raise DataError("a PCA round's preview is pca_noise_preview")
    doc["noise_std_per_value"] = sigma
    if rows is None and class_sizes is None:
        return doc
    d = len(plan.spec.features)
    bound = plan.dp.row_norm_bound  # preview_facts checked it
    doc["class_mean_rms_error"] = {}
    checks = []
    for i, g in enumerate(plan.spec.groupings):
        if i == 0 and class_sizes is not None:  # the guesses are for the utility label
            sizes = [float(n) for n in class_sizes]
        elif rows is not None:
            sizes = [rows / len(g.classes)] * len(g.classes)
        else:
            raise DataError("give rows for the privacy label's classes", field="rows")
        if len(sizes) != len(g.classes) or any(not n > 0 for n in sizes):
            raise DataError(f"give one positive size per class of '{g.label_column}'", field="rows")
        errs = {c: sigma * math.sqrt(d) / n for c, n in zip(g.classes, sizes, strict=True)}
        doc["class_mean_rms_error"][g.label_column] = errs
        smallest = min(zip(sizes, g.classes, strict=True))
        checks.append(
            SignalCheck(f"rows of class {g.label_column}={smallest[1]}", sigma, smallest[0])
        )
        checks.append(
            SignalCheck(f"mean of class {g.label_column}={smallest[1]}", errs[smallest[1]], bound)
        )
    doc["signal_checks"] = [c.to_dict() for c in checks]
    return doc


def moments_noise_preview(plan: Any, rows: int | None = None) -> dict:
    """The preview of the plan's method: PCA or discriminant analysis."""
    if plan.spec.method == pca.PROTOCOL:
        return pca_noise_preview(plan, rows)
    return discriminant_noise_preview(plan, rows)


def preview_lines(doc: Mapping[str, Any], rows: int | None) -> list[str] | None:
    """What the dry run says of each eigenvalue (PCA) or class mean (DCA, LDA, MDR); None
    without `rows`: the noise per value alone, as for every statistic."""
    if rows is None:
        return None
    lines = [
        f"each released value carries noise of std {doc['noise_std_per_value']:.4g} (epsilon "
        f"{doc['epsilon']:g}, delta {doc['delta']:g}, rows clipped to {doc['row_norm_bound']:g})"
    ]
    if "eigenvalue_std_error" in doc:
        for i, err in enumerate(doc["eigenvalue_std_error"], start=1):
            lines.append(
                f"  eigenvalue {i}: +/- {err:.4g} (1 std, for centered data and a small "
                "eigenvalue; larger ones and data far from 0 are noisier)"
            )
        return lines
    for label, errs in doc["class_mean_rms_error"].items():
        for c, err in errs.items():
            lines.append(
                f"  mean of class {label}={c}: moves by about {err:.4g} (RMS distance, "
                "equal class sizes, a mean near 0)"
            )
    return lines


def preview_data(
    spec: Any, columns: dict[str, np.ndarray], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], str]:
    """The preview's columns pairwise correlated: an eigenvalue whose eigenvector mixes
    several columns is noisier than one along a single column (up to 1.5x its variance),
    and real data's eigenvectors mix; independent columns would flatter."""
    names = list(spec.features)
    if len(names) < 2:
        return columns, ""
    mixed, said = dp_release.correlated_columns(columns, names, PREVIEW_CORRELATION)
    n_rows = len(mixed[names[0]])
    for g in spec.groupings:  # DCA, LDA, MDR: classes of equal size, means apart
        k = len(g.classes)
        index = rng.integers(0, k, size=n_rows)
        shift = (index - (k - 1) / 2.0) * PREVIEW_CLASS_SHIFT
        for n in names:
            mixed[n] = mixed[n] + shift * columns[n].std()
        mixed[str(g.label_column)] = np.array(g.classes, dtype=object)[index]
        said += (
            f"; {g.label_column}'s {k} classes of equal size, each class's mean "
            f"{PREVIEW_CLASS_SHIFT:g} std above the previous one's on every column"
        )
    return columns | mixed, said
