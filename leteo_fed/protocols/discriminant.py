"""DCA, LDA and MDR from exact aggregate scatter matrices.

All three solve a symmetric-definite generalized eigenproblem A w = lambda B w:
- DCA (Kung): A = S_B + rho' I, B = S_W + rho I, with the customary DCA defaults
  rho = 0.02 * lambda_max(S_W) and rho' = 0.1 * rho. (The equivalent pencil
  (S_total + (rho + rho') I, S_W + rho I) has the same eigenvectors and our eigenvalues plus one.)
- LDA (Fisher): A = S_B, B = S_W + rho I with a tiny default ridge rho = 1e-9 * lambda_max(S_W),
  only so that a singular S_W (e.g. constant pixels) still gives a definite problem; rho = 0
  means plain S_W, which must then be positive definite.
- MDR (Diamantaras & Kung): A = S_B(utility), B = S_B(privacy) + rho I, default
  rho = 0.02 * lambda_max(S_B(privacy)): directions that separate the utility classes and not
  the privacy classes.
Components are returned unit-norm (generalized eigenvectors are not orthogonal), sign fixed so the
largest weight is positive, in descending order of eigenvalue.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.protocols import moments
from leteo_fed.protocols.pca import orient_components

METHODS = ("dca", "lda", "mdr")
DCA_RHO_FRACTION = 0.02
DCA_RHO_PRIME_FRACTION = 0.1
LDA_RHO_FRACTION = 1e-9
MDR_RHO_FRACTION = 0.02


@dataclass(frozen=True)
class Ridge:
    rho: float | None = None  # None: the method's default
    rho_prime: float | None = None
    # DP rounds: the default rho is at least this (sized to the noise, from public parameters),
    # and the noisy denominator is projected onto the PSD cone first, so the problem stays
    # definite. Both are post-processing of the DP release and cost no privacy.
    noise_floor: float = 0.0


def default_components(method: str, classes: Sequence[int]) -> int:
    """K - 1: the rank of the between-class scatter of the (utility) label."""
    return max(1, classes[0] - 1)


def pencil(
    method: str, s_between: Sequence[np.ndarray], s_within: np.ndarray, ridge: Ridge
) -> tuple[np.ndarray, np.ndarray, dict]:
    """The (A, B) pair of a method and the ridge values actually used."""
    d = s_within.shape[0]
    eye = np.eye(d)
    if ridge.noise_floor > 0:
        s_within = _psd(s_within)
        s_between = [_psd(s) for s in s_between]

    def default(fraction: float, s: np.ndarray) -> float:
        return max(fraction * _lambda_max(s), ridge.noise_floor)

    if method == "dca":
        rho = ridge.rho if ridge.rho is not None else default(DCA_RHO_FRACTION, s_within)
        rho_p = ridge.rho_prime if ridge.rho_prime is not None else DCA_RHO_PRIME_FRACTION * rho
        return s_between[0] + rho_p * eye, s_within + rho * eye, {"rho": rho, "rho_prime": rho_p}
    if method == "lda":
        rho = ridge.rho if ridge.rho is not None else default(LDA_RHO_FRACTION, s_within)
        return s_between[0], s_within + rho * eye, {"rho": rho}
    if method == "mdr":
        if len(s_between) < 2:
            raise DataError("MDR needs a privacy label column", field="privacy_label_column")
        rho = ridge.rho if ridge.rho is not None else default(MDR_RHO_FRACTION, s_between[1])
        return s_between[0], s_between[1] + rho * eye, {"rho": rho}
    raise DataError(f"unknown method {method!r}; expected one of {METHODS}", field="method")


def _psd(s: np.ndarray) -> np.ndarray:
    """Nearest positive semi-definite matrix (negative eigenvalues set to zero)."""
    evals, evecs = np.linalg.eigh(s)
    return (evecs * np.maximum(evals, 0.0)) @ evecs.T


def _lambda_max(s: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(s)[-1])


def solve(a: np.ndarray, b: np.ndarray, components: int) -> tuple[np.ndarray, np.ndarray]:
    d = a.shape[0]
    if not 1 <= components <= d:
        raise DataError(f"components must be in 1..{d}, got {components}", field="components")
    try:
        import scipy.linalg  # the aggregator's solve only: owners never load it

        evals, evecs = scipy.linalg.eigh(a, b)
    except np.linalg.LinAlgError as exc:
        raise DataError(
            "the denominator scatter matrix is not positive definite; use a positive ridge `rho`"
        ) from exc
    order = np.argsort(evals)[::-1][:components]
    w = evecs[:, order]
    w = orient_components(w / np.linalg.norm(w, axis=0))
    return evals[order], w


@dataclass
class DiscriminantResult:
    method: str
    features: list[str]
    classes: list[str]
    privacy_classes: list[str] | None
    n_samples: int
    eigenvalues: list[float]
    components: list[list[float]]
    mean: list[float]
    ridge: dict

    def to_dict(self) -> dict:
        doc = {
            "protocol": self.method,
            "method": self.method,
            "features": self.features,
            "classes": self.classes,
            "n_samples": self.n_samples,
            "eigenvalues": self.eigenvalues,
            "components": self.components,
            "mean": self.mean,
            "ridge": self.ridge,
            "pencil": {
                "dca": "(S_B + rho' I) w = lambda (S_W + rho I) w",
                "lda": "S_B w = lambda (S_W + rho I) w",
                "mdr": "S_B(utility) w = lambda (S_B(privacy) + rho I) w",
            }[self.method],
        }
        if self.privacy_classes is not None:
            doc["privacy_classes"] = self.privacy_classes
        return doc


def from_aggregate(
    agg: moments.IntegerMoments,
    method: str,
    groupings: Sequence[moments.Grouping],
    features: Sequence[str],
    components: int,
    ridge: Ridge = Ridge(),
) -> DiscriminantResult:
    for g, grouping in enumerate(groupings):
        present = sum(1 for mk in agg.m[g] if mk > 0)
        if present < 2:
            raise DataError(
                f"column '{grouping.label_column}' has rows in {present} class(es) across all "
                "owners; a discriminant analysis needs at least 2",
                field=grouping.label_column,
            )
    s_b = [moments.between_scatter(agg, g) for g in range(len(groupings))]
    s_w = moments.within_scatter(agg, 0)
    a, b, used = pencil(method, s_b, s_w, ridge)
    evals, w = solve(a, b, components)
    return DiscriminantResult(
        method=method,
        features=list(features),
        classes=list(groupings[0].classes),
        privacy_classes=list(groupings[1].classes) if len(groupings) > 1 else None,
        n_samples=agg.n,
        eigenvalues=[float(v) for v in evals],
        components=[[float(c) for c in w[:, i]] for i in range(w.shape[1])],
        mean=[float(v) for v in moments.mean(agg)],
        ridge=used,
    )


def reference(
    x: np.ndarray,
    labels: Sequence[np.ndarray],
    method: str,
    components: int,
    ridge: Ridge = Ridge(),
) -> tuple[np.ndarray, np.ndarray]:
    """The same analysis on pooled rows, scatter matrices from per-class centering with NumPy."""
    x = np.asarray(x, dtype=np.float64)
    mu = x.mean(axis=0)
    s_b = []
    s_w = np.zeros((x.shape[1], x.shape[1]))
    for g, y in enumerate(labels):
        sb = np.zeros_like(s_w)
        for c in np.unique(y):
            xc = x[y == c]
            dc = xc.mean(axis=0) - mu
            sb += len(xc) * np.outer(dc, dc)
            if g == 0:
                centered = xc - xc.mean(axis=0)
                s_w += centered.T @ centered
        s_b.append(sb)
    a, b, _ = pencil(method, s_b, s_w, ridge)
    return solve(a, b, components)
