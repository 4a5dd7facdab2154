"""The service's refusals: :class:`~dpcurator.DPError` subclasses, each with its HTTP status.

Shared by the server (which raises them) and the client (which raises them again from a
response), so that both sides speak of the same errors.

Every error a client receives is one of these, or a library error mapped by :func:`http_status`
(a query the curator refuses, a bad parameter, a budget that would be exceeded): a JSON body
``{"error": <type>, "message": <text>}`` with a 4xx status, and nothing spent. The one error
raised after data was read, :class:`~dpcurator.errors.QueryFailedError`, has one fixed text and
one fixed status whatever happened (:data:`FAILED_TEXT`); anything unexpected is answered with
:data:`INTERNAL_TEXT`, never a stack trace.

Examples
--------
>>> from dpcurator.errors import BudgetExceededError, QueryError
>>> http_status(QueryError("no such column")), http_status(BudgetExceededError("over"))
(400, 403)
>>> http_status(AuthenticationError("unknown key"))
401
"""

from __future__ import annotations

from dpcurator.errors import (
    BudgetExceededError,
    DPError,
    InvalidParameterError,
    QueryError,
    QueryFailedError,
    UnsupportedError,
)

__all__ = [
    "FAILED_TEXT",
    "INTERNAL_TEXT",
    "AuthenticationError",
    "BadRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTooLargeError",
    "ServiceError",
    "StoreUnavailableError",
    "error_from_response",
    "http_status",
]

FAILED_TEXT = (
    "The query failed while running. It was charged before it read the data and nothing is "
    "refunded; the reason is not shown because it could depend on the data."
)
"""The one text of every failure after data was read (the status is always 500)."""

INTERNAL_TEXT = "Internal error: the server could not answer this request. Nothing was released."
"""The text of any unexpected failure before data was read (status 500)."""


class ServiceError(DPError):
    """A request the service refuses; :attr:`status` is its HTTP status."""

    status = 400


class BadRequestError(ServiceError):
    """The request is malformed: not JSON, a missing or ill-typed field, a query too long."""

    status = 400


class AuthenticationError(ServiceError):
    """No API key, or an unknown, malformed or revoked one (the message does not say which)."""

    status = 401


class PermissionDeniedError(ServiceError):
    """The key is valid, but not for this: a table the analyst has no budget on, a steward page."""

    status = 403


class NotFoundError(ServiceError):
    """No such resource (an unknown path)."""

    status = 404


class RequestTooLargeError(ServiceError):
    """The request body is larger than the server accepts."""

    status = 413


class RateLimitedError(ServiceError):
    """Too many requests with this key; :attr:`retry_after` says in how many seconds to retry."""

    status = 429

    def __init__(self, message: str, *, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class StoreUnavailableError(ServiceError):
    """The ledger store cannot be reached: nothing was read; retry with the same request id."""

    status = 503


def http_status(exc: DPError) -> int:
    """Return the HTTP status of a refusal (500 for a failure after data was read).

    Parameters
    ----------
    exc : DPError
        The error.

    Returns
    -------
    int
    """
    if isinstance(exc, ServiceError):
        return exc.status
    if isinstance(exc, QueryFailedError):
        return 500
    if isinstance(exc, BudgetExceededError):
        return 403
    if isinstance(exc, QueryError | InvalidParameterError | UnsupportedError):
        return 400
    return 500


_LIBRARY: dict[str, type[DPError]] = {
    "QueryError": QueryError,
    "QueryFailedError": QueryFailedError,
    "UnsupportedError": UnsupportedError,
}
_SERVICE: dict[str, type[ServiceError]] = {
    cls.__name__: cls
    for cls in (
        BadRequestError,
        AuthenticationError,
        PermissionDeniedError,
        NotFoundError,
        RequestTooLargeError,
        StoreUnavailableError,
    )
}


def error_from_response(status: int, kind: str, message: str, retry_after: float = 1.0) -> DPError:
    """Rebuild the error a server answered (its type name and message) on the client's side.

    Examples
    --------
    >>> error_from_response(403, "BudgetExceededError", "Refused: over budget.")
    BudgetExceededError('Refused: over budget.')
    >>> type(error_from_response(400, "InvalidParameterError", "epsilon must be > 0")).__name__
    'BadRequestError'
    """
    if kind == "BudgetExceededError":
        return BudgetExceededError(message)
    if kind == "RateLimitedError":
        return RateLimitedError(message, retry_after=retry_after)
    if kind in _LIBRARY:
        return _LIBRARY[kind](message)
    if kind in _SERVICE:
        return _SERVICE[kind](message)
    if 400 <= status < 500:
        return BadRequestError(message)
    return ServiceError(f"The server answered {status}: {message}")
