"""The results of a moments round (PCA, DCA, LDA, MDR): what the aggregator releases, with the
round's facts, as their proto messages (`results.result_type`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from leteo_fed.protocols.results import (
    DpFacts,
    Result,
    RoundFacts,
    component_table,
    omitted,
    result_type,
)


@result_type
@dataclass(frozen=True, kw_only=True)
class PcaRoundResult(RoundFacts, Result):
    wire: ClassVar[str] = "pca"
    protocol: str
    features: list[str]
    n_samples: int
    eigenvalues: list[float]
    eigenvalue_normalization: str
    components: list[list[float]]
    explained_variance_ratio: list[float]
    mean: list[float]
    standardized: bool
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        cols, index, name = component_table(self.features, self.components, self.eigenvalues)
        cols["explained_variance_ratio"] = list(self.explained_variance_ratio)
        return cols, index, name


@result_type
@dataclass(frozen=True, kw_only=True)
class DiscriminantRoundResult(RoundFacts, Result):
    wire: ClassVar[str] = "discriminant"
    protocol: str
    method: str
    features: list[str]
    classes: list[str]
    n_samples: int
    eigenvalues: list[float]
    components: list[list[float]]
    mean: list[float]
    ridge: dict[str, float]
    pencil: str
    privacy_classes: list[str] | None = omitted()  # MDR only
    dp: DpFacts | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        return component_table(self.features, self.components, self.eigenvalues)


@result_type
@dataclass(frozen=True, kw_only=True)
class ProjectionOnlyResult(RoundFacts, Result):
    wire: ClassVar[str] = "projection_only"
    protocol: str
    method: str
    mode: str
    features: list[str]
    eigenvalues: list[float]
    components: list[list[float]]
    n_samples: int | None = None

    def table(self) -> tuple[dict[str, list], list, str]:
        return component_table(self.features, self.components, self.eigenvalues)

    explained_variance_ratio: list[float] | None = omitted()  # PCA
    standardized: bool | None = omitted()  # PCA
    classes: list[str] | None = omitted()  # DCA, LDA, MDR
    ridge: dict[str, float] | None = omitted()
    privacy_classes: list[str] | None = omitted()  # MDR
    dp: DpFacts | None = None
