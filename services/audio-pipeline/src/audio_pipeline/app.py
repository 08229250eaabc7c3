"""The audio pipeline app: routes are thin; the work is in runtime.py and below."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI

from audio_pipeline import __version__
from audio_pipeline.config import Settings
from audio_pipeline.routes import router
from audio_pipeline.runtime import AudioRuntime
from audio_pipeline.webhooks import router as webhook_router
from her_os_shared.auth import require_token
from her_os_shared.query import forbid_unknown_query
from her_os_shared.service import HealthReport, create_service_app

SERVICE = "audio-pipeline"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = AudioRuntime(settings)
        app.state.runtime = runtime
        await runtime.start()  # models load in the background; /health is 503 until then
        try:
            yield
        finally:
            await runtime.stop()

    async def healthy(app: FastAPI) -> HealthReport:
        runtime: AudioRuntime = app.state.runtime
        return HealthReport(ready=runtime.ready.is_set(), degraded=runtime.degraded())

    app = create_service_app(
        service=SERVICE,
        title="her-os audio pipeline",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
        health_check=healthy,
    )
    # Auth first (401 before 422); then a query parameter no route declares is a 422: the
    # /v1 routes take their input from the path, the body or a declared query parameter, so
    # a misspelt one (`end?swep=false`) must not be ignored.
    v1 = APIRouter(
        prefix="/v1",
        dependencies=[
            Depends(require_token(settings.internal_token)),
            Depends(forbid_unknown_query()),
        ],
    )
    v1.include_router(router)
    app.include_router(v1)
    app.include_router(webhook_router)
    return app
