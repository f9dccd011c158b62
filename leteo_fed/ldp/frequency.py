"""Local-DP frequency oracles: each owner perturbs its value in [0, d); the aggregator estimates counts.

Why this shape
--------------
The aggregator never sees raw values, only per-report "support" counts: c_i is the number of
reports that support value i. Every oracle here is "pure" (Wang et al., USENIX Security 2017):
a report from a holder of i supports i with probability p*, a report from a holder of j != i
supports i with probability q*, independently across users. Hence

    E[c_i] = n_i p* + (n - n_i) q*          =>   Ê_i = (c_i - n q*) / (p* - q*)   (unbiased)
    Var[Ê_i] = n q*(1-q*)/(p*-q*)^2 + n_i (1 - p* - q*)/(p* - q*)                  (exact)

(the second form is [n_i p*(1-p*) + (n-n_i) q*(1-q*)]/(p*-q*)^2). The reported standard error
plugs in n_i := Ê_i clipped to [0, n]. Supports are additive, so chunked aggregation is exact.

Mechanisms (one class each; the textbook pitfalls avoided are noted at each class):

=====  ======================  ================================  ===============================
name   report                  p*                                q*
=====  ======================  ================================  ===============================
grr    int32 (n,)              e^ε/(e^ε+d-1)                     1/(e^ε+d-1)
sue    uint8 (n, d) bits       e^{ε/2}/(e^{ε/2}+1)               1/(e^{ε/2}+1)
oue    uint8 (n, d) bits       1/2                               1/(e^ε+1)
the    uint8 (n, d) bits       1 - ½ e^{-ε(1-θ)/2}               ½ e^{-εθ/2}
she    float64 (n, d)          (sum of coordinates; Var = 8n/ε²)
olh    int64 (n, 2)            e^ε/(e^ε+g-1)                     ≈ 1/g (exact value below)
=====  ======================  ================================  ===============================

- GRR (= direct encoding / k-ary RR): the replacement is uniform over the d-1 OTHER values.
  A common textbook listing draws randint(0, d-1) for it, which can return the true value and
  never reports v-1 (some outputs then have an infinite likelihood ratio); we draw an offset in
  1..d-1.
- THE: one-hot + Lap(2/ε) per coordinate, thresholded at θ ON THE CLIENT (post-processing of
  SHE, so still ε-LDP). A common textbook listing computes p with exp(+ε(1-θ)/2), the wrong
  exponent sign: correct only at θ = 1, and p < 0 e.g. at θ = 0.5, ε = 5.
- OLH: h(v) = ((a v + b) mod P) mod g with P = 2^31 - 1 (prime), a in [1, P-1], b in [0, P-1]
  (Carter-Wegman universal family), then GRR over [0, g) at ε. The report carries the seed
  encoding (a, b) (see `hash_params`). For u != v, (a u + b, a v + b) mod P is uniform over
  ordered pairs of distinct residues, so the collision probability c is computable exactly and
  q* = c p + (1 - c)(1 - p)/(g - 1), which is 1/g up to O(1/P); we use the exact value.

Each oracle carries its privacy map (`privacy_map`): the per-record ε-LDP guarantee, computed
from the probabilities its sampler actually uses.

All randomness comes from an injected `np.random.Generator`; PCG64 is not a cryptographic
generator and floating-point samplers are not exact (cf. Mironov 2012): fine for analytics,
document it if a deployment needs more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from leteo_fed.errors import DataError
from leteo_fed.ldp._checks import EPSILON_MAX, check_count, check_epsilon
from leteo_fed.privacy.budget import Budget

HASH_PRIME = 2**31 - 1  # Mersenne prime; also the largest domain size OLH can hash injectively
_SEED_SPACE = HASH_PRIME * (HASH_PRIME - 1)  # seed <-> (a, b): ~4.6e18 < 2^63
_MAX_D = 2**31 - 1  # GRR reports are int32
_CHUNK_CELLS = 1 << 22  # rows x d cells per block when the server hashes OLH reports


@dataclass(frozen=True)
class FrequencyEstimate:
    """Unbiased count estimates with their exact (plug-in) variance.

    `counts` may be negative or sum to something other than n: that is the price of
    unbiasedness. Use `FrequencyOracle.consistent` for a display-friendly (biased) version.
    For SHE, p and q are NaN (no support probabilities; counts are coordinate sums).
    """

    counts: np.ndarray
    variance: np.ndarray
    std_error: np.ndarray
    n: int
    p: float
    q: float

    @property
    def frequencies(self) -> np.ndarray:
        """Ê_i / n (zeros when n == 0)."""
        return self.counts / self.n if self.n > 0 else np.zeros_like(self.counts)


@dataclass(frozen=True)
class FrequencyOracle:
    """A configured frequency oracle: client-side `perturb`, server-side `support` + `estimate`.

    One subclass per mechanism (`ORACLES`). Build with `make_oracle`, which validates the
    parameters and fills p and q (p*, q* in the module docstring); constructing a subclass
    directly skips those checks (the tests do so on purpose to build a broken oracle). theta is
    set only for "the", g only for "olh".
    """

    name: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()  # the mechanism-specific keyword it accepts

    epsilon: float
    d: int
    p: float
    q: float
    theta: float | None = None
    g: int | None = None

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> FrequencyOracle:
        """p*, q* (and the mechanism's option) for an epsilon and d already validated.

        Every subclass takes the same keywords; one that is not in the subclass's `options`
        must be None (refused by `_check_options`).
        """
        raise NotImplementedError

    @classmethod
    def _check_options(cls, *, theta: float | None, g: int | None) -> None:
        """Refuse a mechanism-specific keyword this class does not take (theta: "the", g: "olh")."""
        for key, value in (("theta", theta), ("g", g)):
            if value is not None and key not in cls.options:
                owner = next(c.name for c in ORACLES.values() if key in c.options)
                raise DataError(f"{key} applies only to the {owner!r} mechanism", field=key)

    def privacy_map(self) -> Budget:
        """The per-record ε-LDP guarantee (delta 0) of this oracle's sampler."""
        raise NotImplementedError

    # ------------------------------------------------------------------ client side
    def perturb(self, values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Perturb integer codes in [0, d); one report row per value (see module table)."""
        return self._perturb(_as_codes(values, self.d), rng)

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    # ------------------------------------------------------------------ server side
    def support(self, reports: np.ndarray) -> np.ndarray:
        """Per-value support counts c_i (SHE: coordinate sums); additive over chunks of reports.

        Reports come from other parties, so their shape, dtype and range are checked.
        """
        return self._support(np.asarray(reports))

    def _support(self, r: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def estimate(self, support: np.ndarray, n: int) -> FrequencyEstimate:
        """Unbiased counts Ê_i = (c_i - n q)/(p - q) and their exact plug-in variance."""
        c = np.asarray(support, dtype=np.float64)
        if c.shape != (self.d,) or not np.all(np.isfinite(c)):
            raise DataError(f"support must be a finite array of shape ({self.d},)", field="support")
        return self._estimate(c, check_count(n, minimum=0))

    def _estimate(self, c: np.ndarray, n: int) -> FrequencyEstimate:
        p, q = self.p, self.q
        counts = (c - n * q) / (p - q)
        nv = np.clip(counts, 0.0, float(n))
        var = n * q * (1 - q) / (p - q) ** 2 + nv * (1 - p - q) / (p - q)
        var = np.maximum(var, 0.0)  # exact form is >= 0 for nv in [0, n]; guard rounding
        return FrequencyEstimate(counts, var, np.sqrt(var), n, p, q)

    def consistent(self, est: FrequencyEstimate) -> np.ndarray:
        """POST-PROCESSED (biased) counts: non-negative and summing to n (Norm-Sub).

        Norm-Sub (Wang et al., NDSS 2020) clips negatives to 0 and shifts the positives by a
        common amount until the total is n; its fixed point is x_i = max(Ê_i + δ, 0) with
        Σ x_i = n, i.e. the Euclidean projection onto {x >= 0, Σx = n}, computed here exactly
        by sorting (no iteration). Post-processing: no privacy cost, but not unbiased.
        """
        e = np.asarray(est.counts, dtype=np.float64)
        n = float(est.n)
        if n <= 0:
            return np.zeros_like(e)
        s = np.sort(e)[::-1]
        css = np.cumsum(s)
        k = np.arange(1, e.size + 1)
        shift = (n - css) / k
        rho = np.nonzero(s + shift > 0)[0][-1]  # s[0] + shift[0] = n > 0, so never empty
        return np.maximum(e + shift[rho], 0.0)

    def theoretical_variance_per_user(self) -> float:
        """Var*/n = q*(1-q*)/(p*-q*)^2 (8/ε² for SHE): count variance per user, for planning.

        Drops the n_i (1-p*-q*)/(p*-q*) term of the exact variance (fair for rare values).
        The std of a frequency f̂ = Ê/n is then sqrt(this / n).
        """
        return self.q * (1 - self.q) / (self.p - self.q) ** 2


# ---------------------------------------------------------------------- the mechanisms


class GRR(FrequencyOracle):
    """Generalized randomized response: the true value w.p. p*, else a uniform OTHER value."""

    name = "grr"

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> GRR:
        cls._check_options(theta=theta, g=g)
        e = math.exp(epsilon)
        return cls(epsilon, d, e / (e + d - 1), 1 / (e + d - 1))

    def privacy_map(self) -> Budget:
        """log(p*/q*): the likelihood ratio of the most likely output (the true value)."""
        return Budget(math.log(self.p / self.q))

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = v.shape[0]
        keep = rng.random(n) < self.p
        # uniform over the d-1 other values: an offset in 1..d-1, never 0 (randint(0, d-1)
        # would sometimes "replace" v by itself and never report v-1)
        other = (v + rng.integers(1, self.d, size=n)) % self.d
        return np.where(keep, v, other).astype(np.int32)

    def _support(self, r: np.ndarray) -> np.ndarray:
        d = self.d
        if r.ndim != 1 or not _is_int(r):
            raise DataError("GRR reports must be a 1-D integer array", field="reports")
        if r.size and (r.min() < 0 or r.max() >= d):
            raise DataError(f"GRR report outside [0, {d})", field="reports")
        return np.bincount(r.astype(np.int64), minlength=d).astype(np.float64)


class _BitVectorOracle(FrequencyOracle):
    """Oracles whose report is a d-bit vector; bit i supports value i."""

    def _support(self, r: np.ndarray) -> np.ndarray:
        d = self.d
        if r.ndim != 2 or r.shape[1] != d or not (_is_int(r) or r.dtype == bool):
            raise DataError(f"{self.name} reports must be an (n, {d}) bit array", field="reports")
        if r.size and (r.min() < 0 or r.max() > 1):
            raise DataError("bit reports must be 0 or 1", field="reports")
        return r.sum(axis=0, dtype=np.int64).astype(np.float64)


class _UnaryEncoding(_BitVectorOracle):
    """One-hot encoding, every bit flipped independently: the true bit is 1 w.p. p*, every
    other bit w.p. q*."""

    def privacy_map(self) -> Budget:
        """log(p*(1-q*) / ((1-p*) q*)): two inputs differ in two bits of the one-hot vector."""
        return Budget(math.log(self.p * (1 - self.q) / ((1 - self.p) * self.q)))

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = v.shape[0]
        # every bit is Bernoulli(q) exactly (q is on the 2^-16 grid, see _unary_pq), then the
        # true bit is redrawn as Bernoulli(p)
        bits = _bernoulli16(rng, (n, self.d), int(self.q * _GRID)).view(np.uint8)
        bits[np.arange(n), v] = _bernoulli16(rng, (n,), int(self.p * _GRID))
        return bits


class SUE(_UnaryEncoding):
    """Symmetric unary encoding (basic RAPPOR): ε/2 per bit."""

    name = "sue"

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> SUE:
        cls._check_options(theta=theta, g=g)
        h = math.exp(epsilon / 2)
        return cls(epsilon, d, *_unary_pq(h / (h + 1), 1 / (h + 1)))


class OUE(_UnaryEncoding):
    """Optimized unary encoding: the true bit is kept at 1/2, other bits are 1 w.p. 1/(e^ε+1)."""

    name = "oue"

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> OUE:
        cls._check_options(theta=theta, g=g)
        e = math.exp(epsilon)
        return cls(epsilon, d, *_unary_pq(0.5, 1 / (e + 1)))


class SHE(FrequencyOracle):
    """Summation with histogram encoding: one-hot + Lap(2/ε) per coordinate, summed as is."""

    name = "she"

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> SHE:
        cls._check_options(theta=theta, g=g)
        return cls(epsilon, d, math.nan, math.nan)

    def privacy_map(self) -> Budget:
        """ε: two one-hot vectors differ by 2 in L1, and the noise is Lap(2/ε)."""
        return Budget(self.epsilon)

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        n = v.shape[0]
        return _onehot(v, self.d).astype(np.float64) + rng.laplace(
            0.0, 2.0 / self.epsilon, size=(n, self.d)
        )

    def _support(self, r: np.ndarray) -> np.ndarray:
        d = self.d
        if r.ndim != 2 or r.shape[1] != d:
            raise DataError(f"SHE reports must be an (n, {d}) array", field="reports")
        r = r.astype(np.float64, copy=False)
        if not np.all(np.isfinite(r)):
            raise DataError("SHE reports must be finite", field="reports")
        return r.sum(axis=0)

    def _estimate(self, c: np.ndarray, n: int) -> FrequencyEstimate:
        var = np.full(self.d, 8.0 * n / self.epsilon**2)
        return FrequencyEstimate(c.copy(), var, np.sqrt(var), n, math.nan, math.nan)

    def theoretical_variance_per_user(self) -> float:
        return 8.0 / self.epsilon**2


class THE(_BitVectorOracle):
    """Thresholded histogram encoding: SHE's noisy one-hot, thresholded at θ on the client."""

    name = "the"
    options = ("theta",)

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> THE:
        """θ defaults to the minimiser of Var*/n over (0.5, 1) (Wang et al. 2017 show the
        optimum lies there; bounded scalar search, 0.75 if the search fails)."""
        cls._check_options(theta=theta, g=g)
        if theta is None:
            th = optimal_theta(epsilon)
        else:
            th = float(theta)
            if not (math.isfinite(th) and 0.0 < th < 1.0):
                raise DataError(f"theta must be in (0, 1), got {theta!r}", field="theta")
        p, q = the_pq(epsilon, th)
        return cls(epsilon, d, p, q, theta=th)

    def privacy_map(self) -> Budget:
        """ε: thresholding is post-processing of SHE's Lap(2/ε) report."""
        return Budget(self.epsilon)

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        assert self.theta is not None
        n = v.shape[0]
        noisy = _onehot(v, self.d) + rng.laplace(0.0, 2.0 / self.epsilon, size=(n, self.d))
        return (noisy > self.theta).astype(np.uint8)


class OLH(FrequencyOracle):
    """Optimized local hashing: a random universal hash to [0, g), then GRR over [0, g)."""

    name = "olh"
    options = ("g",)

    @classmethod
    def configure(
        cls, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
    ) -> OLH:
        """g defaults to round(e^ε) + 1 (the variance-optimal e^ε + 1, rounded), capped at
        2^31 - 1."""
        cls._check_options(theta=theta, g=g)
        e = math.exp(epsilon)
        if g is None:
            gg = min(round(e) + 1, HASH_PRIME)
        else:
            if (
                isinstance(g, bool)
                or not isinstance(g, (int, np.integer))
                or not 2 <= g <= HASH_PRIME
            ):
                raise DataError(f"g must be an integer in [2, {HASH_PRIME}], got {g!r}", field="g")
            gg = int(g)
        p = e / (e + gg - 1)
        c = hash_collision_probability(gg)
        q = c * p + (1 - c) * (1 - p) / (gg - 1)
        return cls(epsilon, d, p, q, g=gg)

    def privacy_map(self) -> Budget:
        """log(p (g-1) / (1-p)): GRR over [0, g); the public hash seed does not depend on v."""
        assert self.g is not None
        return Budget(math.log(self.p * (self.g - 1) / (1 - self.p)))

    def _perturb(self, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        assert self.g is not None
        n, g = v.shape[0], self.g
        seeds = np.asarray(rng.integers(0, _SEED_SPACE, size=n, dtype=np.int64))
        a, b = hash_params(seeds)
        hv = ((a * v + b) % HASH_PRIME) % g
        keep = rng.random(n) < self.p
        other = (hv + rng.integers(1, g, size=n)) % g
        y = np.where(keep, hv, other)
        return np.stack([seeds, y], axis=1).astype(np.int64)

    def _support(self, r: np.ndarray) -> np.ndarray:
        assert self.g is not None
        d = self.d
        if r.ndim != 2 or r.shape[1] != 2 or not _is_int(r):
            raise DataError("OLH reports must be an (n, 2) integer array", field="reports")
        r = r.astype(np.int64, copy=False)
        seeds, y = r[:, 0], r[:, 1]
        if r.size and (seeds.min() < 0 or seeds.max() >= _SEED_SPACE):
            raise DataError("OLH report with an invalid hash seed", field="reports")
        if r.size and (y.min() < 0 or y.max() >= self.g):
            raise DataError(f"OLH report outside [0, {self.g})", field="reports")
        counts = np.zeros(d, dtype=np.int64)
        dom = np.arange(d, dtype=np.int64)
        rows = max(1, _CHUNK_CELLS // d)
        for start in range(0, r.shape[0], rows):  # blocks of rows, bounded memory
            a, b = hash_params(seeds[start : start + rows])
            h = ((a[:, None] * dom[None, :] + b[:, None]) % HASH_PRIME) % self.g
            counts += (h == y[start : start + rows, None]).sum(axis=0)
        return counts.astype(np.float64)


ORACLES: dict[str, type[FrequencyOracle]] = {
    cls.name: cls for cls in (GRR, SUE, OUE, SHE, THE, OLH)
}
FREQUENCY_MECHANISMS: tuple[str, ...] = tuple(ORACLES)


# ---------------------------------------------------------------------- construction


def make_oracle(
    name: str, epsilon: float, d: int, *, theta: float | None = None, g: int | None = None
) -> FrequencyOracle:
    """Validate the parameters and build the named oracle (its class computes p*, q*).

    theta applies to "the" only, g to "olh" only (defaults: see `THE.configure`,
    `OLH.configure`).
    """
    cls = ORACLES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise DataError(
            f"unknown frequency mechanism {name!r}; expected one of {FREQUENCY_MECHANISMS}",
            field="mechanism",
        )
    eps = check_epsilon(epsilon)
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or not 2 <= d <= _MAX_D:
        raise DataError(f"domain size d must be an integer in [2, {_MAX_D}], got {d!r}", field="d")
    return cls.configure(eps, int(d), theta=theta, g=g)  # refuses an option cls does not take


_GRID = 2**16  # resolution of the 16-bit uniforms unary encodings draw
_U64_MAX = np.iinfo(np.uint64).max


def _bernoulli16(rng: np.random.Generator, shape: tuple[int, ...], cut: int) -> np.ndarray:
    """Independent booleans, each True with probability exactly cut / 2^16.

    A 16-bit uniform u = 256 hi + lo is below cut = 256 c_hi + c_lo iff hi < c_hi, or
    hi == c_hi and lo < c_lo. So one random byte decides every draw but the 1 in 256 whose high
    byte ties, and only those get a second byte: about 1 byte per draw instead of 2 (or 4 for
    float32 uniforms).
    """
    if not 0 <= cut <= _GRID:
        raise ValueError(f"cut must be in [0, 2^16], got {cut}")
    if cut == _GRID:
        return np.ones(shape, dtype=bool)
    c_hi, c_lo = divmod(cut, 256)
    high = _random_bytes(rng, math.prod(shape)).reshape(shape)
    out = high < c_hi
    if c_lo:
        ties = np.flatnonzero(high == c_hi)
        if ties.size:
            out.ravel()[ties] = _random_bytes(rng, ties.size) < c_lo
    return out


def _random_bytes(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` independent uniform bytes: full-range 64-bit integers (the generator's raw
    output, no rejection, several times faster than `rng.bytes`) seen as bytes."""
    words = rng.integers(0, _U64_MAX, -(-count // 8), dtype=np.uint64, endpoint=True)
    return words.view(np.uint8)[:count]


def _unary_pq(p: float, q: float) -> tuple[float, float]:
    """p, q on the 2^-16 grid of 16-bit uniforms, rounded so privacy can only improve.

    The unary-encoding guarantee is p(1-q) / ((1-p) q) <= e^epsilon; rounding p down and q up
    can only lower that ratio, and the estimator then uses these exact probabilities, so it stays
    unbiased. (Relative change <= 2^-16 / q: 0.03% for OUE at epsilon = 2, 0.08% at 4.)
    """
    p_grid = math.floor(p * _GRID) / _GRID
    q_grid = math.ceil(q * _GRID) / _GRID
    if not 0 < q_grid < p_grid < 1:
        raise DataError("epsilon is too large or too small for unary encoding", field="epsilon")
    return p_grid, q_grid


def the_pq(epsilon: float, theta: float) -> tuple[float, float]:
    """THE support probabilities for θ in (0, 1): p = 1 - ½e^{-ε(1-θ)/2}, q = ½e^{-εθ/2}.

    (A textbook listing has exp(+ε(1-θ)/2), which is correct only at θ = 1.)
    """
    return 1 - 0.5 * math.exp(-epsilon * (1 - theta) / 2), 0.5 * math.exp(-epsilon * theta / 2)


def optimal_theta(epsilon: float) -> float:
    """θ in (0.5, 1) minimising q(1-q)/(p-q)^2 for THE; 0.75 if the search does not converge."""

    def var(th: float) -> float:
        p, q = the_pq(epsilon, th)
        return q * (1 - q) / (p - q) ** 2

    from scipy.optimize import minimize_scalar  # loaded by the first THE round, not at start

    res = minimize_scalar(var, bounds=(0.5, 1.0), method="bounded", options={"xatol": 1e-6})
    if not res.success or not 0.5 <= res.x <= 1.0:  # pragma: no cover - defensive
        return 0.75
    return float(min(res.x, 1.0 - 1e-9))


def hash_params(seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode OLH seeds in [0, P(P-1)) into (a, b): a = 1 + seed mod (P-1), b = seed div (P-1).

    A uniform seed gives independent uniform a in [1, P-1] and b in [0, P-1]. The products a*v
    stay below 2^62, so int64 arithmetic is exact.
    """
    s = np.asarray(seeds, dtype=np.int64)
    return 1 + s % (HASH_PRIME - 1), s // (HASH_PRIME - 1)


def hash_collision_probability(g: int) -> float:
    """Pr[h(u) = h(v)] for fixed u != v over the family: pairs of distinct residues mod P that
    agree mod g, over P(P-1). Exact integer arithmetic; equals 1/g up to O(1/P)."""
    big_q, r = divmod(HASH_PRIME, g)
    same = r * (big_q + 1) * big_q + (g - r) * big_q * (big_q - 1)
    return same / (HASH_PRIME * (HASH_PRIME - 1))


# ---------------------------------------------------------------------- helpers


def _is_int(a: np.ndarray) -> bool:
    return np.issubdtype(a.dtype, np.integer)


def _as_codes(values: np.ndarray, d: int) -> np.ndarray:
    """1-D int64 codes in [0, d); integral floats accepted, anything else refused by value."""
    v = np.asarray(values)
    if v.ndim != 1:
        raise DataError(f"values must be a 1-D array, got shape {v.shape}", field="values")
    if v.dtype == bool or not (_is_int(v) or np.issubdtype(v.dtype, np.floating)):
        raise DataError(f"values must be integer codes, got dtype {v.dtype}", field="values")
    if np.issubdtype(v.dtype, np.floating):
        bad = ~np.isfinite(v) | (v != np.round(v))
        if bad.any():
            raise DataError(
                f"value {v[bad][0].item()!r} is not an integer code ({int(bad.sum())} such values)",
                field="values",
            )
    out_of_range = (v < 0) | (v >= d)
    if out_of_range.any():
        raise DataError(
            f"value {v[out_of_range][0].item()!r} is outside the domain [0, {d}) "
            f"({int(out_of_range.sum())} values out of range)",
            field="values",
        )
    return v.astype(np.int64)


def _onehot(v: np.ndarray, d: int) -> np.ndarray:
    return v[:, None] == np.arange(d)[None, :]


__all__ = [
    "EPSILON_MAX",
    "FREQUENCY_MECHANISMS",
    "GRR",
    "HASH_PRIME",
    "OLH",
    "ORACLES",
    "OUE",
    "SHE",
    "SUE",
    "THE",
    "FrequencyEstimate",
    "FrequencyOracle",
    "hash_collision_probability",
    "hash_params",
    "make_oracle",
    "optimal_theta",
    "the_pq",
]
