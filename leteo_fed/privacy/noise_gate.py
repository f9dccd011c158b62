"""Is a DP round worth its budget? Checked from public parameters before anything is sent.

A DP release whose expected error is larger than the largest value the statistic can take
(given the public bounds) is noise whatever the data: paying epsilon for it wastes the sites'
budget. Each protocol's noise preview states, per released statistic, its expected error (one
standard deviation) and that largest signal; `drowned` picks the ones the noise buries, and the
analyst's command refuses the round before inviting anyone unless told `--accept-noise`.

The comparison is deliberately lenient (against the largest possible signal, not the likely
one): it refuses only rounds that cannot be useful, never a round that is merely noisy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from leteo_fed.defaults import DEFAULT_MIN_ROWS
from leteo_fed.errors import DataError

# what changes the ratio of noise to signal, in the order an analyst should try it
SECURE_SUM_FIXES = (
    "give public bounds per column near the data's real range (`bounds` COL=LO,HI; without "
    "them, scale the features and lower `row_norm_bound` to match)",
    "raise `scale_bits`",
    "raise epsilon",
    "give `rows` N if the pooled row count is larger",
)
LOCAL_FIXES = (
    "raise `epsilon`",
    "choose a mechanism with a smaller variance (olh or oue for large domains, pm or hm for means)",
    "give `rows` N if more records will report",
)


class NoiseWarning(UserWarning):
    """A released figure is mostly noise or clipping: what the Python API warns with (the CLI
    prints the same text as a `warning:` line and writes it under "warnings" in the result)."""


@dataclass(frozen=True)
class ReleaseWarning:
    """One released figure the noise (or clipping) buries, said after the release."""

    figure: str  # e.g. "coefficient age", "eigenvalue 2", "cluster 3"
    message: str  # one readable sentence, ending with what to change

    def to_dict(self) -> dict:
        return {"figure": self.figure, "message": self.message}


def warn_all(found: Iterable[ReleaseWarning]) -> None:
    """The Python API's side: one NoiseWarning per buried figure (never a print)."""
    import warnings

    for w in found:
        warnings.warn(w.message, NoiseWarning, stacklevel=3)


@dataclass(frozen=True)
class SignalCheck:
    """One released statistic: its expected error against the largest value it can take."""

    statistic: str
    expected_error: float
    largest_signal: float

    @property
    def drowned(self) -> bool:
        return not self.expected_error <= self.largest_signal  # NaN counts as drowned

    def to_dict(self) -> dict:
        return {
            "statistic": self.statistic,
            "expected_error": self.expected_error,
            "largest_signal": self.largest_signal,
            "drowned": self.drowned,
        }


def rows_to_assume(rows: int | None, quorum: int) -> tuple[int, str]:
    """The pooled row count the check uses: the analyst's estimate, else the fewest rows a
    round can have under the owners' default policy (each of the quorum's sites keeps at least
    `min_rows` = DEFAULT_MIN_ROWS rows)."""
    if rows is not None:
        if rows < 2:
            raise DataError(f"`rows` must be at least 2, got {rows}", field="rows")
        return rows, "your `rows` estimate"
    sites = max(1, quorum)
    return sites * DEFAULT_MIN_ROWS, (
        f"the fewest rows the owners' default policy admits ({sites} site(s) x min_rows "
        f"{DEFAULT_MIN_ROWS}); give `rows` N for your estimate"
    )


def drowned(checks: Iterable[SignalCheck]) -> list[SignalCheck]:
    return [c for c in checks if c.drowned]


def refusal(
    buried: list[SignalCheck], rows: int, basis: str, fixes: Sequence[str] = SECURE_SUM_FIXES
) -> str:
    """The analyst's error: which statistics the noise buries, at which row count, and what to
    change. No budget has been spent when this is shown."""
    worst = ", ".join(
        f"{c.statistic} +/- {c.expected_error:.3g} (at most {c.largest_signal:.3g})"
        for c in buried[:4]
    )
    more = f" and {len(buried) - 4} more" if len(buried) > 4 else ""
    return (
        f"refused before any budget is spent: at {rows} pooled rows ({basis}) the noise would "
        f"exceed the largest value these statistics can take: {worst}{more}. To fix: "
        + "; ".join(fixes)
        + ". Run with `dry_run` to see every figure, or `accept_noise` to pay for it anyway."
    )
