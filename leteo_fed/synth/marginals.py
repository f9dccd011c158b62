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
   probability proportional to exp(eps_round * score / 2), score = || M_ij - M^_ij ||_1 - null,
   the L1 distance between the exact (label, i, j) counts and the estimate n_c p(i|c) p(j|c)
   from the released first marginals, less the distance independence would show (`excess`;
   sensitivity 1: one record moves one cell of M_ij by 1, and the rest is fixed by release 1);
3. the d - 1 chosen marginals (with the label's axis), Laplace at L1 sensitivity d - 1.

The graphical model is then fitted to the noisy marginals by Private-PGM (`mbi`: mirror
descent over the marginal polytope), and rows are drawn from it along the tree
(`marginal_generation`): post-processing. The exact counts come from the engine (`Aggregator.
pair_histograms`: one pass, in process or on Spark); only counts per (class, pair of grid
levels) reach the driver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.privacy.mechanisms import Gaussian, Laplace
from leteo_fed.privacy.mechanisms.rdp import zcdp_rho
from leteo_fed.synth.aggregator import Aggregator
from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.model import rng
from leteo_fed.synth.pair_tables import exact_marginals, independent, null_score, shares
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
    first_sd: float = 0.0  # the first marginals' noise standard deviation per cell (public)

    @property
    def class_sizes(self) -> list[float]:
        """The fitted class sizes (the fitted total without a label)."""
        return [float(v) for v in self.first[0].sum(axis=1)]

    @property
    def total(self) -> float:
        return float(self.first[0].sum())

    @property
    def edge_names(self) -> list[list[str]]:
        """The tree's edges as pairs of column names (report.json's `tree.edges`)."""
        return [[self.columns[i].name, self.columns[j].name] for i, j in self.edges]


Mechanism = Laplace | Gaussian


@dataclass(frozen=True)
class Noise:
    """The three releases' mechanisms: the first marginals', the selection rounds' epsilon,
    the tree marginals'; and the budget as report.json states it."""

    first: Mechanism
    eps_round: float
    pair: Mechanism | None
    budget: dict[str, Any]


def _gaussian(rho: float, l2: float) -> Gaussian:
    """The Gaussian mechanism that is rho-zCDP at L2 sensitivity l2: sigma = l2 / sqrt(2 rho)."""
    return Gaussian(l2 / math.sqrt(2.0 * rho))


def noise_for(config: SynthConfig, d: int) -> Noise:
    """Pure epsilon-DP (delta = 0: Laplace, sequential composition) or (epsilon, delta)-DP
    through rho-zCDP (delta > 0: Gaussian measurements at rho_i, exponential mechanisms at
    eps_r^2 / 8 each, rho = the largest rho-zCDP that converts to (epsilon, delta))."""
    eps, s = config.epsilon, config.marginal_shares
    edges = max(d - 1, 0)
    with_label = " (each with the label's axis)" if config.label is not None else ""
    budget: dict[str, Any] = {
        "neighbouring": "add/remove one record",
        "total_epsilon": eps,
        "delta": config.delta,
    }
    if config.delta == 0:
        first: Mechanism = laplace(eps * s["one_way"], float(d))
        pair: Mechanism | None = laplace(eps * s["two_way"], float(edges)) if edges else None
        eps_round = eps * s["select"] / edges if edges else 0.0
        budget |= {
            "mechanism": "laplace + exponential (pure epsilon-DP)",
            "composition": "sequential across the three releases and the selection's rounds",
            "one_way": {"epsilon": eps * s["one_way"], "l1_sensitivity": float(d)},
            "select": {"epsilon": eps * s["select"], "rounds": edges, "score_sensitivity": 1.0},
            "two_way": {"epsilon": eps * s["two_way"], "l1_sensitivity": float(edges)},
        }
    else:
        rho = zcdp_rho(eps, config.delta)
        first = _gaussian(rho * s["one_way"], math.sqrt(d))
        pair = _gaussian(rho * s["two_way"], math.sqrt(edges)) if edges else None
        eps_round = math.sqrt(8.0 * rho * s["select"] / edges) if edges else 0.0
        budget |= {
            "mechanism": "gaussian + exponential ((epsilon, delta)-DP through zCDP)",
            "composition": f"zCDP adds: rho = {rho:.6g} in all, the largest that converts to "
            f"({eps:g}, {config.delta:g})-DP (RDP conversion of Canonne-Kamath-Steinke 2020)",
            "rho": rho,
            "one_way": {"rho": rho * s["one_way"], "l2_sensitivity": math.sqrt(d)},
            "select": {
                "rho": rho * s["select"],
                "rounds": edges,
                "epsilon_per_round": eps_round,
                "score_sensitivity": 1.0,
            },
            "two_way": {"rho": rho * s["two_way"], "l2_sensitivity": math.sqrt(edges)},
        }
    budget["one_way"] |= {"marginals": d, "what": f"every column's marginal{with_label}"}
    budget["two_way"] |= {"marginals": edges, "what": f"the tree's 2-way marginals{with_label}"}
    return Noise(first, eps_round, pair, budget)


def excess(exact: np.ndarray, first: list[np.ndarray], first_var: float, i: int, j: int) -> float:
    """How far a pair's exact table is from independence beyond what independence would show:
    sum |M_ij - E_ij| - null_ij. Without the null, a pair with many sparse cells scores high on
    sampling noise alone: on German credit (500 rows) the tree joined credit_amount to purpose
    (80 cells with the label) and never to duration (32 cells), its real correlation of 0.62."""
    expected = independent(first, i, j)
    null = null_score(expected, shares(first[i]), shares(first[j]), first_var)
    return float(np.abs(exact - expected).sum()) - null


def select_tree(
    pairs: dict[tuple[int, int], np.ndarray],
    first: list[np.ndarray],
    first_var: float,
    eps_round: float,
    g: np.random.Generator,
) -> list[tuple[int, int]]:
    """Kruskal with the exponential mechanism: d - 1 rounds, each over the pairs that join two
    components, by the Gumbel-max trick (argmax of eps * score / 2 + Gumbel noise). A pair's
    score is its L1 distance from independence less that distance's null level
    (`pair_tables.null_score`, public given the first marginals)."""
    d = len(first)
    keys = sorted(pairs)
    score = np.array([excess(pairs[p], first, first_var, *p) for p in keys])
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
    first_sd: float,
    pairs: dict[tuple[int, int], np.ndarray],
    pair_sd: float,
) -> tuple[dict[int, np.ndarray], dict[tuple[int, int], np.ndarray]]:
    """Private-PGM on the noisy marginals (each weighted by its noise's standard deviation):
    the fitted marginals of the same cliques, with the class axis first."""
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

    def measured(y: np.ndarray, clique: tuple[str, ...], sd: float) -> Any:
        values = y if label else y[0]
        return mbi.LinearMeasurement(values.reshape(-1), (*label, *clique), stddev=sd)

    measurements = [measured(y, (names[i],), first_sd) for i, y in enumerate(first)]
    measurements += [measured(y, (names[i], names[j]), pair_sd) for (i, j), y in pairs.items()]
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
    noise = noise_for(config, d)
    exact_first, exact_pairs = exact_marginals(agg, config)
    first = [
        m + np.asarray(noise.first.sample(m.shape, rng(seed, NOISE_ONE_WAY, i)))
        for i, m in enumerate(exact_first)
    ]
    edges: list[tuple[int, int]] = []
    pairs: dict[tuple[int, int], np.ndarray] = {}
    if noise.pair is not None:
        edges = select_tree(
            exact_pairs, first, noise.first.variance, noise.eps_round, rng(seed, SELECT_TREE)
        )
        for e, (i, j) in enumerate(edges):
            m = exact_pairs[(i, j)]
            pairs[(i, j)] = m + np.asarray(noise.pair.sample(m.shape, rng(seed, NOISE_TWO_WAY, e)))
    pair_sd = math.sqrt(noise.pair.variance) if noise.pair is not None else 0.0
    one, two = fit(first, math.sqrt(noise.first.variance), pairs, pair_sd)
    first_sd = math.sqrt(noise.first.variance)
    return MarginalModel(cols, edges, noise.budget, one, two, first_sd)
