"""Tools for authors of statistics and deployments: the statistic test kit."""
