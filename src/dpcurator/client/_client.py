"""The analyst's client: the curator's service over HTTP, with the local session's objects.

:class:`Client` speaks to ``dpcurator serve`` with an API key and returns what a local
:class:`~dpcurator.curator.Session` returns: :meth:`Client.sql` gives a
:class:`~dpcurator.curator.QueryRelease` (the same table, split, events, charge and budget left,
rebuilt exactly from JSON by :mod:`dpcurator.client._wire`), and a refusal raises the same
:class:`~dpcurator.DPError` subclass (:class:`~dpcurator.errors.BudgetExceededError`,
:class:`~dpcurator.errors.QueryError` ...) with the server's message.

Every query carries a request id (random, from :func:`dpcurator.noise.secret_bytes`). If the
connection breaks or the server is briefly unavailable, the client sends the same request again
with the same id, a bounded number of times: the server charges a request id once and answers it
with the answer it stored, so a retry neither pays twice nor gets a second answer.
"""

from __future__ import annotations

import ssl
import time
from types import TracebackType
from typing import Any, Self

import httpx
import pandas as pd

from dpcurator.client._errors import RateLimitedError, StoreUnavailableError, error_from_response
from dpcurator.client._wire import release_from_dict
from dpcurator.curator import QueryRelease
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.noise import secret_bytes

__all__ = ["Client", "ConnectionFailedError"]


class ConnectionFailedError(DPError):
    """The server could not be reached (after the retries); the query may have been charged."""


class Client:
    """Query a dpcurator server with an API key.

    Parameters
    ----------
    url : str
        The server, e.g. ``"https://curator.example.org"`` or ``"http://127.0.0.1:8750"``.
    key : str
        The analyst's API key (``dpk_...``), as the steward issued it.
    timeout : float, default 120
        Seconds to wait for an answer.
    retries : int, default 3
        How many times a query is sent again (same request id) after a broken connection, a
        503 or a 429.
    verify : bool or str, default True
        TLS verification (a CA bundle path for a private CA).

    Examples
    --------
    >>> client = Client("http://127.0.0.1:1", "dpk_000000000000_" + "A" * 43, retries=0,
    ...                 timeout=1.0)
    >>> client.tables()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.client._client.ConnectionFailedError: Could not reach http://127.0.0.1:1 ...
    >>> client.close()
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        timeout: float = 120.0,
        retries: int = 3,
        verify: bool | str = True,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidParameterError("url", url, "must be an http:// or https:// URL")
        if not isinstance(key, str) or not key:
            raise InvalidParameterError("key", "<hidden>", "must be the API key (dpk_...)")
        self.url = url.rstrip("/")
        self._retries = retries
        trust: bool | ssl.SSLContext = (
            ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        )
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
            verify=trust,
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send a request (again on a broken connection, 503 or 429); return its JSON."""
        attempt = 0
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if attempt >= self._retries:
                    raise ConnectionFailedError(
                        f"Could not reach {self.url} ({type(exc).__name__}). A query sent may "
                        "have been charged; send it again with the same request_id to get its "
                        "answer without paying twice."
                    ) from None
            else:
                if response.status_code < 400:
                    return response.json()
                error = _error(response)
                retriable = isinstance(error, StoreUnavailableError | RateLimitedError)
                if not retriable or attempt >= self._retries:
                    raise error
                if isinstance(error, RateLimitedError):
                    time.sleep(min(error.retry_after, 30.0))
            attempt += 1
            time.sleep(min(0.25 * 2**attempt, 2.0))

    # -- the API -----------------------------------------------------------------------------
    def tables(self) -> list[dict[str, Any]]:
        """Return the tables you may query, with their public metadata."""
        return list(self._call("GET", "/api/v1/tables")["tables"])

    def explain(self, query: str, *, epsilon: float = 1.0, delta: float = 0.0) -> dict[str, Any]:
        """Return a query's plan: its split, predicted noise and what it would charge (free)."""
        body = {"query": query, "epsilon": epsilon, "delta": delta}
        return dict(self._call("POST", "/api/v1/explain", json=body))

    def sql(
        self, query: str, *, epsilon: float, delta: float = 0.0, request_id: str | None = None
    ) -> QueryRelease:
        """Answer a query with differential privacy, charged to your budget and the table's.

        Parameters
        ----------
        query : str
            The aggregate SQL (as for :meth:`Session.sql`).
        epsilon, delta : float
            The query's budget.
        request_id : str, optional
            Identifies the request (default: a new random one); sending it again returns the
            stored answer, charged once.

        Raises
        ------
        QueryError, BudgetExceededError, PermissionDeniedError ...
            Refusals (nothing spent).
        QueryFailedError
            The query was charged and failed (one fixed message).
        """
        body = {
            "query": query,
            "epsilon": epsilon,
            "delta": delta,
            "request_id": request_id or secret_bytes(16).hex(),
        }
        answer = self._call("POST", "/api/v1/query", json=body)
        return release_from_dict(answer["release"])

    def query(
        self, query: str, *, epsilon: float, delta: float = 0.0, request_id: str | None = None
    ) -> QueryRelease:
        """Do the same as :meth:`sql`."""
        return self.sql(query, epsilon=epsilon, delta=delta, request_id=request_id)

    def dummy(self, table: str, rows: int = 100) -> pd.DataFrame:
        """Return a dummy table: the declared columns, values drawn from the metadata (free)."""
        raw = self._call("GET", f"/api/v1/tables/{table}/dummy", params={"rows": rows})
        return pd.DataFrame(dict(zip(raw["columns"], raw["data"], strict=True)))

    def budget(self) -> dict[str, Any]:
        """Return your budget, spent and remaining per table (and each table's remaining)."""
        return dict(self._call("GET", "/api/v1/me"))

    def history(self, limit: int = 1000) -> list[dict[str, Any]]:
        """Return your own charges, newest first."""
        return list(self._call("GET", "/api/v1/history", params={"limit": limit})["entries"])

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _error(response: httpx.Response) -> DPError:
    try:
        raw = response.json()
        kind, message = str(raw["error"]), str(raw["message"])
    except (ValueError, KeyError, TypeError):
        kind, message = "", response.text[:500]
    retry = response.headers.get("retry-after", "1")
    return error_from_response(
        response.status_code, kind, message, float(retry) if retry.isdigit() else 1.0
    )
