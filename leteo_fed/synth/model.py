"""The release, computed on the driver from exact aggregates: groups, partitions, noisy models.

Both engines hand this module the same exact integer aggregates (`Aggregator`); every noise draw
comes from a generator seeded by (seed, purpose, class, group), so the release depends on the
seed, the config and the data only, never on the engine or the order of the work.

Budget (pure epsilon-DP, Laplace everywhere): with groups = "dp", at most `grouping_share` of
epsilon goes to the DP grouping release (`pair_grouping`: the class sizes, then a few noisy-max
picks of the most dependent pair of columns; the picks it does not make are not spent); the
rest is split across groups (sequential composition) in proportion to their number of columns
("dimension", the book's choice) or equally; within a group, the histogram, the sums and the
covariance take `shares` of the group's part. Classes are disjoint sets of records: they
compose in parallel and each spends the whole group budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from leteo_fed.synth.aggregator import Aggregator
from leteo_fed.synth.config import SynthConfig
from leteo_fed.synth.grouping import free_merges, group_epsilon, names_of, planned_grouping
from leteo_fed.synth.pair_grouping import (
    COUNT_SHARE,
    SCORE_SENSITIVITY,
    GroupingRelease,
    grouping_release,
    pick_epsilon,
    rounds,
)
from leteo_fed.synth.partition import (
    check_cells,
    cluster_bin_means,
    clusters_from_histogram,
    morton_order,
    restore_levels,
    toward_pooled,
)
from leteo_fed.synth.statistics import (
    ClusterModel,
    gaussian_model,
    gram_l1,
    inverse_variance_mean,
    laplace,
    noisy_moments,
    sum_l1,
)

# purposes of the seeded generators (first element after the seed)
NOISE_GROUPING, NOISE_HISTOGRAM, NOISE_SUMS, NOISE_COV, DRAW_CLUSTER, DRAW_PERMUTATION = range(6)


def rng(seed: int, *path: int) -> np.random.Generator:
    """A generator for one purpose: SeedSequence([seed, *path]) (order-independent draws)."""
    return np.random.default_rng(np.random.SeedSequence([seed, *path]))


@dataclass
class SynthModel:
    """What is released (all of it DP): groups, per (class, group) cluster models, class sizes.

    Kept whole so later measures (distance to closest record, membership inference) can use it.
    """

    groups: list[list[str]]
    provenance: str
    budget: dict[str, Any]
    models: dict[tuple[int, int], ClusterModel] = field(default_factory=dict)
    class_sizes: list[float] = field(default_factory=list)
    # with groups = "dp": the groups the release's picks formed (`pair_grouping`), before
    # `free_merges`, and the picked pairs of columns in order
    found: list[list[str]] | None = None
    picks: list[list[str]] | None = None


def class_sizes(totals: np.ndarray, variances: np.ndarray) -> list[float]:
    """Each class's size from its groups' unclipped noisy histogram totals [classes, groups]:
    each is unbiased, with Laplace variance 2 cells b^2, so they are weighted by the inverse of
    that variance (the least-variance unbiased combination). A plain mean let one fine-grained
    group's noise swamp the rest: on German credit at epsilon 0.5 a 32-cell group at noise
    scale 50 gives its total a standard deviation of 400 against 150 real records of a class."""
    sizes, _ = inverse_variance_mean(totals, variances)
    return [max(0.0, float(v)) for v in sizes]


def budget_split(
    config: SynthConfig, groups: list[list[str]], release: GroupingRelease | None = None
) -> dict[str, Any]:
    """Every epsilon spent, with the sensitivity each Laplace release is calibrated to. With
    groups = "dp", the grouping's `release` says what it spent (its plan when absent)."""
    eps = config.epsilon
    grouping = planned_grouping(config) if release is None else release.epsilon
    total_width = sum(len(g) for g in groups)
    per_group: list[dict[str, Any]] = []
    for g in groups:
        e = group_epsilon(config, len(g), len(groups), total_width, grouping)
        w = sum(config.column(n).kind == "numeric" for n in g)
        if w == 0:  # categorical only: the grid cell is the whole record; no moments needed
            per_group.append(
                {
                    "columns": g,
                    "epsilon": e,
                    "histogram": {"epsilon": e, "l1_sensitivity": 1.0},
                    "sums": None,
                    "covariance": None,
                }
            )
            continue
        per_group.append(
            {
                "columns": g,
                "epsilon": e,
                "histogram": {"epsilon": e * config.shares["histogram"], "l1_sensitivity": 1.0},
                "sums": {"epsilon": e * config.shares["sums"], "l1_sensitivity": sum_l1(w)},
                "covariance": {
                    "epsilon": e * config.shares["covariance"],
                    "l1_sensitivity": gram_l1(w),
                },
            }
        )
    out: dict[str, Any] = {
        "mechanism": "laplace",
        "neighbouring": "add/remove one record",
        "composition": "sequential across grouping and groups; parallel across classes and "
        "across cells/clusters within a group",
        "total_epsilon": eps,
        "grouping": None,
        "groups": per_group,
    }
    if config.groups is None:
        planned = planned_grouping(config)
        k = rounds(len(config.columns))
        made = k if release is None else release.picks_made
        out["grouping"] = {
            "epsilon": grouping,
            "planned_epsilon": planned,
            "class_sizes": {
                "what": "every class's size (Laplace)",
                "epsilon": planned * COUNT_SHARE,
                "l1_sensitivity": 1.0,
            },
            "pair_picks": {
                "what": "report noisy max (exponential noise) among STOP and the column pairs "
                "that may merge, by the L1 distance of their per-class table from its own "
                "independence fit; the picks not made go to the groups",
                "picks": k,
                "picks_made": made,
                "epsilon": grouping - planned * COUNT_SHARE,
                "epsilon_per_pick": pick_epsilon(planned, len(config.columns)),
                "sensitivity": SCORE_SENSITIVITY,
            },
        }
    return out


