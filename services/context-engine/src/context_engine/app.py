"""The context engine app: routes are thin; logic lives in the modules beside this one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from context_engine import __version__
from context_engine.config import Settings
from context_engine.db import create_engine, ping
from her_os_shared.service import create_service_app

SERVICE = "context-engine"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.db = create_engine(settings)
        try:
            yield
        finally:
            await app.state.db.dispose()

    async def healthy(app: FastAPI) -> bool:
        return await ping(app.state.db, settings.health_timeout_s)

    return create_service_app(
        service=SERVICE,
        title="her-os context engine",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
        health_check=healthy,
    )
