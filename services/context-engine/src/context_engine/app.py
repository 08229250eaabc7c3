"""The context engine app: routes are thin; logic lives in the modules beside this one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from context_engine import __version__
from context_engine.config import Settings
from context_engine.mcp.http import mount as mount_mcp
from context_engine.mcp.http import running as mcp_running
from context_engine.routes import api_router
from context_engine.runtime import Runtime
from her_os_shared.creatures import CreatureName
from her_os_shared.events import EventType
from her_os_shared.service import HealthReport, create_service_app

SERVICE = "context-engine"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(settings)
        app.state.runtime = runtime
        # PostgreSQL may be down at start: migrations retry in the background and /health
        # says unavailable until they are done, rather than refusing to start.
        await runtime.start()
        try:
            async with mcp_running(app):  # /mcp's task group, closed before the runtime stops
                yield
        finally:
            await runtime.stop()

    async def healthy(app: FastAPI) -> HealthReport:
        health = await app.state.runtime.health()
        return HealthReport(ready=health.ready, degraded=tuple(health.degraded))

    async def record_auth_failure(request: Request, reason: str) -> None:
        runtime: Runtime | None = getattr(request.app.state, "runtime", None)
        if runtime is None or not runtime.ready:
            return
        runtime.auth_counts["refused"] += 1
        client = request.client.host if request.client else None
        await runtime.recorder.emit(
            CreatureName.BASILISK,
            EventType.ERROR,
            data={
                "reason": f"{reason} token",
                "method": request.method,
                "path": request.url.path[:256],
                "client": client,
            },
        )

    app = create_service_app(
        service=SERVICE,
        title="her-os context engine",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
        health_check=healthy,
    )
    # The dashboard (another origin, :5174) calls the API from the browser. Preflights are
    # answered here, before the token check; the token still guards every /v1 request.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.dashboard_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["X-Internal-Token", "Content-Type", "Last-Event-ID", "Idempotency-Key"],
        max_age=600,
    )
    app.include_router(api_router(settings.internal_token, record_auth_failure))
    if settings.mcp_enabled:
        mount_mcp(app, settings, record_auth_failure)  # /mcp: the memory for MCP clients
    app.add_middleware(AuthCountMiddleware)
    return app


class AuthCountMiddleware:
    """Counts the /v1 requests the token check let through (anything but a 401 or a 429), and
    those refused because their address is locked out after repeated failures (429, the shared
    rate limiter), for the auth gate's (basilisk's) metric event; refusals of a bad token are
    counted by the failure hook. Plain ASGI, so streamed responses (the event stream) pass
    untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] != 401:
                runtime = getattr(scope["app"].state, "runtime", None)
                if runtime is not None:
                    locked = message["status"] == 429
                    runtime.auth_counts["locked_out" if locked else "passed"] += 1
            await send(message)

        await self.app(scope, receive, counting_send)
