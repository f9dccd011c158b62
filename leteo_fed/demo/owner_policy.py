"""The `[policy]` of owners started on this machine (demos, tests): explicit and permissive.

An owner's default policy is what a data protection officer would sign (no column shared until
listed, no release without DP, ...), so a local deployment that runs every protocol on synthetic
or public data must say so. Every owner config `LocalCluster` writes carries this table, with
the keys an `OwnerSpec` sets taking precedence.
"""

from __future__ import annotations

import json
from typing import Any

import tomllib

from leteo_fed.errors import ConfigError

DEMO_POLICY: dict[str, Any] = {
    "protocols": ["*"],
    "columns": ["*"],  # public or synthetic data: every column may be read
    "analysts": ["*"],
    "min_other_owners": 1,  # test clusters of two owners run rounds with a quorum of 2
    "min_rows": 1,
    # what the demos (and test clusters) run without DP
    "non_dp": [
        "pca",
        "dca",
        "lda",
        "mdr",
        "kmeans",
        "weighted_stats",
        "crosstab",
        "linreg",
        "quantiles",
        "logreg",
        "naive_bayes",
        "correlation",
    ],
    "non_dp_repeats": 1000,  # test suites rerun the same query many times
    "non_dp_window_days": 30,
    "data_refusals": 1000,  # test suites probe bad data on purpose
}


def _value(value: Any) -> str:
    """A TOML value (strings, numbers, booleans and lists of them, as policies use)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise ConfigError(f"a demo policy cannot hold {value!r}")


def policy_lines(overrides: str = "") -> list[str]:
    """The `[policy]` table's lines: `DEMO_POLICY` with the keys of `overrides` (TOML) on top."""
    try:
        given = tomllib.loads(overrides)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the owner's policy is not valid TOML: {exc}") from exc
    merged = {**DEMO_POLICY, **given}
    return ["[policy]", *(f"{key} = {_value(value)}" for key, value in merged.items())]
