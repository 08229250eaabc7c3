"""The audio pipeline app. Its /v1 endpoints arrive with the pipeline itself (issue 4)."""

from __future__ import annotations

from fastapi import FastAPI

from audio_pipeline import __version__
from audio_pipeline.config import Settings
from her_os_shared.service import create_service_app

SERVICE = "audio-pipeline"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    return create_service_app(
        service=SERVICE,
        title="her-os audio pipeline",
        version=__version__,
        settings=settings,
    )
