"""Rate limiting after repeated auth failures: a client address that fails the token check
`limit` times within `window_s` seconds is answered `429` (with `Retry-After`) on every route
but `/health` until `window_s` seconds after its last counted failure have passed.

It counts the 401/403 answers going out, so it needs no knowledge of how a route checks the
token. The address is the TCP peer's: X-Forwarded-For, which a client can forge, counts only
from the proxies a service is told to trust (`*_FORWARDED_ALLOW_IPS`, applied by uvicorn in
`server_config`). Behind an untrusted reverse proxy every client shares its address and budget.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Addresses tracked at once; past this the stalest are forgotten (a flood of spoofed IPv6
# sources must not grow memory without bound).
MAX_TRACKED = 10_000
_EXEMPT = ("/health",)


class AuthFailureLimiter:
    """The bookkeeping, apart from ASGI (and with an injectable clock) so it tests directly."""

    def __init__(
        self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._locked_until: dict[str, float] = {}

    def retry_after(self, client: str) -> int | None:
        """Seconds this client must wait, or None when it may go ahead."""
        until = self._locked_until.get(client)
        if until is None:
            return None
        left = until - self._clock()
        if left <= 0:
            del self._locked_until[client]
            self._failures.pop(client, None)
            return None
        return max(1, math.ceil(left))

    def failed(self, client: str) -> bool:
        """Count one failure; True when it locks the client out."""
        now = self._clock()
        failures = self._failures.pop(client, None) or deque()
        self._failures[client] = failures  # re-inserted: dict order is least recently failed
        failures.append(now)
        while failures and failures[0] <= now - self.window_s:
            failures.popleft()
        locked = len(failures) >= self.limit
        if locked:
            self._locked_until[client] = now + self.window_s
        if len(self._failures) > MAX_TRACKED or len(self._locked_until) > MAX_TRACKED:
            self._forget_stalest()
        return locked

    def _forget_stalest(self) -> None:
        for table in (self._failures, self._locked_until):
            for client in list(table)[: len(table) - MAX_TRACKED]:
                del table[client]


class AuthFailureLimitMiddleware:
    """ASGI middleware around the whole app; `limit=0` turns it off."""

    def __init__(self, app: ASGIApp, limit: int, window_s: float) -> None:
        self.app = app
        self.limiter = AuthFailureLimiter(limit, window_s) if limit > 0 else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limiter = self.limiter
        if limiter is None or scope["type"] != "http" or scope["path"] in _EXEMPT:
            await self.app(scope, receive, send)
            return
        client = scope["client"][0] if scope.get("client") else "unknown"
        wait = limiter.retry_after(client)
        if wait is not None:
            response = JSONResponse(
                {"detail": "too many failed token checks from this address; retry later"},
                status_code=429,
                headers={"Retry-After": str(wait)},
            )
            await response(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in (401, 403):
                if limiter.failed(client):
                    log.warning(
                        "auth.locked_out", client=client, failures=limiter.limit,
                        window_s=limiter.window_s,
                    )  # fmt: skip
            await send(message)

        await self.app(scope, receive, counting_send)
