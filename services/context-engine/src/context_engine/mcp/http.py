"""`/mcp` on the engine: the MCP server over streamable HTTP, behind the same token as /v1.

The SDK's session manager runs stateless with JSON answers: every POST is one JSON-RPC
exchange and nothing is held between requests (no MCP session to expire or leak, no open
stream to hold up shutdown); the tools need no server-to-client messages. Its task group is
entered in the engine's lifespan (`running`). The tools reach /v1 in process (MemoryApi).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.types import Receive, Scope, Send

from context_engine.config import Settings
from context_engine.mcp.client import MemoryApi
from context_engine.mcp.server import build_server
from her_os_shared.auth import (
    BEARER_SCHEME,
    TOKEN_HEADER,
    TOKEN_QUERY_PARAMS,
    AuthFailureHook,
    header_token,
    token_matches,
)
from her_os_shared.logging import get_logger

log = get_logger(__name__)

PATH = "/mcp"
# The JSON-RPC error code of a refused token: MCP leaves -32000..-32019 to implementations
# (the SDK's client uses -32000 and -32001 itself).
UNAUTHORIZED = -32010
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # noqa: S104 (names compared, nothing bound)


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection (the SDK checks Host and Origin): the loopback names and the
    address the engine binds, on any port, and the dashboard's origins. An engine bound to
    every address (compose: 0.0.0.0) is reached under names it cannot know, so there the
    Host check is off; the token is what guards /mcp either way."""
    if settings.host in WILDCARD_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    own = f"[{settings.host}]" if ":" in settings.host else settings.host  # IPv6 as in Host
    hosts = list(dict.fromkeys([*LOOPBACK, own]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}:*" for h in hosts] + hosts,
        allowed_origins=[f"http://{h}:*" for h in hosts] + list(settings.dashboard_origins),
    )


class McpEndpoint:
    """The ASGI app at /mcp: the token check, then the SDK's streamable HTTP transport."""

    def __init__(
        self, engine: FastAPI, settings: Settings, on_auth_failure: AuthFailureHook | None
    ) -> None:
        self._token = settings.internal_token
        self.read_only = settings.mcp_read_only
        self._on_auth_failure = on_auth_failure
        # The engine app itself, with its token: the tools' REST calls never leave the process.
        self.api = MemoryApi.in_process(
            engine, self._token.get_secret_value() if self._token else None
        )
        self.server = build_server(lambda: self.api, read_only=settings.mcp_read_only)
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=settings.max_body_bytes,
            transport_security=transport_security(settings),
            host=settings.host,
        )
        self.manager = self.server.session_manager
        # Stateless: the SDK closes a transport after every request and says so at INFO
        # ("Terminating session: None"), one line per tool call. Its warnings still show.
        logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's task group, for the engine's lifespan."""
        async with self.manager.run():
            log.info("mcp.serving", path=PATH, read_only=self.read_only)
            try:
                yield
            finally:
                await self.api.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._token is not None:
            refused = await self._refusal(Request(scope))
            if refused is not None:
                await refused(scope, receive, send)
                return
        if scope["type"] == "http" and scope["method"] != "POST":
            # Stateless: no stream of server messages to open (GET) and no session to end
            # (DELETE). The SDK would hold a GET open, empty, until the client left; the
            # protocol's answer for "no stream here" is 405.
            await PlainTextResponse(
                "only POST: this server is stateless", status_code=405, headers={"Allow": "POST"}
            )(scope, receive, send)
            return
        await self.manager.handle_request(scope, receive, send)

    async def _refusal(self, request: Request) -> JSONResponse | None:
        """401 unless the request carries the token in a header (the /v1 rule), before the
        MCP layer sees anything. A token in the URL is refused outright: URLs reach logs."""
        assert self._token is not None
        if any(name in request.query_params for name in TOKEN_QUERY_PARAMS):
            detail = (
                f"the token goes in the {TOKEN_HEADER} or Authorization header, never in the URL"
            )
            reason = "query"
        else:
            provided = header_token(request)
            if token_matches(provided, self._token.get_secret_value()):
                return None
            reason = "missing" if provided is None else "invalid"
            detail = f"{reason} {TOKEN_HEADER} header"
        if self._on_auth_failure is not None:
            await self._on_auth_failure(request, reason)
        # `detail` as every /v1 refusal; the same reason as a JSON-RPC error too, which MCP
        # clients surface (the SDK's client, given a 401 without one, says only "Server
        # returned an error response"). The request's id is not read: null, as JSON-RPC
        # allows for a request refused before it is parsed (the client matches it anyway).
        error = {"code": UNAUTHORIZED, "message": f"unauthorized: {detail}"}
        return JSONResponse(
            {"jsonrpc": "2.0", "id": None, "error": error, "detail": detail},
            status_code=401,
            headers={"WWW-Authenticate": BEARER_SCHEME},
        )


def mount(app: FastAPI, settings: Settings, on_auth_failure: AuthFailureHook) -> McpEndpoint:
    """Serve /mcp on the engine (kept out of the OpenAPI schema: it is not REST)."""
    endpoint = McpEndpoint(app, settings, on_auth_failure)
    app.add_route(PATH, endpoint, include_in_schema=False)
    app.state.mcp = endpoint
    return endpoint


@asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[None]:
    """The mounted endpoint's lifetime inside the engine's lifespan (nothing when /mcp is off)."""
    endpoint: McpEndpoint | None = getattr(app.state, "mcp", None)
    if endpoint is None:
        yield
        return
    async with endpoint.running():
        yield
