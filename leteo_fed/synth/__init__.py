"""DP synthetic data by insensitive micro-aggregation (`leteo-fed synthesize`, docs/synthetic-data.md).

The book's method (features grouped by correlation, records micro-aggregated per group, each
cluster's mean and covariance perturbed, rows drawn from the perturbed Gaussians), with the
clustering made insensitive to any one record: clusters are cut along a fixed total order of the
public grid from a DP histogram, so every per-cluster statistic has a sensitivity one can state.

Modules, one job each: :mod:`config` (synth.toml), :mod:`encoding` (public columns to [0, 1]
fixed point), :mod:`grouping` (public or DP feature groups), :mod:`partition` (the grid, its
order, the cut), :mod:`statistics` (noisy sums to means and PSD covariances), :mod:`generation`
(rows from the model), :mod:`model` (the driver-side release logic both engines share),
:mod:`local_engine` / :mod:`spark_engine` (exact aggregates), :mod:`report`, :mod:`job`.
"""
