"""Shared cases for the anonymization tests: toy and Adult-like tables, configs, checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from leteo_fed.anonymize.audit import verify
from leteo_fed.anonymize.models.config import (
    AnonymizationConfig,
    LDiversity,
    QuasiIdentifier,
    SensitiveAttribute,
    TCloseness,
)
from leteo_fed.anonymize.models.hierarchy import Hierarchy

ADULT = Path(__file__).resolve().parents[3] / "benchmarks" / "hierarchies" / "adult"

EDU = Hierarchy(
    [
        ["HS", "School", "*"],
        ["Some-college", "School", "*"],
        ["Bachelors", "Uni", "*"],
        ["Masters", "Uni", "*"],
        ["Doctorate", "Uni", "*"],
    ],
    "education",
)


def make_config(
    k: int, qis: list[tuple[str, str]], sensitive: tuple[SensitiveAttribute, ...] = ()
) -> AnonymizationConfig:
    return AnonymizationConfig(
        algorithm="mondrian",
        k=k,
        suppression_limit=0.0,
        info_gain="entropy",
        quasi_identifiers=tuple(QuasiIdentifier(c, t) for c, t in qis),
        sensitive=sensitive,
    )


def toy_table(n: int = 200, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "rid": np.arange(n),
        "age": rng.integers(17, 80, n),
        "education": rng.choice(EDU.leaves, n),
        "income": rng.choice(["<=50K", ">50K"], n, p=[0.7, 0.3]),
    }


TOY_CONFIG = make_config(
    5,
    [("age", "numeric"), ("education", "categorical")],
    (SensitiveAttribute("income", LDiversity("distinct", 2), TCloseness(0.2)),),
)
TOY_H = {"education": EDU}


def adult_like(n: int = 600, seed: int = 1) -> tuple[dict[str, np.ndarray], dict[str, Hierarchy]]:
    """Synthetic rows over the Adult hierarchies' domains (skewed like the real data)."""
    rng = np.random.default_rng(seed)
    hs = {
        c: Hierarchy.from_csv(ADULT / f"{c}.csv", c)
        for c in ("education", "race", "marital-status")
    }
    age = np.clip(rng.normal(38, 13, n).round(), 17, 90).astype(np.int64)

    def skewed(h: Hierarchy) -> np.ndarray:
        w = rng.random(len(h.leaves)) ** 2 + 0.02
        return rng.choice(h.leaves, n, p=w / w.sum())

    cols = {
        "rid": np.arange(n),
        "age": age,
        "education": skewed(hs["education"]),
        "race": skewed(hs["race"]),
        "sex": rng.choice(["Male", "Female"], n),
        "marital-status": skewed(hs["marital-status"]),
        "hours": rng.choice([20.0, 35.0, 40.0, 45.0, 60.0], n),
    }
    return cols, hs


ADULT_CONFIG = make_config(
    10,
    [("age", "numeric"), ("education", "categorical"), ("race", "categorical")],
    (
        SensitiveAttribute(
            "marital-status",
            LDiversity("recursive", 2, 3.0),
            TCloseness(0.2, "hierarchical"),
            hierarchy=ADULT / "marital-status.csv",
        ),
        SensitiveAttribute("hours", None, TCloseness(0.15, "ordered")),
    ),
)


def check_release(
    original: dict,
    released: dict,
    config: AnonymizationConfig,
    hs: dict,
    suppressed: np.ndarray | None = None,
) -> None:
    """Independent checks with :mod:`audit.verify`: k, l, t, truthfulness, nothing lost or changed.

    ``suppressed`` rows are left out of the classes (and must fit the suppression limit).
    """
    qi = config.qi_columns
    if suppressed is not None:
        assert suppressed.sum() <= config.suppression_limit * len(suppressed) + 1e-9
    assert set(released) == set(original)
    assert all(len(released[c]) == len(original["rid"]) for c in released)
    for c in original:
        if c not in qi:
            np.testing.assert_array_equal(released[c], original[c])
    assert verify.k_anonymity(released, qi, suppressed).k >= config.k
    for s in config.sensitive:
        if s.l_diversity is not None:
            ld = s.l_diversity
            rep = verify.l_diversity(
                released, qi, s.column, ld.variant, l=ld.l, c=ld.c, suppressed=suppressed
            )
            assert rep.satisfied, rep
        if s.t_closeness is not None:
            rep = verify.t_closeness(
                released,
                qi,
                s.column,
                distance=s.t_closeness.distance,
                hierarchy=hs.get(s.column),
                suppressed=suppressed,
            )
            assert rep.t <= s.t_closeness.t + 1e-9, rep.t
    assert verify.truthful(original, released, config.quasi_identifiers, hs, suppressed) is None


def to_df(spark, cols: dict[str, np.ndarray]):  # noqa: ANN001, ANN202
    names = list(cols)
    rows = list(zip(*[cols[c].tolist() for c in names], strict=True))
    return spark.createDataFrame(rows, names)
