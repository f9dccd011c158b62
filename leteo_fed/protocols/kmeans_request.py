"""What the analyst asks of federated k-means, and its command's form: the initial centers
from a file or drawn in a public box (`init`, `init_bounds`, `init_seed`, never from the data),
the iteration limit, the tolerance and the features."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leteo_fed.protocols import kmeans
from leteo_fed.protocols.kmeans_centers import DEFAULT_K, init_record, initial_centers
from leteo_fed.protocols.requests import low_high

# the command's initial centers: `init` FILE.json or `init_bounds` drawn with `init_seed`
_INIT_FLAGS: dict[str, Any] = {
    "k": {
        "type": int,
        "default": None,
        "help": f"number of clusters (default: from `init`, else {DEFAULT_K})",
    },
    "init": {
        "type": Path,
        "default": None,
        "metavar": "FILE.json",
        "help": 'initial centers: {"centers": [[...], ...]}, k rows of d values',
    },
    "init_bounds": {
        "type": low_high,
        "default": None,
        "metavar": "LO,HI",
        "help": "initial centers uniform in the public box [LO, HI]^d (seeded)",
    },
    "init_seed": {"type": int, "default": 0, "help": "seed of `init_bounds` (default: 0)"},
}


@dataclass(frozen=True)
class KmeansRequest:
    k: int = field(
        default=0,
        metadata={
            "flags": _INIT_FLAGS,
            "build": initial_centers,
            "sets": ("centers",),
            "written": init_record,
        },
    )
    centers: tuple[float, ...] = ()  # k x d, row-major: set with `k`
    iterations: int = field(  # 0: kmeans.DEFAULT_ITERATIONS
        default=0,
        metadata={
            "flags": {
                "rounds": {
                    "type": int,
                    "aliases": ("iterations",),
                    "default": kmeans.DEFAULT_ITERATIONS,
                    "metavar": "ROUNDS",
                    "help": "maximum number of iterations T (default: "
                    f"{kmeans.DEFAULT_ITERATIONS})",
                }
            },
            "build": lambda rounds: rounds,
        },
    )
    tolerance: float = field(
        default=0.0,
        metadata={
            "help": "stop once no center moves more than this (L2; default 0: when nothing moves)"
        },
    )
    features: tuple[str, ...] = field(
        default=(), metadata={"help": "comma-separated feature columns", "required": True}
    )


DESCRIPTION = """\
Federated k-means (Lloyd's algorithm) through the aggregator. For every iteration the
aggregator opens a round carrying the current centers; each owner assigns its rows to the
nearest center and sends Paillier-encrypted per-cluster sums and counts for all k clusters;
the aggregator adds the shares, blinds them, has the CSP decrypt only the blinded totals,
unblinds and moves every center to the mean of its cluster (an empty cluster keeps its
center). It stops after `iterations` iterations or once no center moved more than `tolerance`.
Without DP the result equals centralized Lloyd on the pooled rows from the same initial centers.

Initial centers: `init` FILE.json with {"centers": [[...], ...]} (k rows of d values, in the
order of `features`), or uniform in the public box `init_bounds` LO,HI drawn with `init_seed`.
They never depend on the data.

With `dp_epsilon` the whole job is (epsilon, delta)-DP: give public bounds per column in natural
units (`bounds` age=17,90, repeated, or `codebook` FILE; `init` centers in the same units):
every owner clips each value to them and the job runs on the scaled columns (experts: rows
clipped to `row_norm_bound` instead). Each iteration's noise is calibrated so that the T =
`iterations` iterations together meet (epsilon, delta) by Renyi composition, and every owner's
ledger composes them the same way. After the job, each center and cluster size is printed
with its noise, and a warning names a cluster the noise may have emptied. See
docs/federated-kmeans.md.
"""
