"""The trusted curator: holds the data, answers queries privately, and keeps the books.

Being built; the ledger first: :class:`Ledger` durably records every release (time, query text,
privacy events, epsilon and delta charged, budget left) in an SQLite file and refuses any release
that would exceed the budget; reopening the file resumes the spent budget.

Examples
--------
>>> import os, tempfile
>>> from dpcurator.accounting import Budget, GaussianEvent
>>> from dpcurator.curator import Ledger
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.sqlite")
>>> with Ledger(path, budget=Budget(1.0, 1e-5), accountant="zcdp") as ledger:
...     entry = ledger.record("SELECT SUM(x) FROM t", [GaussianEvent(sigma=10.0)])
>>> 0.0 < entry.charged.epsilon < 1.0 and entry.charged.delta <= 1e-5
True
"""

from __future__ import annotations

from dpcurator.curator._ledger import Ledger, LedgerEntry

__all__ = ["Ledger", "LedgerEntry"]
