"""Per-class first and second moments: the sufficient statistics of PCA, DCA, LDA and MDR.

A share holds R = sum x x^T (upper triangle) and, for every grouping (a label column with a
public list of K classes), the per-class sums V_k = sum_{y=k} x and counts M_k for **all** K
classes, zero where the owner has no row of that class, so the share's shape reveals nothing
about which classes a site holds. PCA is the special case of one grouping with one class.

Aggregates are exact integers (fixed point at scale 2^f), and the scatter matrices are computed
from them exactly, with one rounding per entry:
    total    S  = R - V V^T / M
    between  SB = sum_k V_k V_k^T / M_k - V V^T / M
    within   SW = R - sum_k V_k V_k^T / M_k
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from leteo_fed.encoding.packing import encode_fixed
from leteo_fed.errors import ConfigError, DataError, EncodingError, ProtocolError
from leteo_fed.privacy.mechanisms import Sensitivity, positive_finite, positive_int


@dataclass(frozen=True)
class Grouping:
    """A label column and its public class list (None: every row in one class)."""

    label_column: str | None
    classes: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.classes:
            raise DataError("a grouping needs at least one class", field="classes")
        if len(set(self.classes)) != len(self.classes):
            raise DataError("class list contains duplicates", field="classes")


ALL_ROWS = Grouping(None, ("all",))


def n_values(d: int, groupings: Sequence[Grouping]) -> int:
    return d * (d + 1) // 2 + sum(len(g.classes) * (d + 1) for g in groupings)


@dataclass(frozen=True)
class LocalMoments:
    r: np.ndarray  # d x d
    v: list[np.ndarray]  # per grouping: K x d per-class sums
    m: list[np.ndarray]  # per grouping: K counts


def class_indices(labels: Sequence[str], grouping: Grouping) -> np.ndarray:
    """Label strings -> class indices; refuses a label outside the round's class list."""
    index = {c: i for i, c in enumerate(grouping.classes)}
    arr = np.asarray(labels, dtype=object)
    unknown = sorted({str(v) for v in arr if v not in index})
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5])
        raise DataError(
            f"column '{grouping.label_column}' has value(s) {shown} outside the round's classes "
            f"{list(grouping.classes)}",
            field=grouping.label_column,
            rule="classes",
        )
    return np.fromiter((index[v] for v in arr), dtype=np.int64, count=len(arr))


def local_moments(
    x: np.ndarray, class_index: Sequence[np.ndarray | None], groupings: Sequence[Grouping]
) -> LocalMoments:
    """class_index[g] maps rows to classes of grouping g (None for ALL_ROWS)."""
    x = np.asarray(x, dtype=np.float64)
    vs, ms = [], []
    for idx, g in zip(class_index, groupings, strict=True):
        k = len(g.classes)
        if idx is None:
            idx = np.zeros(len(x), dtype=np.int64)
        onehot = np.zeros((k, len(x)))
        onehot[idx, np.arange(len(x))] = 1.0
        vs.append(onehot @ x)  # BLAS, no per-row Python
        ms.append(np.bincount(idx, minlength=k).astype(np.int64))
    return LocalMoments(r=x.T @ x, v=vs, m=ms)


