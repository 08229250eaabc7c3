"""The three her-os services and the environment each is started with.

Each service reads only its own prefix (AUDIO_PIPELINE_, CONTEXT_ENGINE_, ANNIE_VOICE_); the
names below must match the fields of services/*/src/*/config.py.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from her_os import falkordb, postgres
from her_os.config import Settings
from her_os.credentials import Credentials
from her_os.paths import DataLayout


@dataclass(frozen=True)
class Service:
    name: str
    module: str
    env_prefix: str
    port_field: str

    def port(self, settings: Settings) -> int:
        port: int = getattr(settings, self.port_field)
        return port

    def base_url(self, host: str, port: int) -> str:
        return f"http://{host}:{port}"

    def argv(self) -> list[str]:
        # The interpreter running the CLI has every workspace member installed.
        return [sys.executable, "-m", self.module]


AUDIO_PIPELINE = Service("audio-pipeline", "audio_pipeline", "AUDIO_PIPELINE_", "audio_port")
CONTEXT_ENGINE = Service("context-engine", "context_engine", "CONTEXT_ENGINE_", "context_port")
ANNIE_VOICE = Service("annie-voice", "annie_voice", "ANNIE_VOICE_", "annie_port")
SERVICES: tuple[Service, ...] = (AUDIO_PIPELINE, CONTEXT_ENGINE, ANNIE_VOICE)


def service_env(
    service: Service, settings: Settings, layout: DataLayout, creds: Credentials
) -> dict[str, str]:
    """The caller's environment plus this service's settings (which win)."""
    own: dict[str, str] = {
        "INTERNAL_TOKEN": creds.internal_token,
        "HOST": settings.host,
        "PORT": str(service.port(settings)),
    }
    if service in (AUDIO_PIPELINE, CONTEXT_ENGINE):
        own["TRANSCRIPTS_DIR"] = str(layout.transcripts)
        own["EVENTS_DIR"] = str(layout.events)
    if service is AUDIO_PIPELINE:
        own["MODELS_DIR"] = str(layout.models)
        own["ENROLLMENT_DIR"] = str(layout.enrollment)
        own["SPOOL_DIR"] = str(layout.spool)
    if service is CONTEXT_ENGINE:
        own["DATABASE_URL"] = postgres.dsn(settings, creds.postgres_password, "postgresql+asyncpg")
        own["GRAPH_URL"] = falkordb.url(settings, creds.falkordb_password)
        own["SEARCH_INDEX_DIR"] = str(layout.search_index)
        own["VECTOR_DIR"] = str(layout.vectors)
        # Forgetting a person deletes their enrolled voice there too.
        own["AUDIO_PIPELINE_URL"] = AUDIO_PIPELINE.base_url(
            settings.connect_host, AUDIO_PIPELINE.port(settings)
        )
    if service is ANNIE_VOICE:
        own["CONTEXT_ENGINE_URL"] = CONTEXT_ENGINE.base_url(
            settings.connect_host, CONTEXT_ENGINE.port(settings)
        )
        # The voice's Whisper is assembled where the audio pipeline's is: one copy, shared.
        own["MODELS_DIR"] = str(layout.models)
        own["PYTHON_SCRATCH_ROOT"] = str(layout.root / "annie" / "scratch")
    env = dict(os.environ)
    env.update({service.env_prefix + key: value for key, value in own.items()})
    env["PYTHONUNBUFFERED"] = "1"  # log lines reach data/logs/<name>.log as they happen
    return env
