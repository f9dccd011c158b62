"""The marginal-based synthesizer (`method = "marginals"`): select, measure, generate.

The attributes are the released columns on their public grid (numeric bins, categories). With
a label every measured marginal also carries the label's axis: the model is a tree over the
columns in which every column also depends on the label (a tree-augmented naive Bayes
structure), so the label keeps its dependence on every column; a plain MST tree would leave it
one or two neighbours and a classifier trained on the synthetic rows little to learn. Without a
label it is MST's tree. Three releases, pure epsilon-DP under add/remove of one record,
composed sequentially (`marginal_shares` of epsilon each, a third by default), for d columns:

1. every column's marginal (with the label: its (label, column) marginal), Laplace at L1
   sensitivity d (one record adds 1 to one cell of each of the d marginals);
2. a spanning tree over the columns, chosen by d - 1 exponential mechanisms (Kruskal, as MST
   does): each round picks, among the pairs joining two components, pair (i, j) with
   probability proportional to exp(eps_round * score / 2), score = || M_ij - M^_ij ||_1, the L1
   distance between the exact (label, i, j) counts and the estimate n_c p(i|c) p(j|c) from the
   released first marginals (sensitivity 1: one record moves one cell of M_ij by 1);
3. the d - 1 chosen marginals (with the label's axis), Laplace at L1 sensitivity d - 1.

The graphical model is then fitted to the noisy marginals by Private-PGM (`mbi`: mirror
descent over the marginal polytope), and rows are drawn from it along the tree
(`marginal_generation`): post-processing. The exact counts come from the engine (`Aggregator.
pair_histograms`: one pass, in process or on Spark); only counts per (class, pair of grid
levels) reach the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.model import Aggregator, rng
from leteo_fed.synth.statistics import laplace

# purposes of the seeded generators (after the micro-aggregation model's 0..5)
NOISE_ONE_WAY, SELECT_TREE, NOISE_TWO_WAY, DRAW_TREE, DRAW_IN_BIN = range(6, 11)
FIT_ITERATIONS = 1000


@dataclass
class MarginalModel:
    """What is released: the tree over the columns and its fitted marginals, every one with a
    leading class axis (of size 1 without a label): first[i] [C, Li], pair[(i, j)] [C, Li, Lj]."""

    columns: list[Column]
    edges: list[tuple[int, int]]
    budget: dict[str, Any]
    first: dict[int, np.ndarray] = field(default_factory=dict)
    pair: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    @property
    def class_sizes(self) -> list[float]:
        """The fitted class sizes (the fitted total without a label)."""
        return [float(v) for v in self.first[0].sum(axis=1)]

    @property
    def total(self) -> float:
        return float(self.first[0].sum())

    @property
    def groups(self) -> list[list[str]]:
        """The tree's edges as pairs of names (the report's structure field)."""
        return [[self.columns[i].name, self.columns[j].name] for i, j in self.edges]


def marginal_budget(config: SynthConfig, d: int) -> dict[str, Any]:
    """Every epsilon spent, with the sensitivity each release is calibrated to."""
    eps = config.epsilon
    s = config.marginal_shares
    edges = max(d - 1, 0)
    with_label = " (each with the label's axis)" if config.label is not None else ""
    return {
        "mechanism": "laplace + exponential",
        "neighbouring": "add/remove one record",
        "composition": "sequential across the three releases; the d - 1 exponential "
        "mechanisms of the selection compose sequentially within it",
        "total_epsilon": eps,
        "one_way": {
            "epsilon": eps * s["one_way"],
            "l1_sensitivity": float(d),
            "marginals": d,
            "what": f"every column's marginal{with_label}",
        },
        "select": {"epsilon": eps * s["select"], "rounds": edges, "score_sensitivity": 1.0},
        "two_way": {
            "epsilon": eps * s["two_way"],
            "l1_sensitivity": float(edges),
            "marginals": edges,
            "what": f"the tree's 2-way marginals{with_label}",
        },
    }


def exact_marginals(
    agg: Aggregator, config: SynthConfig
) -> tuple[list[np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """(per column [C, Li], per pair [C, Li, Lj]) exact counts from one engine pass."""
    cols = list(config.columns)
    if len(cols) == 1:
        return [agg.histogram(cols)], {}
    pairs = {
        (i, j): h.reshape(h.shape[0], cols[i].levels, cols[j].levels)
        for (i, j), h in agg.pair_histograms(cols).items()
    }
    first = [pairs[(0, 1)].sum(axis=2), pairs[(0, 1)].sum(axis=1)]
    first += [pairs[(0, i)].sum(axis=1) for i in range(2, len(cols))]
    return first, pairs


def independent(first: list[np.ndarray], i: int, j: int) -> np.ndarray:
    """n_c p(i|c) p(j|c) from the noisy first marginals (clipped at 0)."""
    a, b = np.maximum(first[i], 0.0), np.maximum(first[j], 0.0)
    n = (a.sum(axis=1) + b.sum(axis=1)) / 2.0
    pa = a / np.maximum(a.sum(axis=1, keepdims=True), 1e-12)
    pb = b / np.maximum(b.sum(axis=1, keepdims=True), 1e-12)
    return n[:, None, None] * pa[:, :, None] * pb[:, None, :]


def select_tree(
    pairs: dict[tuple[int, int], np.ndarray],
    first: list[np.ndarray],
    eps_round: float,
    g: np.random.Generator,
) -> list[tuple[int, int]]:
    """Kruskal with the exponential mechanism: d - 1 rounds, each over the pairs that join two
    components, by the Gumbel-max trick (argmax of eps * score / 2 + Gumbel noise)."""
    d = len(first)
    keys = sorted(pairs)
    score = np.array([np.abs(pairs[p] - independent(first, *p)).sum() for p in keys])
    component = list(range(d))

    def root(a: int) -> int:
        while component[a] != a:
            component[a] = component[component[a]]
            a = component[a]
        return a

    edges: list[tuple[int, int]] = []
    for _ in range(d - 1):
        open_ = np.array([root(i) != root(j) for i, j in keys])
        utility = np.where(open_, eps_round * score / 2.0, -np.inf)
        pick = int(np.argmax(utility + g.gumbel(size=utility.shape[0])))
        i, j = keys[pick]
        component[root(i)] = root(j)
        edges.append((i, j))
    return edges


def fit(
    first: list[np.ndarray],
    first_scale: float,
    pairs: dict[tuple[int, int], np.ndarray],
    pair_scale: float,
) -> tuple[dict[int, np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """Private-PGM on the noisy marginals (each weighted by its Laplace standard deviation
    sqrt(2) b): the fitted marginals of the same cliques, with the class axis first."""
    import logging

    import jax

    logging.getLogger("jax").setLevel(logging.WARNING)  # not the accelerator probes
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_enable_x64", True)  # mbi: float32 stalls on large counts
    jax.config.update("jax_enable_compilation_cache", False)  # mbi: many small programs
    import mbi

    classes = first[0].shape[0]
    label = ("y",) if classes > 1 else ()
    names = [f"c{i}" for i in range(len(first))]
    domain = mbi.Domain([*label, *names], [classes] * len(label) + [f.shape[1] for f in first])

    def measured(y: np.ndarray, clique: tuple[str, ...], scale: float) -> Any:
        values = y if label else y[0]
        return mbi.LinearMeasurement(
            values.reshape(-1), (*label, *clique), stddev=float(np.sqrt(2.0) * scale)
        )

    measurements = [measured(y, (names[i],), first_scale) for i, y in enumerate(first)]
    measurements += [measured(y, (names[i], names[j]), pair_scale) for (i, j), y in pairs.items()]
    model = mbi.estimation.MirrorDescent().estimate(domain, measurements, iters=FIT_ITERATIONS)

    def fitted(clique: tuple[str, ...]) -> np.ndarray:
        values = np.asarray(
            model.project((*label, *clique)).datavector(flatten=False), dtype=np.float64
        )
        return values if label else values[None]

    one = {i: fitted((names[i],)) for i in range(len(first))}
    two = {(i, j): fitted((names[i], names[j])) for (i, j) in pairs}
    return one, two


def build_marginals(agg: Aggregator, config: SynthConfig, seed: int) -> MarginalModel:
    """The DP model: noisy first marginals, a DP spanning tree, its noisy marginals, fitted."""
    cols = list(config.columns)
    d = len(cols)
    budget = marginal_budget(config, d)
    exact_first, exact_pairs = exact_marginals(agg, config)
    first_noise = laplace(budget["one_way"]["epsilon"], float(d))
    first = [
        m + np.asarray(first_noise.sample(m.shape, rng(seed, NOISE_ONE_WAY, i)))
        for i, m in enumerate(exact_first)
    ]
    edges: list[tuple[int, int]] = []
    pairs: dict[tuple[int, int], np.ndarray] = {}
    pair_scale = 0.0
    if d > 1:
        eps_round = budget["select"]["epsilon"] / (d - 1)
        edges = select_tree(exact_pairs, first, eps_round, rng(seed, SELECT_TREE))
        pair_noise = laplace(budget["two_way"]["epsilon"], float(d - 1))
        pair_scale = pair_noise.scale
        for e, (i, j) in enumerate(edges):
            m = exact_pairs[(i, j)]
            pairs[(i, j)] = m + np.asarray(pair_noise.sample(m.shape, rng(seed, NOISE_TWO_WAY, e)))
    one, two = fit(first, first_noise.scale, pairs, pair_scale)
    return MarginalModel(cols, edges, budget, one, two)
