"""The ``dpcurator`` command line: ``epsilon``, ``noise``, ``compose`` and ``demo``."""

from __future__ import annotations

from dpcurator.cli._app import app, main

__all__ = ["app", "main"]
