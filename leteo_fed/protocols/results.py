"""Typed results: what rounds return, shared facts, and the registry of result types.

Every protocol's result is a frozen dataclass whose fields are those of its proto message in
RoundResult's oneof (named by the class's `wire`), so results travel typed and come out as the
same JSON document (`codec.to_dict`). Fields marked OMIT_NONE are left out of that document when
they do not apply (e.g. MDR's privacy classes in an LDA result).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from leteo_fed import extras
from leteo_fed.privacy.bounds import ColumnBounds
from leteo_fed.privacy.noise_gate import ReleaseWarning

OMIT_NONE = {"omit_none": True}

RESULT_TYPES: dict[str, type] = {}


def result_type(cls: type) -> type:
    """Register a result dataclass under its `wire` name (its field in RoundResult)."""
    name = cls.wire  # type: ignore[attr-defined]
    if name in RESULT_TYPES and RESULT_TYPES[name] is not cls:
        raise RuntimeError(f"two result types named {name!r}")
    RESULT_TYPES[name] = cls
    return cls


def omitted(default: Any = None) -> Any:
    """A field left out of the JSON document when None."""
    return field(default=default, metadata=OMIT_NONE)


@dataclass(frozen=True)
class EncodingFacts:
    scale_bits: int
    count_scale_bits: int
    value_bound: float
    slot_bits: int
    slots_per_ciphertext: int
    mask_bits: int
    statistical_security_bits: int
    values_per_share: int
    ciphertexts_per_share: int
    paillier_bits: int


@dataclass(frozen=True)
class RoundTimings:
    owners: dict[str, dict[str, float]]  # each owner's phase timings
    aggregator: dict[str, float]
    csp: dict[str, float]


@dataclass(frozen=True)
class ReportTimings:
    owners: dict[str, dict[str, float]]
    aggregator: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class RoundFacts:
    """What every secure-sum result reports besides its statistics."""

    round_id: str
    owners: list[str]
    declined: dict[str, str]
    encoding: EncodingFacts
    timings: RoundTimings


@dataclass(frozen=True, kw_only=True)
class ReleaseNoiseFacts:
    """What every DP secure-sum result says of its own noise (`dp_release.Truth`): the public
    bounds clipped to, the noisy count of clipped rows, each released figure with its noise's
    std, and the figures the noise or clipping buries."""

    bounds: list[ColumnBounds] = field(default_factory=list)
    clipped_rows: float | None = omitted()
    figures: dict[str, float] = field(default_factory=dict)
    figure_noise_std: dict[str, float] = field(default_factory=dict)
    warnings: list[ReleaseWarning] = field(default_factory=list)


@dataclass(frozen=True)
class DpFacts(ReleaseNoiseFacts):
    """The noise of one DP secure-sum release."""

    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    skellam_mu_aggregate: float | None = omitted()
    noise_std_per_value: float | None = omitted()
    post_processing: str | None = omitted()
    note: str | None = omitted()


@dataclass(frozen=True, kw_only=True)
class IterationDpFacts(ReleaseNoiseFacts):
    """The noise of a multi-round DP job: T iterations whose noise together gives the job's
    (epsilon, delta) by Renyi composition (k-means and logistic regression add their own
    noise std)."""

    mechanism: str
    epsilon: float
    delta: float
    row_norm_bound: float
    quorum: int
    sensitivity_l1: float
    sensitivity_l2: float
    composition: str
    accountant: str
    iterations_budgeted: int
    epsilon_per_iteration: float
    delta_per_iteration: float
    epsilon_spent: float
    delta_spent: float
    skellam_mu_per_iteration: float
    post_processing: str
    note: str


class TermsTable:
    """A regression's result as a table: a row per term (the intercept, then the features)
    with its coefficient, standard error, test statistic (`test_statistic`: the field of t
    or z statistics), p-value and confidence interval; every per-term map in term order."""

    test_statistic: ClassVar[str]
    terms: list[str]  # the result's field (a mixin's annotation, not a dataclass field)

    def table(self) -> tuple[dict[str, list], list, str]:
        terms = self.terms
        fields = ("coefficients", "std_errors", self.test_statistic, "p_values")
        cols = {name[:-1]: [getattr(self, name)[t] for t in terms] for name in fields} | {
            name: [getattr(self, name)[t] for t in terms] for name in ("ci_lower", "ci_upper")
        }
        return cols, list(terms), "term"

    def to_dict(self) -> dict[str, Any]:
        return terms_in_order(super().to_dict())  # type: ignore[misc]


def to_dict(obj: Any) -> Any:
    """A dataclass as JSON-ready data: tuples become lists; a field whose metadata says
    `omit_none` is left out when None."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue
            out[f.name] = to_dict(value)
        return out
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    return obj


