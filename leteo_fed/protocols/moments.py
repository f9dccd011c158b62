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
from leteo_fed.errors import DataError, EncodingError, ProtocolError


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
            raise EncodingError(f"row count {int(m.sum())} exceeds max_rows_per_owner {max_rows}")
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
