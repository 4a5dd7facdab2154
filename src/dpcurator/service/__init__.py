"""The curator as a service: analysts query over HTTP, the data never leaves the steward.

- Configuration: :func:`load_config` reads ``server.toml`` into a :class:`ServerConfig` (the
  declared tables with a global budget each, the analysts with a budget per table, the
  accountant, the ledger store, the :class:`Limits`).
- :class:`LedgerStore`: analysts, keys (scrypt hashes only), budgets, every charge with its
  answer, refusals and the steward's audit trail, in SQLite or PostgreSQL; a query is charged
  to the analyst's and the table's budget at once, durably, before any data is read.
- :class:`ServiceCurator`: plans, charges and answers queries through one
  :class:`~dpcurator.curator.Session` per table; what an analyst may see.
- :func:`create_app` (FastAPI), :func:`app_from_environment` (the uvicorn factory of
  ``dpcurator serve``): authentication, rate and size limits, padded response times, the
  dashboard.

The analyst's side is :mod:`dpcurator.client`. The steward's commands are ``dpcurator serve``
and ``dpcurator admin``.

Examples
--------
>>> from dpcurator.service import padded_delay
>>> padded_delay(0.02, minimum=0.1, quantum=0.05)
0.08
"""

from __future__ import annotations

from dpcurator.client._errors import (
    FAILED_TEXT,
    INTERNAL_TEXT,
    AuthenticationError,
    BadRequestError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTooLargeError,
    ServiceError,
    StoreUnavailableError,
    http_status,
)
from dpcurator.service._app import CONFIG_ENV, app_from_environment, create_app, wrap
from dpcurator.service._config import (
    AnalystConfig,
    Limits,
    ServerConfig,
    TableConfig,
    load_config,
)
from dpcurator.service._curator import ServiceCurator, noise_std, table_metadata
from dpcurator.service._keys import IssuedKey, new_key, parse_key
from dpcurator.service._limits import BodyLimit, RateLimiter, padded_delay
from dpcurator.service._store import STEWARD, Charge, ChargeRecord, Identity, LedgerStore

__all__ = [
    "CONFIG_ENV",
    "FAILED_TEXT",
    "INTERNAL_TEXT",
    "STEWARD",
    "AnalystConfig",
    "AuthenticationError",
    "BadRequestError",
    "BodyLimit",
    "Charge",
    "ChargeRecord",
    "Identity",
    "IssuedKey",
    "LedgerStore",
    "Limits",
    "PermissionDeniedError",
    "RateLimitedError",
    "RateLimiter",
    "RequestTooLargeError",
    "ServerConfig",
    "ServiceCurator",
    "ServiceError",
    "StoreUnavailableError",
    "TableConfig",
    "app_from_environment",
    "create_app",
    "http_status",
    "load_config",
    "new_key",
    "noise_std",
    "padded_delay",
    "parse_key",
    "table_metadata",
    "wrap",
]
