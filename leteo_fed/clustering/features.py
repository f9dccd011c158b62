"""Which columns the DP k-means jobs cluster, decided alike by the Spark and in-process engines.

Columns are typed by :mod:`leteo_fed.anonymize.models.kinds` (a CSV column is a number when every value
looks like one), so both engines see the same numeric columns. Refusals come from the types
alone (a named feature missing or not numeric, no numeric column at all), so they reveal nothing
about individual rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from leteo_fed.anonymize.models.kinds import NUMERIC, TEXT
from leteo_fed.errors import DataError


def pick_features(
    columns: Sequence[str], kinds: Mapping[str, str], features: Sequence[str] | None
) -> list[str]:
    """The features to cluster: the named ones (checked), else every numeric column in order."""
    if features is None:
        names = [c for c in columns if kinds[c] in NUMERIC]
        if not names:
            raise DataError("the data has no numeric column; pass --features", field="features")
        return names
    names = list(features)
    if not names:
        raise DataError("no features selected", field="features")
    if len(set(names)) != len(names):
        raise DataError("a feature is named twice", field="features")
    for name in names:
        if name not in kinds:
            raise DataError(
                f"feature {name!r} is not in the data; available columns: "
                + ", ".join(repr(c) for c in columns),
                field=name,
            )
        if kinds[name] not in NUMERIC:
            what = "it holds text" if kinds[name] == TEXT else "its type is not a number"
            raise DataError(f"feature {name!r} is not numeric ({what})", field=name)
    return names
