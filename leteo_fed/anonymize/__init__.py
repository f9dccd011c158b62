"""Central anonymization (Mondrian / TDS) with k-anonymity, l-diversity and t-closeness.

The job (:mod:`job`) runs on one of two engines that release the same table: :mod:`local_job`
(pyarrow + NumPy, in process) and :mod:`spark_job`. They share the config (:mod:`config`), the
column typing and input checks (:mod:`kinds`, :mod:`inputs`), the planners (:mod:`mondrian_rounds`,
:mod:`tds`), the report arithmetic (:mod:`measure`) and the publishing (:mod:`output`);
:mod:`mondrian` / :mod:`tds` ``anonymize`` are the per-partition NumPy references and
:mod:`verify` the independent checker of released tables.
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
