"""The Annie voice app. Its voice, chat and tool endpoints arrive with issue 9."""

from __future__ import annotations

from fastapi import FastAPI

from annie_voice import __version__
from annie_voice.config import Settings
from her_os_shared.service import create_service_app

SERVICE = "annie-voice"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    return create_service_app(
        service=SERVICE,
        title="her-os Annie voice",
        version=__version__,
        settings=settings,
    )
