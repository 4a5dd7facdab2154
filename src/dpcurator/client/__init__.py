"""The analyst's side of the curator as a service: a client that returns local objects.

- :class:`Client`: tables and their public metadata, :meth:`~Client.explain` (free),
  :meth:`~Client.sql` (a :class:`~dpcurator.curator.QueryRelease`, as a local session returns),
  :meth:`~Client.dummy` (a table made from the metadata only), :meth:`~Client.budget` and
  :meth:`~Client.history` (your own).
- Errors: the server's refusals come back as the same :class:`~dpcurator.DPError` subclasses
  (:class:`~dpcurator.errors.BudgetExceededError`, :class:`~dpcurator.errors.QueryError`,
  :class:`AuthenticationError`, :class:`PermissionDeniedError`, :class:`RateLimitedError` ...).
- The wire format: :func:`release_to_json` / :func:`release_from_json` (exact round trips).

Examples
--------
>>> from dpcurator.client import Client, release_from_json, release_to_json
>>> sorted(name for name in dir(Client) if not name.startswith("_"))
['budget', 'close', 'dummy', 'explain', 'history', 'query', 'sql', 'tables']
"""

from __future__ import annotations

from dpcurator.client._client import Client, ConnectionFailedError
from dpcurator.client._errors import (
    FAILED_TEXT,
    INTERNAL_TEXT,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTooLargeError,
    ServiceError,
    StoreUnavailableError,
    error_from_response,
    http_status,
)
from dpcurator.client._wire import (
    budget_from_json,
    budget_to_json,
    frame_from_json,
    frame_to_json,
    release_from_dict,
    release_from_json,
    release_to_dict,
    release_to_json,
)

__all__ = [
    "FAILED_TEXT",
    "INTERNAL_TEXT",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConnectionFailedError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTooLargeError",
    "ServiceError",
    "StoreUnavailableError",
    "budget_from_json",
    "budget_to_json",
    "error_from_response",
    "frame_from_json",
    "frame_to_json",
    "http_status",
    "release_from_dict",
    "release_from_json",
    "release_to_dict",
    "release_to_json",
]
