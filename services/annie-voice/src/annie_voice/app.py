"""The Annie voice app: the text chat (`/v1/chat`, SSE) answered from memory and an LLM, and
the voice companion (Pipecat over SmallWebRTC: `/`, `/start`, `/sessions/{id}/api/offer`,
`/api/offer`). Routes are thin; the logic lives in the modules beside this one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI

from annie_voice import __version__
from annie_voice.config import Settings
from annie_voice.llm import ChatBackend, Tool
from annie_voice.routes import api_router, page_router, voice_router
from annie_voice.runtime import Runtime
from her_os_shared.service import create_service_app

SERVICE = "annie-voice"


def create_app(
    settings: Settings | None = None,
    *,
    tools: Sequence[Tool] | None = None,
    backend: ChatBackend | None = None,
    engine_transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """`tools`: what Annie may call (with an LLM backend; None: those the settings enable).
    `backend` replaces the one the settings choose; `engine_transport` the network path to the
    context engine (both for embedding Annie elsewhere and for tests)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime(settings, tools=tools, backend=backend, engine_transport=engine_transport)
        app.state.runtime = runtime
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = create_service_app(
        service=SERVICE,
        title="her-os Annie voice",
        version=__version__,
        settings=settings,
        lifespan=lifespan,
    )
    app.include_router(api_router(settings.internal_token))
    app.include_router(voice_router(settings.internal_token))
    app.include_router(page_router())
    return app
