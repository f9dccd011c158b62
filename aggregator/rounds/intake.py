"""What a round's contributions go into, whatever their kind: one interface for the engine.

A secure-sum round keeps its owners' signed shares for the CSP (`secure_sum.SignedShares`); a
report round folds LDP reports into its protocol's accumulator (`report_intake.ReportIntake`).
The engine does the same few things with either: it names the intake's key and slot layout in
the round's spec, folds every accepted upload into it, has it reveal the round's aggregate, and
cleans it up once the round has ended. Only reading an upload off the wire differs by kind (the
service's `SubmitShare` and `SubmitReports`).
"""

from __future__ import annotations

from typing import Any, Protocol

from leteo_fed.encoding.packing import SlotLayout
from leteo_fed.protocols.round_types import Outcome


class RoundIntake(Protocol):
    """A round's intake, as the round engine uses it (see above)."""

    @property
    def key_id(self) -> str:
        """The CSP key the round's shares are encrypted under ("": reports are not)."""
        ...

    @property
    def layout(self) -> SlotLayout | None:
        """How values are packed into the shares' ciphertexts (None: reports are not)."""
        ...

    def fold(self, contribution: Any) -> None:
        """Keep one owner's complete, validated upload (called under the round's lock)."""
        ...

    def reveal(self, outcome: Outcome) -> None:
        """Fill in the round's aggregate (totals, a projection or a report estimate)."""
        ...

    def cleanup(self) -> None:
        """The round has ended, whatever its outcome: drop what it no longer needs."""
        ...
