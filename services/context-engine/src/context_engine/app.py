"""The context engine app: routes are thin; logic lives in the modules beside this one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI

from context_engine import __version__
from context_engine.config import Settings
from context_engine.db import create_engine, ping
from context_engine.migrate import migrate_until_done
from her_os_shared.service import create_service_app

SERVICE = "context-engine"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.db = create_engine(settings)
        app.state.schema_ready = asyncio.Event()
        # PostgreSQL may be down at start: migrate in the background with retries, and
        # report unavailable until it is done, rather than refuse to start.
        migrations = asyncio.create_task(migrate_until_done(settings, app.state.schema_ready))
        try:
            yield
        finally:
            migrations.cancel()
            with suppress(asyncio.CancelledError):
                await migrations
            await app.state.db.dispose()

    async def healthy(app: FastAPI) -> bool:
        if not app.state.schema_ready.is_set():
            return False
        return await ping(app.state.db, settings.health_timeout_s)

    return create_service_app(
        service=SERVICE,
        title="her-os context engine",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
        health_check=healthy,
    )
