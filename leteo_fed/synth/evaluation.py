"""How close a synthetic table is to the real one: what a data holder checks before releasing.

Computed on the real rows, so NOT covered by epsilon: it goes in the report's `holder_only`
section, never in what is published. Both tables are put on the config's public grid (numeric
columns in their bins over [lo, hi], categoricals by category), where marginals are compared:

* total variation distance (TVD) of every 1-way marginal, and of every 2-way marginal (mean and
  worst pair): 0 = the same distribution, 1 = disjoint;
* Pearson correlation of every pair of numeric columns, real against synthetic: the mean and the
  largest absolute error;
* the label's class shares, when a label is configured.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np

from leteo_fed.synth.config import SynthConfig
from leteo_fed.synth.encoding import SCALE, encode_table, level

if TYPE_CHECKING:
    import pyarrow as pa

MAX_PAIRS_LISTED = 10  # the worst 2-way marginals named in the report


@dataclass(frozen=True)
class Graded:
    """A table on the public grid, encoded once: every measure below reads it."""

    levels: dict[str, np.ndarray]
    classes: np.ndarray
    numeric: dict[str, np.ndarray]  # numeric columns on [0, 1]

    @classmethod
    def of(cls, table: pa.Table, config: SynthConfig) -> Graded:
        encoded = encode_table(table, config)
        cols = {c.name: c for c in config.columns}
        return cls(
            {n: level(codes, cols[n]) for n, codes in encoded.codes.items()},
            encoded.classes,
            {
                c.name: encoded.codes[c.name].astype(np.float64) / SCALE
                for c in config.columns
                if c.kind == "numeric"
            },
        )


def _shares(codes: np.ndarray, size: int) -> np.ndarray:
    counts = np.bincount(codes, minlength=size).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def tvd(real: np.ndarray, synthetic: np.ndarray, size: int) -> float:
    """Total variation distance of two samples of codes in [0, size)."""
    return 0.5 * float(np.abs(_shares(real, size) - _shares(synthetic, size)).sum())


def _correlations(values: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    x = np.column_stack([values[n] for n in names])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.corrcoef(x, rowvar=False)
    return np.nan_to_num(np.atleast_2d(r))  # a constant column correlates with nothing


def evaluate(real: Graded, synthetic: Graded, config: SynthConfig) -> dict[str, Any]:
    """The utility measures of `synthetic` against `real` (see the module docstring)."""
    real_levels, real_classes = real.levels, real.classes
    syn_levels, syn_classes = synthetic.levels, synthetic.classes
    sizes = {
        c.name: (len(c.categories) if c.kind == "categorical" else c.bins) for c in config.columns
    }
    one_way = {n: tvd(real_levels[n], syn_levels[n], sizes[n]) for n in sizes}
    pairs = []
    for a, b in combinations(sizes, 2):
        size = sizes[a] * sizes[b]
        pairs.append(
            (
                tvd(
                    real_levels[a] * sizes[b] + real_levels[b],
                    syn_levels[a] * sizes[b] + syn_levels[b],
                    size,
                ),
                a,
                b,
            )
        )
    pairs.sort(reverse=True)
    numeric = [c.name for c in config.columns if c.kind == "numeric"]
    out: dict[str, Any] = {
        "computed_on": "the real input rows and the written synthetic table (NOT covered by "
        "epsilon: for the data holder only)",
        "rows": {"real": int(real_classes.size), "synthetic": int(syn_classes.size)},
        "tvd_1way": one_way,
        "tvd_1way_mean": float(np.mean(list(one_way.values()))),
        "tvd_2way_mean": float(np.mean([p[0] for p in pairs])) if pairs else None,
        "tvd_2way_worst": [{"columns": [a, b], "tvd": t} for t, a, b in pairs[:MAX_PAIRS_LISTED]],
    }
    if len(numeric) >= 2:
        r_real = _correlations(real.numeric, numeric)
        r_syn = _correlations(synthetic.numeric, numeric)
        upper = np.triu_indices(len(numeric), 1)
        err = np.abs(r_real - r_syn)[upper]
        out["correlation"] = {
            "columns": numeric,
            "real": r_real.tolist(),
            "synthetic": r_syn.tolist(),
            "abs_error_mean": float(err.mean()),
            "abs_error_max": float(err.max()),
        }
    if config.label is not None:
        k = len(config.classes)
        out["class_shares"] = {
            "classes": list(config.classes),
            "real": _shares(real_classes, k).tolist(),
            "synthetic": _shares(syn_classes, k).tolist(),
        }
    return out


def marginal_shares(
    real: Graded, synthetic: Graded, config: SynthConfig
) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """Per column: bin or category labels, real shares, synthetic shares (the report's figure)."""
    real_levels, syn_levels = real.levels, synthetic.levels
    out = {}
    for c in config.columns:
        if c.kind == "categorical":
            labels = list(c.categories)
        else:
            edges = c.bin_edges()
            labels = [f"{edges[i]:.4g}" for i in range(c.bins)]
        size = len(labels)
        out[c.name] = (
            labels,
            _shares(real_levels[c.name], size),
            _shares(syn_levels[c.name], size),
        )
    return out
