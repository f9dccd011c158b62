"""Central anonymization (Mondrian / TDS) with k-anonymity, l-diversity and t-closeness.

This package currently holds the job configuration, generalization hierarchies and an
independent verifier of released tables; the Spark algorithms build on these.
"""

from leteo_fed.anonymize.config import (
    AnonymizationConfig,
    Identifiers,
    LDiversity,
    QuasiIdentifier,
    SensitiveAttribute,
    TCloseness,
    load_config,
)
from leteo_fed.anonymize.hierarchy import Hierarchy, format_interval, parse_interval

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
