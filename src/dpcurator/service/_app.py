"""The HTTP interface (FastAPI on uvicorn): every request authenticated, every refusal a clear 4xx.

Endpoints (JSON; ``Authorization: Bearer dpk_...`` on every one but ``/healthz``):

=================================  =============================================================
``GET  /api/v1/tables``            the tables you may query, with their public metadata
``GET  /api/v1/tables/{t}/dummy``  a dummy table from the metadata only (``?rows=``; free)
``POST /api/v1/explain``           a query's plan, cost and predicted noise; free
``POST /api/v1/query``             answer a query: charged to your and the table's budget
``GET  /api/v1/me``                your budgets, spent and remaining, per table
``GET  /api/v1/history``           your own charges (the steward's key: everyone's)
``GET  /dashboard``                the dashboard (HTML; log in at ``/login`` with a key)
=================================  =============================================================

Errors are ``{"error": <type>, "message": <text>}``: 400 for a malformed request or a query the
curator refuses, 401 for a missing, unknown or revoked key, 403 for a table that is not yours or
a budget that would be exceeded, 404, 413 for a body over the limit, 429 over the rate limit
(with ``Retry-After``), 503 when the ledger store is unreachable; nothing is spent by any of
them. A query that fails after it was charged (and may have read data) is answered 500 with one
fixed text. No response carries a stack trace, and no endpoint runs SQL without noise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from dpcurator.client._errors import (
    INTERNAL_TEXT,
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    RateLimitedError,
    http_status,
)
from dpcurator.errors import DPError
from dpcurator.noise import secret_bytes
from dpcurator.service._config import ServerConfig, load_config
from dpcurator.service._curator import ServiceCurator, check_table_name, parse_request
from dpcurator.service._dashboard import COOKIE, login_page, render_dashboard
from dpcurator.service._keys import parse_key
from dpcurator.service._limits import BodyLimit, RateLimiter, padded_delay
from dpcurator.service._store import Identity

__all__ = ["CONFIG_ENV", "app_from_environment", "create_app"]

CONFIG_ENV = "DPCURATOR_SERVER_CONFIG"
"""The environment variable through which ``dpcurator serve`` names the config to each worker."""


_LOG = logging.getLogger("dpcurator.service")

T = TypeVar("T")


def _error(exc: DPError) -> JSONResponse:
    headers = {}
    if isinstance(exc, RateLimitedError):
        headers["Retry-After"] = str(max(1, round(exc.retry_after + 0.5)))
    return JSONResponse(
        {"error": type(exc).__name__, "message": str(exc)},
        status_code=http_status(exc),
        headers=headers,
    )


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _itself(who: Identity) -> Identity:
    return who


class _Gate:
    """Authentication and the per-key rate limit."""

    def __init__(self, curator: ServiceCurator, limiter: RateLimiter) -> None:
        self.curator = curator
        self.limiter = limiter

    async def run_as(
        self, request: Request, work: Callable[[Identity], T], *, cookie: bool = False
    ) -> T:
        """Authenticate ``request`` and run ``work(identity)``, both in one worker thread."""
        text = _bearer(request)
        if text is None and cookie:
            text = request.cookies.get(COOKIE)
        return await self.check(text, _address(request), work)

    async def check(self, text: str | None, address: str, work: Callable[[Identity], T]) -> T:
        """Authenticate a presented key, counting the try against a rate first; then ``work``.

        A well-formed key counts against its key id's bucket, taken before the key is checked,
        so that nobody can make the server run scrypt faster than the rate allows for one key
        id (unknown ids cost no scrypt). A missing or malformed key, and every failed
        authentication, count against the caller's address: one address cannot probe keys
        faster than the rate either, whatever ids it makes up. The key's check and ``work`` run
        in one worker thread (one hand-over from the event loop per request).
        """
        parsed = None if text is None else parse_key(text)
        bucket = f"address:{address}"
        wait = self.limiter.take(bucket) if parsed is None else self.limiter.wait(bucket)
        if parsed is not None and wait == 0:
            wait = self.limiter.take(f"key:{parsed[0]}")
        if wait > 0:
            raise RateLimitedError(
                f"Too many requests; retry in {wait:.1f} s. Nothing was read.", retry_after=wait
            )
        authenticate = self.curator.store.authenticate
        try:
            return await anyio.to_thread.run_sync(lambda: work(authenticate(text)))
        except AuthenticationError:
            if parsed is not None:
                self.limiter.take(bucket)
            raise


def _address(request: Request) -> str:
    """Return the caller's address (the forwarded one when uvicorn is told to trust a proxy)."""
    return request.client.host if request.client is not None else "unknown"


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        raise BadRequestError(
            'The request body must be JSON: {"query": ..., "epsilon": ...}.'
        ) from None


def _limit_threads(count: int) -> None:
    """Let at most ``count`` requests work at once (the worker threads' limiter)."""
    anyio.to_thread.current_default_thread_limiter().total_tokens = count


