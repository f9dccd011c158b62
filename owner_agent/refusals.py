"""What a refusal tells the aggregator: the rule and a fixed sentence, never the data.

A decline reaches the aggregator, which may be the adversary. If its text said how many rows a
site has, its largest value, a label value or a file path, the aggregator could set a public
parameter to trigger it and read the data for free, again and again: nothing is sent, nothing
is charged. So a refusal that depends on the site's data leaves the site as `<rule>: <sentence>`
from the table below; the detail (counts, values, class values, paths) goes to the site's audit
log (`detail`) and its own log only. Refusals built from the round, the signed request and the
site's policy alone (`spec:`, `authorization:`, `policy.*`) carry nothing the aggregator did
not send or could not read from the policy, and keep their text.

Data-dependent refusals are counted per analyst in the audit log and limited by
`policy.data_refusals` per `policy.non_dp_window_days` (`policy.refusal`), so they cannot be
used as an oracle without bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from leteo_fed.errors import LeteoError

DATA_RULES = {
    "bounds": "a value is beyond the round's bound (raise --value-bound or rescale the column)",
    "values": "a value the round reads is missing or not a number",
    "rows": "the number of rows does not fit the round",
    "classes": "a value is outside the round's declared classes or domain (list every class)",
    "columns": "a column the round reads is not in this site's data",
    "policy.min_rows": "this site takes part only with at least policy.min_rows rows in the data "
    "a round reads",
    "data": "the site's data does not fit the round",
}
SITE_RULES = {
    "budget": "this site's privacy budget does not cover the round",
    "internal": "the site could not compute its share",
}
SENTENCES = DATA_RULES | SITE_RULES


@dataclass(frozen=True)
class Refusal:
    """A decline: `public` is all the aggregator receives; `detail` stays at the site."""

    public: str
    detail: str = ""
    data_dependent: bool = False  # counted against policy.data_refusals

    @classmethod
    def rule(cls, name: str, detail: str = "") -> Refusal:
        """A refusal by one of the fixed rules (`bounds`, `budget`...)."""
        return cls(f"{name}: {SENTENCES[name]}", detail or SENTENCES[name], name in DATA_RULES)

    @classmethod
    def said(cls, text: str) -> Refusal:
        """A refusal whose text is built from the round, the request and the policy only."""
        return cls(text, text)

    def facts(self) -> dict:
        """What the audit log records of it."""
        out: dict = {"reason": self.public}
        if self.detail != self.public:
            out["detail"] = self.detail
        if self.data_dependent:
            out["data_dependent"] = True
        return out


def from_error(exc: BaseException) -> Refusal:
    """The refusal for a problem met while computing a share (the site's data was read): the
    error's rule if it names one, else the generic `data` rule; a crash is `internal`."""
    if isinstance(exc, LeteoError):
        name = exc.rule if exc.rule in DATA_RULES else "data"
        return Refusal.rule(name, str(exc))
    return Refusal.rule("internal", f"{type(exc).__name__}: {exc}")