def add_all(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """a0 + a1 + ... in that order (as `sum` would, so partition merges stay reproducible)."""
    return functools.reduce(np.add, arrays)


def merge_moments(parts: Sequence[LocalMoments]) -> LocalMoments:
    if not parts:
        raise DataError("no partitions to merge")
    return LocalMoments(
        r=add_all([p.r for p in parts]),
        v=[add_all([p.v[g] for p in parts]) for g in range(len(parts[0].v))],
        m=[add_all([p.m[g] for p in parts]) for g in range(len(parts[0].m))],
    )


def encode_moments(
    mom: LocalMoments, scale_bits: int, bound: int, max_rows: int, count_scale_bits: int = 0
) -> list[int]:
    """R upper triangle (row-major), then per grouping and class: V_k (d values), M_k.

    Counts are encoded as M * 2^count_scale_bits (DP rounds scale them like R and V)."""
    d = mom.r.shape[0]
    out = encode_fixed(mom.r[np.triu_indices(d)], scale_bits, bound, "sum of x x^T")
    for v, m in zip(mom.v, mom.m, strict=True):
        v_enc = encode_fixed(v, scale_bits, bound, "per-class sum of x")
        if int(m.sum()) > max_rows:
            raise EncodingError(
                f"row count {int(m.sum())} exceeds max_rows_per_owner {max_rows}", rule="rows"
            )
        for k in range(len(m)):
            out.extend(v_enc[k * d : (k + 1) * d])
            out.append(int(m[k]) << count_scale_bits)
    return out


@dataclass(frozen=True)
class IntegerMoments:
    """Exact aggregate: R (d x d), per grouping V (K x d) and M (K); R and V at scale 2^f."""

    r: np.ndarray  # object dtype, Python ints
    v: list[np.ndarray]  # object dtype
    m: list[list[int]]
    scale_bits: int

    @property
    def d(self) -> int:
        return self.r.shape[0]

    @property
    def n(self) -> int:
        return sum(self.m[0])

    def total_v(self) -> np.ndarray:
        return self.v[0].sum(axis=0)


def decode_totals(
    totals: Sequence[int],
    d: int,
    groupings: Sequence[Grouping],
    scale_bits: int,
    count_scale_bits: int = 0,
    noisy: bool = False,
) -> IntegerMoments:
    """Integer totals -> aggregate moments. With `noisy` (DP rounds) counts are noisy: they are
    rounded to whole rows and clamped to at least one, so every declared class stays in the
    analysis (post-processing, no privacy cost)."""
    if len(totals) != n_values(d, groupings):
        raise ProtocolError(f"expected {n_values(d, groupings)} totals, got {len(totals)}")
    tri = d * (d + 1) // 2
    r = np.empty((d, d), dtype=object)
    iu = np.triu_indices(d)
    r[iu] = list(totals[:tri])
    r.T[iu] = list(totals[:tri])
    pos, vs, ms = tri, [], []
    for g in groupings:
        k = len(g.classes)
        block = list(totals[pos : pos + k * (d + 1)])
        pos += k * (d + 1)
        v = np.empty((k, d), dtype=object)
        m = []
        for c in range(k):
            row = block[c * (d + 1) : (c + 1) * (d + 1)]
            v[c, :] = row[:d]
            count = _scaled_count(row[d], count_scale_bits)
            if count < 0 and not noisy:
                raise ProtocolError(
                    f"negative count for class {g.classes[c]!r}: corrupted aggregate"
                )
            m.append(max(count, 1) if noisy else count)
        vs.append(v)
        ms.append(m)
    agg = IntegerMoments(r, vs, ms, scale_bits)
    if agg.n < 2:
        what = "noisy row count" if noisy else "pooled data"
        raise DataError(
            f"the {what} is {agg.n}; at least 2 rows are needed"
            + ("; the data is too small for this epsilon" if noisy else "")
        )
    return agg


def _scaled_count(value: int, count_scale_bits: int) -> int:
    if not count_scale_bits:
        return value
    return (value + (1 << (count_scale_bits - 1))) >> count_scale_bits  # nearest whole row


def _to_float(num: np.ndarray, den: int) -> np.ndarray:
    """Exact rational num/den -> float64, correctly rounded per entry."""
    flat = [int(v) / den for v in num.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(num.shape)


def _class_terms(v: np.ndarray, m: Sequence[int]) -> tuple[np.ndarray, int]:
    """(sum_k (L/M_k) V_k V_k^T, L) with L = lcm of the non-zero class counts."""
    present = [k for k, mk in enumerate(m) if mk > 0]
    lcm = math.lcm(*[m[k] for k in present])
    d = v.shape[1]
    acc = np.zeros((d, d), dtype=object)
    for k in present:
        vk = v[k]
        acc = acc + np.outer(vk, vk) * (lcm // m[k])
    return acc, lcm


def total_scatter(agg: IntegerMoments) -> np.ndarray:
    f, n, vt = agg.scale_bits, agg.n, agg.total_v()
    num = agg.r * (n << f) - np.outer(vt, vt)
    return _to_float(num, n << (2 * f))


def between_scatter(agg: IntegerMoments, grouping: int = 0) -> np.ndarray:
    f, n, vt = agg.scale_bits, agg.n, agg.total_v()
    terms, lcm = _class_terms(agg.v[grouping], agg.m[grouping])
    big = math.lcm(lcm, n)
    num = terms * (big // lcm) - np.outer(vt, vt) * (big // n)
    return _to_float(num, big << (2 * f))


def within_scatter(agg: IntegerMoments, grouping: int = 0) -> np.ndarray:
    f = agg.scale_bits
    terms, lcm = _class_terms(agg.v[grouping], agg.m[grouping])
    num = agg.r * (lcm << f) - terms
    return _to_float(num, lcm << (2 * f))


def mean(agg: IntegerMoments) -> np.ndarray:
    return _to_float(agg.total_v(), agg.n << agg.scale_bits)


def sensitivities_for_scatter(
    row_norm_bound_C: float,
    scale_bits: int,
    d: int,
    n_groupings: int,
    *,
    n_classes: Sequence[int] | None = None,
    extra_slack: float = 0.0,
    count_scale_bits: int = 0,
) -> Sensitivity:
    """L1/L2 sensitivity, in integer units, of a moments share (this module) when one row
    x with ||x||_2 <= C is added or removed.

    The share is: the upper triangle of R = sum x x^T (T = d(d+1)/2 values), then per grouping
    and class V_k = sum x (d values) and the count M_k. R and V are encoded as round(s * 2^f)
    (F = 2^f = 2^scale_bits); counts are exact integers, not scaled.

    Real-valued change caused by the row:
      R triangle: entries x_i x_j (i <= j).
          L2^2 = sum_{i<=j} x_i^2 x_j^2 = (||x||_2^4 + sum x_i^4)/2 <= ||x||_2^4  ->  L2 <= C^2
          L1   = sum_{i<=j} |x_i x_j| = (||x||_1^2 + ||x||_2^2)/2 <= (d + 1) C^2 / 2
      V of the row's class (one class per grouping): x, so L2 <= C, L1 <= sqrt(d) C.
      M of that class: 1.
    Rounding: |round(a F) - round(b F)| <= |a - b| F + 1 for every encoded coordinate (each
    rounding moves a value by at most 1/2), so each of the N affected coordinates gets +1 and,
    by the triangle inequality, L2 gains at most sqrt(N) and L1 at most N:
      R:   L2 <= C^2 F + sqrt(T)         L1 <= (d + 1) C^2 F / 2 + T
      V:   L2 <= C F + sqrt(d)           L1 <= sqrt(d) C F + d          (per grouping)
      M:   L2 = L1 = 1                                                     (per grouping)
    Totals: L2 = sqrt(L2_R^2 + G (L2_V^2 + 1)), L1 = L1_R + G (L1_V + 1), G = n_groupings.
    An integer vector z has ||z||_1 <= ||z||_2^2 and ||z||_1 <= sqrt(N_total) ||z||_2, so L1 is
    also capped by min(L2^2, sqrt(N) L2) (never binding in practice).

    Assumptions, stated: (1) the unrounded statistics are computed exactly (floating-point
    accumulation error of sum x x^T is assumed far below 2^-f; otherwise pass `extra_slack`, in
    integer units per coordinate, covering twice the worst accumulation error times F);
    (2) classes other than the row's are bit-identical with and without the row. If the
    latter is not guaranteed (e.g. BLAS re-blocking changes summation order), pass
    `n_classes` (K per grouping): every other class's V then gets the rounding slack too
    ((K - 1) d coordinates changing by at most 1 + extra_slack each). Neighbouring is
    add/remove-one-row; for replace-one, double both values.
    """
    c = positive_finite(row_norm_bound_C, "row_norm_bound")
    if isinstance(scale_bits, bool) or not isinstance(scale_bits, (int, np.integer)):
        raise ConfigError(f"scale_bits must be an integer, got {scale_bits!r}", field="scale_bits")
    if scale_bits < 0:
        raise ConfigError(f"scale_bits must be >= 0, got {scale_bits}", field="scale_bits")
    d = positive_int(d, "d")
    g = positive_int(n_groupings, "n_groupings")
    if isinstance(extra_slack, bool) or not math.isfinite(extra_slack) or extra_slack < 0:
        raise ConfigError(f"extra_slack must be finite and >= 0, got {extra_slack!r}")
    if n_classes is not None:
        n_classes = [positive_int(k, "n_classes") for k in n_classes]
        if len(n_classes) != g:
            raise ConfigError(
                f"n_classes has {len(n_classes)} entries for {g} groupings", field="n_classes"
            )
    f = float(2**scale_bits)
    slack = 1.0 + float(extra_slack)
    t = d * (d + 1) // 2

    l2_r = c * c * f + math.sqrt(t) * slack
    l1_r = (d + 1) * c * c * f / 2.0 + t * slack
    l2_v = c * f + math.sqrt(d) * slack
    l1_v = math.sqrt(d) * c * f + d * slack

    # counts encoded as M * 2^count_scale_bits (DP rounds scale them like R and V, so that one
    # noise level suits every coordinate): one row changes one count per grouping by 2^cs
    fm = float(2**count_scale_bits)
    l2_sq = l2_r**2 + g * (l2_v**2 + fm**2)
    l1 = l1_r + g * (l1_v + fm)
    n_coords = t + g * (d + 1)
    if n_classes is not None:
        others = sum((k - 1) * d for k in n_classes)
        l2_sq += others * slack * slack
        l1 += others * slack
        n_coords = t + sum(k * (d + 1) for k in n_classes)
    l2 = math.sqrt(l2_sq)
    l1 = min(l1, l2_sq, math.sqrt(n_coords) * l2)
    return Sensitivity(l1=l1, l2=l2)
