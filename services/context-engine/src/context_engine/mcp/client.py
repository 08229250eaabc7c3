"""`MemoryApi`: the engine's own REST API, as the MCP tools call it.

In the engine (`/mcp`) it reaches the app in process through `httpx.ASGITransport`: no
network hop, the same token check, validation and errors as any REST client, and the
engine's running state. Over stdio (`her-os mcp`) it calls a running engine over HTTP. The
token travels in the `X-Internal-Token` header only, never in a URL.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote

import httpx
from starlette.types import ASGIApp

from her_os_shared.auth import TOKEN_HEADER
from her_os_shared.ids import InvalidIdError, validate_id

# A forget waits this long for every store (then the engine answers 202 and its job goes on);
# the HTTP timeout leaves room for it.
FORGET_WAIT_S = 30.0
TIMEOUT_S = FORGET_WAIT_S + 30.0
# The name the in-process client gives the engine: requests never leave the process.
IN_PROCESS_BASE = "http://context-engine.in-process"
# The peer address in-process requests carry (the auth-failure lockout is per address: the
# tools' own calls must not share a budget with clients on 127.0.0.1).
IN_PROCESS_CLIENT = ("mcp-in-process", 0)

Params = Mapping[str, str | int | float | bool | None]


class MemoryApiError(Exception):
    """A REST call that did not succeed; its message is what the MCP client reads (the REST
    `detail`, or that the engine is unavailable), never a traceback."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _QuietRequests(logging.Filter):
    """httpx logs every request line at INFO, query string included: for these calls that is
    the owner's own question (`/v1/context?query=…`). Drop the lines of the hosts this module
    calls; other clients of the process keep theirs."""

    hosts: ClassVar[set[str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(isinstance(a, httpx.URL) and a.netloc.decode() in self.hosts for a in args)


_QUIET = _QuietRequests()


def _quiet(base_url: str) -> None:
    _QuietRequests.hosts.add(httpx.URL(base_url).netloc.decode())
    logger = logging.getLogger("httpx")
    if _QUIET not in logger.filters:
        logger.addFilter(_QUIET)


def path_id(value: str | int) -> str:
    """An id as one path segment. Ids are checked against `[A-Za-z0-9_-]{1,128}` before they
    reach a URL (a `..` would otherwise be resolved away by the URL: `sessions/../entities/5`
    is `entities/5`); quoting is the second guard."""
    try:
        return quote(validate_id(str(value)), safe="")
    except InvalidIdError as exc:
        raise MemoryApiError(str(exc)) from None


def describe_detail(detail: Any) -> str:
    """A REST error's `detail` as one line: a string as it is; FastAPI's validation list as
    `field: reason; …` (the location without its `query`/`body`/`path` part)."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if not isinstance(item, Mapping):
                parts.append(str(item))
                continue
            loc = [str(p) for p in item.get("loc", ()) if p not in ("query", "body", "path")]
            msg = str(item.get("msg", "invalid"))
            parts.append(f"{'.'.join(loc)}: {msg}" if loc else msg)
        return "; ".join(parts) or "invalid request"
    return "invalid request"


class MemoryApi:
    """The REST calls of the tools. Every failure is a MemoryApiError with a clear message."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    @classmethod
    def in_process(cls, app: ASGIApp, token: str | None) -> MemoryApi:
        """The engine app itself (`token` None: the engine runs without one)."""
        # raise_app_exceptions=False: a crash inside a route is its 500, not an exception
        # carrying the route's traceback into the tool.
        transport = httpx.ASGITransport(
            app=app, raise_app_exceptions=False, client=IN_PROCESS_CLIENT
        )
        headers = {TOKEN_HEADER: token} if token else {}
        _quiet(IN_PROCESS_BASE)
        return cls(
            httpx.AsyncClient(
                transport=transport, base_url=IN_PROCESS_BASE, headers=headers, timeout=TIMEOUT_S
            )
        )

    @classmethod
    def over_http(cls, url: str, token: str) -> MemoryApi:
        """A running engine at `url` (http://127.0.0.1:8100)."""
        base = url.rstrip("/")
        _quiet(base)
        return cls(
            httpx.AsyncClient(base_url=base, headers={TOKEN_HEADER: token}, timeout=TIMEOUT_S)
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(self, path: str, params: Params | None = None) -> dict[str, Any]:
        return await self._call("GET", path, params=params)

    async def post(
        self,
        path: str,
        body: Mapping[str, Any],
        params: Params | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        return await self._call("POST", path, params=params, body=body, headers=headers)

    async def delete(self, path: str, params: Params | None = None) -> dict[str, Any]:
        return await self._call("DELETE", path, params=params)

    async def health(self) -> str:
        """`ok`, `degraded` or `unavailable` (GET /health, which needs no token)."""
        try:
            r = await self._client.get("/health")
        except httpx.HTTPError:
            return "unavailable"
        status = r.json().get("status") if _is_json(r) else None
        return status if status in ("ok", "degraded") else "unavailable"

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        query = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        try:
            r = await self._client.request(method, path, params=query, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise MemoryApiError(
                f"the context engine is unavailable: no answer from {self.base_url} "
                f"({type(exc).__name__})"
            ) from None
        if r.status_code < 300:
            if not _is_json(r):
                raise MemoryApiError("the context engine answered something other than JSON")
            found: dict[str, Any] = r.json()
            return found
        raise MemoryApiError(_failure(r), r.status_code)


def _param(value: str | int | float | bool) -> str | int | float:
    return ("true" if value else "false") if isinstance(value, bool) else value


def _is_json(r: httpx.Response) -> bool:
    return r.headers.get("content-type", "").startswith("application/json")


def _failure(r: httpx.Response) -> str:
    detail = describe_detail(r.json().get("detail")) if _is_json(r) else ""
    status = r.status_code
    if status == 401:
        return f"the context engine refused the token ({detail or 'unauthorized'})"
    if status == 429:
        return f"the context engine refuses this address for now: {detail}"
    if status == 503:
        return f"the context engine is unavailable: {detail or 'not ready'}"
    if status >= 500:
        # The detail of a crash is the engine's business (its log has it), not the agent's.
        return f"the context engine failed on this request (HTTP {status}); its log says why"
    return detail or f"the context engine refused the request (HTTP {status})"