def noisy_histograms(
    agg: Aggregator,
    config: SynthConfig,
    groups: list[list[str]],
    budget: dict[str, Any],
    seed: int,
) -> tuple[list[np.ndarray], list[float]]:
    """Every group's noisy per-class histogram [classes, cells] and its Laplace scale; all of
    them first, so that every group's shrinkage knows the class sizes the whole release
    gives (`class_sizes`), not only its own noisy totals."""
    hists, scales = [], []
    for gi, names in enumerate(groups):
        hist = agg.histogram([config.column(n) for n in names])
        noise = laplace(budget["groups"][gi]["histogram"]["epsilon"], 1.0)
        hists.append(
            hist
            + np.stack(
                [
                    np.asarray(noise.sample(hist.shape[1], rng(seed, NOISE_HISTOGRAM, c, gi)))
                    for c in range(agg.n_classes)
                ]
            )
        )
        scales.append(noise.scale)
    return hists, scales


def build(agg: Aggregator, config: SynthConfig, seed: int) -> SynthModel:
    """The DP model: groups, the partition of each group's grid per class, the noisy models."""
    if config.groups is None:
        for column in config.columns:  # a single column over the cap is the config's error
            check_cells([column], config.max_cells)
        release = grouping_release(
            agg,
            config,
            planned_grouping(config),
            rng(seed, NOISE_GROUPING, 0),
            rng(seed, NOISE_GROUPING, 1),
        )
        found = names_of(release.found, config)
        merged = free_merges(release.parts, config, release.n_per_class, release.epsilon)
        groups = names_of(merged, config)
        names = [c.name for c in config.columns]
        picks = [[names[i], names[j]] for i, j in release.picks]
        provenance = "dp"
    else:
        groups = [list(g) for g in config.groups]
        for g in groups:
            check_cells([config.column(n) for n in g], config.max_cells)
        provenance = "config"
        found, picks, release = None, None, None
    budget = budget_split(config, groups, release)
    model = SynthModel(groups, provenance, budget, found=found, picks=picks)
    noisy_hists, scales = noisy_histograms(agg, config, groups, budget, seed)
    model.class_sizes = class_sizes(
        np.stack([h.sum(axis=1) for h in noisy_hists], axis=1),
        np.array([2.0 * h.shape[1] * b * b for h, b in zip(noisy_hists, scales, strict=True)]),
    )
    sizes = np.asarray(model.class_sizes)
    for gi, names in enumerate(groups):
        cols = [config.column(n) for n in names]
        part = budget["groups"][gi]
        order = morton_order(cols)
        noisy_all, scale = noisy_hists[gi], scales[gi]
        keys = np.zeros(noisy_all.shape, dtype=np.int64)
        offsets, noisy_counts, cells_of, cell_counts = [], [], [], []
        n_keys = 0
        shrunk = toward_pooled(noisy_all, scale, cols, sizes)
        for c in range(agg.n_classes):
            noisy = noisy_all[c]
            cluster = clusters_from_histogram(noisy, order, config.k)
            m = int(cluster.max()) + 1
            noisy_counts.append(np.bincount(cluster, np.maximum(noisy, 0.0), minlength=m))
            # rows are drawn only from cells above the noise floor b ln(cells) (about the
            # largest noise among the empty cells), each shrunk towards the pooled shape as
            # far as the noise explains its class's deviation (`toward_pooled`)
            cell_counts.append(restore_levels(noisy, shrunk[c], cols, scale))
            keys[c] = cluster + n_keys
            offsets.append(n_keys)
            cells_of.append(cluster)
            n_keys += m
        numeric = [col for col in cols if col.kind == "numeric"]
        if numeric:
            _, s, q = agg.cluster_sums(cols, keys, n_keys, numeric)
        for c in range(agg.n_classes):
            m = noisy_counts[c].shape[0]
            if numeric:
                sl = slice(offsets[c], offsets[c] + m)
                ns, nq = noisy_moments(
                    s[sl],
                    q[sl],
                    len(numeric),
                    part["sums"]["epsilon"],
                    part["covariance"]["epsilon"],
                    rng(seed, NOISE_SUMS, c, gi),
                    rng(seed, NOISE_COV, c, gi),
                )
            else:
                ns, nq = np.zeros((m, 0)), np.zeros((m, 0, 0))
            q_scale = gram_l1(len(numeric)) / part["covariance"]["epsilon"] if numeric else 0.0
            s_scale = sum_l1(len(numeric)) / part["sums"]["epsilon"] if numeric else 0.0
            prior = cluster_bin_means(cells_of[c], cell_counts[c], cols)
            mu, cov, factor = gaussian_model(noisy_counts[c], ns, nq, q_scale, s_scale, prior)
            model.models[(c, gi)] = ClusterModel(
                noisy_counts[c], cell_counts[c], mu, cov, factor, cells_of[c]
            )
    return model