class Result:
    """Base of the result dataclasses: `wire` is the field name in RoundResult.

    `to_dict()` is the JSON document the CLI writes; `to_pandas()` the result's main table as
    a pandas DataFrame (pandas imported on first use), for results that have one."""

    wire: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = to_dict(self)
        return doc

    def table(self) -> tuple[dict[str, list], list, str] | None:
        """The main table: (columns by name, row labels, the row labels' name); None: none."""
        return None

    def release_warnings(self) -> list[ReleaseWarning]:
        """The released figures the DP noise or clipping buries, as `ReleaseWarning`s (none
        without DP): a secure-sum result's come in its `dp` facts; LDP results override this.
        The client turns each into a `NoiseWarning`; the CLI prints each as a `warning:` line
        and writes them under "warnings" (or dp.warnings) in the result file."""
        dp = getattr(self, "dp", None)
        return list(getattr(dp, "warnings", None) or [])

    def to_pandas(self) -> Any:
        """The main table as a pandas.DataFrame (needs pandas); TypeError if there is none."""
        table = self.table()
        if table is None:
            raise TypeError(f"a {type(self).__name__} has no table")
        columns, index, name = table
        pd = extras.pandas()
        return pd.DataFrame(columns, index=pd.Index(index, name=name))


def component_table(
    features: list[str], components: list[list[float]], eigenvalues: list[float]
) -> tuple[dict[str, list], list, str]:
    """A row per component: its eigenvalue and its weight on each feature."""
    cols: dict[str, list] = {"eigenvalue": list(eigenvalues[: len(components)])}
    for j, f in enumerate(features):
        cols[f] = [row[j] for row in components]
    return cols, [f"c{i + 1}" for i in range(len(components))], "component"


def terms_in_order(doc: dict[str, Any]) -> dict[str, Any]:
    """A regression's document with every per-term map in the order of its `terms` (the wire's
    maps keep none): the intercept, then the features as the request named them."""
    terms = doc["terms"]
    return {
        k: {t: v[t] for t in terms} if isinstance(v, dict) and set(v) == set(terms) else v
        for k, v in doc.items()
    }


@result_type
@dataclass(frozen=True, kw_only=True)
class StatisticResult(RoundFacts, Result):
    """The result of a statistic without a proto message of its own (a plugin's): its fields
    as JSON (`values`) and the figures it states."""

    wire: ClassVar[str] = "statistic"
    protocol: str
    version: str
    values_json: str
    figures: dict[str, float]
    dp: DpFacts | None = None

    @classmethod
    def of(
        cls, statistic: Any, fields: dict, figures: dict[str, float], facts: dict, dp: Any
    ) -> StatisticResult:
        """A statistic's result fields, as JSON, with the figures they state."""
        values_json = json.dumps(to_dict(fields), sort_keys=True)
        return cls(
            protocol=statistic.name,
            version=statistic.version,
            values_json=values_json,
            figures=figures,
            **facts,
            dp=dp,
        )

    @property
    def values(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.values_json)
        return doc

    def to_dict(self) -> dict[str, Any]:
        doc = {k: v for k, v in to_dict(self).items() if k != "values_json"}
        return {**doc, **self.values}

    def table(self) -> tuple[dict[str, list], list, str]:
        """A row per figure the statistic states."""
        names = list(self.figures)
        return {"value": [self.figures[n] for n in names]}, names, "figure"
