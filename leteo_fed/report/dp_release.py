"""The release report of a differentially private central release (dp-kmeans, synthesize):
report.json's common part and its page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from leteo_fed.report.page import Page


@dataclass(frozen=True)
class DpRelease:
    """What a DP release says about itself; `budget` names every part of epsilon (and delta)."""

    kind: str  # the command: dp-kmeans, synthesize
    title: str
    released: dict[str, Any]  # files and what they hold
    epsilon: float
    delta: float
    adjacency: str  # e.g. "add/remove one row"
    accountant: str  # how the parts compose
    budget: dict[str, Any]
    utility: dict[str, Any] = field(default_factory=dict)
    utility_note: str = ""
    risk: dict[str, Any] = field(default_factory=dict)  # measured risk (e.g. DCR), if any
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> value, source
    reproduce: str | None = None
    reproduce_note: str = ""
    figures: Sequence[tuple[bytes | None, str]] = ()
    version: str = ""
    holder_note: str = ""  # what on the page is NOT covered by the guarantee, said first
    risk_note: str = ""
    warnings: Sequence[dict[str, str]] = ()  # {figure, message}: released figures the noise buries

    def guarantee(self) -> dict[str, Any]:
        """The DP bound in the terms a reader weighs: for a 50/50 prior on whether one person's
        row was used, no test on the release guesses right with probability above
        (e^eps + delta) / (1 + e^eps) (the hypothesis-testing view of (eps, delta)-DP)."""
        odds = math.exp(self.epsilon)
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "adjacency": self.adjacency,
            "accountant": self.accountant,
            "odds_ratio_bound": odds,
            "membership_guess_accuracy_at_most": (odds + self.delta) / (1 + odds),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "leteo_fed_version": self.version,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "released": self.released,
            "guarantee": self.guarantee(),
            "budget": self.budget,
            "utility": self.utility,
            "risk": self.risk,
            "parameters": self.parameters,
            "reproduce": self.reproduce,
            "warnings": list(self.warnings),
        }

    def page(self) -> Page:
        g = self.guarantee()
        page = Page(f"Release report: {self.title}", f"leteo-fed {self.version}")
        if self.holder_note:
            page.paragraph(self.holder_note, "note")
        page.section("What was released")
        page.pairs(self.released.items())
        if self.warnings:
            page.section("Warnings", "Released figures the noise buries: read them as noise.")
            page.table(["figure", "warning"], [(w["figure"], w["message"]) for w in self.warnings])
        model = (
            f"{self.epsilon:g}-differential privacy (pure)"
            if self.delta == 0
            else f"({self.epsilon:g}, {self.delta:g})-differential privacy"
        )
        page.section(
            "The guarantee",
            f"{model}, {self.adjacency}: whether any one person's row was in the data changes "
            f"the probability of any output by a factor of at most e^epsilon = "
            f"{g['odds_ratio_bound']:.3g}"
            + (f" (except with probability delta = {self.delta:g})" if self.delta else "")
            + ". Everything released is computed from noisy values and public parameters.",
        )
        page.pairs(
            [("epsilon", self.epsilon), ("delta", self.delta), ("accountant", self.accountant)]
        )
        page.table(["part of the budget", "value"], self.budget.items())
        page.section("Utility", self.utility_note)
        if self.utility:
            page.pairs(self.utility.items())
        for png, caption in self.figures:
            page.figure(png, caption)
        page.section(
            "Re-identification risk",
            "Bounded by the guarantee: at a 50/50 prior, no attack on the release tells whether "
            "a given person's row was used with accuracy above "
            f"{g['membership_guess_accuracy_at_most']:.4f} (0.5 is a coin toss). " + self.risk_note,
        )
        if self.risk:
            page.pairs(self.risk.items())
        page.section("Parameters and where they came from")
        page.table(
            ["parameter", "value", "source"],
            [(name, e["value"], e["source"]) for name, e in self.parameters.items()],
        )
        page.section("How to reproduce it", self.reproduce_note)
        page.code(self.reproduce or "(the command line was not recorded: library call)")
        return page
