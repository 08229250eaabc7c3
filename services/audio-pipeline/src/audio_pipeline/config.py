"""Audio pipeline settings (env prefix AUDIO_PIPELINE_)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from her_os_shared.settings import ServiceSettings


class Settings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="AUDIO_PIPELINE_")

    port: int = Field(default=9100, ge=1, le=65535)
    transcripts_dir: Path = Path("data/transcripts")
    events_dir: Path = Path("data/events")
