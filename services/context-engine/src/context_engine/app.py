"""The context engine app: routes are thin; logic lives in the modules beside this one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware

from context_engine import __version__
from context_engine.config import Settings
from context_engine.routes import api_router
from context_engine.runtime import Runtime
from her_os_shared.service import create_service_app

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
            yield
        finally:
            await runtime.stop()

    async def healthy(app: FastAPI) -> bool:
        return await app.state.runtime.healthy()

    async def record_auth_failure(request: Request, reason: str) -> None:
        runtime: Runtime | None = getattr(request.app.state, "runtime", None)
        if runtime is None or not runtime.ready:
            return
        client = request.client.host if request.client else None
        await runtime.recorder.emit(
            "basilisk",
            "error",
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
        allow_headers=["X-Internal-Token", "Content-Type", "Last-Event-ID"],
        max_age=600,
    )
    app.include_router(api_router(settings.internal_token, record_auth_failure))
    return app
