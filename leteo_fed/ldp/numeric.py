"""Local-DP mean estimation for values in [-1, 1], one class per mechanism.

Why this shape
--------------
Each owner maps its value to [-1, 1] with PUBLIC bounds (`to_unit`), perturbs it, and sends one
real number per attribute. Every mechanism is unbiased, E[t*] = t, so the aggregator only needs
the running sums Σt* and Σt*² (`NumericMechanism.sums`, additive over chunks) and n.

1-D mechanisms at budget ε (per-report variance at input t):

- laplace: t + Lap(2/ε)                                   Var = 8/ε²
- duchi:   ±B, B = (e^ε+1)/(e^ε-1),
           Pr[+B] = ½ + t(e^ε-1)/(2e^ε+2)                 Var = B² - t²
- pm:      piecewise (Wang et al. ICDE 2019), C = (e^{ε/2}+1)/(e^{ε/2}-1),
           l(t) = (C+1)t/2 - (C-1)/2, r(t) = l(t) + C - 1;
           w.p. e^{ε/2}/(e^{ε/2}+1) uniform on [l, r], else uniform on [-C, l) ∪ (r, C]
           (tails chosen proportionally to their lengths, NOT 50/50: a 50/50 choice, as in a
           common textbook listing, biases the mean, e.g. to 1.65 at ε = 1, t = 0.8)
                                                          Var = t²/(e^{ε/2}-1) + (e^{ε/2}+3)/(3(e^{ε/2}-1)²)
- hm:      hybrid: for ε > ε* = 0.61, PM w.p. α = 1 - e^{-ε/2}, else Duchi; Duchi only below ε*
                                                          Var = α Var_PM(t) + (1-α) Var_Duchi(t)
           (constant in t for ε > ε*: the t² terms cancel).

Multi-dimensional records t in [-1, 1]^d (`perturb_multi`):

- laplace: Lap(2d/ε) per coordinate (L1 range of a record is 2d).
- duchi:   Duchi et al.'s d-dimensional mechanism with ties (t*·v = 0, even d only) in BOTH T+
           and T-; a common textbook listing uses a strict ">" for T+, which sends every tie to
           T- and biases the estimate for even d. Every coordinate of the report is ±B_d.
- pm, hm:  k = max(1, min(d, floor(ε/2.5))) attributes sampled WITHOUT replacement (sampling
           with replacement can pick an attribute twice, which breaks the d/k scaling that makes
           the report unbiased), each perturbed with the 1-D mechanism at ε/k and scaled by d/k;
           others report 0.

Each mechanism carries its privacy map (`privacy_map`): the per-record ε-LDP guarantee.

Standard errors: `estimate` reports the EMPIRICAL variance of the reports over n. Reports are
independent but not identically distributed (their variance depends on t_i); the sample variance
then estimates mean_i Var(t*_i) + spread of the t_i, so s²/n is a consistent, slightly
conservative SE of the mean (and exactly the right SE if users are a random sample of a
population). The closed-form worst case over t is given alongside as an upper bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.ldp._checks import check_count, check_epsilon
from leteo_fed.privacy.budget import Budget

HM_EPSILON_STAR = 0.61  # Wang et al. ICDE 2019: below it HM is pure Duchi


@dataclass(frozen=True)
class MeanEstimate:
    """A mean in unit scale with its variance; arrays for multi-dimensional estimates.

    variance / std_error: empirical (sample variance of the reports / n).
    theoretical_worst_case_variance: closed-form max over t in [-1, 1] of the per-report
    variance, / n (an upper bound on the true variance of `mean`).
    """

    mean: float | np.ndarray
    variance: float | np.ndarray
    std_error: float | np.ndarray
    theoretical_worst_case_variance: float | np.ndarray
    n: int

    def to_bounds(self, lo: float, hi: float) -> MeanEstimate:
        """The same estimate in the original units of public bounds [lo, hi]."""
        s = _check_bounds(lo, hi)
        return replace(
            self,
            mean=from_unit(self.mean, lo, hi),
            variance=self.variance * s**2,
            std_error=self.std_error * s,
            theoretical_worst_case_variance=self.theoretical_worst_case_variance * s**2,
        )


@dataclass(frozen=True)
class NumericMechanism:
    """A configured numeric mechanism; one subclass per mechanism (`MECHANISMS`), built with
    `make_numeric`."""

    name: ClassVar[str] = ""
    samples_attributes: ClassVar[bool] = False  # pm/hm: k of d attributes per record

    epsilon: float

    def privacy_map(self) -> Budget:
        """The per-record ε-LDP guarantee (delta 0), for 1-D values and for d-dim records."""
        return Budget(self.epsilon)

    # ------------------------------------------------------------------ client side
    def perturb(self, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One unbiased report per value of t (shape (n,), values in [-1, 1])."""
        x = _check_unit(t, ndim=1)
        return self._perturb_1d(x, self.epsilon, rng)

    def perturb_multi(
        self, t: np.ndarray, rng: np.random.Generator, *, k: int | None = None
    ) -> np.ndarray:
        """ε-LDP reports for records t of shape (n, d) in [-1, 1]^d; unbiased column means.

        k (pm/hm only): sampled attributes per user, default max(1, min(d, floor(ε/2.5))).
        """
        x = _check_unit(t, ndim=2)
        d, kk = self._dims(x.shape[1], k)
        return self._perturb_records(x, d, kk, rng)

    def _perturb_1d(self, t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        """The 1-D sampler at budget eps (pm/hm call it at ε/k for sampled attributes)."""
        raise NotImplementedError

    def _perturb_records(
        self, x: np.ndarray, d: int, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        raise NotImplementedError

    # ------------------------------------------------------------------ server side
    @staticmethod
    def sums(reports: np.ndarray) -> tuple[np.ndarray | float, np.ndarray | float]:
        """(Σ reports, Σ reports²) over rows: what the aggregator accumulates chunk by chunk."""
        r = np.asarray(reports, dtype=np.float64)
        if not np.all(np.isfinite(r)):
            raise DataError("numeric reports must be finite", field="reports")
        return r.sum(axis=0), np.square(r).sum(axis=0)

    def estimate(
        self,
        total: float | np.ndarray,
        total_sq: float | np.ndarray,
        n: int,
        *,
        d: int = 1,
        k: int | None = None,
    ) -> MeanEstimate:
        """Mean Σt*/n with empirical SE sqrt(s²/n), s² = (Σt*² - (Σt*)²/n)/(n-1).

        d, k: the record dimension and sampled-attribute count used by `perturb_multi`
        (defaults: 1-D); they only affect `theoretical_worst_case_variance`.
        """
        n = check_count(n, minimum=2)
        s1 = np.asarray(total, dtype=np.float64)
        s2 = np.asarray(total_sq, dtype=np.float64)
        if s1.shape != s2.shape or not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
            raise DataError(
                "total and total_sq must be finite and of the same shape", field="total"
            )
        mean = s1 / n
        s_var = np.maximum((s2 - s1 * s1 / n) / (n - 1), 0.0)  # guard rounding below zero
        var = s_var / n
        worst = self.worst_case_variance(d=d, k=k) / n
        if s1.ndim == 0:
            return MeanEstimate(float(mean), float(var), float(np.sqrt(var)), float(worst), n)
        return MeanEstimate(mean, var, np.sqrt(var), np.full(s1.shape, worst), n)

    # ------------------------------------------------------------------ closed forms
    def report_variance(
        self, t: float | np.ndarray, *, d: int = 1, k: int | None = None
    ) -> float | np.ndarray:
        """Closed-form variance of one report coordinate at input t (d > 1: `perturb_multi`)."""
        t2 = np.square(np.asarray(t, dtype=np.float64))
        d, k = self._dims(d, k)
        v = self._report_variance(t2, d, k)
        return float(v) if v.ndim == 0 else v

    def _report_variance(self, t2: np.ndarray, d: int, k: int) -> np.ndarray:
        raise NotImplementedError

    def worst_case_variance(self, *, d: int = 1, k: int | None = None) -> float:
        """max over t in [-1, 1] of `report_variance` (it is linear in t², so t ∈ {0, 1})."""
        return float(max(self.report_variance(0.0, d=d, k=k), self.report_variance(1.0, d=d, k=k)))

    def _dims(self, d: int, k: int | None) -> tuple[int, int]:
        if isinstance(d, bool) or int(d) != d or d < 1:
            raise DataError(f"d must be a positive integer, got {d!r}", field="d")
        d = int(d)
        if not self.samples_attributes:
            if k is not None:
                raise DataError("k (sampled attributes) applies only to pm and hm", field="k")
            return d, d
        if k is None:
            return d, default_k(self.epsilon, d)
        if isinstance(k, bool) or int(k) != k or not 1 <= k <= d:
            raise DataError(f"k must be an integer in [1, {d}], got {k!r}", field="k")
        return d, int(k)


class Laplace(NumericMechanism):
    """t + Lap(2/ε): the range of [-1, 1] is 2 (2d in L1 for a d-dim record)."""

    name = "laplace"

    def _perturb_1d(self, t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        return t + rng.laplace(0.0, 2.0 / eps, size=t.shape)

    def _perturb_records(
        self, x: np.ndarray, d: int, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        return x + rng.laplace(0.0, 2.0 * d / self.epsilon, size=x.shape)

    def _report_variance(self, t2: np.ndarray, d: int, k: int) -> np.ndarray:
        return np.full_like(t2, 8.0 * d * d / self.epsilon**2)


class Duchi(NumericMechanism):
    """Duchi et al.: two outputs ±B, the sign biased towards t."""

    name = "duchi"

    def _perturb_1d(self, t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        return _duchi_1d(t, eps, rng)

    def _perturb_records(
        self, x: np.ndarray, d: int, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        return _duchi_multi(x, self.epsilon, rng)

    def _report_variance(self, t2: np.ndarray, d: int, k: int) -> np.ndarray:
        b = duchi_multi_bound(self.epsilon, d)
        return b * b - t2


class _SampledAttributes(NumericMechanism):
    """pm / hm on records: k distinct attributes per row at ε/k each, scaled by d/k."""

    samples_attributes = True

    def _var_1d(self, eps: float, t2: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _perturb_records(
        self, x: np.ndarray, d: int, k: int, rng: np.random.Generator
    ) -> np.ndarray:
        n = x.shape[0]
        # k distinct attributes per row (ranks of iid uniforms = a uniform permutation)
        chosen = _rank_rows(rng.random((n, d))) < k
        out = np.zeros_like(x)
        out[chosen] = (d / k) * self._perturb_1d(x[chosen], self.epsilon / k, rng)
        return out

    def _report_variance(self, t2: np.ndarray, d: int, k: int) -> np.ndarray:
        # with sampling: E[x²] = (k/d)(d/k)² (Var1(t) + t²)
        v1 = self._var_1d(self.epsilon / k, t2)
        return (d / k) * (v1 + t2) - t2


class Piecewise(_SampledAttributes):
    """The piecewise mechanism (Wang et al. ICDE 2019): output in [-C, C], a likely band near t."""

    name = "pm"

    def _perturb_1d(self, t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        return _pm_1d(t, eps, rng)

    def _var_1d(self, eps: float, t2: np.ndarray) -> np.ndarray:
        return _pm_var(eps, t2)


class Hybrid(_SampledAttributes):
    """The hybrid mechanism: piecewise w.p. α = 1 - e^{-ε/2} above ε* = 0.61, else Duchi."""

    name = "hm"

    def _perturb_1d(self, t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
        # the mixture choice is independent of t, so each branch keeps its ε guarantee
        alpha = _hm_alpha(eps)
        use_pm = rng.random(t.shape) < alpha
        return np.where(use_pm, _pm_1d(t, eps, rng), _duchi_1d(t, eps, rng))

    def _var_1d(self, eps: float, t2: np.ndarray) -> np.ndarray:
        alpha = _hm_alpha(eps)
        return alpha * _pm_var(eps, t2) + (1 - alpha) * _duchi_var(eps, t2)


MECHANISMS: dict[str, type[NumericMechanism]] = {
    cls.name: cls for cls in (Laplace, Duchi, Piecewise, Hybrid)
}
NUMERIC_MECHANISMS: tuple[str, ...] = tuple(MECHANISMS)


def make_numeric(name: str, epsilon: float) -> NumericMechanism:
    """Validate name (NUMERIC_MECHANISMS) and ε (finite, in (0, EPSILON_MAX])."""
    cls = MECHANISMS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise DataError(
            f"unknown numeric mechanism {name!r}; expected one of {NUMERIC_MECHANISMS}",
            field="mechanism",
        )
    return cls(check_epsilon(epsilon))


def perturb_multi(
    t: np.ndarray,
    epsilon: float,
    mechanism: str,
    rng: np.random.Generator,
    *,
    k: int | None = None,
) -> np.ndarray:
    """ε-LDP reports for records t of shape (n, d) in [-1, 1]^d; unbiased column means.

    k (pm/hm only): sampled attributes per user, default max(1, min(d, floor(ε/2.5))).
    """
    return make_numeric(mechanism, epsilon).perturb_multi(t, rng, k=k)


def default_k(epsilon: float, d: int) -> int:
    """Wang et al. 2019: k = max(1, min(d, floor(ε / 2.5)))."""
    return max(1, min(d, math.floor(epsilon / 2.5)))


def duchi_multi_bound(epsilon: float, d: int) -> float:
    """B = (e^ε+1)/(e^ε-1) · C_d for Duchi et al.'s d-dimensional mechanism (d = 1: 1-D B).

    C_d = 2^{d-1} / binom(d-1, (d-1)/2) for odd d,
    C_d = (2^{d-1} + ½ binom(d, d/2)) / binom(d-1, d/2) for even d (ties counted in both sets).
    """
    if d % 2:
        c = 2 ** (d - 1) / math.comb(d - 1, (d - 1) // 2)
    else:
        c = (2 ** (d - 1) + math.comb(d, d // 2) / 2) / math.comb(d - 1, d // 2)
    return (math.exp(epsilon) + 1) / (math.exp(epsilon) - 1) * c


def to_unit(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Map values in public bounds [lo, hi] to [-1, 1]: 2(x - lo)/(hi - lo) - 1.

    Refuses (does not clip) values outside the bounds: silently clipping would bias the mean,
    and the bounds are a public promise about the data.
    """
    _check_bounds(lo, hi)
    a = np.asarray(x, dtype=np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        raise DataError(f"{int(bad.sum())} values are NaN or infinite", field="values")
    below, above = int((a < lo).sum()), int((a > hi).sum())
    if below or above:
        parts = []
        if below:
            parts.append(f"{below} values below the lower bound {lo!r}")
        if above:
            parts.append(f"{above} values above the upper bound {hi!r}")
        raise DataError("; ".join(parts), field="values")
    return np.clip(2.0 * (a - lo) / (hi - lo) - 1.0, -1.0, 1.0)


def from_unit(mu: float | np.ndarray, lo: float, hi: float) -> float | np.ndarray:
    """Inverse of `to_unit` for a mean: lo + (mu + 1)(hi - lo)/2 (SEs scale by (hi - lo)/2)."""
    _check_bounds(lo, hi)
    if np.ndim(mu) == 0:
        return lo + (float(mu) + 1.0) * (hi - lo) / 2.0
    return lo + (np.asarray(mu, dtype=np.float64) + 1.0) * (hi - lo) / 2.0


# ---------------------------------------------------------------------- samplers


def _duchi_1d(t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    e = math.exp(eps)
    b = (e + 1) / (e - 1)
    p_plus = 0.5 + t * (e - 1) / (2 * e + 2)
    return np.where(rng.random(t.shape) < p_plus, b, -b)


def _pm_1d(t: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    h = math.exp(eps / 2)
    c = (h + 1) / (h - 1)
    left = (c + 1) / 2 * t - (c - 1) / 2
    right = left + c - 1
    centre = left + (c - 1) * rng.random(t.shape)
    # uniform over [-C, l) ∪ (r, C], total length C + 1: left piece has length l + C
    u = (c + 1) * rng.random(t.shape)
    tail = np.where(u < left + c, -c + u, right + (u - (left + c)))
    return np.where(rng.random(t.shape) < h / (h + 1), centre, tail)


def _duchi_multi(x: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Duchi et al. d-dim: v ~ sign(t) coordinate-wise, then uniform on T+ or T-.

    Write t* = B (v ⊙ s) with s in {-1, 1}^d; t*·v = B Σs, so T+ = {#agreements >= d/2} and
    T- = {#agreements <= d/2} (ties in both). A uniform element of T+ has its number of
    agreements m distributed ∝ binom(d, m), m >= d/2, and then a uniform set of m agreeing
    positions; T- is the mirror image (d - m agreements).
    """
    n, d = x.shape
    e = math.exp(eps)
    b = duchi_multi_bound(eps, d)
    v = np.where(rng.random((n, d)) < 0.5 + 0.5 * x, 1.0, -1.0)
    ms = np.arange((d + 1) // 2, d + 1)
    weights = [math.comb(d, int(m)) for m in ms]
    total = sum(weights)
    probs = np.array([w / total for w in weights])  # big-int ratios: no overflow for large d
    cdf = np.cumsum(probs)
    cdf[-1] = 1.0
    m = ms[np.searchsorted(cdf, rng.random(n), side="right").clip(0, ms.size - 1)]
    in_plus = rng.random(n) < e / (e + 1)
    agree = np.where(in_plus, m, d - m)
    s = np.where(_rank_rows(rng.random((n, d))) < agree[:, None], 1.0, -1.0)
    return b * v * s


def _rank_rows(u: np.ndarray) -> np.ndarray:
    """Row-wise ranks 0..d-1 of iid uniforms: a uniformly random permutation per row."""
    return np.argsort(np.argsort(u, axis=1), axis=1)


# ---------------------------------------------------------------------- closed forms


def _hm_alpha(eps: float) -> float:
    return 1.0 - math.exp(-eps / 2) if eps > HM_EPSILON_STAR else 0.0


def _duchi_var(eps: float, t2: np.ndarray) -> np.ndarray:
    e = math.exp(eps)
    return ((e + 1) / (e - 1)) ** 2 - t2


def _pm_var(eps: float, t2: np.ndarray) -> np.ndarray:
    h = math.exp(eps / 2)
    return t2 / (h - 1) + (h + 3) / (3 * (h - 1) ** 2)


# ---------------------------------------------------------------------- validation


def _check_unit(t: np.ndarray, *, ndim: int) -> np.ndarray:
    x = np.asarray(t, dtype=np.float64)
    if x.ndim != ndim:
        raise DataError(f"expected a {ndim}-D array, got shape {x.shape}", field="values")
    bad = ~np.isfinite(x) | (x < -1.0) | (x > 1.0)
    if bad.any():
        raise DataError(
            f"{int(bad.sum())} values are outside [-1, 1] (map them with to_unit first)",
            field="values",
        )
    return x


def _check_bounds(lo: float, hi: float) -> float:
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise DataError(f"bounds must be finite with lo < hi, got [{lo!r}, {hi!r}]", field="bounds")
    return (hi - lo) / 2.0


__all__ = [
    "HM_EPSILON_STAR",
    "MECHANISMS",
    "NUMERIC_MECHANISMS",
    "Duchi",
    "Hybrid",
    "Laplace",
    "MeanEstimate",
    "NumericMechanism",
    "Piecewise",
    "default_k",
    "duchi_multi_bound",
    "from_unit",
    "make_numeric",
    "perturb_multi",
    "to_unit",
]
