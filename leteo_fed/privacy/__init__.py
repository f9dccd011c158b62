"""Differential-privacy building blocks: the per-owner budget ledger and distributed noise."""

from __future__ import annotations

from leteo_fed.errors import LeteoError


class BudgetExceeded(LeteoError):
    """A privacy charge or reservation would take a ledger past its total epsilon or delta.

    Raised before anything is written: the ledger file is unchanged and no data was touched.
    """


__all__ = ["BudgetExceeded"]
