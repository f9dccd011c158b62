"""Central anonymization (Mondrian / TDS) with k-anonymity, l-diversity and t-closeness.

The package is laid out by role (lower layers never import higher ones)::

    job.py           the `leteo-fed anonymize` job: plan and check, run an engine, enforce the
                     limits, write the report, publish (the policy; one for both engines)
    inputs.py        the input's format and the columns a config needs
    output.py        where a release goes, and its atomic publishing
    keys.py          the HMAC key of the pseudonyms
    arrays.py        grouping helpers on integer arrays (the hot loops)
    models/          what a job asks for: config (TOML), hierarchies, privacy models (k / l / t),
                     column kinds, TDS taxonomies, re-identification risk
    planners/        the algorithms' decisions, engine independent: Mondrian's round planner,
                     TDS's planner and loop
    audit/           grading a release apart from the algorithm: the independent verifier and
                     the report's measurements
    engines/         base.py (the engine interface), choice.py (which engine runs a job) and
                     the two engines, local/ (pyarrow + NumPy, in process) and spark/; each
                     reads, scans, pseudonymizes, feeds the planners, writes and summarizes

Both engines release the same table for the same job. The NumPy reference anonymizers the tests
hold the engines to live in ``tests/leteo_fed/anonymize/reference_*.py``.
"""

from leteo_fed.anonymize.models.config import (
    AnonymizationConfig,
    Identifiers,
    LDiversity,
    QuasiIdentifier,
    SensitiveAttribute,
    TCloseness,
    load_config,
)
from leteo_fed.anonymize.models.hierarchy import Hierarchy, format_interval, parse_interval

__all__ = [
    "AnonymizationConfig",
    "Hierarchy",
    "Identifiers",
    "LDiversity",
    "QuasiIdentifier",
    "SensitiveAttribute",
    "TCloseness",
    "format_interval",
    "load_config",
    "parse_interval",
]
