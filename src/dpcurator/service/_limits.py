"""Request limits: body size (an ASGI middleware), per-key rates, padded response times.

Timing padding and what it leaves
---------------------------------
A query's latency could tell an analyst about the data beyond the noisy answer (how many rows
a filter kept, how many groups or units were beyond their bounds, the noise sampler's rare slow
path). The service sends a query's answer -- or its failure -- no sooner than
``min_response_ms`` after the request arrived, and at a multiple of ``response_quantum_ms``
(:func:`padded_delay`). A query that runs in less than the minimum has a latency independent of
the data. The residual risk: a query that runs longer than the minimum shows which quantum its
running time fell in (about ``log2(seconds / quantum)`` bits per query at most, usually far
less), and an analyst can observe the server's load through other queries and other analysts'
latencies; set ``min_response_ms`` above the slowest query's running time to close the first,
and give analysts separate servers to close the second. Refusals are decided before any data is
read and are not padded.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["BodyLimit", "RateLimiter", "padded_delay"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def padded_delay(elapsed: float, *, minimum: float, quantum: float) -> float:
    """Seconds to wait after ``elapsed`` so that the total is ``max(minimum, k * quantum)``.

    ``k`` is the smallest integer with ``k * quantum >= elapsed``.

    >>> padded_delay(0.01, minimum=0.1, quantum=0.05)
    0.09
    >>> round(padded_delay(0.12, minimum=0.1, quantum=0.05), 6)
    0.03
    """
    target = max(minimum, math.ceil(elapsed / quantum) * quantum) if quantum > 0 else minimum
    return max(0.0, round(target - elapsed, 9))


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests a minute, bursts of up to that many.

    Each server process has its own buckets (with ``n`` workers a key may make up to ``n``
    times the rate). A bucket idle for a minute is full again and is forgotten, so that keys
    made up by a caller cost no memory beyond a minute's requests.

    Examples
    --------
    >>> limiter = RateLimiter(per_minute=2)
    >>> limiter.take("k", now=0.0), limiter.take("k", now=0.0), limiter.take("k", now=0.0) > 0
    (0.0, 0.0, True)
    >>> limiter.take("k", now=30.0)  # one token back after 30 s
    0.0
    >>> limiter.wait("k", now=30.0) > 0  # looks without taking
    True
    """

    _PRUNE_EVERY = 1024

    def __init__(self, per_minute: int) -> None:
        self._rate = per_minute / 60.0
        self._capacity = float(per_minute)
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}
        self._since_prune = 0

    def _tokens(self, key: str, moment: float) -> float:
        tokens, last = self._buckets.get(key, (self._capacity, moment))
        return min(self._capacity, tokens + (moment - last) * self._rate)

    def wait(self, key: str, *, now: float | None = None) -> float:
        """Seconds until ``key`` has a token (0 if it has one now); takes nothing."""
        moment = time.monotonic() if now is None else now
        with self._lock:
            return max(0.0, (1.0 - self._tokens(key, moment)) / self._rate)

    def take(self, key: str, *, now: float | None = None) -> float:
        """Take one token for ``key``: 0 if allowed, else the seconds until one is available."""
        moment = time.monotonic() if now is None else now
        with self._lock:
            tokens = self._tokens(key, moment)
            self._prune(moment)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, moment)
                return 0.0
            self._buckets[key] = (tokens, moment)
            return (1.0 - tokens) / self._rate

    def __len__(self) -> int:
        return len(self._buckets)

    def _prune(self, moment: float) -> None:
        """Forget the buckets that have refilled (every ``_PRUNE_EVERY`` takes)."""
        self._since_prune += 1
        if self._since_prune < self._PRUNE_EVERY:
            return
        self._since_prune = 0
        full = self._capacity / self._rate
        for key in [k for k, (_, last) in self._buckets.items() if moment - last >= full]:
            del self._buckets[key]


class BodyLimit:
    """ASGI middleware: refuse an HTTP request whose body exceeds ``max_bytes`` (413, JSON).

    The body is read (up to the limit) before the application sees the request, whether or
    not it declares a ``Content-Length``; a declared length over the limit is refused at once.

    Parameters
    ----------
    app : ASGI application
    max_bytes : int
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Buffer the body (refusing one too large), then call the application."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        text = json.dumps(
            {
                "error": "RequestTooLargeError",
                "message": f"The request body is larger than {self.max_bytes} bytes, the most "
                "this server accepts. Nothing was read or spent.",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(text)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": text})
