"""The ``dpcurator`` command line.

Commands: ``epsilon``, ``noise``, ``compose``, ``query``, ``ledger``, ``demo`` (the curator on
real data), ``tour`` (the foundation),
``local`` and ``audit`` (empirical privacy audits of every mechanism).
"""

from __future__ import annotations

from dpcurator.cli._app import app, main

__all__ = ["app", "main"]
