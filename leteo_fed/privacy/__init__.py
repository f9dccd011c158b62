"""Differential-privacy building blocks: budgets, mechanisms with their privacy maps, the
owner-side release check, the per-owner budget ledger and distributed noise.

The layer sits below the protocols: it imports only numpy/scipy, `leteo_fed.errors`,
`leteo_fed.fileio` and itself. Only the light budget module is imported here, so that importing
`leteo_fed.privacy` (e.g. from a Spark executor running an LDP oracle) does not load scipy.
"""

from __future__ import annotations

from leteo_fed.errors import LeteoError
from leteo_fed.privacy.budget import EPSILON_MAX, Balance, Budget, check_delta, check_epsilon


class BudgetExceeded(LeteoError):
    """A privacy charge or reservation would take a ledger past its total epsilon or delta.

    Raised before anything is written: the ledger file is unchanged and no data was touched.
    """


__all__ = ["EPSILON_MAX", "Balance", "Budget", "BudgetExceeded", "check_delta", "check_epsilon"]