def create_app(curator: ServiceCurator) -> FastAPI:
    """Build the ASGI application serving ``curator`` (its limits from ``curator.config``).

    The returned application is wrapped in :class:`~dpcurator.service.BodyLimit`; its
    ``state.curator`` is the curator.
    """
    config = curator.config
    limits = config.limits
    gate = _Gate(curator, RateLimiter(limits.rate_per_minute))
    app = FastAPI(
        title="dpcurator",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        on_startup=[lambda: _limit_threads(limits.concurrent_requests)],
        on_shutdown=[curator.close],
    )
    app.state.curator = curator

    @app.exception_handler(DPError)
    async def refused(request: Request, exc: DPError) -> Response:
        return _error(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            return _error(NotFoundError(f"No such endpoint: {request.url.path}."))
        return JSONResponse(
            {"error": "HTTPError", "message": "The request was not understood."},
            status_code=exc.status_code if 400 <= exc.status_code < 500 else 400,
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        fields = sorted({str(e.get("loc", ("?",))[-1]) for e in exc.errors()})
        return _error(BadRequestError(f"Invalid value of {', '.join(fields)} in the request."))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        # the steward's log gets the trace; the analyst one fixed text
        _LOG.error("Internal error on %s", request.url.path, exc_info=exc)
        return JSONResponse({"error": "InternalError", "message": INTERNAL_TEXT}, status_code=500)

    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/api/v1/tables")
    async def tables(request: Request) -> dict[str, Any]:
        return {"tables": await gate.run_as(request, curator.tables)}

    @app.get("/api/v1/tables/{table}/dummy")
    async def dummy(request: Request, table: str, rows: int = 100) -> dict[str, Any]:
        name = check_table_name(table)
        return await gate.run_as(request, lambda who: curator.dummy(who, name, rows))

    @app.get("/api/v1/me")
    async def me(request: Request) -> dict[str, Any]:
        return await gate.run_as(request, curator.standing)

    @app.get("/api/v1/history")
    async def history(request: Request, limit: int = 1000) -> dict[str, Any]:
        most = max(1, min(limit, 10_000))
        return {"entries": await gate.run_as(request, lambda who: curator.history(who, most))}

    @app.post("/api/v1/explain")
    async def explain(request: Request) -> dict[str, Any]:
        raw = await request.body()

        def explained(who: Identity) -> dict[str, Any]:
            body = parse_request(
                _json(raw), max_query_chars=limits.max_query_chars, needs_epsilon=False
            )
            return curator.explain(who, body)

        return await gate.run_as(request, explained)

    @app.post("/api/v1/query")
    async def query(request: Request) -> Response:
        started = time.monotonic()
        raw = await request.body()

        def answered(who: Identity) -> tuple[bool, str]:
            body = parse_request(
                _json(raw), max_query_chars=limits.max_query_chars, needs_epsilon=True
            )
            return curator.query(who, body, body.request_id or secret_bytes(16).hex())

        # Not cancellable: a client that disconnects is charged all the same, and the answer
        # is stored with the charge (the same request id gets it again).
        ok, text = await gate.run_as(request, answered)
        await asyncio.sleep(
            padded_delay(
                time.monotonic() - started,
                minimum=limits.min_response_ms / 1000,
                quantum=limits.response_quantum_ms / 1000,
            )
        )
        return Response(text, status_code=200 if ok else 500, media_type="application/json")

    _dashboard_routes(app, gate)
    return app


def _dashboard_routes(app: FastAPI, gate: _Gate) -> None:
    curator = gate.curator

    @app.get("/")
    async def root() -> Response:
        return RedirectResponse("/dashboard", status_code=303)

    @app.get("/login")
    async def login_form() -> Response:
        return HTMLResponse(login_page())

    @app.post("/login")
    async def login(request: Request) -> Response:
        from urllib.parse import parse_qs  # noqa: PLC0415

        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        key = (form.get("key") or [""])[0].strip()
        try:
            await gate.check(key, _address(request), _itself)
        except (AuthenticationError, RateLimitedError):
            return HTMLResponse(login_page("That key is unknown or revoked."), status_code=401)
        response = RedirectResponse("/dashboard", status_code=303)
        response.set_cookie(
            COOKIE,
            key,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            max_age=8 * 3600,
        )
        return response

    @app.get("/logout")
    async def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    @app.get("/dashboard")
    async def dashboard(request: Request) -> Response:
        try:
            html = await gate.run_as(
                request, lambda who: render_dashboard(curator, who), cookie=True
            )
        except AuthenticationError:
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(html)

    @app.get("/dashboard/data")
    async def dashboard_data(request: Request) -> dict[str, Any]:
        return await gate.run_as(request, curator.standing, cookie=True)


def wrap(app: FastAPI, config: ServerConfig) -> BodyLimit:
    """``app`` behind the body-size limit of ``config``."""
    return BodyLimit(app, config.limits.max_body_bytes)


def app_from_environment() -> BodyLimit:
    """Build the application of the config in ``$DPCURATOR_SERVER_CONFIG`` (for uvicorn)."""
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(f"{CONFIG_ENV} must name the server's config file")
    config = load_config(path)
    return wrap(create_app(ServiceCurator(config)), config)
